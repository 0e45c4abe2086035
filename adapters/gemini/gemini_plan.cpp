#include "adapters/gemini/gemini_plan.hpp"

#include "adapters/gemini/gemini_adapter.hpp"
#include "adapters/plan_common.hpp"
#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "protocol/json.hpp"

namespace mh::adapters::gemini {

namespace {

// Variables the plan sets besides HOME, PATH, TMPDIR, GEMINI_CLI_HOME and the run marker.
constexpr std::array<std::string_view, 8> kOwnedEnv = {
    "GEMINI_API_KEY",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_CLI_NO_RELAUNCH",
    "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
    "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
    "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
    "GEMINI_TELEMETRY_ENABLED",
    "GEMINI_MODEL",
};
// Declared variables that would put settings, instructions or another backend beside the plan's.
constexpr std::array<std::string_view, 8> kSeamBreakers = {"GEMINI_CLI_TRUST_WORKSPACE",
                                                           "GEMINI_SYSTEM_MD",
                                                           "GOOGLE_GENAI_USE_VERTEXAI",
                                                           "GOOGLE_GENAI_USE_GCA",
                                                           "GOOGLE_API_KEY",
                                                           "GOOGLE_CLOUD_PROJECT",
                                                           "GEMINI_SANDBOX",
                                                           "GEMINI_CLI_IDE_SERVER_PORT"};

// The vendor options a spec may give (`--vendor-option KEY=N`): max_attempts is Gemini CLI's
// general.maxAttempts, how many times it sends a model request that failed retryably (a 429, a
// 5xx) before the prompt fails; its own default and ceiling is 10, with a backoff from 5 s to 30 s.
constexpr std::array<std::string_view, 1> kVendorOptions = {"max_attempts"};

}  // namespace

std::string settings_json(const std::map<std::string, std::string>& vendor_options) {
  // No update check and no update nag (both fetch from the npm registry).
  json::object general{{"enableAutoUpdate", false}, {"enableAutoUpdateNotification", false}};
  if (auto it = vendor_options.find("max_attempts"); it != vendor_options.end())
    // A non-negative integer (common_plan checked its digits); Gemini CLI takes at most 10 itself.
    general["maxAttempts"] = it->second.size() > 2 ? 10 : std::stoi(it->second);
  json::object settings{
      {"general", std::move(general)},
      // Usage statistics are on by default: Clearcut logging to play.googleapis.com (observed as a
      // DNS query at start without this, none with it).
      {"privacy", json::object{{"usageStatisticsEnabled", false}}},
      {"telemetry", json::object{{"enabled", false}}},
      // No MCP server: nothing reaches out but the model endpoint.
      {"mcpServers", json::object{}},
  };
  return protocol::canonical_json(settings);
}

std::string_view admin_policy_toml() {
  static constexpr std::string_view kPolicy =
      "# Written by metaharness: every call of every tool asks (over ACP, session/request_permission).\n"
      "[[rule]]\n"
      "toolName = \"*\"\n"
      "decision = \"ask_user\"\n"
      "priority = 999\n";
  return kPolicy;
}

std::variant<LaunchPlan, LaunchRefusal> make_plan(const Adapter& adapter, const HostConfig& config, const RunSpec& spec,
                                                  const RunPaths& paths) {
  VendorRules rules{.binary = configured_binary(config, "gemini", descriptor().default_binary(config.vendor_dir)),
                    .config_env = "GEMINI_CLI_HOME",
                    .config_home = "home",
                    .owned_env = kOwnedEnv,
                    .seam_breakers = kSeamBreakers,
                    .seam_breaker_effect =
                        "would put settings, instructions or another model backend beside the "
                        "generated ones",
                    .vendor_options = kVendorOptions,
                    .own_env_summary =
                        "GEMINI_API_KEY (the run's endpoint token), GOOGLE_GEMINI_BASE_URL, GEMINI_CLI_NO_RELAUNCH, "
                        "the system settings, system defaults and trusted-folders paths, GEMINI_TELEMETRY_ENABLED",
                    .credential_detail = "as GEMINI_API_KEY, which the gateway auth type sends as x-goog-api-key",
                    .version_source = "initialize (agentInfo.version)"};
  auto drafted = common_plan(adapter, spec, paths, rules);
  auto* draft = std::get_if<PlanDraft>(&drafted);
  if (!draft) return std::get<LaunchRefusal>(std::move(drafted));

  LaunchPlan& p = draft->plan;
  const std::filesystem::path scratch = std::filesystem::absolute(paths.scratch);
  const std::filesystem::path gemini_dir = draft->scratch.config_home / ".gemini";
  // In a directory of the plan's own: only those are visible inside the run's sandbox. Nothing
  // is written at the system paths: Gemini CLI then reads no system settings, defaults or trust.
  const std::filesystem::path own = scratch / "gemini";
  const std::filesystem::path policy = own / "admin-policy.toml";
  const std::string model = spec.model.value_or(std::string(kDefaultModel));

  p.args = {"--acp", "--model", model, "--approval-mode", "default", "--extensions", "none"};
  p.directories.insert(p.directories.end(), {gemini_dir, own});
  p.files.push_back(ScratchFile{gemini_dir / "settings.json", settings_json(spec.vendor_options), 0644});
  // Deny-only: no policy of ours; Gemini CLI's default rules decide every call the run does not deny.
  if (!spec.deny_only) {
    p.args.insert(p.args.end(), {"--admin-policy", policy.string()});
    p.files.push_back(ScratchFile{policy, std::string(admin_policy_toml()), 0644});
  }

  std::string base = spec.model_endpoint->base_url;
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  for (auto [name, value] : std::initializer_list<std::pair<std::string_view, std::string>>{
           {"GEMINI_API_KEY", spec.model_endpoint->token},
           {"GOOGLE_GEMINI_BASE_URL", base},
           // One process: without it the CLI relaunches itself as a child node with a larger heap.
           {"GEMINI_CLI_NO_RELAUNCH", "true"},
           {"GEMINI_CLI_SYSTEM_SETTINGS_PATH", (own / "no-system-settings.json").string()},
           {"GEMINI_CLI_SYSTEM_DEFAULTS_PATH", (own / "no-system-defaults.json").string()},
           {"GEMINI_CLI_TRUSTED_FOLDERS_PATH", (own / "no-trusted-folders.json").string()},
           {"GEMINI_TELEMETRY_ENABLED", "false"},
           {"GEMINI_MODEL", model},
       })
    p.env.emplace_back(std::string(name), std::move(value));

  using proto::HermeticRow;
  auto& a = p.attestation;
  a.imposed.insert(
      a.imposed.end(),
      {
          {HermeticRow::h1a, "GEMINI_CLI_HOME=" + draft->scratch.config_home.string() +
                                 " (fresh): no extension installed, and --extensions none loads none"},
          {HermeticRow::h2, "the only settings are the generated " + (gemini_dir / "settings.json").string() +
                                "; the system settings, system defaults and trusted-folders paths name files that do "
                                "not exist; the work dir is untrusted, so no workspace settings or hooks load"},
          {HermeticRow::h5,
           "the generated settings configure no MCP server (mcpServers = {}) and session/new "
           "names none"},
          {HermeticRow::h8, (spec.deny_only ? std::string("Gemini CLI's default policy rules")
                                            : "the admin policy " + policy.string() + ", every tool asking") +
                                "; each call that asks is decided at its ACP permission request, which fails closed "
                                "(anything but an allow is cancel)"},
      });
  if (spec.cwd)
    a.unavailable.push_back({HermeticRow::h11, "the operator named the working directory " + *spec.cwd +
                                                   ": Gemini CLI may read a GEMINI.md there, and does not report it"});
  else
    a.imposed.push_back({HermeticRow::h11,
                         "the work dir is a fresh scratch directory and the scratch home holds no "
                         "GEMINI.md"});
  a.ambient_inputs = {
      "no network isolation beyond the switched-off usage statistics, telemetry and update checks: Gemini CLI's "
      "web_fetch and google_web_search tools reach the network when a call of them is allowed",
      "Gemini CLI's ACP mode fires no BeforeTool hook: a deny's reason does not reach the model (it reads \"Tool ... "
      "was canceled by the user.\"), and the run warns DENY_REASON_NOT_DELIVERED",
      "Gemini CLI reports no tool input over ACP: calls are decided by tool name, with input null"};
  if (spec.deny_only)
    a.ambient_inputs.push_back(
        "deny-only: no admin policy; Gemini CLI's default rules decide every call (its read tools run unasked), and "
        "any permission they ask is answered cancel (no one else can grant it)");
  note_observe_mode(spec, a.ambient_inputs,
                    "observe mode answers every call with allow, delivered as abstain under the deny-only policy: "
                    "every call is then cancelled",
                    "observe mode allows every call, answered proceed_once");
  p.notes = {"model " + model + " on the Gemini wire at " + base + "; permission rules: " +
             (spec.deny_only ? "Gemini CLI's defaults (deny-only)" : "every tool asks (admin policy)")};
  return finish_plan(std::move(*draft), spec);
}

}  // namespace mh::adapters::gemini
