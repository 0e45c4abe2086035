// The governing logic of one run, vendor-neutral and free of I/O: it reads no clock (every
// input carries `now`), spawns nothing and touches no socket. It decides each tool call before
// it runs (frame / ask / observe), keeps the deadlines, the census, the turn boundaries and the
// command results, and asks its host (RunEffects) to write, arm timers and stop the vendor.
//
// The Asio shell (run.hpp) owns one RunCore per run and drives it from the run's strand; the
// unit tests drive it directly with a scripted adapter session, deterministically.
#pragma once

#include <chrono>
#include <deque>
#include <set>

#include "adapters/adapter.hpp"
#include "daemon/run/budget_meter.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace proto = mh::protocol;
namespace json = boost::json;
using Instant = std::chrono::steady_clock::time_point;

// What the core asks of its host. Called synchronously, in order.
class RunEffects {
 public:
  virtual ~RunEffects() = default;
  // Appends one event to the run's stream (the host assigns seq and makes it durable before
  // anyone sees it) and returns the seq it got.
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
  // What the run has spent changed (a turn, a tool call, a usage record).
  virtual void spend_changed(const Spend& spend) { (void)spend; }
};

struct RunCoreOptions {
  std::chrono::milliseconds halt_grace{3000};
  const PriceTable* prices = nullptr;  // for a usd budget; outlives the core
};

// A call still waiting for the embedder, as a (re)attaching controller is handed it.
struct PendingCallView {
  std::string call_id;
  std::uint64_t requested_seq = 0;  // the seq of its tool.requested line
  std::uint64_t remaining_ms = 0;   // until the deadline denies it
};

class RunCore final : private adapters::AdapterSink {
 public:
  enum class Phase {
    starting,  // spawned, control channel not yet confirmed
    turn,      // a turn is running (or its first message is on the way)
    idle,      // between turns, held open for message.inject
    ending,    // the end was decided; waiting for the vendor's stdout to close
    closed,    // wound up; the host writes stream.closed
  };

  RunCore(const adapters::RunSpec& spec, const adapters::Adapter& adapter,
          std::unique_ptr<adapters::AdapterSession> session, RunEffects& effects, RunCoreOptions options = {});
  ~RunCore();

  // Inputs. Each may emit events and effects before it returns.
  void start(Instant now);
  void on_vendor_line(const proto::FramedLine& line, Instant now);
  // A hook program's request over the run's hook channel, and its disappearance.
  void on_hook_request(std::uint64_t connection, const json::value& input, Instant now);
  void on_hook_gone(std::uint64_t connection, Instant now);
  void on_command(proto::Command command, std::optional<proto::PeerIdentity> peer, Instant now);
  // A command line that could not be read: answered MALFORMED under its id (or "-").
  void on_unreadable_command(const proto::LineRefusal& refusal, Instant now);
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
  // A budget kept outside the run (the daemon's daily budget of the run's owner) is exhausted:
  // the run is stopped and closes `budget`, the warning saying which.
  void on_budget_exhausted(const std::string& message, Instant now);
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

  Phase phase() const { return phase_; }
  bool turn_active() const { return phase_ == Phase::turn; }
  const proto::DecisionCensus& census() const { return census_; }
  std::vector<PendingCallView> pending_calls(Instant now) const;
  std::size_t pending_count() const { return pending_.size(); }
  std::uint32_t turns() const { return turn_; }
  const Spend& spend() const { return budget_.spend(); }
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

  // AdapterSink
  void event(proto::EventPayload payload, std::optional<std::string> at) override;
  void event_cut(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut) override;
  void call_presented(adapters::ToolCall call, std::optional<std::string> at) override;
  void call_awaits_answer(adapters::ToolCall call, adapters::ReplyToken reply) override;
  void call_withdrawn(const adapters::ReplyToken& reply) override;
  void control_answered(adapters::ControlReply reply) override;
  void turn_started(std::optional<std::string> at) override;
  void turn_ended(std::optional<std::string> stop_reason, std::optional<std::string> at) override;
  void write_vendor(std::string line) override;
  void reply_hook(std::uint64_t connection, std::string line) override;
  void session_ready() override;
  void fail_run(std::string reason) override;

  CallState& present(adapters::ToolCall call, std::optional<std::string> at, proto::Seam seam);
  void decide(CallState& call, proto::Decision decision, proto::DecidedBy by, proto::Seam seam,
              std::optional<proto::PeerIdentity> peer = std::nullopt);
  void answer_vendor(CallState& call);
  void abandon_pending(std::string_view why);
  void warn(std::string code, std::string message);
  void result(const std::string& id, proto::CommandOutcome outcome);

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

  void handle(const proto::cmd::ToolDecide& c, const std::string& id, std::optional<proto::PeerIdentity> peer);
  void handle(const proto::cmd::FrameSet& c, const std::string& id);
  void handle(const proto::cmd::MessageInject& c, const std::string& id);
  void handle(const proto::cmd::Steer& c, const std::string& id);
  void handle(const proto::cmd::PermissionSet& c, const std::string& id);
  void handle(const proto::cmd::Interrupt& c, const std::string& id);
  void handle(const proto::cmd::Halt& c, const std::string& id);
  void track(const adapters::ControlAck& ack, const std::string& command_id, proto::CommandName name);

  const adapters::RunSpec& spec_;
  const adapters::Adapter& adapter_;
  std::unique_ptr<adapters::AdapterSession> session_;
  RunEffects& effects_;
  RunCoreOptions options_;

  Phase phase_ = Phase::starting;
  Instant now_{};
  Instant started_at_{};
  BudgetMeter budget_;
  std::uint32_t turn_ = 0;
  bool turn_announced_ = false;  // turn.started emitted for the current turn
  bool command_source_open_ = true;
  bool hold_after_interrupt_ = false;
  std::optional<proto::CloseReason> forced_close_;  // halt / shutdown / failure

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
    std::string command_id;
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
  bool session_ended_emitted_ = false;
  bool session_started_seen_ = false;
  bool vendor_end_told_ = false;  // session_->on_vendor_end was called (exactly once per run)
};

std::string_view to_string(RunCore::Phase phase);

// Globs for frame subject scopes: literals, `*` (within one path segment), `**` (anything).
bool subject_glob_matches(std::string_view glob, std::string_view subject);

}  // namespace mh::daemon
