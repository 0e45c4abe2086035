// RunCore's inputs and its lifecycle: construction, the on_* entry points the shell calls with
// `now`, the wind-up when the vendor is gone, and the turn and end-of-run steps (start_turn,
// at_boundary, stop). What the adapter reports is run_core_sink.cpp, how a call is decided
// run_core_decide.cpp, and each command run_core_commands.cpp.
#include "daemon/run/run_core.hpp"

#include <algorithm>

#include "daemon/run/run_core_impl.hpp"

namespace mh::daemon {

using namespace run_core_detail;

std::string_view to_string(RunCore::Phase phase) {
  switch (phase) {
    case RunCore::Phase::starting:
      return "starting";
    case RunCore::Phase::turn:
      return "turn";
    case RunCore::Phase::idle:
      return "idle";
    case RunCore::Phase::ending:
      return "ending";
    case RunCore::Phase::closed:
      return "closed";
  }
  return "unknown";
}

RunCore::RunCore(const adapters::RunSpec& spec, const adapters::Adapter& adapter,
                 std::unique_ptr<adapters::AdapterSession> session, RunEffects& effects, RunCoreOptions options)
    : spec_(spec),
      adapter_(adapter),
      session_(std::move(session)),
      effects_(effects),
      options_(options),
      budget_(spec.budget, options.prices, spec.model),
      frame_in_force_(spec.frame),
      step_change_pending_(spec.frame.has_value()) {}

RunCore::~RunCore() = default;

void RunCore::start(Instant now) {
  now_ = now;
  started_at_ = now;
  if (spec_.budget.wall_ms) effects_.arm_wall_budget(now + std::chrono::milliseconds(*spec_.budget.wall_ms));
  session_->start(*this);
}

void RunCore::on_wall_budget(Instant now) {
  now_ = now;
  if (phase_ == Phase::closed) return;
  if (auto crossing = budget_.wall(ms_between(started_at_, now))) exhaust(*crossing);
}

void RunCore::on_budget_exhausted(const std::string& message, Instant now) {
  now_ = now;
  if (phase_ == Phase::closed || forced_close_) return;
  warn("BUDGET_EXHAUSTED", message);
  stop(proto::CloseReason::budget, "the run's budget was exhausted");
}

void RunCore::on_vendor_line(const proto::FramedLine& line, Instant now) {
  now_ = now;
  if (phase_ == Phase::closed) return;
  session_->on_vendor_line(line, *this);
}

void RunCore::on_hook_request(std::uint64_t connection, const json::value& input, Instant now) {
  now_ = now;
  if (phase_ == Phase::closed) {
    effects_.reply_hook(connection, "");
    return;
  }
  session_->on_hook_request(connection, input, *this);
}

void RunCore::on_hook_gone(std::uint64_t connection, Instant now) {
  now_ = now;
  if (phase_ == Phase::closed) return;
  session_->on_hook_gone(connection, *this);
}

void RunCore::on_unreadable_command(const proto::LineRefusal& refusal, Instant now) {
  now_ = now;
  result(refusal.id.value_or("-"), proto::outcome_for(refusal));
}

void RunCore::on_deadline(const std::string& call_id, Instant now) {
  now_ = now;
  auto it = calls_.find(call_id);
  if (it == calls_.end() || !pending_.count(call_id)) return;  // decided meanwhile
  CallState& call = it->second;
  std::string reason = "metaharness's own " + std::to_string(spec_.decision_deadline_ms) +
                       "ms decision deadline expired before an answer arrived; it is shorter than "
                       "the vendor's own timeout, so this refusal is metaharness's and not an ambiguity";
  decide(call, proto::decision::Deny{std::move(reason)}, proto::DecidedBy::deadline, call.seam);
}

void RunCore::on_command_source_closed(Instant now) {
  now_ = now;
  command_source_open_ = false;
  if (phase_ == Phase::idle) end_normally();
}

void RunCore::on_idle_timeout(Instant now) {
  now_ = now;
  if (phase_ == Phase::idle) end_normally();
}

void RunCore::on_shutdown(Instant now) {
  now_ = now;
  stop(proto::CloseReason::killed, "the daemon shut down");
}

void RunCore::on_command(proto::Command command, std::optional<proto::PeerIdentity> peer, Instant now) {
  now_ = now;
  proto::CommandName name = proto::command_name(command.payload);
  proto::CommandSupport support = adapter_.capabilities().command(name);
  if (!support.honoured) {
    result(command.id, proto::CommandOutcome::refused(support.code, adapter_.capabilities().refusal_reason(name)));
    return;
  }
  std::visit(
      [&](auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, proto::cmd::ToolDecide>)
          handle(c, command.id, peer);
        else
          handle(c, command.id);
      },
      command.payload);
}

