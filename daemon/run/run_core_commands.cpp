// RunCore's commands: one handler per command (tool.decide, frame.set, message.inject, steer,
// permission.set, interrupt, halt), and the tracking of controls the vendor answers later. Each
// ends in exactly one result (RunCore::result), now or when the vendor answers; one the vendor
// never answers is answered TOO_LATE at wind-up.
#include "adapters/session.hpp"
#include "daemon/run/run_core.hpp"
#include "protocol/digest.hpp"

namespace mh::daemon {

namespace {

constexpr std::string_view kNextBoundary = "the next turn boundary";

}  // namespace

void RunCore::track(const adapters::ControlAck& ack, const CommandRef& ref, proto::CommandName name) {
  switch (ack.kind) {
    case adapters::ControlAck::Kind::done:
    case adapters::ControlAck::Kind::refused:
      result(ref, ack.outcome);
      return;
    case adapters::ControlAck::Kind::pending_vendor:
      pending_controls_[ack.control_id] = PendingControl{ref, name, ack.outcome.applies_at};
      return;
  }
}

void RunCore::handle(const proto::cmd::ToolDecide& c, const CommandRef& ref, std::optional<proto::PeerIdentity> peer) {
  auto it = calls_.find(c.call_id);
  if (it == calls_.end()) {
    result(ref,
           proto::CommandOutcome::refused(proto::RefusalCode::UNKNOWN_CALL,
                                          "no call " + proto::excerpt(c.call_id, 80) + " was presented in this run"));
    return;
  }
  CallState& st = it->second;
  if (!pending_.count(c.call_id)) {
    std::string why = st.decision ? "call " + c.call_id + " was already decided (" +
                                        std::string(proto::decision_name(*st.decision)) + " by " +
                                        std::string(proto::to_string(*st.decided_by)) + "); its window is closed"
                                  : "call " + c.call_id + " is a record nobody adjudicates (seam none)";
    result(ref, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, why));
    return;
  }
  if (spec_.deny_only && std::holds_alternative<proto::decision::Replace>(c.decision)) {
    result(ref, proto::CommandOutcome::refused(
                    proto::RefusalCode::UNSUPPORTED_CONTROL,
                    "this run is deny-only: a replace is an allow with another input, so it would grant and bypass "
                    "the vendor's own rules; deny, abstain or allow (delivered as abstain) instead"));
    return;
  }
  // The vendor's posture drifted (issue 27 section 6): a decision that hands the call to it is refused.
  if (auto drift = posture_.refusal(c.decision, spec_.deny_only)) {
    result(ref, proto::CommandOutcome::refused(proto::RefusalCode::UNSUPPORTED_CONTROL, std::move(*drift)));
    return;
  }
  if (auto refusal = session_->check_decision(st.call, c.decision)) {
    result(ref, proto::CommandOutcome{std::move(*refusal), std::nullopt});
    return;
  }
  decide(st, c.decision, proto::DecidedBy::embedder, st.seam, peer);
  result(ref, proto::CommandOutcome::ok());
}

void RunCore::handle(const proto::cmd::FrameSet& c, const CommandRef& ref) {
  if (spec_.decisions == proto::DecisionMode::observe) {
    result(ref, proto::CommandOutcome::refused(
                    proto::RefusalCode::UNSUPPORTED_CONTROL,
                    "observe mode allows every call: a frame would be shown to the model and enforced by nothing"));
    return;
  }
  if (!live()) {
    result(ref, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                               "the run is ending; no further turn boundary will come"));
    return;
  }
  frame_pending_ = c.frame;
  pending_step_outcome_ = c.step_outcome;
  result(ref, proto::CommandOutcome::ok(std::string(kNextBoundary)));
}

