// A tool call as the vendor presented it: what the adapter's session hands the run loop, and
// what an adapter's operations and subjects are computed from.
#pragma once

#include <boost/json/value.hpp>
#include <optional>
#include <string>

#include "protocol/events.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

struct ToolCall {
  std::string call_id;
  std::string name;
  json::value input;
  // The seam that will carry this call's decision; `none` marks a record of a call nothing can
  // gate (delivered, never decided, never counted).
  proto::Seam seam = proto::Seam::hook;
  // Which agent made the call: unset for the main agent, else the vendor's id of the sub-agent.
  std::optional<std::string> agent;
  // A request to re-run a call outside the vendor's sandbox: its own call, decided on its own.
  bool escalation = false;
};

}  // namespace mh::adapters
