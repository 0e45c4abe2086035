// Host leases (the hosts bucket, key = host id, TTL = lease_ttl) and what the survivors do when
// one runs out: each host renews its key every ttl/3; a run whose record names a host with no
// key is a lost host's run, and exactly one survivor closes it in the events stream — it wins
// the record's compare-and-set (open → closing, closed_by = itself), appends a `warning`
// HOST_LOST naming the lost host, then `stream.closed` reason `error`, each at the next seq and
// guarded by the subject's expected last sequence (a late line from the lost host and the close
// cannot interleave: one of the two publishes is refused), then marks the record closed.
// A survivor that dies half way leaves `closing` under its own name: once its lease is gone too,
// the next sweep claims the close again (the publishes are idempotent by message id).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "daemon/fleet/fleet_link.hpp"
#include "daemon/fleet/run_records.hpp"

namespace mh::fleet {

// Puts (renews) this host's lease. `info` is a small JSON object (what `ls --fleet` shows of
// the host).
NatsResult<void> renew_lease(FleetLink& link, const std::string& host, const std::string& info);
// Removes it (a clean stop: the survivors need not wait for the TTL).
NatsResult<void> drop_lease(FleetLink& link, const std::string& host);
// The hosts whose lease is live.
NatsResult<std::set<std::string>> live_hosts(FleetLink& link);

struct ClosedRun {
  std::string run_id;
  std::string lost_host;
  std::uint64_t closed_seq = 0;  // the seq of its stream.closed
};

// One sweep by host `self`: every open (or orphaned closing) run of a host with no lease, closed
// if this host wins its claim. What it closed.
NatsResult<std::vector<ClosedRun>> close_lost_runs(FleetLink& link, const std::string& self);

// Closes one run in the events stream as `closer` after its host `lost_host` was lost (the claim
// already won): the warning, then stream.closed, after whatever the fleet holds. Idempotent.
NatsResult<ClosedRun> close_run_in_fleet(FleetLink& link, const std::string& run_id, const std::string& lost_host,
                                         const std::string& closer);

}  // namespace mh::fleet
