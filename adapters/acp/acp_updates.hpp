// session/update notifications -> events, and what the client knows of each tool call between its
// first notice (`tool_call`) and its end (`tool_call_update` completed or failed). Part of the ACP
// client (acp_client.hpp); no I/O, no clock.
#pragma once

#include <map>

#include "adapters/acp/acp_wire.hpp"
#include "adapters/adapter.hpp"
#include "adapters/session.hpp"

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

class UpdateReader {
 public:
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

 private:
  bool tool_call(const json::object& update, bool first_notice, AdapterOutputs& sink);
  std::map<std::string, OpenCall> calls_;
};

// ACP token counts (session/prompt's usage, a usage_update's tokens) as ours; nullopt when the
// object carries none.
std::optional<proto::TokenUsage> token_usage(const json::object& usage);

}  // namespace mh::adapters::acp
