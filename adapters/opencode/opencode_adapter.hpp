// The opencode adapter (opencode-ai 1.18.33, a native binary: no node at run time), driven through
// `opencode acp` (the Agent Client Protocol over stdio, adapters/acp). Facts:
// docs/reference/opencode-acp-wire.md. So far: where the pinned binary lands.
#pragma once

#include <filesystem>

namespace mh::adapters::opencode {

// The native binary in the pinned platform package (an optional npm dependency of opencode-ai,
// which may be missing where npm skipped optional dependencies).
std::filesystem::path default_binary(const std::filesystem::path& vendor_dir);

}  // namespace mh::adapters::opencode
