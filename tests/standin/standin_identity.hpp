// The stand-in harness's identity (README.md beside this file, docs/standin.md): its program, the
// adapter whose wire it speaks (the [vendor] key a daemon runs it under, and a spec's adapter),
// and the format its scripts declare. Defined once, beside the stand-in, and read by the stand-in
// itself, testkit and the benches, so nothing else spells the CLI it stands in for.
#pragma once

#include <string>
#include <string_view>

namespace mh::standin {

inline constexpr std::string_view kProgram = "mh-standin-claude";
inline constexpr std::string_view kAdapter = "claude";
inline constexpr std::string_view kScriptFormat = "mh-standin-claude.script/1";

// A script's opening, `{"format":"<kScriptFormat>",`, for a bench writing one as JSON text.
inline std::string script_head() {
  return R"({"format":")" + std::string(kScriptFormat) + R"(",)";
}

}  // namespace mh::standin
