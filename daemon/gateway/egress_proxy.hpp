// The run's egress (issue 25, docs/gateway.md): an HTTP CONNECT proxy beside the gateway, the
// only way out for a tool call, open to the destinations the run's spec lists ("host:port") and
// to nothing else. Destinations are checked after name resolution: never loopback, link-local,
// private-use cloud metadata, unspecified, multicast or the host's own addresses, whatever name
// led there. A refused destination is told (hooks.denied) once per destination with its count at
// the end; an allowed one is counted.
//
// Only CONNECT is served: a plain-HTTP request in absolute form ("GET http://host/ HTTP/1.1") is
// refused 405 by name (Allow: CONNECT). Forwarding plain HTTP is not offered, so the proxy never
// parses or rewrites a tool's traffic; a tool that must reach an http:// destination tunnels to
// it (curl --proxytunnel). A name that resolves to any refused address is refused whole: a name
// mixing public and loopback addresses is how DNS rebinding reaches the host.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace mh::gateway {

struct EgressHooks {
  // The first refusal of a destination ("host:port"), with why.
  std::function<void(const std::string& destination, const std::string& why)> denied;
  // Every attempt, allowed or refused (why empty when allowed): what a run's record counts
  // (stream.closed.resources.egress). Empty: not told.
  std::function<void(const std::string& destination, bool allowed, const std::string& why)> attempt;
  std::function<void(const std::string&)> log;
};

struct EgressCounts {
  std::map<std::string, std::uint64_t> allowed;  // destination -> connections made
  std::map<std::string, std::uint64_t> denied;   // destination -> attempts refused
};

struct EgressOptions {
  std::size_t max_header_bytes = 8u << 10;            // a CONNECT request is a line and a few headers
  std::chrono::milliseconds request_timeout{30'000};  // to send the CONNECT request
  std::chrono::milliseconds connect_timeout{30'000};  // to reach an allowed destination
  std::size_t max_connections = 256;                  // open at once; past it a new one is closed unanswered
  // Tests only: loopback addresses pass the address rule, so a listener the test owns can stand in
  // for a destination on the network. Never set by the daemon.
  bool allow_loopback_for_tests = false;
};

class EgressProxy {
 public:
  // `allowed`: "host:port" entries (host case-insensitive; an IPv6 literal in brackets).
  EgressProxy(boost::asio::io_context& io, std::vector<std::string> allowed, EgressHooks hooks,
              EgressOptions options = {});
  ~EgressProxy();
  EgressProxy(const EgressProxy&) = delete;
  EgressProxy& operator=(const EgressProxy&) = delete;

  void serve(boost::asio::local::stream_protocol::acceptor acceptor);
  void serve(boost::asio::ip::tcp::acceptor acceptor);
  void stop();
  EgressCounts counts() const;  // thread-safe

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// Whether an address may be reached from a run (post-resolution check): false for loopback,
// link-local (169.254/16, fe80::/10; 169.254.169.254 and fd00:ec2::254 metadata among them),
// unspecified, multicast, broadcast, and any address of the host's own interfaces.
bool egress_address_allowed(const boost::asio::ip::address& address);

}  // namespace mh::gateway
