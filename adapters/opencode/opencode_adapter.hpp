// The opencode adapter (opencode-ai 1.18.33, a native binary: no node at run time), driven through
// `opencode acp` (the Agent Client Protocol over stdio: adapters/acp). Facts:
// docs/reference/opencode-acp-wire.md.
//
// The call seam has two gates:
//   - the seam plugin's tool.execute.before (opencode_plugin.hpp) asks the run before every tool
//     call runs, with the call's real input: tool.requested with seam hook, answered allow, deny
//     (the model reads our reason as the tool's error result and goes on), replace (the call runs
//     the new input) or abstain; it fails closed;
//   - opencode's own permission, "ask" for every tool, reaches us as session/request_permission:
//     for a call the plugin saw it is answered at once (allow_once where the seam granted the call,
//     reject_once where it did not); one the plugin never saw is presented on its own (seam
//     control_request: allow or deny only). "Always" is never selected: it is a broad in-process rule.
#pragma once

#include <filesystem>

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters {

std::unique_ptr<Adapter> make_opencode_adapter(const HostConfig& config);

struct VendorDescriptor;  // adapters/vendor_descriptor.hpp

namespace opencode {
// This vendor as the host knows it before any run (opencode_descriptor.cpp; vendor_descriptor.hpp).
const VendorDescriptor& descriptor();

const proto::CapabilityTable& capabilities();

// The native binary in the pinned platform package (an optional npm dependency of opencode-ai,
// which may be missing where npm skipped optional dependencies).
inline constexpr std::string_view kBinaryUnderVendor = "node_modules/opencode-linux-x64/bin/opencode";
std::filesystem::path default_binary(const std::filesystem::path& vendor_dir);

// Where setup installs the seam plugin's package (@opencode-ai/plugin at opencode's own version,
// with package.json and package-lock.json beside node_modules): one read-only tree for every run.
std::filesystem::path plugin_package_dir(const std::filesystem::path& vendor_dir);

}  // namespace opencode
}  // namespace mh::adapters
