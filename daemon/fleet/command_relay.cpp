#include "daemon/fleet/command_relay.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <thread>

namespace mh::fleet {

struct CommandServer::State {
  boost::asio::any_io_executor executor;
  Handler handler;
};

namespace {

void on_request(natsConnection* nc, natsSubscription*, natsMsg* raw, void* closure) {
  MsgHandle msg(raw);
  auto* state = static_cast<CommandServer::State*>(closure);
  const char* reply = natsMsg_GetReply(msg.get());
  if (reply == nullptr || *reply == '\0') return;  // a publish, not a request: nobody to answer
  Responder responder(nc, reply);
  if (static_cast<std::size_t>(natsMsg_GetDataLength(msg.get())) > kMaxRelayBytes) {
    responder.respond(R"({"error":"REQUEST_TOO_LARGE"})");
    return;
  }
  std::string body(natsMsg_GetData(msg.get()), static_cast<std::size_t>(natsMsg_GetDataLength(msg.get())));
  // Off libnats' thread at once: the handler runs where the daemon's state lives.
  boost::asio::post(state->executor,
                    [handler = state->handler, body = std::move(body), responder = std::move(responder)]() mutable {
                      handler(std::move(body), std::move(responder));
                    });
}

void on_complete(void* closure) {
  delete static_cast<CommandServer::State*>(closure);
}

}  // namespace

void Responder::respond(const std::string& body) {
  if (sent_) return;
  sent_ = true;
  (void)natsConnection_Publish(nc_, reply_.c_str(), body.data(), static_cast<int>(body.size()));
}

NatsResult<std::unique_ptr<CommandServer>> CommandServer::open(FleetLink& link, const std::string& subject,
                                                               boost::asio::any_io_executor executor, Handler handler) {
  auto state = std::make_unique<State>(State{std::move(executor), std::move(handler)});
  natsSubscription* raw = nullptr;
  natsStatus s = natsConnection_Subscribe(&raw, link.nc(), subject.c_str(), on_request, state.get());
  if (s != NATS_OK) return nats_error("serving " + subject, s);
  SubscriptionHandle sub(raw);
  // From here libnats owns the state: freed once no callback can run any more.
  s = natsSubscription_SetOnCompleteCB(sub.get(), on_complete, state.release());
  if (s != NATS_OK) return nats_error("serving " + subject, s);
  // The server knows of the subscription before anyone is told to send to it.
  if (s = natsConnection_Flush(link.nc()); s != NATS_OK) return nats_error("serving " + subject, s);
  return std::unique_ptr<CommandServer>(new CommandServer(std::move(sub)));
}

CommandServer::~CommandServer() {
  if (sub_) (void)natsSubscription_Unsubscribe(sub_.get());
}

NatsResult<std::string> relay_request(FleetLink& link, const std::string& subject, const std::string& body,
                                      std::chrono::milliseconds timeout) {
  if (body.size() > kMaxRelayBytes) return nats_error("request to " + subject + " over 1 MiB", NATS_INVALID_ARG);
  // A subscription made on another node of the cluster reaches this node's interest table a
  // moment later (routes carry it asynchronously), so "no responders" right after a host began
  // serving is not yet the truth: asked again, briefly, before it is said.
  const auto grace_ends = std::chrono::steady_clock::now() + std::min(timeout, kNoRespondersGrace);
  for (;;) {
    natsMsg* raw = nullptr;
    natsStatus s = natsConnection_Request(&raw, link.nc(), subject.c_str(), body.data(), static_cast<int>(body.size()),
                                          timeout.count());
    MsgHandle reply(raw);
    if (s == NATS_NO_RESPONDERS) {
      if (std::chrono::steady_clock::now() + kNoRespondersRetry < grace_ends) {
        std::this_thread::sleep_for(kNoRespondersRetry);  // the fleet thread's own wait, bounded by the grace
        continue;
      }
      return nats_error("no host serves " + subject, s);
    }
    if (s != NATS_OK) return nats_error("request to " + subject, s);
    if (static_cast<std::size_t>(natsMsg_GetDataLength(reply.get())) > kMaxRelayBytes)
      return nats_error("answer from " + subject + " over 1 MiB", NATS_ERR);
    return std::string(natsMsg_GetData(reply.get()), static_cast<std::size_t>(natsMsg_GetDataLength(reply.get())));
  }
}

}  // namespace mh::fleet
