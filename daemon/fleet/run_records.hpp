// The fleet's record of each run (the runs bucket, key = run id): which host owns it and whether
// its stream is open. Placement is a create-only put (exactly one host wins a run id, however
// often its spec is delivered); every later change is a compare-and-set on the revision read (a
// lost host's run is closed once by its events subject itself, leases.hpp; its record after).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/fleet/event_publisher.hpp"
#include "daemon/fleet/fleet_link.hpp"

namespace mh::fleet {

struct RunRecord {
  std::string run_id;
  std::string host;            // the owner
  std::string state = "open";  // open · closed ("closing": an earlier version's claim, swept as open)
  std::string closed_by;       // the host that closed it when that is not the owner
  bool launched = false;       // the owner has made the run (a queued run is claimed a moment before)
  std::uint64_t revision = 0;  // of the bucket entry (for compare-and-set)

  std::string to_json() const;
  // A peer wrote it: bounded, parsed as a value, refused when any field does not fit.
  static std::optional<RunRecord> from_json(std::string run_id, std::string_view text, std::uint64_t revision);
};

enum class Claim { won, lost };

// The create-only put: `host` owns `run_id` unless another host already does. A retry of a claim
// this host made (its ack lost) is `won` again. `launched`: the run exists already (one submitted
// on its own host); a queued run is claimed first, and marked launched once it is made.
NatsResult<Claim> claim_placement(FleetLink& link, const std::string& run_id, const std::string& host,
                                  bool launched = false);

// Lets go of a claim this host made and did not launch (its run not made here: the host is
// stopping, or refused it BUSY): a delete of the record over the revision read, so that the
// spec, given back to the queue afterwards, can be claimed by another host. A record that is
// not this host's unlaunched open claim (another host's, launched, closed by a survivor meanwhile)
// is never touched. True: the key holds no record now; false: it holds one this host may not drop.
NatsResult<bool> release_placement(FleetLink& link, const std::string& run_id, const std::string& host);

// Marks this host's record of `run_id` launched (compare-and-set): its run is made here.
NatsResult<void> mark_launched(FleetLink& link, const std::string& run_id);

// The record, or nullopt when the fleet has none (or it does not parse).
NatsResult<std::optional<RunRecord>> read_run_record(FleetLink& link, const std::string& run_id,
                                                     Wait wait = Wait::request);

// Compare-and-set: writes `next` over the revision `next.revision` names. `lost` when the entry
// changed meanwhile (someone else wrote first).
NatsResult<Claim> update_run_record(FleetLink& link, const RunRecord& next, Wait wait = Wait::request);

// Waits (at most `timeout`) until the fleet's record of `run_id` says its host has made the run
// (launched, or already closed): a watch on its key, so a submitter hears of the placement as
// soon as the winning host has the run, and `get` or `tail` there find it. nullopt: not yet.
NatsResult<std::optional<RunRecord>> await_run_record(FleetLink& link, const std::string& run_id,
                                                      std::chrono::milliseconds timeout);

// Every record in the bucket (`ls --fleet`). A consumer made for the call: it needs the
// cluster's meta leader and the bucket's leader.
NatsResult<std::vector<RunRecord>> list_run_records(FleetLink& link);

// Every record not closed, kept current by one watch of the bucket made once (the host-loss
// sweep): after a NATS node's loss the sweep still knows every open run recorded before it,
// whatever node led the bucket or the cluster (a fresh listing would wait for both to be elected
// again). A record is let go once it reads closed (it never opens again), so the watch's memory
// grows with the runs open, not with every run the fleet ever had. Changes are taken in by
// drain(), never waiting for one.
class RunRecordWatch {
 public:
  static NatsResult<RunRecordWatch> open(FleetLink& link);
  // Takes in every change delivered so far.
  NatsResult<void> drain();
  // The records not closed, by run id.
  const std::map<std::string, RunRecord>& records() const { return records_; }

  using WatcherHandle = std::unique_ptr<kvWatcher, NatsDeleter<kvWatcher, kvWatcher_Destroy>>;

 private:
  explicit RunRecordWatch(WatcherHandle watcher) : watcher_(std::move(watcher)) {}
  WatcherHandle watcher_;
  std::map<std::string, RunRecord> records_;
};

}  // namespace mh::fleet
