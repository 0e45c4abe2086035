// The fleet's record of each run (the runs bucket, key = run id): which host owns it and whether
// its stream is open. Placement is a create-only put (exactly one host wins a run id, however
// often its spec is delivered); every later change is a compare-and-set on the revision read, so
// two survivors cannot both close a lost host's run.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/fleet/fleet_link.hpp"

namespace mh::fleet {

struct RunRecord {
  std::string run_id;
  std::string host;            // the owner
  std::string state = "open";  // open · closing (a survivor claimed the close) · closed
  std::string closed_by;       // the host that closed it when that is not the owner
  std::uint64_t revision = 0;  // of the bucket entry (for compare-and-set)

  std::string to_json() const;
  // A peer wrote it: bounded, parsed as a value, refused when any field does not fit.
  static std::optional<RunRecord> from_json(std::string run_id, std::string_view text, std::uint64_t revision);
};

enum class Claim { won, lost };

// The create-only put: `host` owns `run_id` unless another host already does. A retry of a claim
// this host made (its ack lost) is `won` again.
NatsResult<Claim> claim_placement(FleetLink& link, const std::string& run_id, const std::string& host);

// The record, or nullopt when the fleet has none (or it does not parse).
NatsResult<std::optional<RunRecord>> read_run_record(FleetLink& link, const std::string& run_id);

// Compare-and-set: writes `next` over the revision `next.revision` names. `lost` when the entry
// changed meanwhile (someone else wrote first).
NatsResult<Claim> update_run_record(FleetLink& link, const RunRecord& next);

// Waits (at most `timeout`) until the fleet has a record of `run_id`: a watch on its key, so a
// submitter hears of the placement as soon as the winning host writes it. nullopt: none yet.
NatsResult<std::optional<RunRecord>> await_run_record(FleetLink& link, const std::string& run_id,
                                                      std::chrono::milliseconds timeout);

// Every record in the bucket (`ls --fleet`, the lease sweep).
NatsResult<std::vector<RunRecord>> list_run_records(FleetLink& link);

}  // namespace mh::fleet
