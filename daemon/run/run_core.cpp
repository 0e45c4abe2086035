#include "daemon/run/run_core.hpp"

#include <algorithm>

#include "protocol/digest.hpp"

namespace mh::daemon {

namespace {

constexpr std::string_view kNextBoundary = "the next turn boundary";

// The same request: same tool, same input (structural JSON equality, key order aside). Compared
// directly rather than through a digest: this sits on every call's path.
bool identical_request(const adapters::ToolCall& a, const adapters::ToolCall& b) {
  return a.name == b.name && a.input == b.input;
}

std::string op_label(const proto::Operation& op) {
  if (op.op == proto::OpKind::mcp_call) return "mcp.call " + op.server + "/" + op.tool;
  return std::string(op.wire_name());
}

std::uint64_t ms_between(Instant from, Instant to) {
  if (to <= from) return 0;
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

}  // namespace

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

bool subject_glob_matches(std::string_view glob, std::string_view subject) {
  // Iterative matcher with backtracking over the most recent star; `**` may cross '/', `*` may not.
  std::size_t g = 0, s = 0;
  std::size_t star_g = std::string_view::npos, star_s = 0;
  bool star_crosses = false;
  while (s < subject.size()) {
    if (g < glob.size() && glob[g] == '*') {
      star_crosses = g + 1 < glob.size() && glob[g + 1] == '*';
      g += star_crosses ? 2 : 1;
      star_g = g;
      star_s = s;
      continue;
    }
    if (g < glob.size() && glob[g] == subject[s]) {
      ++g;
      ++s;
      continue;
    }
    if (star_g != std::string_view::npos && (star_crosses || subject[star_s] != '/')) {
      ++star_s;
      s = star_s;
      g = star_g;
      continue;
    }
    return false;
  }
  while (g < glob.size() && glob[g] == '*')
    ++g;
  return g == glob.size();
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

// ---------------------------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------------------------

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
  now_ = now;
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

// ---------------------------------------------------------------------------------------------
// Adapter sink
// ---------------------------------------------------------------------------------------------

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
  effects_.emit(std::move(payload), std::move(at));
  if (crossing) exhaust(*crossing);  // the tokens are spent already: the record first, then the stop
}

void RunCore::event_cut(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut) {
  // Content events (text, thinking, tool.result, injection): nothing the core meters or tracks.
  effects_.emit_cut(std::move(payload), std::move(at), std::move(cut));
}

void RunCore::write_vendor(std::string line) {
  effects_.write_vendor(std::move(line));
}

void RunCore::reply_hook(std::uint64_t connection, std::string line) {
  effects_.reply_hook(connection, std::move(line));
}

void RunCore::session_ready() {
  if (phase_ != Phase::starting) return;
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
  bool has_reply = !reply.id.empty();
  auto it = calls_.find(call.call_id);
  if (it == calls_.end()) {
    // Asked before (or without) being presented: this request is its presentation.
    CallState& st = present(std::move(call), std::nullopt, reply.seam);
    if (has_reply) st.reply = std::move(reply);
    if (st.decision) answer_vendor(st);
    return;
  }
  CallState& st = it->second;
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
    if (!st.reply || st.reply->id != reply.id) continue;
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
    result(pending.command_id, proto::CommandOutcome::ok(pending.applies_at));
  } else {
    result(pending.command_id,
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
  turn_announced_ = true;
  effects_.emit(proto::ev::TurnStarted{turn_, frame_in_force_ ? std::optional<std::string>(frame_in_force_->digest)
                                                              : std::nullopt},
                std::move(at));
  if (phase_ == Phase::idle || phase_ == Phase::starting) phase_ = Phase::turn;
}

void RunCore::turn_ended(std::optional<std::string> stop_reason, std::optional<std::string> at) {
  // A turn end closes the decision window: nothing still pending can run any more.
  abandon_pending("the turn ended");
  // A request of an unpriced model was judged at the turn's end (its figures had no cost).
  auto crossing = budget_.turn_ended();
  effects_.spend_changed(budget_.spend());
  effects_.emit(proto::ev::TurnEnded{std::max<std::uint32_t>(turn_, 1), stop_reason}, std::move(at));
  // A steer belongs to its turn: one accepted that the vendor never showed in it is gone.
  std::erase_if(steers_, [&](auto& s) {
    if (s.accepted) steer_undelivered(s, "the turn ended (" + stop_reason.value_or("no stop reason") + ") first");
    s.turn_over = true;
    return s.accepted;
  });
  turn_announced_ = false;
  if (crossing) {
    if (phase_ == Phase::turn) phase_ = Phase::idle;  // the turn is over: nothing to interrupt
    exhaust(*crossing);
    return;
  }
  if (phase_ == Phase::turn) at_boundary();
}

// ---------------------------------------------------------------------------------------------
// Deciding
// ---------------------------------------------------------------------------------------------

RunCore::CallState& RunCore::present(adapters::ToolCall call, std::optional<std::string> at, proto::Seam seam) {
  std::string id = call.call_id;
  CallState& st = calls_[id];
  st.seam = seam;
  auto ops = adapter_.operations_for(call);

  proto::ev::ToolRequested requested;
  requested.call_id = call.call_id;
  requested.name = call.name;
  requested.input = call.input;
  for (const auto& op : ops)
    requested.operations.push_back(op_label(op));
  requested.subjects = adapter_.subjects_for(call);
  requested.seam = seam;
  requested.agent = call.agent;
  requested.escalation = call.escalation;
  st.call = std::move(call);
  st.delivered_at = now_;

  auto over_budget = budget_.tool_call();
  effects_.spend_changed(budget_.spend());
  if (seam == proto::Seam::none) {  // a record of a call nobody adjudicates: delivered, never decided
    st.requested_seq = effects_.emit(std::move(requested), std::move(at));
    if (over_budget) exhaust(*over_budget);
    return st;
  }
  if (over_budget) {
    // The call that crosses the budget does not run: it is recorded, refused, and the run stops.
    st.requested_seq = effects_.emit(std::move(requested), std::move(at));
    decide(st, proto::decision::Deny{"the run's budget: " + over_budget->message() + ", so this call did not run"},
           proto::DecidedBy::adapter, seam);
    exhaust(*over_budget);
    return st;
  }

  auto verdict = frame_in_force_ ? frame_refuses(st, ops) : std::nullopt;
  switch (spec_.decisions) {
    case proto::DecisionMode::observe:
      st.requested_seq = effects_.emit(std::move(requested), std::move(at));
      decide(st, proto::decision::Allow{}, proto::DecidedBy::observe, seam);
      return st;
    case proto::DecisionMode::frame:
      if (!frame_in_force_) {
        if (!warned_no_frame_) {
          warned_no_frame_ = true;
          warn("NO_FRAME_IN_FORCE",
               "decisions are taken from the frame and no frame is in force, so "
               "metaharness abstains: the vendor's own permission pipeline decides");
        }
        st.requested_seq = effects_.emit(std::move(requested), std::move(at));
        decide(st, proto::decision::Abstain{}, proto::DecidedBy::adapter, seam);
        return st;
      }
      if (verdict && verdict->uncovered) warn("UNCOVERED_TOOL", verdict->reason);
      st.requested_seq = effects_.emit(std::move(requested), std::move(at));
      if (verdict)
        decide(st, proto::decision::Deny{verdict->reason}, proto::DecidedBy::frame, seam);
      else
        decide(st, proto::decision::Allow{}, proto::DecidedBy::frame, seam);
      return st;
    case proto::DecisionMode::ask:
      // A frame in force narrows what the embedder is asked about: what it refuses is refused
      // at once; what it admits still needs the embedder's answer.
      if (verdict) {
        if (verdict->uncovered) warn("UNCOVERED_TOOL", verdict->reason);
        st.requested_seq = effects_.emit(std::move(requested), std::move(at));
        decide(st, proto::decision::Deny{verdict->reason}, proto::DecidedBy::frame, seam);
        return st;
      }
      requested.decision_required = true;
      requested.deadline_ms = spec_.decision_deadline_ms;
      st.decision_required = true;
      st.requested_seq = effects_.emit(std::move(requested), std::move(at));
      // The deadline runs from delivery, and keeps running whether or not anyone listens.
      st.delivered_at = now_;
      st.deadline_at = now_ + std::chrono::milliseconds(spec_.decision_deadline_ms);
      pending_.insert(id);
      effects_.arm_deadline(id, st.deadline_at);
      return st;
  }
  return st;
}

void RunCore::decide(CallState& st, proto::Decision decision, proto::DecidedBy by, proto::Seam seam,
                     std::optional<proto::PeerIdentity> peer) {
  if (pending_.erase(st.call.call_id)) effects_.cancel_deadline(st.call.call_id);
  proto::ev::ToolDecided decided;
  // Deny-only: an allow would grant and bypass the vendor's own rules, which this run relies on;
  // it is delivered as abstain (the vendor's pipeline decides), and the record says both.
  if (spec_.deny_only && std::holds_alternative<proto::decision::Allow>(decision)) {
    decided.requested = std::move(decision);
    decision = proto::decision::Abstain{};
  }
  census_.count(decision, seam, by);
  decided.call_id = st.call.call_id;
  decided.decision = decision;
  decided.decided_by = by;
  decided.seam = seam;
  if (by == proto::DecidedBy::embedder || by == proto::DecidedBy::deadline || by == proto::DecidedBy::adapter)
    decided.latency_ms = ms_between(st.delivered_at, now_);
  decided.peer = peer;
  st.decision = std::move(decision);
  st.decided_by = by;
  // The decision reaches the vendor before anything else happens (an interrupt or a halt that
  // follows must not overtake it), and the record follows the effect.
  answer_vendor(st);
  effects_.emit(std::move(decided), std::nullopt);
}

void RunCore::answer_vendor(CallState& st) {
  if (!st.reply || st.answered || !st.decision) return;
  st.answered = true;
  session_->answer(*st.reply, st.call, *st.decision, *this);
}

void RunCore::abandon_pending(std::string_view why) {
  std::vector<std::string> ids(pending_.begin(), pending_.end());
  std::sort(ids.begin(), ids.end(),
            [&](const auto& a, const auto& b) { return calls_.at(a).requested_seq < calls_.at(b).requested_seq; });
  for (const auto& id : ids) {
    CallState& st = calls_.at(id);
    decide(st, proto::decision::Deny{std::string(why) + " before this call was decided, so nothing ran"},
           proto::DecidedBy::adapter, st.seam);
    warn("PENDING_CALL_ABANDONED", id + " was never decided by the embedder");
  }
}

std::optional<RunCore::Verdict> RunCore::frame_refuses(const CallState& st,
                                                       const std::vector<proto::Operation>& ops) const {
  const proto::Frame& frame = *frame_in_force_;
  const std::vector<proto::Operation>* admitted = &frame.operations;
  auto subjects = adapter_.subjects_for(st.call);
  if (!frame.subject_rules.empty() && !subjects.empty()) {
    for (const auto& rule : frame.subject_rules) {
      bool hit = std::any_of(rule.subjects.begin(), rule.subjects.end(), [&](const std::string& glob) {
        return std::any_of(subjects.begin(), subjects.end(),
                           [&](const std::string& s) { return subject_glob_matches(glob, s); });
      });
      if (hit) {
        admitted = &rule.operations;
        break;
      }
    }
  }
  if (ops.empty())
    return Verdict{true, st.call.name +
                             " is outside the operation vocabulary this step was framed with, "
                             "so this step does not admit it"};
  for (const auto& op : ops)
    if (std::binary_search(admitted->begin(), admitted->end(), op)) return std::nullopt;
  std::string admits = "[";
  for (std::size_t i = 0; i < admitted->size(); ++i)
    admits += (i ? ",\"" : "\"") + op_label((*admitted)[i]) + "\"";
  admits += "]";
  std::string is;
  for (std::size_t i = 0; i < ops.size(); ++i)
    is += (i ? "/" : "") + op_label(ops[i]);
  return Verdict{false, "this step admits " + admits + " and " + st.call.name + " is " + is +
                            ", which it does not; a refusal is the answer, not an obstacle"};
}

// ---------------------------------------------------------------------------------------------
// Turns and the end of the run
// ---------------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------------------------

void RunCore::track(const adapters::ControlAck& ack, const std::string& command_id, proto::CommandName name) {
  switch (ack.kind) {
    case adapters::ControlAck::Kind::done:
    case adapters::ControlAck::Kind::refused:
      result(command_id, ack.outcome);
      return;
    case adapters::ControlAck::Kind::pending_vendor:
      pending_controls_[ack.control_id] = PendingControl{command_id, name, ack.outcome.applies_at};
      return;
  }
}

void RunCore::handle(const proto::cmd::ToolDecide& c, const std::string& id, std::optional<proto::PeerIdentity> peer) {
  auto it = calls_.find(c.call_id);
  if (it == calls_.end()) {
    result(id,
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
    result(id, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, why));
    return;
  }
  if (spec_.deny_only && std::holds_alternative<proto::decision::Replace>(c.decision)) {
    result(id, proto::CommandOutcome::refused(
                   proto::RefusalCode::UNSUPPORTED_CONTROL,
                   "this run is deny-only: a replace is an allow with another input, so it would grant and bypass "
                   "the vendor's own rules; deny, abstain or allow (delivered as abstain) instead"));
    return;
  }
  if (auto refusal = session_->check_decision(st.call, c.decision)) {
    result(id, proto::CommandOutcome{std::move(*refusal), std::nullopt});
    return;
  }
  decide(st, c.decision, proto::DecidedBy::embedder, st.seam, peer);
  result(id, proto::CommandOutcome::ok());
}

void RunCore::handle(const proto::cmd::FrameSet& c, const std::string& id) {
  if (spec_.decisions == proto::DecisionMode::observe) {
    result(id, proto::CommandOutcome::refused(
                   proto::RefusalCode::UNSUPPORTED_CONTROL,
                   "observe mode allows every call: a frame would be shown to the model and enforced by nothing"));
    return;
  }
  if (phase_ == Phase::ending || phase_ == Phase::closed) {
    result(id, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                              "the run is ending; no further turn boundary will come"));
    return;
  }
  frame_pending_ = c.frame;
  pending_step_outcome_ = c.step_outcome;
  result(id, proto::CommandOutcome::ok(std::string(kNextBoundary)));
}

void RunCore::handle(const proto::cmd::MessageInject& c, const std::string& id) {
  if (phase_ == Phase::ending || phase_ == Phase::closed) {
    result(id, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                              "the run is ending; no further turn will start"));
    return;
  }
  if (phase_ == Phase::idle) {
    if (!turn_allowed()) {
      result(id, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                                "the run's turns budget is exhausted; no further turn will start"));
      return;
    }
    effects_.emit(proto::ev::Injection{c.text, "message.inject"}, std::nullopt);
    result(id, proto::CommandOutcome::ok());
    start_turn({c.text});
    return;
  }
  // Mid-turn (or before the first turn has begun): it waits for the boundary, and says so.
  queued_messages_.emplace_back(id, c.text);
  result(id, proto::CommandOutcome::ok(std::string(kNextBoundary)));
}

