// An upstream's URL taken apart: https to anywhere, or http to loopback only (a key sent in clear
// must not leave the host).
#pragma once

#include <boost/system/result.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace mh::gateway {

struct UpstreamUrl {
  bool tls = true;
  std::string host;                 // as written (brackets off an IPv6 literal), lower case
  std::string port;                 // "443" / "80" when not written
  std::string base_path;            // "" or "/api" (no trailing slash): the vendor's path is forwarded under it
  std::string host_header() const;  // host[:port] as the Host header carries it
};

// Either the URL or why it is refused.
struct UpstreamUrlResult {
  std::optional<UpstreamUrl> url;
  std::string error;
};
UpstreamUrlResult parse_upstream_url(std::string_view text);

bool is_loopback_host(std::string_view host);

}  // namespace mh::gateway
