// RunCore's inputs and its lifecycle: construction, the on_* entry points the shell calls with
// `now`, every command's one result (result, on_recorded), the wind-up when the vendor is gone,
// and the turn and end-of-run steps (start_turn, at_boundary, stop). The state machine is the
// table in run_core.hpp. What the adapter reports is run_core_sink.cpp, how a call is decided
// run_core_decide.cpp, and each command run_core_commands.cpp.
#include "daemon/run/run_core.hpp"

#include <algorithm>
#include <array>

#include "adapters/session.hpp"
#include "daemon/run/run_core_impl.hpp"

namespace mh::daemon {

using namespace run_core_detail;

std::string_view to_string(RunCore::Phase phase) {
  // In the enum's declaration order.
  static constexpr std::array<std::string_view, 9> kNames = {"created", "launching", "starting",     "turn",  "idle",
                                                             "parked",  "ending",    "vendor_ended", "closed"};
  static_assert(static_cast<std::size_t>(RunCore::Phase::closed) + 1 == kNames.size());
  return kNames[static_cast<std::size_t>(phase)];
}

RunCore::RunCore(const adapters::RunSpec& spec, const adapters::Adapter& adapter,
                 std::unique_ptr<adapters::AdapterSession> session, RunEffects& effects, RunCoreOptions options)
    : spec_(spec),
      adapter_(adapter),
      session_(std::move(session)),
      effects_(effects),
      options_(options),
      budget_(spec.budget, options.prices, spec.model),
      posture_(session_ ? session_->asked_posture() : std::nullopt),
      frame_in_force_(spec.frame),
      step_change_pending_(spec.frame.has_value()) {}

RunCore::~RunCore() = default;

RunPhase RunCore::public_phase() const {
  switch (life_.phase) {
    case Phase::created:
    case Phase::launching:
    case Phase::starting:
      return RunPhase::starting;
    case Phase::turn:
      return RunPhase::turn;
    case Phase::idle:
      return RunPhase::idle;
    case Phase::parked:
      return RunPhase::parked;
    case Phase::ending:
    case Phase::vendor_ended:
      return RunPhase::ending;
    case Phase::closed:
      return RunPhase::closed;
  }
  return RunPhase::closed;
}

// Between start and the vendor's end: the vendor can still be told something.
bool RunCore::live() const {
  return life_.phase == Phase::starting || life_.phase == Phase::turn || life_.phase == Phase::idle;
}

void RunCore::launch() {
  if (life_.phase == Phase::created) life_.phase = Phase::launching;
}

void RunCore::start(Instant now) {
  StallSettle settle(*this);
  if (life_.phase != Phase::created && life_.phase != Phase::launching) return;
  now_ = now;
  started_at_ = now;
  stall_.last_output = now;  // a vendor that never says anything is silent since its spawn
  life_.phase = Phase::starting;
  if (spec_.budget.wall_ms) effects_.arm_wall_budget(now + std::chrono::milliseconds(*spec_.budget.wall_ms));
  adapters::AdapterOutputs outputs;
  session_->start(outputs);
  fold(outputs);
  auto waiting = std::move(waiting_start_);
  waiting_start_.clear();
  for (auto& w : waiting) {
    if (auto* c = std::get_if<proto::Command>(&w.what))
      on_command(w.ticket, std::move(*c), std::move(w.peer), now);
    else
      on_unreadable_command(w.ticket, std::get<proto::LineRefusal>(w.what), now);
  }
  if (auto decided = std::move(stop_at_start_)) {
    stop_at_start_.reset();
    stop(decided->reason, decided->why);
  }
}

void RunCore::on_wall_budget(Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (life_.phase == Phase::closed) return;
  if (auto crossing = budget_.wall(ms_between(started_at_, now))) exhaust(*crossing);
}

void RunCore::on_budget_exhausted(const std::string& message, Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (!(live() || life_.phase == Phase::ending || life_.phase == Phase::vendor_ended)) return;
  if (life_.ending && life_.ending->forced) return;
  warn("BUDGET_EXHAUSTED", message);
  stop(proto::CloseReason::budget, "the run's budget was exhausted");
}

void RunCore::on_gateway_usage(const GatewayAnswer& answer, Instant now) {
  StallSettle settle(*this);
  note_output();  // a model request of the vendor's was answered
  now_ = now;
  if (life_.phase == Phase::closed || life_.phase == Phase::created || life_.phase == Phase::launching) return;
  if (answer.status == 429) {
    // The upstream throttled the run: recorded as the vendors' own 429s are (the claude
    // adapter's api_retry mapping), so a reader finds throttling in one place.
    proto::RateLimitInfo info;
    info.status = "429";
    event(proto::ev::RateLimit{info}, std::nullopt);
  }
  proto::ev::Usage usage;
  usage.request_id = "gateway-" + std::to_string(answer.request);
  if (!answer.model.empty()) usage.model = answer.model;
  usage.usage = answer.usage;
  // The cost at the configured price: the gateway's figures carry none of their own. Unpriced:
  // null (unknown), and the meter says so.
  if (!usage.usage.cost_usd) {
    std::optional<std::string> model = usage.model ? usage.model : spec_.model;
    if (model) usage.usage.cost_usd = request_cost(usage.usage, *model, options_.prices);
  }
  usage.scope = "request";
  usage.source = "gateway";
  event(std::move(usage), std::nullopt);  // counted by the budget meter, crossing stops the run
}

void RunCore::on_gateway_refused(const std::string& method, const std::string& path, Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (life_.phase == Phase::closed || !routes_refused_.insert({method, path}).second) return;
  warn("GATEWAY_ROUTE_REFUSED", "the run's model gateway refused " + method + " " + path +
                                    " (403): only the upstream wire's model routes are forwarded with its key; "
                                    "further requests to this route are refused without another warning");
}

void RunCore::on_egress(const std::string& destination, bool allowed, const std::string& why, Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (life_.phase == Phase::closed) return;  // stream.closed has counted what it could
  auto& counts = allowed ? egress_.allowed : egress_.denied;
  const std::uint64_t n = ++counts[destination];
  if (allowed || n != 1) return;  // a denied destination is warned of once
  std::uint64_t denied = 0;
  for (const auto& [where, count] : egress_.denied)
    denied += count;
  warn("EGRESS_DENIED", "the run's egress proxy refused a connection to " + destination +
                            (why.empty() ? std::string() : " (" + why + ")") + "; " + std::to_string(denied) +
                            " connection attempt(s) refused so far in all (each destination is warned of once; "
                            "stream.closed's resources.egress counts every attempt)");
}

void RunCore::on_vendor_line(const proto::FramedLine& line, Instant now) {
  StallSettle settle(*this);
  note_output();
  now_ = now;
  if (!session_ || life_.phase == Phase::closed) return;
  adapters::AdapterOutputs outputs;
  session_->on_vendor_line(line, outputs);
  fold(outputs);
}

void RunCore::on_hook_request(std::uint64_t connection, const json::value& input, Instant now) {
  StallSettle settle(*this);
  note_output();  // the vendor asks through its hook program
  now_ = now;
  if (!session_ || life_.phase == Phase::closed) {
    effects_.reply_hook(connection, "");
    return;
  }
  adapters::AdapterOutputs outputs;
  session_->on_hook_request(connection, input, outputs);
  fold(outputs);
}

void RunCore::on_hook_gone(std::uint64_t connection, Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (!session_ || life_.phase == Phase::closed) return;
  adapters::AdapterOutputs outputs;
  session_->on_hook_gone(connection, outputs);
  fold(outputs);
}

void RunCore::on_unreadable_command(Ticket ticket, const proto::LineRefusal& refusal, Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (life_.phase == Phase::created || life_.phase == Phase::launching) {
    waiting_start_.push_back(Waiting{ticket, refusal, std::nullopt});
    return;
  }
  result(CommandRef{ticket, refusal.id.value_or("-")}, proto::outcome_for(refusal));
}

void RunCore::on_deadline(const std::string& call_id, Instant now) {
  StallSettle settle(*this);
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
  StallSettle settle(*this);
  now_ = now;
  command_source_closed_ = true;
  if (life_.phase == Phase::idle) end_normally();
}

void RunCore::on_idle_timeout(Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (life_.phase == Phase::idle) end_normally();
}

void RunCore::on_stall_timeout(Instant now) {
  StallSettle settle(*this);
  now_ = now;
  stall_.armed.reset();  // the host's timer has run out: settle_stall arms it again if still wanted
  const std::uint64_t after = spec_.stall_after_ms.value_or(0);
  if (after == 0 || !stall_.timing_from || stall_.named_at) return;
  if (ms_between(*stall_.timing_from, now) < after) return;  // the run moved on after the timer was set
  stall_.named_at = now;
  proto::ev::StallReport report;
  report.silent_ms = ms_between(stall_.last_output.value_or(started_at_), now);
  report.last_event = stall_.last_event;
  report.last_tool = stall_.last_tool;
  report.stall_after_ms = after;
  report.on_stall = spec_.on_stall.value_or(proto::OnStall::warn);
  const bool halt = report.on_stall == proto::OnStall::halt;
  std::string last = stall_.last_event ? "its last output made " + *stall_.last_event +
                                             (stall_.last_tool ? " (" + *stall_.last_tool + ")" : std::string())
                                       : "it has made no event yet";
  std::string message = std::string(adapter_.id()) + " has made no output for " +
                        std::to_string(report.silent_ms / 1000) + " s and no decision is pending (" + last +
                        "; stall_after " + std::to_string(after) + " ms)" +
                        (halt ? "; on_stall is \"halt\": the run is halted"
                              : "; on_stall is \"warn\": the run goes on, and is named again only after it "
                                "makes output and falls silent once more");
  proto::ev::Warning warning{"RUN_STALLED", std::move(message)};
  warning.stall = std::move(report);
  effects_.emit(std::move(warning), std::nullopt);
  if (halt) stop(proto::CloseReason::steer_halt, "the run stalled");
}

void RunCore::settle_stall() {
  settle_park();  // after every input, as the stall clock (run_core_park.cpp)
  const std::uint64_t after = spec_.stall_after_ms.value_or(0);
  // Timed only while the vendor owes the run something: it is starting or in a turn, and no
  // call waits on the embedder (a decision is the embedder's to make, not the vendor's).
  const bool timing = after > 0 && (life_.phase == Phase::starting || life_.phase == Phase::turn) && pending_.empty();
  if (stall_.output) stall_.last_output = now_;
  if (!timing) {
    stall_.timing_from.reset();
    stall_.named_at.reset();
  } else if (!stall_.timing_from || stall_.output) {
    stall_.timing_from = now_;  // a new silence: from this output, or from when timing (re)started
    stall_.named_at.reset();
  }
  stall_.output = false;
  std::optional<Instant> want;
  if (timing && !stall_.named_at) want = *stall_.timing_from + std::chrono::milliseconds(after);
  // A timer already set to run out no later than wanted is kept: on_stall_timeout finds the
  // silence younger than stall_after and sets it again then. So a chatty vendor costs no timer
  // change per line, only one timeout per stall_after.
  if (want == stall_.armed || (want && stall_.armed && *stall_.armed <= *want)) return;
  stall_.armed = want;
  effects_.arm_stall(want);
}

void RunCore::note_last(std::string_view event, const std::string* tool) {
  stall_.last_event = std::string(event);
  stall_.last_tool = tool ? std::optional<std::string>(*tool) : std::nullopt;
}

void RunCore::note_last(const proto::EventPayload& payload) {
  const std::string* tool = nullptr;
  if (const auto* result = std::get_if<proto::ev::ToolResult>(&payload))
    if (auto it = calls_.find(result->call_id); it != calls_.end()) tool = &it->second.call.name;
  note_last(proto::event_names()[payload.index()], tool);
}

RunProgress RunCore::progress(Instant now) const {
  RunProgress p;
  for (const auto& id : pending_) {
    std::uint64_t waited = ms_between(calls_.at(id).delivered_at, now);
    if (!p.waiting_ms || waited > *p.waiting_ms) p.waiting_ms = waited;
  }
  if (live() && stall_.last_output) p.silent_ms = ms_between(*stall_.last_output, now);
  if (stall_.named_at) p.stalled_ms = ms_between(*stall_.named_at, now);
  return p;
}

void RunCore::on_shutdown(Instant now) {
  StallSettle settle(*this);
  now_ = now;
  stop(proto::CloseReason::killed, "the daemon shut down");
}

void RunCore::on_command(Ticket ticket, proto::Command command, std::optional<proto::PeerIdentity> peer, Instant now) {
  StallSettle settle(*this);
  now_ = now;
  switch (life_.phase) {
    case Phase::created:
    case Phase::launching:
      waiting_start_.push_back(Waiting{ticket, std::move(command), std::move(peer)});
      return;
    case Phase::closed: {
      CommandRef ref{ticket, command.id};
      result(ref, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                                 "the run's stream is closed; nothing more can be recorded"));
      return;
    }
    default:
      break;
  }
  CommandRef ref{ticket, command.id};  // before the command is moved
  dispatch(ref, std::move(command), std::move(peer));
}

