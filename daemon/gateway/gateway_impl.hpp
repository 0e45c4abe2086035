// The gateway's insides, shared by gateway.cpp (preparing, accepting, stopping) and
// gateway_session.cpp (one client connection: check, forward, relay). Internal to mh_gateway.
#pragma once

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "daemon/gateway/credential_file.hpp"
#include "daemon/gateway/gateway.hpp"
#include "daemon/gateway/upstream_url.hpp"

namespace mh::gateway {

// What stop() needs of a live connection.
class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void close_now() = 0;
};

struct Gateway::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io_context, GatewayOptions o, GatewayHooks h)
      : io(io_context), options(std::move(o)), hooks(std::move(h)) {}

  // The key for the next request: the credential file is read again first if it changed.
  std::string key_for_request();
  std::string current_key() const {
    std::lock_guard lock(key_mutex);
    return key;
  }
  // A refused route is told once per (method, path), and at most kMaxRoutesTold of them: a run
  // spraying paths must not fill the supervisor's memory or log.
  void refused(const std::string& method, const std::string& path);
  void log(const std::string& line) const {
    if (hooks.log) hooks.log(line);
  }
  // Registers a live connection unless stopping or at max_connections (on the io thread).
  bool adopt(const std::shared_ptr<SessionBase>& session);
  void stop_now();  // on the io thread

  static constexpr std::size_t kMaxRoutesTold = 256;

  asio::io_context& io;
  GatewayOptions options;
  GatewayHooks hooks;
  UpstreamUrl url;
  std::string key_header;  // lower case
  std::optional<CredentialFile> credential;
  mutable std::mutex key_mutex;  // the key is read by tests from another thread
  std::string key;
  std::optional<asio::ssl::context> tls;  // made by prepare(); plain http upstreams never use it
  bool prepared = false;
  bool stopped = false;
  bool told_connection_limit = false;
  std::uint64_t requests = 0;
  std::set<std::pair<std::string, std::string>> routes_told;
  std::vector<std::weak_ptr<SessionBase>> sessions;
  std::vector<std::function<void()>> acceptor_closers;
};

// Starts serving one accepted connection (gateway_session.cpp).
void spawn_session(const std::shared_ptr<Gateway::State>& state, asio::ip::tcp::socket socket);
void spawn_session(const std::shared_ptr<Gateway::State>& state, asio::local::stream_protocol::socket socket);

}  // namespace mh::gateway
