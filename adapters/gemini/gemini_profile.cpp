#include "adapters/gemini/gemini_profile.hpp"

#include <cctype>

#include "adapters/acp/acp_session.hpp"
#include "adapters/gemini/gemini_adapter.hpp"
#include "adapters/gemini/gemini_plan.hpp"

namespace mh::adapters::gemini {

namespace {

// Strips a "<sep><digits>" tail; false where the tail is not one.
bool strip_number(std::string_view& s) {
  std::size_t end = s.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(s[end - 1])))
    --end;
  if (end == s.size() || end == 0 || (s[end - 1] != '-' && s[end - 1] != '_')) return false;
  s = s.substr(0, end - 1);
  return true;
}

void evidence(const RunSpec& spec, const LaunchPlan& plan, acp::ClientOptions& o) {
  proto::ev::SessionStarted& s = o.started;
  if (spec.model_endpoint) {
    s.model = spec.model.value_or(std::string(kDefaultModel));
    // session/new reports models.currentModelId: another one means the launch's model was not taken.
    o.expected_model = *s.model;
  }
  o.tool_of_call = &tool_of_call;
  if (plan.adapter.empty()) return;
  // session/new reports the session's mode (currentModeId "default", "Prompts for approval"); the
  // posture in force is the policy's, which the plan sets.
  s.permission_mode =
      spec.deny_only ? "default (Gemini CLI's own rules: deny-only)" : "default, every tool ask_user (admin policy)";
  // ACP reports no credential: this is the plan's. It names no API key (H4): the only credential
  // is the per-run endpoint token, which Gemini CLI's gateway auth type sends to the endpoint.
  s.credential_source = "none (the run's endpoint token only, through the gateway auth type)";
  // Gemini CLI reports no plugin, no MCP server and no context file over ACP; the plan loads no
  // extension (--extensions none, a fresh home) and configures no MCP server, which its attestation
  // says (H1a, H5 launch claims). The lists stay null: unknown from the record.
}

}  // namespace

std::optional<std::string> tool_of_call(std::string_view call_id) {
  if (auto at = call_id.find("__"); at != std::string_view::npos && at > 0) return std::string(call_id.substr(0, at));
  // "<tool>-<ms>-<n>" (the ACP session's own) or "<tool>_<ms>_<n>" (the chat's).
  std::string_view s = call_id;
  if (strip_number(s) && strip_number(s) && !s.empty()) return std::string(s);
  return std::nullopt;
}

const acp::Profile& profile() {
  static const acp::Profile p{
      .vendor = "gemini",
      .capabilities = &capabilities(),
      .hook_seam = std::nullopt,
      .evidence = &evidence,
  };
  return p;
}

std::unique_ptr<AdapterSession> make_session(const RunSpec& spec, const LaunchPlan& plan, bool offline) {
  return acp::make_session(profile(), spec, plan, offline);
}

}  // namespace mh::adapters::gemini
