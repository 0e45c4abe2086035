// Where each pinned vendor CLI's native binary lies under the vendor dir (`metaharness vendor
// install` puts it there): the native binary, not the node wrapper, so the pid is exact. One
// place for the adapters' defaults and the seam bench's.
#pragma once

#include <string_view>

namespace mh::adapters {

inline constexpr std::string_view kClaudeBinaryUnderVendor = "node_modules/@anthropic-ai/claude-code-linux-x64/claude";
inline constexpr std::string_view kCodexBinaryUnderVendor =
    "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
// opencode-ai's platform package (an optional npm dependency, missing where npm skipped those).
inline constexpr std::string_view kOpencodeBinaryUnderVendor = "node_modules/opencode-linux-x64/bin/opencode";

}  // namespace mh::adapters
