// Gemini CLI's profile for the generic ACP session (adapters/acp/acp_profile.hpp): no hook seam
// (its ACP mode fires no tool hook), its calls named by the tool their id names, and the evidence
// its plan knows and ACP does not report. No I/O, no clock.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "adapters/adapter.hpp"

namespace mh::adapters::acp {
struct Profile;  // adapters/acp/acp_profile.hpp: what only the session and its tests need
}

namespace mh::adapters::gemini {

const acp::Profile& profile();

// The tool a Gemini CLI call id names: its ACP session makes a call's id "<tool>__<the model's
// functionCall id>" (observed on 0.61.0), or "<tool>-<ms>-<n>" where the model gave none; nullopt
// for an id of neither shape.
std::optional<std::string> tool_of_call(std::string_view call_id);

// `offline`: the reader alone (translate).
std::unique_ptr<AdapterSession> make_session(const RunSpec& spec, const LaunchPlan& plan, bool offline = false);

}  // namespace mh::adapters::gemini
