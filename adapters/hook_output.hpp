// A PreToolUse hook's answer, in the one shape both vendors read: Claude Code takes it as the
// payload of the control_response to its hook_callback, Codex as the stdout of its command hook
// (mh-codex-hook passes the run's answer through).
//   allow    {"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}
//   deny     ... "permissionDecision":"deny","permissionDecisionReason":<reason>
//   replace  ... "permissionDecision":"allow","updatedInput":<input>
//   abstain  {}: no opinion, the vendor's own permission pipeline decides
#pragma once

#include <boost/json/value.hpp>

#include "protocol/types.hpp"

namespace mh::adapters {

boost::json::value hook_output(const protocol::Decision& decision);

}  // namespace mh::adapters
