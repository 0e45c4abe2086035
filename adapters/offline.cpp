#include "adapters/offline.hpp"

#include "adapters/adapter_outputs.hpp"
#include "protocol/overloaded.hpp"

namespace mh::adapters {

void read_transcript(std::string_view transcript, const std::function<void(const proto::FramedLine&)>& on_line) {
  proto::LineFramer framer(proto::kDefaultMaxVendorLineBytes, /*digest_oversized=*/true);
  framer.feed(transcript, on_line);
  framer.finish(on_line);
}

OfflineSink::OfflineSink(const Adapter& adapter, std::string run_id) : adapter_(adapter), run_id_(std::move(run_id)) {}

void OfflineSink::push(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut) {
  proto::Event e{events_.size() + 1, run_id_, std::move(at), std::move(payload)};
  e.cut = std::move(cut);
  events_.push_back(std::move(e));
}

void OfflineSink::fold(AdapterOutputs& outputs) {
  for (auto& output : outputs.take()) {
    std::visit(
        proto::Overloaded{
            [&](out::Event& o) { push(std::move(o.payload), std::move(o.at)); },
            [&](out::EventCut& o) { push(std::move(o.payload), std::move(o.at), std::move(o.cut)); },
            [&](out::CallPresented& o) { call_presented(std::move(o.call), std::move(o.at)); },
            [&](out::CallAwaitsAnswer& o) { call_presented(std::move(o.call), std::nullopt); },
            [&](out::TurnStarted& o) {
              push(proto::ev::TurnStarted{++turn_, std::nullopt}, std::move(o.at));
            },
            [&](out::TurnEnded& o) {
              push(proto::ev::TurnEnded{std::max<std::uint32_t>(turn_, 1), std::move(o.stop_reason)}, std::move(o.at));
            },
            // Withdrawals, control answers, writes, hook replies, readiness, failure: nothing offline.
            [](auto&) {},
        },
        output);
  }
}

void OfflineSink::call_presented(ToolCall call, std::optional<std::string> at) {
  // One record per call, however many times the vendor's transcript restates it.
  if (!presented_.insert(call.call_id).second) return;
  proto::ev::ToolRequested r;
  for (const auto& op : adapter_.operations_for(call))
    r.operations.emplace_back(op.wire_name());
  r.subjects = adapter_.subjects_for(call);
  r.call_id = std::move(call.call_id);
  r.name = std::move(call.name);
  r.input = std::move(call.input);
  r.decision_required = false;
  r.seam = proto::Seam::none;  // offline: nobody adjudicates these calls
  r.agent = std::move(call.agent);
  r.escalation = call.escalation;
  push(std::move(r), std::move(at));
}

std::vector<proto::Event> OfflineSink::finish(std::optional<proto::ev::SessionEnded> ended) {
  if (ended) push(*ended, std::nullopt);
  proto::ev::StreamClosed closed;
  closed.events = events_.size();
  closed.reason = classify_close(false, ended);
  closed.run_id = run_id_;
  push(closed, std::nullopt);
  return std::move(events_);
}

}  // namespace mh::adapters
