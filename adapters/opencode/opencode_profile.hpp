// opencode's profile for the generic ACP session (adapters/acp/acp_profile.hpp): its seam plugin
// (opencode_plugin.hpp) as the hook seam beside ACP's permission, which presents each call before
// it runs and carries its decision back, and the evidence its plan knows and ACP does not report.
// No I/O, no clock.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "adapters/adapter.hpp"

namespace mh::adapters::acp {
struct Profile;  // adapters/acp/acp_profile.hpp: what only the session and its tests need
}

namespace mh::adapters::opencode {

const acp::Profile& profile();

// `offline`: the reader alone (translate): nothing is decided, so no hook channel is expected.
std::unique_ptr<AdapterSession> make_session(const RunSpec& spec, const LaunchPlan& plan, bool offline = false);

}  // namespace mh::adapters::opencode
