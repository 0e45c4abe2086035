// Qwen Code as the host knows it before any run (adapters/vendor_descriptor.hpp).
#include "adapters/qwen/qwen_adapter.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters::qwen {

const VendorDescriptor& descriptor() {
  static const VendorDescriptor d{
      .id = "qwen",
      .atif_agent_name = "qwen-code",
      .binary_under_vendor_dir = kBinaryUnderVendor,
      .usage_shape = UsageShape::unknown,
      .make = &make_qwen_adapter,
      // node, one process: its relaunch is off under the adapter.
      .process_names = {"node"},
      .over_acp = true,
      .scripted_shell = {
          .tool = "run_shell_command", .command_key = "command", .call_id_prefix = "toolu_", .side_requests = true}};
  return d;
}

}  // namespace mh::adapters::qwen