void RunCore::dispatch(const CommandRef& ref, proto::Command command, std::optional<proto::PeerIdentity> peer) {
  proto::CommandName name = proto::command_name(command.payload);
  proto::CommandSupport support = adapter_.capabilities().command(name);
  if (!support.honoured) {
    result(ref, proto::CommandOutcome::refused(support.code, adapter_.capabilities().refusal_reason(name)));
    return;
  }
  std::visit(
      [&](auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, proto::cmd::ToolDecide>)
          handle(c, ref, peer);
        else
          handle(c, ref);
      },
      command.payload);
}

void RunCore::result(const CommandRef& ref, proto::CommandOutcome outcome) {
  proto::ev::CommandResult r{ref.id, std::move(outcome)};
  if (life_.phase == Phase::closed) {
    // Nothing more can be recorded: the sender hears it directly.
    effects_.command_answered(ref.ticket, r, false);
    return;
  }
  std::uint64_t seq = effects_.emit(r, std::nullopt);
  unrecorded_.push_back(Unrecorded{seq, ref.ticket, std::move(r)});
}

void RunCore::on_recorded(std::uint64_t seq) {
  auto answered = std::move(unrecorded_);
  unrecorded_.clear();
  for (const auto& u : answered)
    effects_.command_answered(u.ticket, u.result, u.seq != 0 && u.seq <= seq);
}

