// The Gemini CLI as the host knows it before any run (adapters/vendor_descriptor.hpp).
#include "adapters/gemini/gemini_adapter.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters::gemini {

const VendorDescriptor& descriptor() {
  static const VendorDescriptor d{.id = "gemini",
                                  .atif_agent_name = "gemini-cli",
                                  .binary_under_vendor_dir = kBinaryUnderVendor,
                                  .usage_shape = UsageShape::unknown,
                                  .make = &make_gemini_adapter,
                                  // node, one process: its relaunch is off under the adapter.
                                  .process_names = {"node"},
                                  .over_acp = true,
                                  // It names a call `<tool>__<the model's id>` (docs/adapters.md).
                                  .scripted_shell = {.tool = "run_shell_command",
                                                     .command_key = "command",
                                                     .call_id_prefix = "toolu_",
                                                     .reported_call_id = "run_shell_command__{id}",
                                                     .side_requests = true}};
  return d;
}

}  // namespace mh::adapters::gemini
