// One opencode run's adapter session: the ACP client (adapters/acp) for the conversation, plus
// the seam plugin's requests over the hook channel (opencode_plugin.hpp), which present each call
// before it runs and carry its decision back. No I/O, no clock.
#pragma once

#include "adapters/adapter.hpp"
#include "adapters/session.hpp"

namespace mh::adapters::opencode {

// `offline`: the reader alone (translate): nothing is decided, so no hook channel is expected.
std::unique_ptr<AdapterSession> make_session(const RunSpec& spec, const LaunchPlan& plan, bool offline = false);

}  // namespace mh::adapters::opencode
