// The governing logic of one run, vendor-neutral and free of I/O: it reads no clock (every
// input carries `now`), spawns nothing and touches no socket. It decides each tool call before
// it runs (frame / ask / observe), keeps the deadlines, the census, the turn boundaries, the
// run's lifecycle and every command's one result, and asks its host (RunEffects) to write, arm
// timers and stop the vendor.
//
// The Asio shell (run.hpp) owns one RunCore per run from the moment the run is created and
// drives it from the run's strand; the unit tests drive it directly with a scripted adapter
// session, deterministically.
//
// The lifecycle is one state, the phase (with, once the end is decided, how it was decided):
//
//   phase         input that moves it                         next
//   ------------  ------------------------------------------  -----------------------------------
//   created       launch()                                    launching
//   created,      start(now) (the vendor is spawned)          starting; queued commands handled
//    launching    on_stream_closed() (refused / failed)       closed; queued commands TOO_LATE
//   starting      session ready (adapter)                     turn (or ending: turns budget)
//   turn          turn ended (adapter), nothing queued        idle (keep_open, interrupted) or
//                                                             ending (normal end)
//   turn          turn ended, messages queued                 turn (the next one)
//   idle          message.inject                              turn
//   idle          on_command_source_closed, on_idle_timeout   ending (normal end)
//   any live      halt, shutdown, budget, fail_run,           ending{forced: reason}
//                 on_budget_exhausted, on_wall_budget
//   starting,     on_stall_timeout with on_stall = halt       ending{forced: steer_halt} (after RUN_STALLED)
//    turn
//   turn          turn ended "tool_deferred" after on_park_     parked (the vendor's stdin closed;
//                 timeout answered a pending call defer         its process exits; issue 27 §5)
//   parked        on_resumed (the decision came, the vendor   turn
//                 was started again with its resume args)
//   parked        halt, shutdown, budget (stop)               ending{forced}
//   live, ending  on_vendor_end (the vendor's stdout ended)   vendor_ended (ending kept)
//   any           wind_up(process) (its processes are gone)   closed
//
// "live" is starting, turn or idle. Commands that arrive while created or launching wait in the
// core and are handled, in order, once started. Every command that enters (on_command,
// on_unreadable_command) leaves as exactly one RunEffects::command_answered: now, later when the
// vendor acknowledges a control, at wind-up (TOO_LATE), or at once unrecorded once closed. A
// result in the stream is answered `recorded` only when the host says it is durable
// (on_recorded), so a caller is never told "recorded" of a line that was lost.
//
// What an adopting host (a daemon taking over a run that outlived its predecessor) would have
// to rebuild this state from: the stream's last seq (from events.jsonl), the phase and the
// ending (from the last turn.started / turn.ended and whether a halt or budget warning was
// recorded), the calls still pending with their deadlines (tool.requested with decision_required
// and no tool.decided: requested_seq, deadline_ms from delivery), the controls still awaiting a
// vendor acknowledgement (their vendor control ids are not in the stream: a per-run supervisor
// would keep them), the frame in force and the step, the budget spent, and the census.
// Nothing of it lives in the shell: an adopting daemon rebuilds it by replaying the run's input
// journal into a new core (daemon/run/adoption.hpp, replay_effects.hpp).
#pragma once

#include <chrono>
#include <deque>
#include <set>

#include "adapters/adapter.hpp"
#include "adapters/session.hpp"
#include "daemon/run/budget_meter.hpp"
#include "daemon/run/posture_check.hpp"
#include "daemon/run/run_effects.hpp"
#include "daemon/run/run_types.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace proto = mh::protocol;
namespace json = boost::json;

struct RunCoreOptions {
  std::chrono::milliseconds halt_grace{3000};
  const PriceTable* prices = nullptr;  // for a usd budget; outlives the core
};

// One model request's answer as the run's gateway read it (issue 25; docs/gateway.md).
struct GatewayAnswer {
  std::uint64_t request = 0;  // the gateway's number for the request
  std::int32_t status = 0;    // the upstream's HTTP status
  std::string model;          // as the answer (or the request) named it; empty: neither did
  proto::TokenUsage usage;    // the figures the answer carried (a kind it did not carry: null)
  bool complete = false;      // the answer was read to its end (else: the figures read so far)
};

