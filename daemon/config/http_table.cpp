// [http]: the metrics listener (docs/metrics.md), and the one reading of its listen address.
#include <arpa/inet.h>

#include <optional>
#include <string>

#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"

namespace mh::daemon {

boost::system::result<DaemonConfig::HttpListen, std::string> parse_http_listen(std::string_view text) {
  using Result = boost::system::result<DaemonConfig::HttpListen, std::string>;
  auto refuse = [&](const std::string& why) {
    return Result(boost::system::in_place_error, "\"" + std::string(text) + "\" " + why +
                                                     " (give ADDRESS:PORT, e.g. \"127.0.0.1:9464\" or \"[::1]:9464\")");
  };
  const auto colon = text.rfind(':');
  if (colon == std::string_view::npos) return refuse("has no port");
  std::string_view host = text.substr(0, colon), port_text = text.substr(colon + 1);
  const bool bracketed = host.size() >= 2 && host.front() == '[' && host.back() == ']';
  if (bracketed) host = host.substr(1, host.size() - 2);
  if (host.empty()) return refuse("names no address (nothing is listened on by default; say which)");
  const std::string address(host);
  unsigned char scratch[sizeof(in6_addr)];
  const bool v4 = !bracketed && ::inet_pton(AF_INET, address.c_str(), scratch) == 1;
  const bool v6 = bracketed && ::inet_pton(AF_INET6, address.c_str(), scratch) == 1;
  if (!v4 && !v6) {
    if (!bracketed && address.find(':') != std::string::npos)
      return refuse("is not ADDRESS:PORT (an IPv6 address goes in brackets)");
    return refuse("does not name an IP address (" + address + "; a host name is not resolved)");
  }
  if (port_text.empty() || port_text.size() > 5 || port_text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoul(std::string(port_text)) > 65535)
    return refuse("has no port between 0 and 65535");
  return DaemonConfig::HttpListen{address, static_cast<std::uint16_t>(std::stoul(std::string(port_text)))};
}

namespace config_tables {

std::string read_http_table(const toml::table& http, DaemonConfig& c) {
  std::string error;
  TableReader r(http, "http.", error);
  std::optional<std::string> listen;
  std::string text;
  r.read<std::string>("listen", text, [&listen](const std::string& v) -> std::string {
    auto parsed = parse_http_listen(v);
    if (!parsed) return parsed.error();
    listen = v;
    return "";
  });
  r.finish();
  if (error.empty() && listen) c.http_listen = *parse_http_listen(*listen);
  return error;
}

}  // namespace config_tables

}  // namespace mh::daemon
