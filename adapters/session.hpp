// The session seam: the run-loop side of one vendor's conversation. An AdapterSession reads the
// vendor's lines and answers commands; for every input it fills an ordered list of outputs
// (AdapterOutputs) the run loop folds once the session has returned. No I/O, no clock.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "adapters/posture.hpp"
#include "adapters/tool_call.hpp"
#include "protocol/events.hpp"
#include "protocol/line_framer.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

// The reply channel for one vendor decision request: the vendor's own request id (the control
// request_id of an in-band hook_callback, the JSON-RPC id of an approval request), or the hook
// channel's connection that is waiting (a command hook, a seam plugin). Typed, so an adapter
// never parses its own token back out of a string. No id and no connection: no reply channel.
struct ReplyToken {
  std::string id;
  std::optional<std::uint64_t> hook_connection;
  proto::Seam seam = proto::Seam::hook;

  bool empty() const { return id.empty() && !hook_connection; }
  // The same channel (the seam says where the request came from, not which one it is).
  bool same_channel(const ReplyToken& other) const {
    return id == other.id && hook_connection == other.hook_connection;
  }
};

// The vendor's answer to a control request metaharness sent.
struct ControlReply {
  std::string control_id;
  bool ok = true;
  std::string vendor_error;  // the vendor's own words when !ok
  // The refusal code a vendor error maps to (e.g. a vendor's "no active turn" is TOO_LATE).
  proto::RefusalCode refusal_code = proto::RefusalCode::UNSUPPORTED_CONTROL;
  json::value response;
};

// How a controller handled a command right away.
struct ControlAck {
  enum class Kind { done, pending_vendor, refused } kind = Kind::done;
  proto::CommandOutcome outcome;  // for done / refused; for pending_vendor, the ok it becomes
  std::string control_id;         // pending_vendor: resolve when the vendor answers this id

  static ControlAck done(std::optional<std::string> applies_at = std::nullopt) {
    return {Kind::done, proto::CommandOutcome::ok(std::move(applies_at)), {}};
  }
  static ControlAck pending(std::string control_id, std::optional<std::string> applies_at = std::nullopt) {
    return {Kind::pending_vendor, proto::CommandOutcome::ok(std::move(applies_at)), std::move(control_id)};
  }
  static ControlAck refused(proto::RefusalCode code, std::string reason) {
    return {Kind::refused, proto::CommandOutcome::refused(code, std::move(reason)), {}};
  }
};

// What an adapter session produces for one input, as values: the session fills an ordered list
// while it handles the input, and the run loop folds the list in order once the session has
// returned (RunCore::fold; offline, OfflineSink::fold). Nothing calls back into the run loop
// mid-parse. Events appear in the stream in list order.
namespace out {
// A mapped event (text, thinking, usage, tool.result, opaque, ...). `at` is the vendor's own
// timestamp on the source record, passed through.
struct Event {
  proto::EventPayload payload;
  std::optional<std::string> at;
};
// A mapped event whose content the adapter holds only cut (a vendor line over the line bound,
// read as a skeleton): `cut` says what each field no longer holds, as the stream writer's own
// cuts do (protocol/line_cut.hpp).
struct EventCut {
  proto::EventPayload payload;
  std::optional<std::string> at;
  std::vector<proto::CutField> cut;
};
// The model asked for a tool call (the run loop emits tool.requested and decides per mode).
struct CallPresented {
  ToolCall call;
  std::optional<std::string> at;
};
// The vendor is blocked until this call is answered through `reply`.
struct CallAwaitsAnswer {
  ToolCall call;
  ReplyToken reply;
};
// The vendor withdrew a decision request (e.g. its own timeout, or an interrupt).
struct CallWithdrawn {
  ReplyToken reply;
};
// The vendor answered a control request metaharness sent.
struct ControlAnswered {
  ControlReply reply;
};
// Turn boundaries as the vendor reports them. The run loop numbers turns and emits turn.started /
// turn.ended (it knows which frame is in force); a turn end closes the decision window and is
// where queued messages are delivered or the run winds up.
struct TurnStarted {
  std::optional<std::string> at;
};
struct TurnEnded {
  std::optional<std::string> stop_reason;
  std::optional<std::string> at;
};
// A line to write to the vendor's stdin (newline added by the run loop).
struct WriteVendor {
  std::string line;
};
// The answer to one hook-channel request (see HookChannel); the run loop writes it to that
// hook's connection and closes it. An empty line means "no opinion".
struct ReplyHook {
  std::uint64_t connection = 0;
  std::string line;
};
// The adapter's control channel is established (e.g. the vendor answered initialize, so the
// call seam is installed): the run loop may now start the first turn.
struct SessionReady {};
// Something makes it unsafe to go on (e.g. the vendor refused to install the call seam): the run
// loop ends the run with reason error, saying why.
struct FailRun {
  std::string reason;
};
// The vendor said which posture it runs under (issue 27 section 6): at its start (an adapter
// whose session.started does not carry it all), or when a session is resumed. `occasion` says
// when ("start", "resume").
struct PostureReported {
  Posture posture;
  std::string occasion;
};
}  // namespace out

