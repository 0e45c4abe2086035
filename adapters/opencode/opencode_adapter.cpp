#include "adapters/opencode/opencode_adapter.hpp"

namespace mh::adapters::opencode {

std::filesystem::path default_binary(const std::filesystem::path& vendor_dir) {
  return vendor_dir / "node_modules/opencode-linux-x64/bin/opencode";
}

}  // namespace mh::adapters::opencode