void RunCore::handle(const proto::cmd::Steer& c, const std::string& id) {
  if (phase_ != Phase::turn) {
    result(id, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, "no turn is running to steer"));
    return;
  }
  adapters::ControlAck ack = session_->steer(c.text, *this);
  if (ack.kind != adapters::ControlAck::Kind::refused)
    steers_.push_back({id, ack.control_id, c.text, ack.kind == adapters::ControlAck::Kind::done});
  track(ack, id, proto::CommandName::steer);
}

void RunCore::steer_undelivered(const SteerInFlight& steer, std::string_view why) {
  warn("STEER_UNDELIVERED", "steer " + steer.command_id + " was accepted, but " + std::string(why) + " and " +
                                std::string(adapter_.id()) + " never delivered it: the text (sha256 " +
                                proto::sha256_hex(steer.text) + ", \"" + proto::excerpt(steer.text, 40) +
                                "\") never reached the model");
}

void RunCore::handle(const proto::cmd::PermissionSet& c, const std::string& id) {
  if (phase_ == Phase::ending || phase_ == Phase::closed) {
    result(id, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, "the run is ending"));
    return;
  }
  if (!spec_.deny_only && session_->allow_overrides_posture(c.posture)) {
    result(id,
           proto::CommandOutcome::refused(
               proto::RefusalCode::SHADOWED,
               "posture \"" + proto::excerpt(c.posture, 40) + "\" would appear to work and would not: an allow at " +
                   "the call seam grants and overrides it; a run that relies on the vendor's own posture must " +
                   "use the deny-only policy (--deny-only, \"deny_only\": true), under which allows are "
                   "delivered as abstain"));
    return;
  }
  track(session_->set_permission(c.posture, *this), id, proto::CommandName::permission_set);
}

void RunCore::handle(const proto::cmd::Interrupt&, const std::string& id) {
  if (phase_ != Phase::turn) {
    result(id,
           proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, "no turn is running; nothing to interrupt"));
    return;
  }
  abandon_pending("the run was interrupted");
  hold_after_interrupt_ = true;
  track(session_->interrupt(*this), id, proto::CommandName::interrupt);
}

void RunCore::handle(const proto::cmd::Halt&, const std::string& id) {
  if (phase_ == Phase::closed) {
    result(id, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE, "the run has already closed"));
    return;
  }
  if (forced_close_ && *forced_close_ == proto::CloseReason::steer_halt) {
    result(id, proto::CommandOutcome::ok());  // already halting: the same end, said again
    return;
  }
  forced_close_.reset();  // a halt outranks a normal end already under way
  stop(proto::CloseReason::steer_halt, "the run was halted");
  result(id, proto::CommandOutcome::ok());
}

}  // namespace mh::daemon