void RunCore::on_vendor_end(Instant now) {
  now_ = now;
  if (vendor_end_told_ || phase_ == Phase::closed) return;
  vendor_end_told_ = true;
  session_->on_vendor_end(*this);
}

static std::string describe(const proto::ProcessTermination& p) {
  switch (p.kind) {
    case proto::ProcessKind::exited:
      return "exited with status " + std::to_string(p.code);
    case proto::ProcessKind::signaled:
      return "was killed by signal " + std::to_string(p.signal);
    case proto::ProcessKind::unknown:
      break;
  }
  return "ended (its status is unknown)";
}

proto::CloseReason RunCore::wind_up(const proto::ProcessTermination& process, Instant now,
                                    std::string_view vendor_stderr_tail) {
  // What the session held is the vendor's own record: it comes before why the run ends.
  on_vendor_end(now);
  // A turn cut short: what it spent is judged as at a turn's end (an unpriced request is unknown).
  (void)budget_.turn_ended();
  effects_.spend_changed(budget_.spend());
  bool we_ended_it = phase_ == Phase::ending;
  if (!we_ended_it && !forced_close_) {
    // The vendor stopped on its own: the stream says so, and why as far as anyone can tell, so
    // a stream that closes `error` is never silent about it.
    std::string message =
        std::string(adapter_.id()) + " " + describe(process) +
        (session_started_seen_ ? " while the run was in progress" : " before it opened a session (no session.started)");
    if (!vendor_stderr_tail.empty()) message += "; its stderr ends: " + std::string(vendor_stderr_tail);
    warn("VENDOR_EXITED", message);
  }
  abandon_pending("the stream ended");
  for (const auto& [control_id, pending] : pending_controls_)
    result(pending.command_id, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                                              "the run ended before the vendor answered " +
                                                                  std::string(proto::to_string(pending.name))));
  pending_controls_.clear();
  for (const auto& steer : steers_)
    if (steer.accepted) steer_undelivered(steer, "the run ended first");
  steers_.clear();
  for (const auto& [command_id, text] : queued_messages_)
    warn("INJECTION_UNDELIVERED", "message.inject " + command_id +
                                      " was queued for the next turn boundary, but the run ended first; "
                                      "the text never reached the model");
  queued_messages_.clear();
  if (frame_pending_)
    warn("FRAME_NEVER_IN_FORCE", "the frame " + frame_pending_->digest +
                                     " set for the next turn boundary never came into force: no further turn started");
  if (step_in_force_)
    leave_step(proto::StepOutcome{proto::StepOutcome::Kind::no_verdict,
                                  "the run ended in this step; metaharness does not judge steps"});
  auto ended = session_->session_ended();
  if (ended && !session_ended_emitted_) {
    ended->census = census_;
    session_ended_emitted_ = true;
    effects_.emit(std::move(*ended), std::nullopt);
  }
  phase_ = Phase::closed;
  if (forced_close_) return *forced_close_;
  // The vendor stopped on its own (crash, kill, exit mid-turn): that is an error whatever it
  // said before; so is a vendor that was killed by a signal after we closed its stdin.
  if (!we_ended_it || process.kind == proto::ProcessKind::signaled) return proto::CloseReason::error;
  return adapters::classify_close(false, ended);
}

std::vector<PendingCallView> RunCore::pending_calls(Instant now) const {
  std::vector<PendingCallView> out;
  for (const auto& id : pending_) {
    const CallState& c = calls_.at(id);
    out.push_back(PendingCallView{id, c.requested_seq, ms_between(now, c.deadline_at)});
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.requested_seq < b.requested_seq; });
  return out;
}

