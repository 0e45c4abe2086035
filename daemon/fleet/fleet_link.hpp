// One host's link to the fleet: a NATS connection (reconnecting on its own), its JetStream
// context, and the streams and buckets every host agrees on (made by whoever comes first, with
// this host's replicas; a host that finds them uses them as they are).
//
// Threading: libnats runs its own threads; every call here blocks (bounded by the config's
// request_timeout) and is safe from any thread, but never from the daemon's io threads — the
// daemon calls it from its fleet thread (fleet_worker.hpp). Nothing here touches Asio.
#pragma once

#include <memory>
#include <string>

#include "daemon/fleet/fleet_config.hpp"
#include "daemon/fleet/nats_handles.hpp"

namespace mh::fleet {

class FleetLink {
 public:
  // Connects (every URL, user/password or credentials from the config), then makes or finds the
  // layout: the events stream, the submit work queue and its durable pull consumer, the runs
  // and hosts buckets.
  static NatsResult<std::unique_ptr<FleetLink>> connect(const FleetConfig& config);
  ~FleetLink();
  FleetLink(const FleetLink&) = delete;
  FleetLink& operator=(const FleetLink&) = delete;

  const FleetConfig& config() const { return config_; }
  const FleetNames& names() const { return names_; }
  natsConnection* nc() const { return nc_.get(); }
  jsCtx* js() const { return js_.get(); }
  kvStore* runs() const { return runs_.get(); }
  kvStore* hosts() const { return hosts_.get(); }
  // The largest message the server takes (max_payload): a line above it cannot be published.
  std::int64_t max_payload() const;

 private:
  FleetLink(FleetConfig config) : config_(std::move(config)), names_(config_.prefix) {}
  NatsResult<void> make_layout();

  FleetConfig config_;
  FleetNames names_;
  ConnectionHandle nc_;
  JsHandle js_;
  KvHandle runs_, hosts_;
};

}  // namespace mh::fleet
