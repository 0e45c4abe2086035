// Codex as the host knows it before any run (adapters/vendor_descriptor.hpp).
#include "adapters/codex/codex_adapter.hpp"
#include "adapters/vendor_binaries.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters::codex {

const VendorDescriptor& descriptor() {
  static const VendorDescriptor d{.id = "codex",
                                  .atif_agent_name = "codex",
                                  .binary_under_vendor_dir = kCodexBinaryUnderVendor,
                                  .usage_shape = UsageShape::openai,
                                  .make = &make_codex_adapter};
  return d;
}

}  // namespace mh::adapters::codex