void RunCore::handle(const proto::cmd::MessageInject& c, const CommandRef& ref) {
  if (!live()) {
    result(ref, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                               "the run is ending; no further turn will start"));
    return;
  }
  if (life_.phase == Phase::idle) {
    if (!turn_allowed()) {
      result(ref, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                                 "the run's turns budget is exhausted; no further turn will start"));
      return;
    }
    effects_.emit(proto::ev::Injection{c.text, "message.inject"}, std::nullopt);
    result(ref, proto::CommandOutcome::ok());
    start_turn({c.text});
    return;
  }
  // Mid-turn (or before the first turn has begun): it waits for the boundary, and says so.
  queued_messages_.emplace_back(ref.id, c.text);
  result(ref, proto::CommandOutcome::ok(std::string(kNextBoundary)));
}

void RunCore::handle(const proto::cmd::Steer& c, const CommandRef& ref) {
  if (life_.phase != Phase::turn) {
    result(ref, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, "no turn is running to steer"));
    return;
  }
  adapters::AdapterOutputs outputs;
  adapters::ControlAck ack = session_->steer(c.text, outputs);
  fold(outputs);
  if (ack.kind != adapters::ControlAck::Kind::refused)
    steers_.push_back({ref.id, ack.control_id, c.text, ack.kind == adapters::ControlAck::Kind::done});
  track(ack, ref, proto::CommandName::steer);
}

void RunCore::steer_undelivered(const SteerInFlight& steer, std::string_view why) {
  warn("STEER_UNDELIVERED", "steer " + steer.command_id + " was accepted, but " + std::string(why) + " and " +
                                std::string(adapter_.id()) + " never delivered it: the text (sha256 " +
                                proto::sha256_hex(steer.text) + ", \"" + proto::excerpt(steer.text, 40) +
                                "\") never reached the model");
}

void RunCore::handle(const proto::cmd::PermissionSet& c, const CommandRef& ref) {
  if (!live()) {
    result(ref, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, "the run is ending"));
    return;
  }
  if (!spec_.deny_only && session_->allow_overrides_posture(c.posture)) {
    result(ref,
           proto::CommandOutcome::refused(
               proto::RefusalCode::SHADOWED,
               "posture \"" + proto::excerpt(c.posture, 40) + "\" would appear to work and would not: an allow at " +
                   "the call seam grants and overrides it; a run that relies on the vendor's own posture must " +
                   "use the deny-only policy (--deny-only, \"deny_only\": true), under which allows are "
                   "delivered as abstain"));
    return;
  }
  adapters::AdapterOutputs outputs;
  adapters::ControlAck ack = session_->set_permission(c.posture, outputs);
  // What the run asks from here on, once the vendor applies it (a drifted part is then set again).
  if (ack.kind == adapters::ControlAck::Kind::done) posture_.set_applied(session_->posture_of_set(c.posture));
  if (ack.kind == adapters::ControlAck::Kind::pending_vendor)
    posture_.set_sent(ack.control_id, session_->posture_of_set(c.posture));
  fold(outputs);
  track(ack, ref, proto::CommandName::permission_set);
}

void RunCore::handle(const proto::cmd::Interrupt&, const CommandRef& ref) {
  if (life_.phase != Phase::turn) {
    result(ref,
           proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, "no turn is running; nothing to interrupt"));
    return;
  }
  abandon_pending("the run was interrupted");
  turn_interrupted_ = true;
  adapters::AdapterOutputs outputs;
  adapters::ControlAck ack = session_->interrupt(outputs);
  fold(outputs);
  track(ack, ref, proto::CommandName::interrupt);
}

void RunCore::handle(const proto::cmd::Halt&, const CommandRef& ref) {
  if (life_.phase == Phase::closed) {
    result(ref, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, "the run has already closed"));
    return;
  }
  if (life_.ending && life_.ending->forced == proto::CloseReason::steer_halt) {
    result(ref, proto::CommandOutcome::ok());  // already halting: the same end, said again
    return;
  }
  if (life_.ending) life_.ending->forced.reset();  // a halt outranks any end already under way
  stop(proto::CloseReason::steer_halt, "the run was halted");
  result(ref, proto::CommandOutcome::ok());
}

}  // namespace mh::daemon
