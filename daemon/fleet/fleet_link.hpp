// One host's link to the fleet: a NATS connection (reconnecting on its own), its JetStream
// context, and the streams and buckets every host agrees on (made by whoever comes first, with
// this host's replicas; a host that finds them uses them as they are).
//
// Threading: libnats runs its own threads; every call here blocks (bounded by the config's
// request_timeout) and is safe from any thread, but never from the daemon's io threads — the
// daemon calls it from its fleet thread (fleet_worker.hpp). Nothing here touches Asio.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/fleet/fleet_config.hpp"
#include "daemon/fleet/nats_handles.hpp"
#include "daemon/fleet/publish_pipe.hpp"

namespace mh::fleet {

// A JetStream call a starting host waits for rather than refuses: "temporarily unavailable" (no
// meta leader, or the node catching up; also a stream or consumer of the layout that JetStream
// holds but whose replicas have no leader yet) or no answer within the wait. Anything else (no
// JetStream at all, a stream made with other settings, more replicas than nodes) will not change
// by waiting.
bool worth_waiting_for(const NatsError& e);

class FleetLink {
 public:
  // What connect() is told each time JetStream was not ready for the layout and it waits.
  using LayoutWait = std::function<void(const NatsError& why)>;
  // How long connect() waits, at most, for JetStream to take the layout: its meta group may be
  // electing a leader, or the node it reached catching up after it was away (a node stopped and
  // resumed answers "temporarily unavailable" for seconds). Past that the start is refused.
  static constexpr std::chrono::seconds kLayoutPatience{60};

  // Connects (every URL, user/password or credentials from the config), then makes or finds the
  // layout: the events stream, the submit work queue and its durable pull consumer, the runs,
  // hosts and requests buckets, each with a leader (so the first publish or fetch finds someone to
  // answer). A failure JetStream calls temporary (or a call it did not answer in time) is tried
  // again, `waiting` told each time, within `patience` (then returned, saying how long it was
  // waited for); any other is returned at once.
  static NatsResult<std::unique_ptr<FleetLink>> connect(const FleetConfig& config, const LayoutWait& waiting = {},
                                                        std::chrono::milliseconds patience = kLayoutPatience);
  ~FleetLink();
  FleetLink(const FleetLink&) = delete;
  FleetLink& operator=(const FleetLink&) = delete;

  const FleetConfig& config() const { return config_; }
  const FleetNames& names() const { return names_; }
  natsConnection* nc() const { return nc_.get(); }
  jsCtx* js() const { return js_.get(); }
  kvStore* runs() const { return runs_.get(); }
  kvStore* hosts() const { return hosts_.get(); }
  // The fleet submits' request ids (request_claims.hpp), each kept for request_id_retention.
  kvStore* requests() const { return requests_.get(); }
  // The same context and buckets with a short wait (sweep_timeout): the lease and the host-loss
  // sweep must not sit out request_timeout on a call that went to a leader that just died — a
  // failed call is tried again at the next tick, by then perhaps against the new leader.
  jsCtx* sweep_js() const { return sweep_js_.get(); }
  kvStore* sweep_runs() const { return sweep_runs_.get(); }
  kvStore* sweep_hosts() const { return sweep_hosts_.get(); }
  // Every run's lines, published asynchronously (publish_pipe.hpp); acks awaited request_timeout.
  PublishPipe& pipe() const { return *pipe_; }
  // A third of the lease (a renewal tick), at least 200 ms, at most request_timeout.
  std::chrono::milliseconds sweep_timeout() const;
  // The largest message the server takes (max_payload): a line above it cannot be published.
  std::int64_t max_payload() const;

 private:
  FleetLink(FleetConfig config) : config_(std::move(config)), names_(config_.prefix) {}
  NatsResult<void> make_layout();

 public:
  // A create of the layout (a stream, the consumer) that went unanswered, by name, and since when
  // JetStream has answered "not found" for it: such a create may yet be applied (see
  // fleet_link.cpp, kUnansweredCreateSettle), so it is not sent again until that answer held a
  // while. Public for the helpers in fleet_link.cpp only.
  struct UnansweredCreate {
    std::optional<std::chrono::steady_clock::time_point> missing_since;
  };
  using Creates = std::map<std::string, UnansweredCreate>;

 private:
  Creates unanswered_creates_;

  FleetConfig config_;
  FleetNames names_;
  std::unique_ptr<PublishPipe> pipe_;  // destroyed after the connection is closed (~FleetLink)
  ConnectionHandle nc_;
  JsHandle js_, sweep_js_;
  KvHandle runs_, hosts_, requests_, sweep_runs_, sweep_hosts_;
};

}  // namespace mh::fleet
