#include "adapters/opencode/opencode_profile.hpp"

#include "adapters/acp/acp_session.hpp"
#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/opencode/opencode_plan.hpp"
#include "adapters/opencode/opencode_plugin.hpp"

namespace mh::adapters::opencode {

namespace {

void evidence(const RunSpec& spec, const LaunchPlan& plan, acp::ClientOptions& o) {
  proto::ev::SessionStarted& s = o.started;
  if (spec.model_endpoint) {
    s.model = spec.model.value_or(std::string(kDefaultModel));
    o.expected_model = std::string(kProviderId) + "/" + *s.model;
  }
  if (plan.adapter.empty()) return;
  s.permission_mode = spec.deny_only ? "opencode defaults (deny-only)" : "ask";
  // ACP reports no credential: this is the plan's. As the other vendors' "none" under the run's
  // endpoint, it names no API key (H4): the only credential is the per-run endpoint token,
  // which the generated provider config carries, and the scratch data dir holds no opencode login.
  s.credential_source = "none (the run's endpoint token only, in the generated provider config)";
  // ACP reports no plugin list either: this is the plan's own, the seam plugin it installs and
  // declares in the attestation's installed_plugins (H1a reads the one against the other).
  s.plugins =
      std::vector<proto::PluginRef>{proto::PluginRef{std::string(kPluginName), std::string(kPluginFile), std::nullopt}};
}

}  // namespace

const acp::Profile& profile() {
  static const acp::Profile p{
      .vendor = "opencode",
      .capabilities = &capabilities(),
      .hook_seam =
          acp::HookSeam{.read_request = &read_seam_request,
                        .answer_line = &seam_answer,
                        .replace_needs_object = "an opencode tool's arguments are a JSON object: replace needs an "
                                                "object input"},
      .evidence = &evidence,
  };
  return p;
}

std::unique_ptr<AdapterSession> make_session(const RunSpec& spec, const LaunchPlan& plan, bool offline) {
  return acp::make_session(profile(), spec, plan, offline);
}

}  // namespace mh::adapters::opencode