void RunCore::exhaust(const Crossing& crossing) {
  if (forced_close_ || phase_ == Phase::closed) return;
  warn("BUDGET_EXHAUSTED", crossing.message());
  stop(proto::CloseReason::budget, "the run's budget was exhausted");
}

bool RunCore::turn_allowed() {
  auto crossing = budget_.before_turn();
  if (!crossing) return true;
  exhaust(*crossing);
  return false;
}

void RunCore::start_turn(std::vector<std::string> texts) {
  if (frame_pending_) {
    // The boundary a frame.set promised: from here on calls are adjudicated against it, and the
    // model is shown it first, so no call is ever judged by a frame the model never saw.
    frame_in_force_ = std::move(frame_pending_);
    frame_pending_.reset();
    step_change_pending_ = true;
    std::string text = proto::render_frame_text(*frame_in_force_);
    effects_.emit(proto::ev::Injection{text, "frame"}, std::nullopt);
    texts.insert(texts.begin(), std::move(text));
  }
  phase_ = Phase::turn;
  hold_after_interrupt_ = false;
  session_->send_user_turn(texts, *this);
}

void RunCore::announce_step() {
  step_change_pending_ = false;
  if (!frame_in_force_) return;
  const proto::StepRef& next = frame_in_force_->step;
  if (step_in_force_ && *step_in_force_ == next) return;  // a new frame for the same step: no boundary
  if (step_in_force_)
    leave_step(pending_step_outcome_.value_or(
        proto::StepOutcome{proto::StepOutcome::Kind::no_verdict,
                           "the embedder put the frame of another step in force without saying how this one ended"}));
  pending_step_outcome_.reset();
  step_in_force_ = next;
  effects_.emit(proto::ev::StepEntered{next, frame_in_force_->digest}, std::nullopt);
}

void RunCore::leave_step(proto::StepOutcome outcome) {
  proto::StepRef left = *step_in_force_;
  step_in_force_.reset();
  effects_.emit(proto::ev::StepLeft{std::move(left), std::move(outcome)}, std::nullopt);
}

void RunCore::at_boundary() {
  if (forced_close_) return;
  if (!queued_messages_.empty()) {
    if (!turn_allowed()) return;  // stopped: the queued texts are reported undelivered at wind-up
    std::vector<std::string> texts;
    for (auto& [id, text] : queued_messages_) {
      effects_.emit(proto::ev::Injection{text, "message.inject"}, std::nullopt);
      texts.push_back(std::move(text));
    }
    queued_messages_.clear();
    start_turn(std::move(texts));
    return;
  }
  // An interrupted run waits for its embedder's next word rather than ending under it.
  if ((spec_.keep_open || hold_after_interrupt_) && command_source_open_) {
    phase_ = Phase::idle;
    return;
  }
  end_normally();
}

void RunCore::end_normally() {
  phase_ = Phase::ending;
  if (session_->exits_on_stdin_close())
    effects_.close_vendor_stdin();
  else
    effects_.terminate_vendor(options_.halt_grace);
}

void RunCore::stop(proto::CloseReason reason, std::string_view why) {
  if (forced_close_ || phase_ == Phase::closed) return;
  forced_close_ = reason;
  abandon_pending(why);
  // Graceful first (the vendor kills its own running tools on interrupt and end_session), then
  // the host closes stdin and kills whatever of the run is left after the grace period.
  if (phase_ == Phase::turn) session_->interrupt(*this);
  session_->end_session(*this);
  phase_ = Phase::ending;
  effects_.terminate_vendor(options_.halt_grace);
}

void RunCore::warn(std::string code, std::string message) {
  effects_.emit(proto::ev::Warning{std::move(code), std::move(message)}, std::nullopt);
}

void RunCore::result(const std::string& id, proto::CommandOutcome outcome) {
  effects_.emit(proto::ev::CommandResult{id, std::move(outcome)}, std::nullopt);
}

}  // namespace mh::daemon
