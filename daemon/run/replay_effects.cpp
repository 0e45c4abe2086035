// ReplayEffects (replay_effects.hpp): the core's effects while its run's journal is replayed,
// checked against the record and collected for the adoption's reconciliation.
#include "daemon/run/replay_effects.hpp"

namespace mh::daemon {

ReplayEffects::ReplayEffects(RunEffects& live, std::vector<std::string> recorded_types,
                             std::chrono::milliseconds exit_grace)
    : live_(live), recorded_types_(std::move(recorded_types)), exit_grace_(exit_grace) {}

std::uint64_t ReplayEffects::emit(proto::EventPayload payload, std::optional<std::string> at) {
  return emit_cut(std::move(payload), std::move(at), {});
}

std::uint64_t ReplayEffects::emit_cut(proto::EventPayload payload, std::optional<std::string> at,
                                      std::vector<proto::CutField> cut) {
  // Past the record: a new event, written as the live run writes it.
  if (seq_ >= recorded_last()) return live_.emit_cut(std::move(payload), std::move(at), std::move(cut));
  // On record already. It must be the one the record holds at its seq, or the core is not the one
  // that governed the run.
  ++seq_;
  std::string_view made = proto::event_name(payload);
  const std::string& recorded = recorded_types_[seq_ - 1];
  if (made != recorded)
    diverge("the replay made " + std::string(made) + " where the stream holds " + recorded + " (seq " +
            std::to_string(seq_) + ")");
  return seq_;
}

// Delivered before, or to be delivered once the replay is reconciled. A line written once stdin
// was closed never reached the vendor: the supervisor did not accept it (nor keep it in its stdin
// log, the copy the reconciliation compares with), so neither does the replay.
void ReplayEffects::write_vendor(std::string line) {
  if (stdin_closed_) return;
  stdin_bytes_ += line;
  stdin_bytes_.push_back('\n');
}

// Sent once the replay is reconciled, if that hook still waits.
void ReplayEffects::reply_hook(std::uint64_t connection, std::string line) {
  hook_replies_[connection] = std::move(line);
}

void ReplayEffects::arm_deadline(const std::string& call_id, Instant when) {
  deadlines_[call_id] = when;
}

void ReplayEffects::cancel_deadline(const std::string& call_id) {
  deadlines_.erase(call_id);
}

void ReplayEffects::close_vendor_stdin() {
  stdin_closed_ = true;
  if (!kill_at_) kill_at_ = now_ + exit_grace_;
}

void ReplayEffects::terminate_vendor(std::chrono::milliseconds grace) {
  stdin_closed_ = true;
  Instant at = now_ + grace;
  if (!kill_at_ || at < *kill_at_) kill_at_ = at;
}

void ReplayEffects::arm_park(const std::string& call_id, std::optional<Instant> when) {
  if (when)
    park_.emplace(call_id, *when);
  else
    park_.reset();
}

// A parked run's vendor was started again (issue 27 §5): its stdin is open, and the grace its
// stdin's close began is over (the old process exited within it).
void ReplayEffects::vendor_started_again() {
  stdin_closed_ = false;
  kill_at_.reset();
}

void ReplayEffects::arm_wall_budget(Instant when) {
  wall_ = when;
}

void ReplayEffects::command_answered(Ticket ticket, const proto::ev::CommandResult& result, bool recorded) {
  live_.command_answered(ticket, result, recorded);
}

}  // namespace mh::daemon