class RunCore final {
 public:
  // The run's lifecycle (the table at the top of this file).
  enum class Phase {
    created,       // constructed; nothing spawned yet; commands wait
    launching,     // the host is writing the plan's files and spawning; commands wait
    starting,      // spawned, control channel not yet confirmed
    turn,          // a turn is running (or its first message is on the way)
    idle,          // between turns, held open for message.inject
    parked,        // a call waited park_after_ms: the vendor deferred it and exits; a decision resumes it
    ending,        // the end was decided (see Ending); waiting for the vendor's stdout to close
    vendor_ended,  // the vendor's stdout ended; waiting for its processes to be gone
    closed,        // wound up, or never started; the host writes stream.closed
  };
  // How the end was decided, from the moment it was (phase ending, and kept through
  // vendor_ended and closed). Absent when the vendor stopped on its own.
  struct Ending {
    std::optional<proto::CloseReason> forced;  // halt / shutdown / budget / failure; nullopt: a normal end
  };

  RunCore(const adapters::RunSpec& spec, const adapters::Adapter& adapter,
          std::unique_ptr<adapters::AdapterSession> session, RunEffects& effects, RunCoreOptions options = {});
  ~RunCore();

  // Inputs. Each may emit events and effects before it returns.
  // The host begins launching (writing files, spawning); commands keep waiting. Once only.
  void launch();
  // The vendor is spawned: the session's first lines go out and waiting commands are handled.
  void start(Instant now);
  void on_vendor_line(const proto::FramedLine& line, Instant now);
  // A hook program's request over the run's hook channel, and its disappearance.
  void on_hook_request(std::uint64_t connection, const json::value& input, Instant now);
  void on_hook_gone(std::uint64_t connection, Instant now);
  // A command, and a command line that could not be read (answered MALFORMED under its id, or
  // "-"). Each yields exactly one command_answered(ticket, ...), whatever the phase.
  void on_command(Ticket ticket, proto::Command command, std::optional<proto::PeerIdentity> peer, Instant now);
  void on_unreadable_command(Ticket ticket, const proto::LineRefusal& refusal, Instant now);
  // The same, for a host nobody waits on (the result is in the stream only).
  void on_command(proto::Command command, std::optional<proto::PeerIdentity> peer, Instant now) {
    on_command(kUnrouted, std::move(command), std::move(peer), now);
  }
  void on_unreadable_command(const proto::LineRefusal& refusal, Instant now) {
    on_unreadable_command(kUnrouted, refusal, now);
  }
  // Every event up to `seq` is durable and nothing is held: the results emitted up to it are
  // answered recorded, any emitted past it (their write failed and was cut back) unrecorded.
  void on_recorded(std::uint64_t seq);
  // The host wrote stream.closed (or could not): the final input. A run that never started
  // closes here, answering what waited TOO_LATE, unrecorded.
  void on_stream_closed();
  void on_deadline(const std::string& call_id, Instant now);
  // The command source will send nothing more (one-shot stdin EOF): the run ends at its next
  // idle point instead of waiting for another message.
  void on_command_source_closed(Instant now);
  // The host will not keep this idle run any longer (idle timeout).
  void on_idle_timeout(Instant now);
  // The daemon is shutting down: the run is stopped like a halt, and closes `killed`.
  void on_shutdown(Instant now);
  // The run's wall_ms budget ran out (the timer armed through arm_wall_budget).
  void on_wall_budget(Instant now);
  // The stall timer ran out (armed through arm_stall; issue 27 §2). The run has been timing a
  // silence — live (starting or in a turn), no decision pending, no vendor output — since the
  // later of its last output, its spawn, the turn's start from idle and the last decision made:
  // once that reaches the spec's stall_after_ms it gets one warning RUN_STALLED (with a
  // StallReport), and with on_stall = halt it is then halted (steer_halt; failure `stalled`).
  // A silence is named once: further output (or a new silence after a decision) times afresh,
  // and a later silence as long is named again. A timeout the run has moved past is ignored.
  void on_stall_timeout(Instant now);
  // Parking (issue 27 §5; run_core_park.cpp). The park timer ran out for `call_id`: if it still
  // waits on the embedder and the vendor blocks on it, the session answers it "defer" (the
  // vendor ends its turn "tool_deferred", and the run parks: its stdin is closed, the process
  // exits). The decision, when it comes (the embedder, the deadline), asks the host to start the
  // vendor again (resume_vendor); on_resumed() then says it is back.
  void on_park_timeout(const std::string& call_id, Instant now);
  // The vendor was started again for a parked run: RUN_RESUMED, a turn.started, the session's
  // resume (its control channel again); the call's new request is answered with its decision.
  void on_resumed(Instant now);
  // Parked, the decision made (or the deadline's), and not yet started again.
  bool resume_wanted() const { return life_.phase == Phase::parked && parking_.resume_wanted; }
  // The vendor's arguments for the process that resumes a parked run (the session's).
  std::vector<std::string> resume_args() const;
  // A budget kept outside the run (the daemon's daily budget of the run's owner) is exhausted:
  // the run is stopped and closes `budget`, the warning saying which.
  void on_budget_exhausted(const std::string& message, Instant now);
  // The run has a model gateway (issue 25): its usage is what the budgets count from here on, the
  // vendor's own usage records are informational. Before start.
  void meter_by_gateway() { budget_.meter_by_gateway(); }
  // A model request's answer ended at the gateway: a `usage` event (scope "request", source
  // "gateway", the cost at the model's price, null when it has none) counted by the budgets, and
  // an upstream 429 a `rate_limit` first, as the vendors' own throttling is recorded. Crossing a
  // budget stops the run (reason budget), as any usage does. Nothing once closed.
  void on_gateway_usage(const GatewayAnswer& answer, Instant now);
  // Whether a model request of this worst case may be forwarded now (`held`: the run's other
  // requests reserved and not settled): the budget it would cross, if any (BudgetMeter::reserve).
  // The gateway refused a route outside the wire's model routes (403): a warning
  // GATEWAY_ROUTE_REFUSED naming method and path, once per (method, path).
  void on_gateway_refused(const std::string& method, const std::string& path, Instant now);
  // A connection attempt through the run's egress proxy: counted per destination (stream.closed's
  // resources.egress); the first denied attempt to a destination is a warning EGRESS_DENIED.
  void on_egress(const std::string& destination, bool allowed, const std::string& why, Instant now);
  const proto::ev::EgressCounts& egress_counts() const { return egress_; }
  std::optional<Crossing> reserve_check(const Spend& worst, const Spend& held) const {
    return budget_.reserve(worst, held);
  }
  const PriceTable* prices() const { return options_.prices; }
  // The vendor's stdout ended (its last line was handed in): the session flushes what it still
  // holds (Codex: the notifications it held for a thread that never came), in the stream before
  // the wind-up's records. The session is told once; wind_up tells it first if the host has not.
  void on_vendor_end(Instant now);
  // The vendor's stdout ended and its processes are gone. Abandons what is pending, emits
  // session.ended (if the vendor produced terminal evidence) and returns the close reason for
  // the host's stream.closed.
  // `vendor_stderr_tail` (the last lines the vendor wrote to stderr) is quoted in the warning that
  // says why, when the vendor stopped on its own.
  proto::CloseReason wind_up(const proto::ProcessTermination& process, Instant now,
                             std::string_view vendor_stderr_tail = {});

