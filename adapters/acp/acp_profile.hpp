// What one ACP vendor adds to the generic ACP session (acp_session.hpp): everything that session
// cannot learn from the protocol. The session itself (initialize, session/new, one session/prompt
// per turn, session/cancel, session/update -> events, session/request_permission as the decision
// seam: acp_client.hpp) is the same for every ACP agent; a vendor's folder holds its launch plan
// and one Profile.
//
// The knobs, and what the ACP vendors probed so far need of them (/work/shared/reference
// acp-vendors.md: the first ACP vendor, Qwen Code 0.24.4, Gemini CLI 0.61.0):
//   - a hook seam beside ACP's permission (`hook_seam`): ACP's permission answer carries no reason
//     and no input, so deny-with-a-reason and replace need a hook inside the agent that presents
//     every call before it runs (the first ACP vendor's: a plugin's tool.execute.before; Qwen
//     Code's PreToolUse hooks, said to take hook_output.hpp's shape, and Gemini CLI's BeforeTool
//     hooks are the candidates, neither probed yet). Without one, ACP's permission request is the
//     only gate: allow or deny (a fixed text), replace refused.
//   - how tool kinds ask: whether every call asks is the launch's to arrange (a config's
//     "permission": "ask" for every tool; Qwen Code: --approval-mode default plus permissions.ask
//     rules; Gemini CLI: read tools run unasked). A call that ends without having asked is
//     recorded as a call nothing gated (seam none), whatever the profile; the capability table's
//     tool_decide line says what the vendor's launch promises.
//   - modes and posture: `evidence` names the run's permission posture in the vendor's own words
//     (session.started.permission_mode); permission_set is honoured only where the capability table
//     says so (no ACP vendor yet: the first has no session mode that is a posture; Qwen Code's
//     session modes, started by --approval-mode, would be the first to map).
//   - what session/new reports: `evidence` sets ClientOptions::expected_model, the model the
//     session must say it chose (a vendor that falls back to a hosted default fails the run before
//     its first prompt). Qwen Code's session/new also reports currentModeId "auto" (an LLM
//     classifier approves calls), which a Qwen profile must check or change before a prompt.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "adapters/acp/acp_client.hpp"
#include "adapters/adapter.hpp"
#include "adapters/session.hpp"

namespace mh::adapters::acp {

// A call seam of the vendor's own, before ACP's permission: a hook inside the agent that asks the
// run over the plan's hook channel (one request line, one answer line) with the call's real input.
// ACP's permission request for a call the hook presented is then the second gate, answered at once
// from the hook's verdict (acp::Client::presented_at_seam / decided_at_seam).
struct HookSeam {
  // One hook-channel request read as the call it presents (seam hook), or why it cannot be
  // governed (answered with a deny carrying that reason).
  std::function<std::variant<ToolCall, std::string>(const json::value& request)> read_request;
  // The answer line for a decision (no newline).
  std::function<std::string(const proto::Decision& decision)> answer_line;
  // The refusal of a replace whose input is not a JSON object (the vendor's tools take objects);
  // empty: any input is delivered.
  std::string replace_needs_object;
};

struct Profile {
  // The adapter's id: session.started.adapter, and the vendor's name in the run's failures.
  std::string vendor;
  // The vendor's capability table: steer and permission_set are refused with its reasons.
  const proto::CapabilityTable* capabilities = nullptr;
  // The hook seam beside ACP's permission; nullopt: the permission request is the only gate.
  std::optional<HookSeam> hook_seam;
  // What the agent does not report over ACP and the plan knows (the model and the one session/new
  // must report, the posture in the vendor's words, the credential, the plugins the launch
  // installs): written into the options the generic part has filled (adapter, cwd, transcript,
  // attestation). Called for live runs and, with an empty spec and plan, for `translate`.
  std::function<void(const RunSpec& spec, const LaunchPlan& plan, ClientOptions& options)> evidence;
};

}  // namespace mh::adapters::acp
