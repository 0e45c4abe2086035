// The session seam: the run-loop side of one vendor's conversation. An AdapterSession reads the
// vendor's lines and answers commands; for every input it fills an ordered list of outputs
// (AdapterOutputs, adapter_outputs.hpp) the run loop folds once the session has returned. No
// I/O, no clock.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "adapters/adapter_outputs.hpp"
#include "adapters/control_answer.hpp"
#include "adapters/posture.hpp"
#include "adapters/reply_token.hpp"
#include "adapters/tool_call.hpp"
#include "protocol/events.hpp"
#include "protocol/line_framer.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

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
