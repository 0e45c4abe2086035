// Commands across hosts: each host serves request/reply on <prefix>.cmd.<host>; a host that
// gets a command (or an attach's line) for a run another host owns sends it there and waits for
// the one answer. The body is a small JSON object (command_relay's caller defines it); the
// answer too. Bounded both ways: a body over kMaxRelayBytes is refused unread.
//
// Threading: libnats delivers a request on its own thread; the server posts it onto the Asio
// executor it was given (a strand of the daemon) and nothing else runs there. respond() may be
// called from any thread (libnats' publish is thread-safe). request() blocks: fleet thread only.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "daemon/fleet/fleet_link.hpp"

namespace mh::fleet {

inline constexpr std::size_t kMaxRelayBytes = 1u << 20;
// How long "no responders" is asked again before it is believed (a new subscription crosses the
// cluster's routes asynchronously), and how often within that.
inline constexpr std::chrono::milliseconds kNoRespondersGrace{1000};
inline constexpr std::chrono::milliseconds kNoRespondersRetry{50};

// Where one request's answer goes.
class Responder {
 public:
  Responder(natsConnection* nc, std::string reply) : nc_(nc), reply_(std::move(reply)) {}
  // Sends the answer (once; a second call is ignored).
  void respond(const std::string& body);

 private:
  natsConnection* nc_;
  std::string reply_;
  bool sent_ = false;
};

class CommandServer {
 public:
  using Handler = std::function<void(std::string body, Responder responder)>;

  // Serves `subject` until destroyed; each request runs `handler` on `executor`.
  static NatsResult<std::unique_ptr<CommandServer>> open(FleetLink& link, const std::string& subject,
                                                         boost::asio::any_io_executor executor, Handler handler);
  ~CommandServer();
  CommandServer(const CommandServer&) = delete;
  CommandServer& operator=(const CommandServer&) = delete;

  struct State;  // what libnats' callback holds; freed when the subscription completes

 private:
  CommandServer(SubscriptionHandle sub) : sub_(std::move(sub)) {}
  SubscriptionHandle sub_;
};

// One request, its one answer within `timeout`. No host serving the subject is an error that says
// so (NATS_NO_RESPONDERS), once it held for kNoRespondersGrace: never the whole timeout.
NatsResult<std::string> relay_request(FleetLink& link, const std::string& subject, const std::string& body,
                                      std::chrono::milliseconds timeout);

}  // namespace mh::fleet
