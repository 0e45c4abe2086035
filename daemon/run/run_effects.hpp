// What the run core (run_core.hpp) asks of its host: the live shell's effects (run_impl), or the
// replay's while an adopting daemon replays the run's journal (replay_effects.hpp).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/run/budget_meter.hpp"
#include "daemon/run/run_types.hpp"
#include "protocol/events.hpp"

namespace mh::daemon {

namespace proto = mh::protocol;

// What the core asks of its host. Called synchronously, in order.
class RunEffects {
 public:
  virtual ~RunEffects() = default;
  // Appends one event to the run's stream (the host assigns seq and makes it durable before
  // anyone sees it) and returns the seq it got; 0 when the stream could not take it (its write
  // failed: the host then stops the run, and the core tells no one it was recorded).
  virtual std::uint64_t emit(proto::EventPayload payload, std::optional<std::string> at) = 0;
  // The same, for a payload whose content the adapter holds only cut (Event::cut, kept as given).
  virtual std::uint64_t emit_cut(proto::EventPayload payload, std::optional<std::string> at,
                                 std::vector<proto::CutField> cut) = 0;
  // One line to the vendor's stdin (the host appends the newline and keeps a copy).
  virtual void write_vendor(std::string line) = 0;
  // The answer to a hook-channel request: written to that connection, which is then closed.
  virtual void reply_hook(std::uint64_t connection, std::string line) = 0;
  virtual void arm_deadline(const std::string& call_id, Instant when) = 0;
  virtual void cancel_deadline(const std::string& call_id) = 0;
  // Normal end: close the vendor's stdin; the vendor finishes and its stdout ends.
  virtual void close_vendor_stdin() = 0;
  // Forced end: close stdin, give the vendor `grace` to exit, then kill every process of the
  // run. Its stdout then ends and the host calls wind_up().
  virtual void terminate_vendor(std::chrono::milliseconds grace) = 0;
  // The run's wall-clock budget runs out at `when`: the host calls on_wall_budget() then.
  virtual void arm_wall_budget(Instant when) { (void)when; }
  // The run is named stalled at `when` unless the core says otherwise first: the host calls
  // on_stall_timeout() then. nullopt disarms it. Each call replaces the one before; the core
  // calls it only when what it wants changes.
  virtual void arm_stall(std::optional<Instant> when) { (void)when; }
  // Parking (issue 27 §5). The park timer: the host calls on_park_timeout(call_id) at `when`;
  // nullopt disarms it. One per run; each call replaces the one before.
  virtual void arm_park(const std::string& call_id, std::optional<Instant> when) {
    (void)call_id;
    (void)when;
  }
  // The parked run has its decision (or was ended): once the vendor's process is gone, the host
  // starts it again with the session's resume_args() and calls on_resumed() (or, when the run is
  // no longer parked, winds it up).
  virtual void resume_vendor() {}
  // The vendor's process was started again (on_resumed): a new process, its stdin open, no grace
  // of the old one's running. The live shell started it already; a replay of the journal keeps
  // its own view of the vendor (ReplayEffects) and takes it from here.
  virtual void vendor_started_again() {}
  // What the run has spent changed (a turn, a tool call, a usage record).
  virtual void spend_changed(const Spend& spend) { (void)spend; }
  // The one result of the command handed in under `ticket`: `recorded` when it is the
  // command.result in the stream and durable; not recorded when the stream could not take it
  // (closed, or its write failed), so the sender must be told directly. Exactly once per ticket.
  virtual void command_answered(Ticket ticket, const proto::ev::CommandResult& result, bool recorded) {
    (void)ticket;
    (void)result;
    (void)recorded;
  }
};

}  // namespace mh::daemon
