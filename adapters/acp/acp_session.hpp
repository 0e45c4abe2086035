// The adapter session every ACP vendor runs (acp_profile.hpp says what a vendor adds): the ACP
// client (acp_client.hpp) for the conversation, plus the vendor's hook seam when its profile has
// one. No I/O, no clock.
#pragma once

#include <memory>

#include "adapters/acp/acp_profile.hpp"
#include "adapters/adapter.hpp"
#include "adapters/session.hpp"

namespace mh::adapters::acp {

// `offline`: the reader alone (translate): nothing is decided, so no hook channel is expected.
std::unique_ptr<AdapterSession> make_session(const Profile& profile, const RunSpec& spec, const LaunchPlan& plan,
                                             bool offline = false);

}  // namespace mh::adapters::acp
