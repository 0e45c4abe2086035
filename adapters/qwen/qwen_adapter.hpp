// The Qwen Code adapter (@qwen-code/qwen-code 0.24.4, a node bundle), driven through `qwen --acp`
// (the Agent Client Protocol over stdio: adapters/acp) against the model endpoint's Anthropic wire
// (--auth-type anthropic, ANTHROPIC_BASE_URL).
//
// The call seam is ACP's permission request. Qwen Code's ACP sessions start in "auto" (an LLM
// classifier approves calls) unless --approval-mode default; in default mode only shell, write and
// edit ask, so the generated settings add permissions.ask rules naming every tool (observed: shell,
// read, glob, grep, write, edit, web fetch then ask). The request carries the call's real input
// and Qwen's tool name (_meta.toolName). Qwen Code's PreToolUse hooks fire in ACP mode, but only
// after the permission was granted (and fail open on a hook error), so they cannot be the gate: a
// deny is `cancel` at the permission, the model reads Qwen's own text, and the run names the reason
// it could not deliver (warning DENY_REASON_NOT_DELIVERED); replace is refused UNSUPPORTED_CONTROL.
#pragma once

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters {

std::unique_ptr<Adapter> make_qwen_adapter(const HostConfig& config);

struct VendorDescriptor;  // adapters/vendor_descriptor.hpp

namespace qwen {
// This vendor as the host knows it before any run (qwen_descriptor.cpp; vendor_descriptor.hpp).
const VendorDescriptor& descriptor();

const proto::CapabilityTable& capabilities();

// The CLI's entry script in the pinned package (package.json's bin: a node script).
inline constexpr std::string_view kBinaryUnderVendor = "node_modules/@qwen-code/qwen-code/cli-entry.js";

}  // namespace qwen
}  // namespace mh::adapters
