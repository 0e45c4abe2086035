// Claude Code as the host knows it before any run (adapters/vendor_descriptor.hpp).
#include "adapters/claude/claude_adapter.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters::claude {

const VendorDescriptor& descriptor() {
  static const VendorDescriptor d{.id = "claude",
                                  .atif_agent_name = "claude-code",
                                  .binary_under_vendor_dir = kBinaryUnderVendor,
                                  .usage_shape = UsageShape::anthropic,
                                  .make = &make_claude_adapter};
  return d;
}

}  // namespace mh::adapters::claude
