// The post-resolution rule for a run's egress: whatever name a tool call asked for, the address it
// leads to must be out on the network, never this host or its link.
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <optional>

#include "daemon/gateway/egress_proxy.hpp"

namespace mh::gateway {

namespace ip = boost::asio::ip;

namespace {

std::optional<ip::address> address_of(const struct sockaddr* sa) {
  if (!sa) return std::nullopt;
  if (sa->sa_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(sa);
    return ip::address_v4(ntohl(in->sin_addr.s_addr));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    ip::address_v6::bytes_type bytes;
    std::copy(std::begin(in6->sin6_addr.s6_addr), std::end(in6->sin6_addr.s6_addr), bytes.begin());
    return ip::address_v6(bytes);  // no scope: an fe80:: address is refused whatever its scope
  }
  return std::nullopt;
}

bool equal_unscoped(const ip::address& a, const ip::address& b) {
  if (a.is_v6() && b.is_v6()) return a.to_v6().to_bytes() == b.to_v6().to_bytes();
  return a == b;
}

// The host's own addresses, and its interfaces' broadcast addresses: read per check, so an
// interface that came up since is covered (getifaddrs is cheap beside a connection).
bool is_own_address(const ip::address& address) {
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return true;  // unknown: refuse rather than guess
  bool own = false;
  for (const struct ifaddrs* i = list; i && !own; i = i->ifa_next) {
    if (auto a = address_of(i->ifa_addr); a && equal_unscoped(*a, address)) own = true;
    if ((i->ifa_flags & IFF_BROADCAST) && i->ifa_broadaddr)
      if (auto b = address_of(i->ifa_broadaddr); b && equal_unscoped(*b, address)) own = true;
  }
  ::freeifaddrs(list);
  return own;
}

bool v4_allowed(const ip::address_v4& a) {
  const std::uint32_t v = a.to_uint();
  if ((v >> 24) == 0) return false;                    // 0.0.0.0/8: "this network", the unspecified address
  if ((v >> 24) == 127) return false;                  // loopback
  if ((v >> 16) == 0xA9FE) return false;               // 169.254/16 link-local, 169.254.169.254 metadata
  if ((v >> 28) == 0xE) return false;                  // 224/4 multicast
  if ((v >> 28) == 0xF) return false;                  // 240/4 reserved, 255.255.255.255 broadcast
  if ((v & 0xFFFFFF00u) == 0x64646400u) return false;  // 100.100.100.0/24: Alibaba Cloud's metadata
  return true;
}

}  // namespace

bool egress_address_allowed(const ip::address& address) {
  if (address.is_v4()) {
    if (!v4_allowed(address.to_v4())) return false;
  } else {
    const ip::address_v6 v6 = address.to_v6();
    if (v6.is_v4_mapped()) return egress_address_allowed(ip::make_address_v4(ip::v4_mapped, v6));
    const auto bytes = v6.to_bytes();
    if (v6.is_loopback() || v6.is_unspecified() || v6.is_multicast() || v6.is_link_local() || v6.is_site_local())
      return false;
    // fd00:ec2::254, AWS's metadata service over IPv6.
    if (v6 == ip::make_address_v6("fd00:ec2::254")) return false;
    // ::/96 (IPv4-compatible, deprecated) and 64:ff9b::/96 (NAT64) would carry a v4 address past
    // the v4 rules: checked as the v4 address they embed.
    const bool compatible = std::all_of(bytes.begin(), bytes.begin() + 12, [](unsigned char b) { return b == 0; });
    const bool nat64 = bytes[0] == 0x00 && bytes[1] == 0x64 && bytes[2] == 0xff && bytes[3] == 0x9b &&
                       std::all_of(bytes.begin() + 4, bytes.begin() + 12, [](unsigned char b) { return b == 0; });
    if (compatible || nat64) {
      const ip::address_v4 embedded(ip::address_v4::bytes_type{bytes[12], bytes[13], bytes[14], bytes[15]});
      // The host's own v4 addresses too: a NAT64 gateway hands 64:ff9b::<this host's address>
      // back to this host, past a check that compares v6 bytes only.
      if (!v4_allowed(embedded) || is_own_address(ip::address(embedded))) return false;
    }
  }
  return !is_own_address(address);
}

}  // namespace mh::gateway
