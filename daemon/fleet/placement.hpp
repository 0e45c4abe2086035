// Placement through the submit work queue: a submitter publishes a run's spec (its run id
// already assigned, and the message id = the run id, so a retried submit is one message); every
// host pulls from the one durable consumer only while it has room, and a spec it takes becomes a
// run on that host once it wins the run's record (run_records.hpp). The message is acked only
// after the run's spec is durable on the host's disk; a host that dies before that lets AckWait
// pass and the spec goes to another host. A redelivery of a placed run loses the claim and is
// dropped (acked): a run is placed exactly once.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "daemon/fleet/fleet_link.hpp"

namespace mh::fleet {

inline constexpr const char* kRunIdHeader = "Mh-Run-Id";
inline constexpr std::size_t kMaxSpecBytes = 1u << 20;

// Puts one spec on the queue. `spec_json` is the socket API's spec object with its run id.
NatsResult<void> submit_spec(FleetLink& link, const std::string& run_id, const std::string& spec_json);

// One spec taken from the queue, not yet acknowledged.
class SubmitOffer {
 public:
  explicit SubmitOffer(MsgHandle msg);
  const std::string& run_id() const { return run_id_; }  // "" when the header is missing or bad
  std::string_view spec() const;
  std::uint64_t deliveries() const { return deliveries_; }
  // Done with it: placed here, or a redelivery of a run placed elsewhere. Synchronous ack.
  NatsResult<void> ack();
  // Not now (this host ran out of room after all): it goes back at once for another host.
  NatsResult<void> give_back();
  // Refused for good (bad run id, oversized, not a spec): never delivered again.
  NatsResult<void> refuse();

 private:
  MsgHandle msg_;
  std::string run_id_;
  std::uint64_t deliveries_ = 0;
};

class PlacementPuller {
 public:
  static NatsResult<PlacementPuller> open(FleetLink& link);
  // Up to `batch` offers, waiting at most `wait` for the first. Empty: nothing queued.
  NatsResult<std::vector<SubmitOffer>> fetch(int batch, std::chrono::milliseconds wait);

 private:
  explicit PlacementPuller(SubscriptionHandle sub) : sub_(std::move(sub)) {}
  SubscriptionHandle sub_;
};

}  // namespace mh::fleet