using AdapterOutput =
    std::variant<out::Event, out::EventCut, out::CallPresented, out::CallAwaitsAnswer, out::CallWithdrawn,
                 out::ControlAnswered, out::TurnStarted, out::TurnEnded, out::WriteVendor, out::ReplyHook,
                 out::SessionReady, out::FailRun, out::PostureReported>;

// The ordered list a session fills for one input, with one short verb per kind of output.
class AdapterOutputs {
 public:
  void event(proto::EventPayload payload, std::optional<std::string> at) {
    list_.emplace_back(out::Event{std::move(payload), std::move(at)});
  }
  void event_cut(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut) {
    list_.emplace_back(out::EventCut{std::move(payload), std::move(at), std::move(cut)});
  }
  void call_presented(ToolCall call, std::optional<std::string> at) {
    list_.emplace_back(out::CallPresented{std::move(call), std::move(at)});
  }
  void call_awaits_answer(ToolCall call, ReplyToken reply) {
    list_.emplace_back(out::CallAwaitsAnswer{std::move(call), std::move(reply)});
  }
  void call_withdrawn(ReplyToken reply) { list_.emplace_back(out::CallWithdrawn{std::move(reply)}); }
  void control_answered(ControlReply reply) { list_.emplace_back(out::ControlAnswered{std::move(reply)}); }
  void turn_started(std::optional<std::string> at) { list_.emplace_back(out::TurnStarted{std::move(at)}); }
  void turn_ended(std::optional<std::string> stop_reason, std::optional<std::string> at) {
    list_.emplace_back(out::TurnEnded{std::move(stop_reason), std::move(at)});
  }
  void write_vendor(std::string line) { list_.emplace_back(out::WriteVendor{std::move(line)}); }
  void reply_hook(std::uint64_t connection, std::string line) {
    list_.emplace_back(out::ReplyHook{connection, std::move(line)});
  }
  void session_ready() { list_.emplace_back(out::SessionReady{}); }
  void fail_run(std::string reason) { list_.emplace_back(out::FailRun{std::move(reason)}); }
  void posture_reported(Posture posture, std::string occasion) {
    list_.emplace_back(out::PostureReported{std::move(posture), std::move(occasion)});
  }

  std::size_t size() const { return list_.size(); }
  bool empty() const { return list_.empty(); }
  // How many outputs from index `from` on are records of the vendor's (events, calls, controls
  // answered, turns) rather than effects (writes, hook replies, readiness, failure): a vendor
  // record that produced none of these becomes opaque.
  std::size_t records_since(std::size_t from) const;
  const std::vector<AdapterOutput>& list() const { return list_; }
  // Hands the list over (for folding) and leaves this one empty.
  std::vector<AdapterOutput> take() { return std::exchange(list_, {}); }

 private:
  std::vector<AdapterOutput> list_;
};

// Per-run adapter state: reader + controller for one vendor process.
class AdapterSession {
 public:
  virtual ~AdapterSession() = default;

  // The first lines to the vendor (e.g. initialize, then the prompt as the first user turn).
  virtual void start(AdapterOutputs& sink) = 0;
  // One line of the vendor's stdout (line.number is its 1-based line in the transcript).
  virtual void on_vendor_line(const proto::FramedLine& line, AdapterOutputs& sink) = 0;
  // The vendor's stdout ended. Adapters that synthesise a terminal record do it here, and what
  // they held for a later line (e.g. notifications before the vendor's thread exists) is released here,
  // never dropped. Called once, after the last line: live by RunCore::on_vendor_end, before the
  // run's wind-up records; offline by translate.
  virtual void on_vendor_end(AdapterOutputs& sink) = 0;
  // One request from a hook program over the plan's HookChannel (`input` is the hook's stdin
  // JSON). Adapters without a hook channel never get one.
  virtual void on_hook_request(std::uint64_t connection, const json::value& input, AdapterOutputs& sink) {
    (void)input;
    sink.reply_hook(connection, "");
  }
  // A hook program went away before it was answered (the vendor's own hook timeout killed it).
  virtual void on_hook_gone(std::uint64_t connection, AdapterOutputs& sink) {
    (void)connection;
    (void)sink;
  }

