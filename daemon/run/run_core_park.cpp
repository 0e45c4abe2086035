// RunCore's parking (issue 27 §5; docs/policies.md "Parking"): a call that waits on the embedder
// longer than the spec's park_after_ms is answered "defer" through the session, the vendor ends
// its turn on it ("tool_deferred") and its process is let go (stdin closed: it exits, its memory
// is freed), and the run is parked. The call stays pending: the embedder's decision or the
// call's own deadline decides it as ever, and the host then starts the vendor again with the
// session's resume arguments; the vendor asks for the call once more and gets that decision.
// The stream stays one stream: warnings RUN_PARKED and RUN_RESUMED say where.
#include <algorithm>

#include "adapters/session.hpp"
#include "daemon/run/run_core.hpp"
#include "daemon/run/run_core_impl.hpp"

namespace mh::daemon {

using namespace run_core_detail;

void RunCore::settle_park() {
  const std::uint64_t after = spec_.park_after_ms.value_or(0);
  if (after == 0) return;
  auto disarm = [&] {
    if (!parking_.timed) return;
    parking_.timed.reset();
    effects_.arm_park({}, std::nullopt);
  };
  // Timed only in a turn, and not once a call is being deferred or the run is parked.
  if (life_.phase != Phase::turn || parking_.deferring) {
    disarm();
    return;
  }
  // The oldest call the vendor blocks on (it has a reply channel nobody has answered).
  const CallState* oldest = nullptr;
  for (const auto& id : pending_) {
    const CallState& st = calls_.at(id);
    if (!st.reply || st.answered) continue;
    if (!oldest || st.requested_seq < oldest->requested_seq) oldest = &st;
  }
  if (!oldest) {
    disarm();
    return;
  }
  if (parking_.timed == oldest->call.call_id) return;
  parking_.timed = oldest->call.call_id;
  effects_.arm_park(oldest->call.call_id, oldest->delivered_at + std::chrono::milliseconds(after));
}

void RunCore::on_park_timeout(const std::string& call_id, Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (parking_.timed != call_id) return;  // moved past it
  parking_.timed.reset();
  if (life_.phase != Phase::turn || parking_.deferring || !pending_.count(call_id)) return;
  CallState& st = calls_.at(call_id);
  if (!st.reply || st.answered) return;
  adapters::AdapterOutputs outputs;
  if (!session_->park(*st.reply, st.call, outputs)) return;  // refused at start where not honoured
  st.answered = true;  // the vendor's request is answered (defer); the decision is still to come
  parking_.deferring = call_id;
  fold(outputs);
}

bool RunCore::park_at_turn_end(const std::optional<std::string>& stop_reason, std::optional<std::string>& at) {
  if (!parking_.deferring || life_.phase != Phase::turn) return false;
  const std::string id = *parking_.deferring;
  parking_.deferring.reset();
  if (stop_reason != std::optional<std::string>("tool_deferred")) return false;  // not parked: any turn end
  // The turn is over for every other call; the parked one stays pending (its deadline runs on).
  const bool pending = pending_.erase(id) > 0;
  abandon_pending("the turn ended");
  if (pending) pending_.insert(id);
  auto crossing = budget_.turn_ended();
  effects_.spend_changed(budget_.spend());
  note_last(proto::ev::TurnEnded::kName, nullptr);
  effects_.emit(proto::ev::TurnEnded{std::max<std::uint32_t>(turn_, 1), stop_reason}, std::move(at));
  life_.phase = Phase::parked;
  parking_.parked = id;
  parking_.parked_at = now_;
  ++parking_.times;
  warn("RUN_PARKED", id + " waited " + std::to_string(ms_between(calls_.at(id).delivered_at, now_)) +
                         " ms for a decision (park_after " + std::to_string(spec_.park_after_ms.value_or(0)) +
                         " ms): the vendor deferred it and its process is let go; a decision (or the call's "
                         "deadline) resumes the session");
  effects_.close_vendor_stdin();
  if (crossing) {
    exhaust(*crossing);
    return true;
  }
  // Decided while the vendor was still deferring it: resume at once.
  if (!pending) decided_while_parked(id);
  return true;
}

void RunCore::decided_while_parked(const std::string& call_id) {
  if (life_.phase != Phase::parked || parking_.parked != call_id || parking_.resume_wanted) return;
  parking_.resume_wanted = true;
  effects_.resume_vendor();
}

// The parked call's decision is known before the vendor starts again: the session may carry it in
// the arguments (Claude: a settings hook that answers that call before the in-band seam is back).
std::vector<std::string> RunCore::resume_args() const {
  if (parking_.parked)
    if (auto it = calls_.find(*parking_.parked); it != calls_.end() && it->second.decision)
      return session_->resume_args(it->second.call, *it->second.decision);
  return session_->resume_args();
}

void RunCore::on_resumed(Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (!resume_wanted()) return;
  parking_.resume_wanted = false;
  const std::string id = parking_.parked.value_or("");
  parking_.parked.reset();
  stall_.last_output = now;  // a resumed vendor is silent since its spawn
  life_.phase = Phase::turn;
  warn("RUN_RESUMED", id + " was decided after " + std::to_string(ms_between(parking_.parked_at, now)) +
                          " ms parked: the vendor's session is resumed and the decision answers the call");
  effects_.vendor_started_again();
  turn_started(std::nullopt);
  parking_.unasked = id;
  adapters::AdapterOutputs outputs;
  session_->resume(outputs);
  fold(outputs);
}

// Claude Code 2.1.197 may resume the deferred call before it has read the initialize that installs
// the call seam again (seen under load: the call's result, then the process's init, then the
// answer to initialize): its own permission pipeline then decided the call, not the decision the
// run made. That is never passed over in silence: the stream names it, before the result.
void RunCore::check_resumed_result(const proto::EventPayload& payload) {
  if (!parking_.unasked) return;
  const auto* result = std::get_if<proto::ev::ToolResult>(&payload);
  if (!result || result->call_id != *parking_.unasked) return;
  const std::string id = *parking_.unasked;
  parking_.unasked.reset();
  const CallState& st = calls_.at(id);
  // Carried in the resumed process's own arguments: governed even before its seam is back.
  if (st.decision && session_->resume_delivers_decision(st.call, *st.decision)) return;
  warn("RESUME_UNGOVERNED",
       id +
           " was resumed by the vendor before its call seam was installed again, so the vendor's own permission "
           "pipeline decided it; the run's decision (" +
           std::string(st.decision ? proto::decision_name(*st.decision) : "none") +
           ") was not delivered, and its result follows as the vendor reports it");
}

}  // namespace mh::daemon
