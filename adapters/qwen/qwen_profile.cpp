#include "adapters/qwen/qwen_profile.hpp"

#include "adapters/acp/acp_session.hpp"
#include "adapters/qwen/qwen_adapter.hpp"
#include "adapters/qwen/qwen_plan.hpp"

namespace mh::adapters::qwen {

namespace {

void evidence(const RunSpec& spec, const LaunchPlan& plan, acp::ClientOptions& o) {
  proto::ev::SessionStarted& s = o.started;
  // session/new reports models.currentModelId in Qwen Code's own spelling
  // ("$runtime|anthropic|<model>(anthropic)"), not the model's name: not compared.
  if (spec.model_endpoint) s.model = spec.model.value_or(std::string(kDefaultModel));
  if (plan.adapter.empty()) return;
  s.permission_mode =
      spec.deny_only ? "default (Qwen Code's own rules: deny-only)" : "default, every tool ask (permissions.ask)";
  // ACP reports no credential: this is the plan's. It names no API key (H4): the only credential
  // is the per-run endpoint token.
  s.credential_source = "none (the run's endpoint token only, through the anthropic auth type)";
  // Qwen Code reports no plugin, MCP server, output style or context file over ACP: null.
}

}  // namespace

const acp::Profile& profile() {
  static const acp::Profile p{
      .vendor = "qwen",
      .capabilities = &capabilities(),
      .hook_seam = std::nullopt,
      .evidence = &evidence,
  };
  return p;
}

std::unique_ptr<AdapterSession> make_session(const RunSpec& spec, const LaunchPlan& plan, bool offline) {
  return acp::make_session(profile(), spec, plan, offline);
}

}  // namespace mh::adapters::qwen