  Phase phase() const { return life_.phase; }
  const std::optional<Ending>& ending() const { return life_.ending; }
  // The phase as the socket API names it (starting, turn, idle, ending, closed).
  RunPhase public_phase() const;
  const proto::DecisionCensus& census() const { return census_; }
  std::vector<PendingCallView> pending_calls(Instant now) const;
  // Decisions waited on, the vendor's silence, a stall named (RunProgress), as of `now`.
  RunProgress progress(Instant now) const;
  std::size_t pending_count() const { return pending_.size(); }
  std::uint32_t turns() const { return turn_; }
  // Settled (what the budgets and the daily ledger count) and reported (what readers are shown:
  // an unpriced request leaves usd unknown mid-turn); see BudgetMeter.
  const Spend& spend() const { return budget_.spend(); }
  Spend reported_spend() const { return budget_.reported(); }
  const adapters::Budgets& budget_limits() const { return budget_.limits(); }

 private:
  struct CallState {
    adapters::ToolCall call;  // as presented: the request its decision is bound to
    proto::Seam seam = proto::Seam::hook;
    bool decision_required = false;
    std::uint64_t requested_seq = 0;
    Instant delivered_at{};
    Instant deadline_at{};
    std::optional<proto::Decision> decision;
    std::optional<proto::DecidedBy> decided_by;
    std::optional<adapters::ReplyToken> reply;  // the vendor is blocked on this
    bool answered = false;
  };