  // Answer a vendor decision request.
  virtual void answer(const ReplyToken& reply, const ToolCall& call, const proto::Decision& decision,
                      AdapterOutputs& sink) = 0;
  // Is the request the vendor blocks on (`asked`) the same request as the one it presented
  // (`presented`)? A decision is bound to what was presented; the vendor may restate it in its
  // own normal form (e.g. a relative file_path resolved against its cwd) without changing what
  // runs. Anything else is a different request, denied as mutated. Default: byte equality of the
  // canonical JSON.
  virtual bool same_request(const ToolCall& presented, const ToolCall& asked) const {
    return presented.name == asked.name && proto::canonical_json(presented.input) == proto::canonical_json(asked.input);
  }
  // Can this adapter carry this decision for this call? (e.g. a replace whose input the wire
  // cannot express is refused by name, never downgraded.)
  virtual std::optional<proto::Refusal> check_decision(const ToolCall& call, const proto::Decision& decision) const = 0;
  // Would an allow at the call seam override this permission posture (the vendor honours the
  // allow and skips the posture's own refusal)? Such a posture, asked for without the deny-only
  // policy, is refused SHADOWED: it would appear to work and would not.
  virtual bool allow_overrides_posture(const std::string& posture) const {
    (void)posture;
    return false;
  }

  // Parking (issue 27 §5), for an adapter whose capability table honours it. park: answer the
  // request the vendor blocks on so that it defers the call and ends its turn (the run loop then
  // closes its stdin); false when this session cannot. resume_args: what the next process of the
  // same session is started with. resume: that process is spawned; its first lines go out (the
  // call seam again), and the vendor's own word that a turn began is not repeated (the run loop
  // states the resumed turn itself).
  virtual bool park(const ReplyToken& reply, const ToolCall& call, AdapterOutputs& sink) {
    (void)reply;
    (void)call;
    (void)sink;
    return false;
  }
  virtual std::vector<std::string> resume_args() const { return {}; }
  // The same, knowing the parked call and the decision it is to be answered with: a session whose
  // vendor may run the deferred call before its call seam is back can carry the decision in the
  // arguments themselves (then resume_delivers_decision says so for that call).
  virtual std::vector<std::string> resume_args(const ToolCall& call, const proto::Decision& decision) const {
    (void)call;
    (void)decision;
    return resume_args();
  }
  virtual bool resume_delivers_decision(const ToolCall& call, const proto::Decision& decision) const {
    (void)call;
    (void)decision;
    return false;
  }
  virtual void resume(AdapterOutputs& sink) { start(sink); }

  // Start a new turn with one user message made of these texts, in order (a frame that comes
  // into force at this boundary is delivered as the first text).
  virtual void send_user_turn(const std::vector<std::string>& texts, AdapterOutputs& sink) = 0;
  virtual ControlAck interrupt(AdapterOutputs& sink) = 0;
  virtual ControlAck steer(const std::string& text, AdapterOutputs& sink) = 0;
  virtual ControlAck set_permission(const std::string& posture, AdapterOutputs& sink) = 0;
  // The posture (issue 27 section 6) this session asks the vendor for at launch, to hold what the
  // vendor reports against; nullopt: the adapter states none (nothing to compare with).
  virtual std::optional<Posture> asked_posture() const { return std::nullopt; }
  // What a permission.set of `posture` asks, once the vendor applied it (Codex's sandbox postures
  // move the sandbox, the rest the permission mode).
  virtual Posture posture_of_set(const std::string& posture) const { return Posture{posture, std::nullopt}; }
  // Whether the session reports its posture through PostureReported at its start; otherwise the
  // run reads session.started's permission_mode as the start's report.
  virtual bool reports_posture() const { return false; }
  // Halt, step by step: the adapter's graceful end (e.g. end_session), before stdin is closed
  // and the process tree is killed by the run loop.
  virtual void end_session(AdapterOutputs& sink) = 0;
  // After the vendor's stdin is closed, does the vendor finish on its own? (Some exit after
  // the current turn.)
  virtual bool exits_on_stdin_close() const { return true; }
  // The session's terminal record, if the vendor produced terminal evidence (built from the
  // turns seen; vendor-specific accumulation, e.g. permission_denials reported per turn).
  // The run loop fills in the census and emits it once, at wind-up.
  virtual std::optional<proto::ev::SessionEnded> session_ended() const = 0;
};

}  // namespace mh::adapters
