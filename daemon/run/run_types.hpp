// The run's public vocabulary: what a host (the server, the CLI, the fleet) names a run's state
// and its commands by, without the run's governing logic (run_core.hpp) or the adapters' session
// seam behind it. A change to either rebuilds the run, not everything that talks about runs.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "adapters/run_spec.hpp"
#include "daemon/run/budget_meter.hpp"
#include "protocol/events.hpp"

namespace mh::daemon {

using Instant = std::chrono::steady_clock::time_point;

// The host's name for one command it handed in, so the command's one result is routed back to
// whoever sent it. kUnrouted: nobody waits on this command's result (it is in the stream only).
using Ticket = std::uint64_t;
inline constexpr Ticket kUnrouted = 0;

// A call still waiting for the embedder, as a (re)attaching controller is handed it.
struct PendingCallView {
  std::string call_id;
  std::uint64_t requested_seq = 0;  // the seq of its tool.requested line
  std::uint64_t remaining_ms = 0;   // until the deadline denies it
};

// Where a run is, as its host shows it (`ls`, `get`, /metrics): the core's phases folded into
// the five a user sees (RunCore::public_phase).
// parked (issue 27 §5): a call waited longer than park_after_ms, the vendor was told to defer it and
// has exited; a decision resumes it.
enum class RunPhase { starting, turn, idle, ending, closed, parked };
inline constexpr std::array<RunPhase, 6> kRunPhases = {RunPhase::starting, RunPhase::turn,   RunPhase::idle,
                                                       RunPhase::ending,   RunPhase::closed, RunPhase::parked};
constexpr std::string_view to_string(RunPhase phase) {
  switch (phase) {
    case RunPhase::starting:
      return "starting";
    case RunPhase::turn:
      return "turn";
    case RunPhase::idle:
      return "idle";
    case RunPhase::ending:
      return "ending";
    case RunPhase::parked:
      return "parked";
    case RunPhase::closed:
      return "closed";
  }
  return "closed";
}

// Whether a live run is making progress (issue 27 §2), as `get`, `ls`, the viewer and /metrics
// show it: ages at the moment the status was taken (RunCore::progress).
struct RunProgress {
  std::optional<std::uint64_t> waiting_ms;  // the oldest pending decision has waited this long; none pending: nullopt
  std::optional<std::uint64_t> silent_ms;   // since the vendor's last output (or its spawn); not started: nullopt
  std::optional<std::uint64_t> stalled_ms;  // named RUN_STALLED this long ago and silent since; else nullopt
};

struct RunStatus {
  std::string run_id;
  std::string adapter;
  RunPhase phase = RunPhase::starting;
  std::size_t pending_decisions = 0;
  std::uint32_t turns = 0;
  std::uint64_t last_seq = 0;
  std::optional<protocol::CloseReason> close_reason;
  int pid = 0;
  std::chrono::system_clock::time_point created_at;
  std::map<std::string, std::string> labels;
  Spend spend;               // so far
  adapters::Budgets budget;  // the run's limits
  RunProgress progress;      // decisions waited on, silence, a stall (issue 27)
};

}  // namespace mh::daemon