  // What the adapter session reported for one input (adapters::AdapterOutputs), folded in order
  // once the session has returned (run_core_sink.cpp). An output that makes the core call the
  // session again (an answer, the first turn) has that call's outputs folded in its place.
  void fold(adapters::AdapterOutputs& outputs);
  void event(proto::EventPayload payload, std::optional<std::string> at);
  // The vendor reported its posture (issue 27 section 6): a drift is warned POSTURE_DRIFT.
  void posture_reported(const adapters::Posture& report, std::string_view occasion);
  void event_cut(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut);
  void call_presented(adapters::ToolCall call, std::optional<std::string> at);
  void call_awaits_answer(adapters::ToolCall call, adapters::ReplyToken reply);
  void call_withdrawn(const adapters::ReplyToken& reply);
  void control_answered(adapters::ControlReply reply);
  void turn_started(std::optional<std::string> at);
  void turn_ended(std::optional<std::string> stop_reason, std::optional<std::string> at);
  void session_ready();
  void fail_run(std::string reason);

  CallState& present(adapters::ToolCall call, std::optional<std::string> at, proto::Seam seam);
  void decide(CallState& call, proto::Decision decision, proto::DecidedBy by, proto::Seam seam,
              std::optional<proto::PeerIdentity> peer = std::nullopt);
  void answer_vendor(CallState& call);
  void abandon_pending(std::string_view why);
  void warn(std::string code, std::string message);
  // Stalls (issue 27 §2). Every input ends with settle_stall() (through a StallSettle made at its
  // top): it works out whether a silence is being timed and tells the host's timer when it changed.
  void settle_stall();
  void note_output() { stall_.output = true; }
  void note_last(std::string_view event, const std::string* tool);
  void note_last(const proto::EventPayload& payload);  // its name, and a tool.result's tool
  struct StallSettle {
    RunCore& core;
    explicit StallSettle(RunCore& c) : core(c) {}
    ~StallSettle() { core.settle_stall(); }
    StallSettle(const StallSettle&) = delete;
    StallSettle& operator=(const StallSettle&) = delete;
  };

  // Parking (issue 27 §5; run_core_park.cpp).
  struct Parking {
    std::optional<std::string> timed;      // the call the park timer runs for
    std::optional<std::string> deferring;  // answered defer: the vendor's turn is ending on it
    std::optional<std::string> parked;     // the run is parked on this call
    bool resume_wanted = false;            // its decision is made: start the vendor again
    std::optional<std::string> unasked;    // resumed: the vendor has not asked for this call again yet
    Instant parked_at{};
    std::uint32_t times = 0;  // how often this run parked
  };
  Parking parking_;
  void settle_park();  // arms the park timer for the oldest call the vendor blocks on
  // A turn end while a call was answered defer: true when the run parked on it.
  bool park_at_turn_end(const std::optional<std::string>& stop_reason, std::optional<std::string>& at);
  void decided_while_parked(const std::string& call_id);
  // A tool.result of the resumed call before the vendor asked the seam for it: RESUME_UNGOVERNED.
  void check_resumed_result(const proto::EventPayload& payload);

  // One command in flight: who sent it (ticket) and its id (for command.result).
  struct CommandRef {
    Ticket ticket = kUnrouted;
    std::string id;
  };
  // The one result of a command: into the stream (answered once on_recorded says it is
  // durable), or straight back unrecorded once the stream is closed.
  void result(const CommandRef& ref, proto::CommandOutcome outcome);
  void dispatch(const CommandRef& ref, proto::Command command, std::optional<proto::PeerIdentity> peer);
  bool live() const;

  // Frame verdict for a call: nullopt when the frame admits it.
  struct Verdict {
    bool uncovered = false;
    std::string reason;
  };
  std::optional<Verdict> frame_refuses(const CallState& call, const std::vector<proto::Operation>& ops) const;

  void start_turn(std::vector<std::string> texts);
  void exhaust(const Crossing& crossing);  // BUDGET_EXHAUSTED, then stopped with reason budget
  bool turn_allowed();                     // false (and exhausted) when the turns budget is spent
  void announce_step();                    // step.left / step.entered for the frame now in force, if its step changed
  void leave_step(proto::StepOutcome outcome);
  void at_boundary();  // after a turn ended: deliver queued messages, idle, or end
  void end_normally();
  void stop(proto::CloseReason reason, std::string_view why);

  void handle(const proto::cmd::ToolDecide& c, const CommandRef& ref, std::optional<proto::PeerIdentity> peer);
  void handle(const proto::cmd::FrameSet& c, const CommandRef& ref);
  void handle(const proto::cmd::MessageInject& c, const CommandRef& ref);
  void handle(const proto::cmd::Steer& c, const CommandRef& ref);
  void handle(const proto::cmd::PermissionSet& c, const CommandRef& ref);
  void handle(const proto::cmd::Interrupt& c, const CommandRef& ref);
  void handle(const proto::cmd::Halt& c, const CommandRef& ref);
  void track(const adapters::ControlAck& ack, const CommandRef& ref, proto::CommandName name);

