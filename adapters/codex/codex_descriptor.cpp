// Codex as the host knows it before any run (adapters/vendor_descriptor.hpp).
#include "adapters/codex/codex_adapter.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters::codex {

const VendorDescriptor& descriptor() {
  static const VendorDescriptor d{
      .id = "codex",
      .atif_agent_name = "codex",
      .binary_under_vendor_dir = kBinaryUnderVendor,
      .usage_shape = UsageShape::openai,
      .make = &make_codex_adapter,
      // The PreToolUse command hook Codex runs per call (mh_codex_hook.cpp).
      .helpers = {{.binary_key = "codex-hook",
                   .config_key = "codex_hook",
                   .env = "METAHARNESS_CODEX_HOOK_BIN",
                   .file_name = "mh-codex-hook"}},
      .process_names = {"codex"},
      .scripted_shell = {.tool = "exec_command", .command_key = "cmd", .call_id_prefix = "call_"}};
  return d;
}

}  // namespace mh::adapters::codex
