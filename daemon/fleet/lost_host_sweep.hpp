// One host's part in closing the runs of lost hosts (docs/fleet.md "Host loss"): it renews its own
// lease, and sweeps — every run the fleet records as open whose host holds no lease is closed in
// the events stream (close_run_in_fleet), then its record is marked closed.
//
// A lease is judged only while this host's own renewals have been taken for a whole TTL: when the
// hosts bucket has no leader (its NATS node died and JetStream is electing another, 4-9 s in
// nats-server 2.9) nobody can renew, every lease may run out meanwhile, and a host that had no
// chance to renew since is not lost. So a host with no lease of its own judges nobody, and after
// the bucket comes back everyone gets a full TTL to renew first.
//
// What the sweep asks of NATS does not wait on a dead leader longer than the sweep's short wait
// (fleet_link.hpp), and needs no consumer made (the cluster's meta leader may be the one that
// died): the records come from one watch of the bucket (RunRecordWatch), a lease from the hosts
// bucket's last message for the host.
//
// Threading: renew() and sweep() block (each call bounded by the sweep's wait); they may run on
// two threads at once, each on its own.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/fleet/leases.hpp"
#include "daemon/fleet/run_records.hpp"

namespace mh::fleet {

class LostHostSweep {
 public:
  LostHostSweep(FleetLink& link, std::string self) : link_(&link), self_(std::move(self)) {}

  // Puts this host's lease, and notes whether the bucket took it. True when this renewal comes
  // a whole lease or more after the last one taken: this host's lease had run out meanwhile (it
  // was stopped, or cut off), and the others may have closed its runs.
  NatsResult<bool> renew(const std::string& info);
  // One sweep: what it closed. A failed call ends the sweep (the next one tries again).
  NatsResult<std::vector<ClosedRun>> sweep();
  // Whether this host may judge the others' leases now: its own renewals taken for a TTL, and
  // its lease live (the last one taken less than a TTL ago).
  bool may_judge() const;
  // A test hook (FleetHost, kFailSweepMarkEnv): the next `count` marks of a closed run's record
  // fail, as a NATS that did not take them. Never set in production.
  void fail_marks_for_test(int count) { marks_to_fail_ = count; }

 private:
  using Clock = std::chrono::steady_clock;
  FleetLink* link_;
  std::string self_;
  // Since when every renewal has been taken, and when the last one was (steady-clock ticks);
  // kNever after a failed one. A gap of a lease between two taken renewals (this host was
  // stopped, or away) starts the count again.
  static constexpr Clock::rep kNever = -1;
  std::atomic<Clock::rep> taken_since_{kNever}, last_taken_{kNever};
  std::optional<RunRecordWatch> records_;       // sweep() only
  std::map<std::string, std::string> closers_;  // sweep() only: closes whose record is not marked yet
  // sweep() only: runs found closed in the fleet by a host this one cannot name (the close was
  // whole when it looked), since when: their closer marks the record; after a whole lease
  // without it (the closer died between its close and its mark) this host marks it, closer unknown.
  std::map<std::string, Clock::time_point> closed_unnamed_;
  std::atomic<int> marks_to_fail_{0};  // fail_marks_for_test
};

}  // namespace mh::fleet
