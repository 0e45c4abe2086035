// Claude Code as the host knows it before any run (adapters/vendor_descriptor.hpp).
#include "adapters/claude/claude_adapter.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters::claude {

const VendorDescriptor& descriptor() {
  static const VendorDescriptor d{
      .id = "claude",
      .atif_agent_name = "claude-code",
      .binary_under_vendor_dir = kBinaryUnderVendor,
      .usage_shape = UsageShape::anthropic,
      .make = &make_claude_adapter,
      .process_names = {"claude"},
      // Bash; read-only commands (`ls`, `echo`) are auto-allowed and
      // skip the permission pipeline, so a driver's calls should write.
      .scripted_shell = {.tool = "Bash", .command_key = "command", .call_id_prefix = "toolu_"}};
  return d;
}

}  // namespace mh::adapters::claude
