// opencode's call seam: a plugin metaharness writes into every opencode run's config directory.
// Its `tool.execute.before` hook runs inside opencode, before every tool call's side effect, and
// asks the run over the run's hook channel (HookChannel: an abstract Unix socket named by
// $METAHARNESS_HOOK_SOCKET, one request line, one answer line), then acts on the answer:
//
//   {"decision":"allow"} / {"decision":"abstain"}  -> the call goes on (to ACP's permission, the
//                                                      second gate: adapters/acp/acp_session.cpp)
//   {"decision":"deny","reason":R}                 -> the hook throws R: the model reads R as the
//                                                      tool's error result and its loop goes on
//   {"decision":"replace","input":{...}}            -> the call's arguments become the input
//
// and it FAILS CLOSED: no channel, no connection, no answer before its own deadline
// ($METAHARNESS_HOOK_DEADLINE_S), or an answer it cannot use is a throw (a deny) naming why. The
// plugin is the same text for every run (what differs comes from the environment). Observed on
// opencode 1.18.33: docs/reference/opencode-acp-wire.md ("The plugin seam").
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "adapters/adapter.hpp"

namespace mh::adapters::opencode {

inline constexpr std::string_view kHookSocketEnv = "METAHARNESS_HOOK_SOCKET";
inline constexpr std::string_view kHookDeadlineEnv = "METAHARNESS_HOOK_DEADLINE_S";
// The plugin's file name under $XDG_CONFIG_HOME/opencode/plugin/.
inline constexpr std::string_view kPluginFile = "metaharness-seam.js";
// Its name, as the plan's attestation declares it (installed_plugins) and session.started lists
// it: the hermetic floor's H1a reads the one against the other.
inline constexpr std::string_view kPluginName = "metaharness-seam";
// What the plugin sends: {"hook": kSeamHook, "tool", "session_id", "call_id", "args"}.
inline constexpr std::string_view kSeamHook = "tool.execute.before";

// The plugin's source (an ES module; opencode loads every file in its config's plugin/ dir).
std::string_view plugin_source();

// One hook-channel request from the plugin, read as the call it presents (seam hook), or why it
// cannot be governed (answered with a deny: the plugin then throws that reason).
std::variant<ToolCall, std::string> read_seam_request(const json::value& request);

// The answer line for a decision (canonical JSON, no newline).
std::string seam_answer(const proto::Decision& decision);

}  // namespace mh::adapters::opencode
