// The Gemini CLI adapter (@google/gemini-cli 0.61.0, a node bundle), driven through `gemini --acp`
// (the Agent Client Protocol over stdio: adapters/acp) against the model endpoint's Gemini wire
// (GOOGLE_GEMINI_BASE_URL: only ACP mode takes a base URL).
//
// The call seam is ACP's permission alone. Gemini CLI's BeforeTool hooks would carry a reason and
// a replaced input, but its ACP mode runs each tool itself (its session's runTool) and fires no
// tool hook (read in the 0.61.0 bundle; SessionStart is the only hook it fires). So:
//   - an admin policy (the highest tier) makes every tool ask: session/request_permission for
//     every call of every kind (observed: shell, read, glob, grep, list, write, replace, web
//     fetch, todos), presented as the call (seam control_request) and answered proceed_once for an
//     allow and cancel for anything else; "Allow for this session" is never selected;
//   - a deny reaches the model as Gemini's own text ("Tool \"<tool>\" was canceled by the user.");
//     the reason is recorded, and the run warns DENY_REASON_NOT_DELIVERED (acp_client.hpp);
//   - replace is refused UNSUPPORTED_CONTROL by name: the permission answer carries no input;
//   - the calls' input is not reported (no rawInput anywhere): a call is presented with input
//     null, named by its tool (its call id is "<tool>__<the model's id>").
#pragma once

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters {

std::unique_ptr<Adapter> make_gemini_adapter(const HostConfig& config);

struct VendorDescriptor;  // adapters/vendor_descriptor.hpp

namespace gemini {
// This vendor as the host knows it before any run (gemini_descriptor.cpp; vendor_descriptor.hpp).
const VendorDescriptor& descriptor();

const proto::CapabilityTable& capabilities();

// The CLI's entry script in the pinned package (package.json's bin: a node script).
inline constexpr std::string_view kBinaryUnderVendor = "node_modules/@google/gemini-cli/bundle/gemini.js";

}  // namespace gemini
}  // namespace mh::adapters
