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

bool is_nkey(std::string_view text, NkeyKind kind) {
  const std::string_view prefix = kind == NkeyKind::user_public_key ? "U" : "SU";
  if (text.size() <= prefix.size() || text.substr(0, prefix.size()) != prefix) return false;
  if (kind == NkeyKind::user_public_key && text.size() != 56) return false;
  for (char ch : text)
    if (!((ch >= 'A' && ch <= 'Z') || (ch >= '2' && ch <= '7'))) return false;
  return true;
}

}  // namespace mh::fleet
