// The Gemini CLI as the host knows it before any run (adapters/vendor_descriptor.hpp).
#include "adapters/gemini/gemini_adapter.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters::gemini {

const VendorDescriptor& descriptor() {
  static const VendorDescriptor d{.id = "gemini",
                                  .atif_agent_name = "gemini-cli",
                                  .binary_under_vendor_dir = kBinaryUnderVendor,
                                  .usage_shape = UsageShape::unknown,
                                  .make = &make_gemini_adapter};
  return d;
}

}  // namespace mh::adapters::gemini
