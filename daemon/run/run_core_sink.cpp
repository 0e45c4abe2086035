// What the vendor session reports, folded: each input's outputs (adapters::AdapterOutputs: events,
// calls presented, awaiting an answer or withdrawn, controls answered, turns, writes, hook
// replies) turned into records, decisions and effects, in order. Separate from the inputs because
// this is the adapter's side of the seam.
#include <algorithm>

#include "adapters/session.hpp"
#include "daemon/run/run_core.hpp"
#include "daemon/run/run_core_impl.hpp"
#include "protocol/overloaded.hpp"

namespace mh::daemon {

using namespace run_core_detail;

namespace {

// The same request: same tool, same input (structural JSON equality, key order aside). Compared
// directly rather than through a digest: this sits on every call's path.
bool identical_request(const adapters::ToolCall& a, const adapters::ToolCall& b) {
  return a.name == b.name && a.input == b.input;
}

}  // namespace

void RunCore::event(proto::EventPayload payload, std::optional<std::string> at) {
  std::optional<Crossing> crossing;
  if (std::holds_alternative<proto::ev::SessionStarted>(payload)) session_started_seen_ = true;
  if (auto* injection = std::get_if<proto::ev::Injection>(&payload); injection && injection->origin == "steer") {
    auto delivered =
        std::find_if(steers_.begin(), steers_.end(), [&](const auto& s) { return s.text == injection->text; });
    if (delivered != steers_.end()) steers_.erase(delivered);
  }
  if (auto* usage = std::get_if<proto::ev::Usage>(&payload)) {
    crossing = budget_.usage(*usage);
    effects_.spend_changed(budget_.spend());
  }
  // The start's posture, from session.started, unless the session reports it on its own.
  std::optional<adapters::Posture> start_posture;
  if (auto* started = std::get_if<proto::ev::SessionStarted>(&payload); started && !session_->reports_posture())
    start_posture = adapters::Posture{started->permission_mode, std::nullopt};
  note_last(payload);
  check_resumed_result(payload);  // parking (run_core_park.cpp)
  effects_.emit(std::move(payload), std::move(at));
  if (start_posture) posture_reported(*start_posture, "start");  // after session.started, which opens the stream
  if (crossing) exhaust(*crossing);  // the tokens are spent already: the record first, then the stop
}

void RunCore::posture_reported(const adapters::Posture& report, std::string_view occasion) {
  if (auto drift = posture_.reported(report, occasion, spec_.deny_only)) effects_.emit(std::move(*drift), std::nullopt);
}

void RunCore::event_cut(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut) {
  // Content events (text, thinking, tool.result, injection): nothing the core meters or tracks,
  // beyond what the vendor last did (a stall names it).
  note_last(payload);
  check_resumed_result(payload);  // parking (run_core_park.cpp)
  effects_.emit_cut(std::move(payload), std::move(at), std::move(cut));
}

void RunCore::fold(adapters::AdapterOutputs& outputs) {
  namespace out = adapters::out;
  // No catch-all: an output kind added to the adapters' list does not compile until the core takes it.
  for (auto& output : outputs.take()) {
    std::visit(protocol::Overloaded{
                   [&](out::Event& o) { event(std::move(o.payload), std::move(o.at)); },
                   [&](out::EventCut& o) { event_cut(std::move(o.payload), std::move(o.at), std::move(o.cut)); },
                   [&](out::CallPresented& o) { call_presented(std::move(o.call), std::move(o.at)); },
                   [&](out::CallAwaitsAnswer& o) { call_awaits_answer(std::move(o.call), std::move(o.reply)); },
                   [&](out::CallWithdrawn& o) { call_withdrawn(o.reply); },
                   [&](out::ControlAnswered& o) { control_answered(std::move(o.reply)); },
                   [&](out::TurnStarted& o) { turn_started(std::move(o.at)); },
                   [&](out::TurnEnded& o) { turn_ended(std::move(o.stop_reason), std::move(o.at)); },
                   // Straight to the host: nothing to decide.
                   [&](out::WriteVendor& o) { effects_.write_vendor(std::move(o.line)); },
                   [&](out::ReplyHook& o) { effects_.reply_hook(o.connection, std::move(o.line)); },
                   [&](out::SessionReady&) { session_ready(); },
                   [&](out::FailRun& o) { fail_run(std::move(o.reason)); },
                   [&](out::PostureReported& o) { posture_reported(o.posture, o.occasion); },
               },
               output);
  }
}

void RunCore::session_ready() {
  if (life_.phase != Phase::starting) return;
  if (turn_allowed()) start_turn({spec_.prompt});
}

void RunCore::fail_run(std::string reason) {
  warn("RUN_FAILED", reason);
  stop(proto::CloseReason::error, "the run failed");
}

void RunCore::call_presented(adapters::ToolCall call, std::optional<std::string> at) {
  auto it = calls_.find(call.call_id);
  if (it == calls_.end()) {
    present(std::move(call), std::move(at), call.seam);
    return;
  }
  // The same call presented again. With the same request it is the same call; with another,
  // the decision cannot be carried over to an input nobody adjudicated.
  if (!identical_request(it->second.call, call) && !session_->same_request(it->second.call, call))
    call_awaits_answer(std::move(call), adapters::ReplyToken{});
}

void RunCore::call_awaits_answer(adapters::ToolCall call, adapters::ReplyToken reply) {
  bool has_reply = !reply.empty();
  auto it = calls_.find(call.call_id);
  if (it == calls_.end()) {
    // Asked before (or without) being presented: this request is its presentation.
    CallState& st = present(std::move(call), std::nullopt, reply.seam);
    if (has_reply) st.reply = std::move(reply);
    if (st.decision) answer_vendor(st);
    return;
  }
  CallState& st = it->second;
  if (parking_.unasked == call.call_id) parking_.unasked.reset();  // the resumed vendor asked again
  if (!identical_request(st.call, call) && !session_->same_request(st.call, call)) {
    proto::ev::ToolRequested again;
    again.call_id = call.call_id;
    again.name = call.name;
    again.input = call.input;
    again.operations = {};
    for (const auto& op : adapter_.operations_for(call))
      again.operations.push_back(op_label(op));
    again.subjects = adapter_.subjects_for(call);
    again.decision_required = false;
    again.seam = has_reply ? reply.seam : st.seam;
    again.agent = call.agent;
    again.escalation = call.escalation;
    st.requested_seq = effects_.emit(std::move(again), std::nullopt);
    warn("REQUEST_MUTATED", st.call.call_id +
                                " was presented with one input and the vendor then asked to run "
                                "another; the decision is bound to the input it was made for, so this one is denied");
    if (pending_.erase(st.call.call_id)) effects_.cancel_deadline(st.call.call_id);
    st.call = std::move(call);
    st.decision.reset();
    st.answered = false;
    if (has_reply) st.reply = std::move(reply);
    decide(st, proto::decision::Deny{"this call id was already presented with a different input"},
           proto::DecidedBy::adapter, st.reply ? st.reply->seam : st.seam);
    return;
  }
  if (has_reply) {
    st.reply = std::move(reply);
    st.answered = false;
  }
  if (st.decision) answer_vendor(st);
}

void RunCore::call_withdrawn(const adapters::ReplyToken& reply) {
  for (auto& [id, st] : calls_) {
    if (!st.reply || !st.reply->same_channel(reply)) continue;
    st.answered = true;  // nobody is listening for an answer any more
    if (!st.decision) {
      decide(st,
             proto::decision::Deny{"the vendor withdrew its request (its own timeout or an interrupt) "
                                   "before this call was decided, so nothing ran"},
             proto::DecidedBy::adapter, st.seam);
      warn("PENDING_CALL_ABANDONED", id + " was never decided by the embedder");
    }
    return;
  }
}

void RunCore::control_answered(adapters::ControlReply reply) {
  auto it = pending_controls_.find(reply.control_id);
  if (it == pending_controls_.end()) return;  // e.g. the interrupt a halt sends: no command waits on it
  PendingControl pending = std::move(it->second);
  pending_controls_.erase(it);
  if (pending.name == proto::CommandName::permission_set) posture_.set_answered(reply.control_id, reply.ok);
  auto steer =
      std::find_if(steers_.begin(), steers_.end(), [&](const auto& s) { return s.control_id == reply.control_id; });
  if (steer != steers_.end()) {
    steer->accepted = reply.ok;
    if (!reply.ok || steer->turn_over) {
      if (reply.ok) steer_undelivered(*steer, "its turn ended before the vendor answered");
      steers_.erase(steer);
    }
  }
  if (reply.ok) {
    result(pending.command, proto::CommandOutcome::ok(pending.applies_at));
  } else {
    result(pending.command,
           proto::CommandOutcome::refused(reply.refusal_code, std::string(adapter_.id()) + " refused " +
                                                                  std::string(proto::to_string(pending.name)) + ": " +
                                                                  reply.vendor_error));
  }
}

void RunCore::turn_started(std::optional<std::string> at) {
  if (step_change_pending_) announce_step();
  budget_.turn_started();
  effects_.spend_changed(budget_.spend());
  ++turn_;
  note_last(proto::ev::TurnStarted::kName, nullptr);
  effects_.emit(proto::ev::TurnStarted{turn_, frame_in_force_ ? std::optional<std::string>(frame_in_force_->digest)
                                                              : std::nullopt},
                std::move(at));
  if (life_.phase == Phase::idle || life_.phase == Phase::starting) life_.phase = Phase::turn;
}

void RunCore::turn_ended(std::optional<std::string> stop_reason, std::optional<std::string> at) {
  if (park_at_turn_end(stop_reason, at)) return;  // the vendor deferred the call it was parked on
  // A turn end closes the decision window: nothing still pending can run any more.
  abandon_pending("the turn ended");
  // A request of an unpriced model was judged at the turn's end (its figures had no cost).
  auto crossing = budget_.turn_ended();
  effects_.spend_changed(budget_.spend());
  note_last(proto::ev::TurnEnded::kName, nullptr);
  effects_.emit(proto::ev::TurnEnded{std::max<std::uint32_t>(turn_, 1), stop_reason}, std::move(at));
  // A steer belongs to its turn: one accepted that the vendor never showed in it is gone.
  std::erase_if(steers_, [&](auto& s) {
    if (s.accepted) steer_undelivered(s, "the turn ended (" + stop_reason.value_or("no stop reason") + ") first");
    s.turn_over = true;
    return s.accepted;
  });
  if (crossing) {
    if (life_.phase == Phase::turn) life_.phase = Phase::idle;  // the turn is over: nothing to interrupt
    exhaust(*crossing);
    return;
  }
  if (life_.phase == Phase::turn) at_boundary();
}

}  // namespace mh::daemon
