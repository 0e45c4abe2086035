// Qwen Code's profile for the generic ACP session (adapters/acp/acp_profile.hpp): no hook seam
// (its PreToolUse hooks fire only after a permission is granted), and the evidence its plan knows
// and ACP does not report. Its calls name their tool themselves (_meta.toolName). No I/O, no clock.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "adapters/adapter.hpp"

namespace mh::adapters::acp {
struct Profile;  // adapters/acp/acp_profile.hpp: what only the session and its tests need
}

namespace mh::adapters::qwen {

const acp::Profile& profile();

// `offline`: the reader alone (translate).
std::unique_ptr<AdapterSession> make_session(const RunSpec& spec, const LaunchPlan& plan, bool offline = false);

}  // namespace mh::adapters::qwen