  const adapters::RunSpec& spec_;
  const adapters::Adapter& adapter_;
  std::unique_ptr<adapters::AdapterSession> session_;
  RunEffects& effects_;
  RunCoreOptions options_;

  // The lifecycle: the only state that says where the run is in its life.
  struct Lifecycle {
    Phase phase = Phase::created;
    std::optional<Ending> ending;
  };
  Lifecycle life_;
  Instant now_{};
  Instant started_at_{};
  BudgetMeter budget_;
  PostureCheck posture_;  // the posture asked, held against what the vendor reports (issue 27 section 6)
  std::uint32_t turn_ = 0;
  // Facts, not lifecycle: they shape what the next boundary does, not where the run is.
  bool command_source_closed_ = false;  // no further message can come: the next idle point ends the run
  bool turn_interrupted_ = false;       // the running turn was interrupted: its boundary waits for the embedder
  bool session_started_seen_ = false;   // the vendor recorded session.started (for the VENDOR_EXITED message)

  std::optional<proto::Frame> frame_in_force_;
  std::optional<proto::Frame> frame_pending_;
  bool warned_no_frame_ = false;
  // Steps (the embedder's unit of work, named by the frame): the step announced with
  // step.entered, and whether a frame came into force whose step is still to be announced (at the
  // next turn.started, so both vendors order it session.started, step.entered, turn.started).
  std::optional<proto::StepRef> step_in_force_;
  bool step_change_pending_ = false;
  std::optional<proto::StepOutcome> pending_step_outcome_;  // from the frame.set that changed it

  std::map<std::string, CallState> calls_;
  std::set<std::string> pending_;  // call ids awaiting the embedder
  proto::DecisionCensus census_;

  std::deque<std::pair<std::string, std::string>> queued_messages_;  // (command id, text)
  struct PendingControl {
    CommandRef command;
    proto::CommandName name;
    std::optional<std::string> applies_at;  // what the ok says when the vendor accepts
  };
  std::map<std::string, PendingControl> pending_controls_;  // vendor control id -> command
  // A steer sent to the vendor, until it reaches the model (an injection with origin steer) or
  // its turn ends; one the vendor accepted that never arrived is STEER_UNDELIVERED.
  struct SteerInFlight {
    std::string command_id;
    std::string control_id;
    std::string text;
    bool accepted = false;
    bool turn_over = false;  // its turn ended while the vendor had not answered yet
  };
  std::deque<SteerInFlight> steers_;
  void steer_undelivered(const SteerInFlight& steer, std::string_view why);

  // Commands that arrived before start (created, launching), in arrival order.
  struct Waiting {
    Ticket ticket = kUnrouted;
    std::variant<proto::Command, proto::LineRefusal> what;
    std::optional<proto::PeerIdentity> peer;
  };
  std::vector<Waiting> waiting_start_;
  // A forced end decided before start (a daemon's shutdown while the run was still launching):
  // applied as soon as the run starts, never dropped (issue 24: such a run outlived the stop).
  struct StopAtStart {
    proto::CloseReason reason;
    std::string why;
  };
  std::optional<StopAtStart> stop_at_start_;
  // Results in the stream not yet known durable: answered at the next on_recorded.
  struct Unrecorded {
    std::uint64_t seq = 0;  // 0: the stream did not take it
    Ticket ticket = kUnrouted;
    proto::ev::CommandResult result;
  };
  std::vector<Unrecorded> unrecorded_;
  // The stall clock (issue 27 §2; settle_stall).
  struct StallClock {
    std::optional<Instant> timing_from;                // the silence being timed began then; nullopt: none is timed
    std::optional<Instant> armed;                      // what the host's timer was last told
    std::optional<Instant> named_at;                   // this silence was named RUN_STALLED then
    std::optional<Instant> last_output;                // the vendor's last output, else its spawn
    bool output = false;                               // the input being handled carried vendor output
    std::optional<std::string> last_event, last_tool;  // what the vendor's output last made
  };
  StallClock stall_;
  // The gateway's reports (issue 25): routes warned of, egress attempts per destination.
  std::set<std::pair<std::string, std::string>> routes_refused_;
  proto::ev::EgressCounts egress_;
};

std::string_view to_string(RunCore::Phase phase);

// Globs for frame subject scopes: literals, `*` (within one path segment), `**` (anything).
bool subject_glob_matches(std::string_view glob, std::string_view subject);

}  // namespace mh::daemon