void RunCore::on_stream_closed() {
  StallSettle settle(*this);
  // Whatever the host could not confirm durable before the close is not recorded.
  on_recorded(0);
  if (life_.phase == Phase::closed) return;
  // Never started (refused or failed at launch): what waited for the start hears it never came.
  life_.phase = Phase::closed;
  auto waiting = std::move(waiting_start_);
  waiting_start_.clear();
  for (const auto& w : waiting) {
    std::string id = "-";
    if (auto* c = std::get_if<proto::Command>(&w.what))
      id = c->id;
    else
      id = std::get<proto::LineRefusal>(w.what).id.value_or("-");
    result(CommandRef{w.ticket, id},
           proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
                                          "the run's stream is closed; nothing more can be recorded"));
  }
}

void RunCore::on_vendor_end(Instant now) {
  StallSettle settle(*this);
  now_ = now;
  if (!session_ || !(live() || life_.phase == Phase::ending)) return;
  // What the session held is the vendor's own record, handled in the phase the vendor left the
  // run in (a turn end it held still reaches its boundary); then nothing more comes from it.
  adapters::AdapterOutputs outputs;
  session_->on_vendor_end(outputs);
  fold(outputs);
  if (life_.phase != Phase::closed) life_.phase = Phase::vendor_ended;
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
  StallSettle settle(*this);
  // What the session held is the vendor's own record: it comes before why the run ends.
  on_vendor_end(now);
  // A turn cut short: what it spent is judged as at a turn's end (an unpriced request is unknown).
  (void)budget_.turn_ended();
  effects_.spend_changed(budget_.spend());
  bool we_ended_it = life_.ending.has_value();
  std::optional<proto::CloseReason> forced;
  if (we_ended_it) forced = life_.ending->forced;
  if (!we_ended_it) {
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
    result(pending.command, proto::CommandOutcome::refused(proto::RefusalCode::TOO_LATE,
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
  auto ended = session_ ? session_->session_ended() : std::nullopt;
  if (ended) {
    ended->census = census_;
    effects_.emit(std::move(*ended), std::nullopt);
  }
  life_.phase = Phase::closed;
  if (forced) return *forced;
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
  if ((life_.ending && life_.ending->forced) || life_.phase == Phase::closed) return;
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
  life_.phase = Phase::turn;
  turn_interrupted_ = false;
  adapters::AdapterOutputs outputs;
  session_->send_user_turn(texts, outputs);
  fold(outputs);
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
  if (life_.ending) return;
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
  if ((spec_.keep_open || turn_interrupted_) && !command_source_closed_) {
    life_.phase = Phase::idle;
    return;
  }
  end_normally();
}

void RunCore::end_normally() {
  life_.phase = Phase::ending;
  life_.ending = Ending{std::nullopt};
  if (session_->exits_on_stdin_close())
    effects_.close_vendor_stdin();
  else
    effects_.terminate_vendor(options_.halt_grace);
}

void RunCore::stop(proto::CloseReason reason, std::string_view why) {
  if ((life_.ending && life_.ending->forced) || life_.phase == Phase::closed) return;
  if (life_.phase == Phase::created || life_.phase == Phase::launching) {
    // Nothing runs yet: the end applies when it starts (RunCore::start).
    if (!stop_at_start_) stop_at_start_ = StopAtStart{reason, std::string(why)};
    return;
  }
  Phase was = life_.phase;
  life_.ending = Ending{reason};
  if (was != Phase::vendor_ended) life_.phase = Phase::ending;
  abandon_pending(why);
  // Graceful first (the vendor kills its own running tools on interrupt and end_session), then
  // the host closes stdin and kills whatever of the run is left after the grace period.
  adapters::AdapterOutputs outputs;
  if (was == Phase::turn) (void)session_->interrupt(outputs);
  session_->end_session(outputs);
  fold(outputs);
  effects_.terminate_vendor(options_.halt_grace);
}

void RunCore::warn(std::string code, std::string message) {
  effects_.emit(proto::ev::Warning{std::move(code), std::move(message)}, std::nullopt);
}

}  // namespace mh::daemon
