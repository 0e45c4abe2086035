// A PreToolUse hook's answer, in the one shape every vendor with a PreToolUse hook reads: in band,
// as the payload of the control_response to a hook_callback, or as the stdout of a command hook
// (a vendor's hook program passes the run's answer through).
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
