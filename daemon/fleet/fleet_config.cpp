#include "daemon/fleet/fleet_config.hpp"

namespace mh::fleet {

std::string host_id_problem(std::string_view host_id) {
  if (host_id.empty()) return "must not be empty";
  if (host_id.size() > 64) return "must be at most 64 characters";
  for (char ch : host_id) {
    bool ok =
        (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-';
    if (!ok)
      return "must hold only A-Z, a-z, 0-9, _ and - (it goes into NATS subjects); found '" + std::string(1, ch) + "'";
  }
  return "";
}

bool url_is_loopback(std::string_view url) {
  auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return false;
  std::string_view rest = url.substr(scheme + 3);
  rest = rest.substr(0, rest.find('/'));
  if (auto at = rest.rfind('@'); at != std::string_view::npos) rest.remove_prefix(at + 1);
  std::string_view host;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) return false;
    host = rest.substr(1, close - 1);
    return host == "::1";
  }
  host = rest.substr(0, rest.find(':'));
  if (host == "localhost") return true;
  // 127.a.b.c: four dot-separated decimal parts, the first 127.
  if (host.substr(0, 4) != "127.") return false;
  int parts = 2, digits = 0;  // "127" and the part being read
  for (char ch : host.substr(4)) {
    if (ch == '.') {
      if (digits == 0) return false;
      ++parts;
      digits = 0;
    } else if (ch >= '0' && ch <= '9' && digits < 3) {
      ++digits;
    } else {
      return false;
    }
  }
  return parts == 4 && digits > 0;
}

bool is_nkey(std::string_view text, NkeyKind kind) {
  const std::string_view prefix = kind == NkeyKind::user_public_key ? "U" : "SU";
  if (text.size() <= prefix.size() || text.substr(0, prefix.size()) != prefix) return false;
  if (kind == NkeyKind::user_public_key && text.size() != 56) return false;
  for (char ch : text)
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= '2' && ch <= '7'))) return false;
  return true;
}

}  // namespace mh::fleet
