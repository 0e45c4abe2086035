// session/update notifications -> events, and what the client knows of each tool call between its
// first notice (`tool_call`) and its end (`tool_call_update` completed or failed). Part of the ACP
// client (acp_client.hpp); no I/O, no clock.
#pragma once

#include <functional>
#include <map>

#include "adapters/acp/acp_wire.hpp"
#include "adapters/adapter.hpp"
#include "adapters/adapter_outputs.hpp"
#include "protocol/line_framer.hpp"

namespace mh::adapters::acp {

// A hostile agent could open calls and never end them: past this many open calls a new one is
// not tracked (its update is opaque; its permission request is still presented and decided).
inline constexpr std::size_t kMaxOpenCalls = 1024;

struct OpenCall {
  std::string name;        // the tool call's first title (e.g. the agent's tool id, "bash")
  std::string kind;        // the ACP kind (execute, edit, read, search, fetch, think, other...)
  json::value input;       // the fullest rawInput seen so far (the first notice often carries none)
  bool presented = false;  // tool.requested is in the stream (a permission asked, or recorded at its end)
};

// The tool a call id names, for an agent whose notices and permission requests name no tool (their
// title is a rendering such as the command line): nullopt where the id does not say.
using ToolOfCall = std::function<std::optional<std::string>(std::string_view call_id)>;

class UpdateReader {
 public:
  explicit UpdateReader(ToolOfCall tool_of_call = {}) : tool_of_call_(std::move(tool_of_call)) {}

  // One update object (`params.update`). False when it read nothing out of it: the caller
  // records the line as opaque. A call that ends without ever having been presented (its agent
  // did not ask) is recorded first as a call nothing gated (seam none), so tool.result never
  // comes without its tool.requested.
  bool read(const json::object& update, AdapterOutputs& sink);

  // The call a permission request names: tracked (so its end finds it presented), or nullptr.
  OpenCall* find(const std::string& call_id);
  // Starts tracking a call first seen in a permission request; nullptr past kMaxOpenCalls.
  OpenCall* track(const std::string& call_id, std::string name, std::string kind);
  std::size_t open_calls() const { return calls_.size(); }
  // What names a call first seen in `notice` (a tool_call update, or a permission request's
  // toolCall) with this title: the tool its _meta.toolName names (Qwen Code), else the tool its id
  // names (ToolOfCall), else the title.
  std::string tool_name(const std::string& call_id, std::string title, const json::object* notice = nullptr) const;

 private:
  bool tool_call(const json::object& update, bool first_notice, AdapterOutputs& sink);
  ToolOfCall tool_of_call_;
  std::map<std::string, OpenCall> calls_;
};

// ACP token counts (session/prompt's usage, a usage_update's tokens) as ours; nullopt when the
// object carries none.
std::optional<proto::TokenUsage> token_usage(const json::object& usage);

}  // namespace mh::adapters::acp
