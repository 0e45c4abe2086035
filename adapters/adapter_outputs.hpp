// AdapterOutputs: what a session produces for one input, as an ordered list of values (the
// session seam's vocabulary, session.hpp). A vendor's reader fills it without knowing the session
// that drives it, so it includes this header, not the seam.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "adapters/control_answer.hpp"
#include "adapters/posture.hpp"
#include "adapters/reply_token.hpp"
#include "adapters/tool_call.hpp"
#include "protocol/events.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

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

}  // namespace mh::adapters
