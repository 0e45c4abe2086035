// The stand-in harness (tests/standin, docs/standin.md) as the benches name it: its program, the
// adapter whose wire it speaks (the [vendor] key a daemon runs it under, and a spec's adapter),
// and the format its scripts declare. One place, so no bench spells the CLI it stands in for.
#pragma once

#include <string>
#include <string_view>

namespace mh::testkit::standin {

inline constexpr std::string_view kProgram = "mh-standin-claude";
inline constexpr std::string_view kAdapter = "claude";
inline constexpr std::string_view kScriptFormat = "mh-standin-claude.script/1";

// A script's opening, `{"format":"<kScriptFormat>",`, for a bench writing one as JSON text.
inline std::string script_head() {
  return R"({"format":")" + std::string(kScriptFormat) + R"(",)";
}

}  // namespace mh::testkit::standin
