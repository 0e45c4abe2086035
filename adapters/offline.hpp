// An adapter's reader alone, offline (`metaharness translate`): a retained transcript framed as
// the live run frames the vendor's stdout, its outputs collected with no decisions made.
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/adapter.hpp"
#include "adapters/adapter_outputs.hpp"
#include "protocol/line_framer.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

// Collects what an adapter's reader produces offline (`metaharness translate`): no decisions are
// made, so every tool call is a record nobody adjudicates (seam none); turns are numbered here.
class OfflineSink final {
 public:
  OfflineSink(const Adapter& adapter, std::string run_id);
  // Folds one input's outputs, in order (effects for a live vendor are ignored: there is none).
  void fold(AdapterOutputs& outputs);
  // The stream: what was read, the session's terminal record (census empty: nothing was
  // decided) if any, and stream.closed.
  std::vector<proto::Event> finish(std::optional<proto::ev::SessionEnded> ended);

 private:
  void call_presented(ToolCall call, std::optional<std::string> at);
  void push(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut = {});
  const Adapter& adapter_;
  std::string run_id_;
  std::uint32_t turn_ = 0;
  std::set<std::string> presented_;
  std::vector<proto::Event> events_;
};

// Frames a retained transcript (`metaharness translate`) as the live run frames the vendor's
// stdout: the same line bound, an oversized line digested whole.
void read_transcript(std::string_view transcript, const std::function<void(const proto::FramedLine&)>& on_line);

}  // namespace mh::adapters
