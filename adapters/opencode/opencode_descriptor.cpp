// opencode as the host knows it before any run (adapters/vendor_descriptor.hpp).
#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters::opencode {

const VendorDescriptor& descriptor() {
  static const VendorDescriptor d{
      .id = "opencode",
      .atif_agent_name = "opencode",
      .binary_under_vendor_dir = kBinaryUnderVendor,
      .usage_shape = UsageShape::unknown,
      .make = &make_opencode_adapter,
      // A Bun binary: its process may show as `.opencode` (the launcher's target).
      .process_names = {"opencode", ".opencode"},
      .over_acp = true,
      // It asks for a session title with no tools.
      .scripted_shell = {.tool = "bash", .command_key = "command", .call_id_prefix = "toolu_", .side_requests = true}};
  return d;
}

}  // namespace mh::adapters::opencode
