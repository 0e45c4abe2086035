// Host leases (the hosts bucket, key = host id, TTL = lease_ttl) and the close of a lost host's
// run: each host renews its key every ttl/3; a run whose record names a host with no key is a
// lost host's run, and the survivors close it in the events stream — a `warning` HOST_LOST
// naming the lost host, then `stream.closed` reason `error`, each at the next seq, with the
// message id <run>:<seq> and guarded by the subject's expected last sequence. That guard is what
// makes the close happen once: of two survivors (or a survivor and the lost host's late line)
// only one line lands at a seq, the other is refused or deduplicated, reads the new end and goes
// on from it. The record is marked closed afterwards (lost_host_sweep.hpp).
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "daemon/fleet/fleet_link.hpp"

namespace mh::fleet {

// Puts (renews) this host's lease, with the short wait of the sweep. `info` is a small JSON
// object (what `ls --fleet` shows of the host).
NatsResult<void> renew_lease(FleetLink& link, const std::string& host, const std::string& info);
// Removes it (a clean stop: the survivors need not wait for the TTL).
NatsResult<void> drop_lease(FleetLink& link, const std::string& host);
// The hosts whose lease is live (`ls --fleet`: a consumer made for the call).
NatsResult<std::set<std::string>> live_hosts(FleetLink& link);
// Whether `host` holds a lease now, asked of the hosts bucket's leader (the last message of the
// host's key, no consumer, the short wait): a follower that is behind could miss a renewal.
NatsResult<bool> holds_lease(FleetLink& link, const std::string& host);

struct ClosedRun {
  std::string run_id;
  std::string lost_host;
  std::uint64_t closed_seq = 0;  // the seq of its stream.closed
  std::string closer;            // whose HOST_LOST warning it is ("" when the run was closed already)
};

// The closer a survivor's HOST_LOST warning (`line`, as the fleet holds it) names, or "" when the
// line is not one (the warning close_run_in_fleet writes before its stream.closed).
std::string host_lost_closer(std::string_view line);

// Closes one run in the events stream as `closer` after its host `lost_host` was lost: the
// warning, then stream.closed, after whatever the fleet holds (with the sweep's short wait).
// Idempotent, and safe to race with another survivor: one warning lands.
NatsResult<ClosedRun> close_run_in_fleet(FleetLink& link, const std::string& run_id, const std::string& lost_host,
                                         const std::string& closer);

}  // namespace mh::fleet
