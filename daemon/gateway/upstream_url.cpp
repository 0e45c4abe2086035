#include "daemon/gateway/upstream_url.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/url/parse.hpp>
#include <cctype>

namespace mh::gateway {

namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::string UpstreamUrl::host_header() const {
  const std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if ((tls && port == "443") || (!tls && port == "80")) return name;
  return name + ":" + port;
}

bool is_loopback_host(std::string_view host) {
  if (lower(host) == "localhost") return true;
  boost::system::error_code ec;
  const auto address = boost::asio::ip::make_address(std::string(host), ec);
  return !ec && address.is_loopback();
}

UpstreamUrlResult parse_upstream_url(std::string_view text) {
  UpstreamUrlResult out;
  auto parsed = boost::urls::parse_absolute_uri(text);
  if (!parsed) {
    out.error = "the upstream url '" + std::string(text) + "' is not an absolute URL";
    return out;
  }
  UpstreamUrl url;
  const std::string scheme = lower(parsed->scheme());
  if (scheme != "https" && scheme != "http") {
    out.error = "the upstream url '" + std::string(text) + "' is neither https nor http";
    return out;
  }
  url.tls = scheme == "https";
  if (parsed->has_userinfo() || parsed->has_query() || parsed->has_fragment()) {
    out.error = "the upstream url '" + std::string(text) + "' carries user info, a query or a fragment";
    return out;
  }
  std::string host;
  if (parsed->host_type() == boost::urls::host_type::ipv6)
    host = parsed->host_ipv6_address().to_string();
  else
    host = parsed->host_name().empty() ? std::string(parsed->encoded_host()) : std::string(parsed->host_name());
  url.host = lower(host);
  if (url.host.empty()) {
    out.error = "the upstream url '" + std::string(text) + "' names no host";
    return out;
  }
  url.port = parsed->has_port() ? std::string(parsed->port()) : (url.tls ? "443" : "80");
  if (parsed->has_port() && parsed->port_number() == 0) {
    out.error = "the upstream url '" + std::string(text) + "' has port 0";
    return out;
  }
  std::string path(parsed->encoded_path());
  while (!path.empty() && path.back() == '/')
    path.pop_back();
  url.base_path = path;
  if (!url.tls && !is_loopback_host(url.host)) {
    out.error = "the upstream url '" + std::string(text) +
                "' is plain http off loopback: the key would cross the network in clear (use https)";
    return out;
  }
  out.url = std::move(url);
  return out;
}

}  // namespace mh::gateway
