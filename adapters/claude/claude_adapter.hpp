// The Claude Code adapter (CLI 2.1.197), driven in bidirectional stream-json mode:
//   claude -p --input-format stream-json --output-format stream-json --verbose
//          --setting-sources "" --strict-mcp-config
// The call seam is an in-band PreToolUse hook callback registered with `initialize` for every
// tool; each decision goes back as a control_response. Facts: ../shared/reference/claude-code-wire.md.
#pragma once

#include <map>

#include "adapters/adapter.hpp"
#include "adapters/host_config.hpp"

namespace mh::adapters {

std::unique_ptr<Adapter> make_claude_adapter(const HostConfig& config);

struct VendorDescriptor;  // adapters/vendor_descriptor.hpp

namespace claude {
// This vendor as the host knows it before any run (claude_descriptor.cpp; vendor_descriptor.hpp).
const VendorDescriptor& descriptor();

const proto::CapabilityTable& capabilities();

// Where the pinned CLI's native binary lies under the vendor dir (`metaharness vendor install`
// puts it there): the native binary, not the node wrapper, so the pid is exact.
inline constexpr std::string_view kBinaryUnderVendor = "node_modules/@anthropic-ai/claude-code-linux-x64/claude";

// Where the pinned CLI lives under a vendor dir.
inline std::filesystem::path default_binary(const std::filesystem::path& vendor_dir) {
  return vendor_dir / kBinaryUnderVendor;
}

// Claude's permission postures (set_permission_mode), in the vendor's vocabulary.
bool is_known_posture(std::string_view posture);
std::string_view posture_vocabulary();

}  // namespace claude
}  // namespace mh::adapters
