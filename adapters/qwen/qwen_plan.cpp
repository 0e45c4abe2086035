#include "adapters/qwen/qwen_plan.hpp"

#include "adapters/plan_common.hpp"
#include "adapters/qwen/qwen_adapter.hpp"
#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "protocol/json.hpp"

namespace mh::adapters::qwen {

namespace {

// Variables the plan sets besides HOME, PATH, TMPDIR, QWEN_HOME and the run marker.
constexpr std::array<std::string_view, 7> kOwnedEnv = {
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_MODEL",
    "QWEN_CODE_NO_RELAUNCH",
    "QWEN_CODE_SYSTEM_SETTINGS_PATH",
    "QWEN_CODE_SYSTEM_DEFAULTS_PATH",
    "QWEN_CODE_TRUSTED_FOLDERS_PATH",
};
// Declared variables that would put settings, instructions or another model backend beside the plan's.
constexpr std::array<std::string_view, 6> kSeamBreakers = {"QWEN_SYSTEM_MD",  "OPENAI_API_KEY",
                                                           "OPENAI_BASE_URL", "QWEN_SANDBOX",
                                                           "GEMINI_API_KEY",  "QWEN_CODE_IDE_WORKSPACE_PATH"};

// Every tool asks: Qwen Code's rule names (the Claude-style aliases and its own tool names; a "*"
// rule does not match its read tools, observed on 0.24.4).
constexpr std::array<std::string_view, 21> kAskRules = {"Read",
                                                        "Glob",
                                                        "Grep",
                                                        "Bash",
                                                        "Edit",
                                                        "Write",
                                                        "WebFetch",
                                                        "read_file",
                                                        "glob",
                                                        "grep_search",
                                                        "run_shell_command",
                                                        "write_file",
                                                        "edit",
                                                        "web_fetch",
                                                        "todo_write",
                                                        "read_many_files",
                                                        "save_memory",
                                                        "list_directory",
                                                        "Skill",
                                                        "Agent",
                                                        "task"};

// The vendor options a spec may give (`--vendor-option KEY=N`): max_retries is Qwen Code's
// model.generationConfig.maxRetries, how many times it retries a model request the endpoint
// throttled (429) or failed (5xx) before the prompt fails; its own default is 10, the first after
// 60 s and each later one up to 5 minutes (a throttled run looks stalled for most of an hour).
constexpr std::array<std::string_view, 1> kVendorOptions = {"max_retries"};

}  // namespace

std::string settings_json(std::string_view model, bool ask_every_call,
                          const std::map<std::string, std::string>& vendor_options) {
  json::object model_settings{{"name", model}};
  if (auto it = vendor_options.find("max_retries"); it != vendor_options.end())
    // A non-negative integer (common_plan checked its digits), bounded as Qwen Code's setting is.
    model_settings["generationConfig"] =
        json::object{{"maxRetries", it->second.size() > 9 ? std::int64_t{2147483647} : std::stoll(it->second)}};
  json::object settings{
      // Side requests that carry tools (they would take a scenario's steps and reach the model
      // on their own): managed memory extraction, its dream, follow-up suggestions.
      {"memory", json::object{{"enableManagedAutoMemory", false}, {"enableManagedAutoDream", false}}},
      {"ui", json::object{{"enableFollowupSuggestions", false}}},
      {"privacy", json::object{{"usageStatisticsEnabled", false}}},
      {"telemetry", json::object{{"enabled", false}}},
      {"general", json::object{{"enableAutoUpdate", false}, {"disableAutoUpdate", true}}},
      {"tools", json::object{{"approvalMode", "default"}}},
      {"model", std::move(model_settings)},
      {"mcpServers", json::object{}},
  };
  if (ask_every_call) {
    json::array ask;
    for (auto rule : kAskRules)
      ask.emplace_back(rule);
    settings["permissions"] = json::object{{"ask", std::move(ask)}};
  }
  return protocol::canonical_json(settings);
}

std::variant<LaunchPlan, LaunchRefusal> make_plan(const Adapter& adapter, const HostConfig& config, const RunSpec& spec,
                                                  const RunPaths& paths) {
  VendorRules rules{.binary = configured_binary(config, "qwen", descriptor().default_binary(config.vendor_dir)),
                    .config_env = "QWEN_HOME",
                    .config_home = "home/.qwen",
                    .owned_env = kOwnedEnv,
                    .seam_breakers = kSeamBreakers,
                    .seam_breaker_effect =
                        "would put settings, instructions or another model backend beside the "
                        "generated ones",
                    .vendor_options = kVendorOptions,
                    .own_env_summary =
                        "ANTHROPIC_API_KEY (the run's endpoint token), ANTHROPIC_BASE_URL, ANTHROPIC_MODEL, "
                        "QWEN_CODE_NO_RELAUNCH, the system settings, system defaults and trusted-folders paths",
                    .credential_detail = "as ANTHROPIC_API_KEY, which --auth-type anthropic sends to the endpoint",
                    .version_source = "initialize (agentInfo.version)"};
  auto drafted = common_plan(adapter, spec, paths, rules);
  auto* draft = std::get_if<PlanDraft>(&drafted);
  if (!draft) return std::get<LaunchRefusal>(std::move(drafted));

  LaunchPlan& p = draft->plan;
  const std::filesystem::path scratch = std::filesystem::absolute(paths.scratch);
  const std::filesystem::path own = scratch / "qwen";
  const std::filesystem::path settings = draft->scratch.config_home / "settings.json";
  const std::string model = spec.model.value_or(std::string(kDefaultModel));

  p.args = {"--acp", "--auth-type", "anthropic", "--approval-mode", "default", "--model", model};
  p.directories.push_back(own);
  p.files.push_back(ScratchFile{settings, settings_json(model, !spec.deny_only, spec.vendor_options), 0644});

  std::string base = spec.model_endpoint->base_url;
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  for (auto [name, value] : std::initializer_list<std::pair<std::string_view, std::string>>{
           {"ANTHROPIC_API_KEY", spec.model_endpoint->token},
           {"ANTHROPIC_BASE_URL", base},
           {"ANTHROPIC_MODEL", model},
           {"QWEN_CODE_NO_RELAUNCH", "true"},
           {"QWEN_CODE_SYSTEM_SETTINGS_PATH", (own / "no-system-settings.json").string()},
           {"QWEN_CODE_SYSTEM_DEFAULTS_PATH", (own / "no-system-defaults.json").string()},
           {"QWEN_CODE_TRUSTED_FOLDERS_PATH", (own / "no-trusted-folders.json").string()},
       })
    p.env.emplace_back(std::string(name), std::move(value));

  using proto::HermeticRow;
  auto& a = p.attestation;
  a.imposed.insert(
      a.imposed.end(),
      {
          {HermeticRow::h1a, "QWEN_HOME=" + draft->scratch.config_home.string() + " (fresh): no extension installed"},
          {HermeticRow::h2, "the only settings are the generated " + settings.string() +
                                "; the system settings, system defaults and trusted-folders paths name files that do "
                                "not exist"},
          {HermeticRow::h5,
           "the generated settings configure no MCP server (mcpServers = {}) and session/new "
           "names none"},
          {HermeticRow::h8, (spec.deny_only ? std::string("Qwen Code's default rules (approval mode default)")
                                            : std::string("permissions.ask names every tool (approval mode default)")) +
                                "; each call that asks is decided at its ACP permission request, which fails closed "
                                "(anything but an allow is cancel)"},
      });
  if (spec.cwd)
    a.unavailable.push_back({HermeticRow::h11, "the operator named the working directory " + *spec.cwd +
                                                   ": Qwen Code may read a QWEN.md there, and does not report it"});
  else
    a.imposed.push_back(
        {HermeticRow::h11, "the work dir is a fresh scratch directory and the scratch home holds no QWEN.md"});
  a.ambient_inputs = {
      "no network isolation beyond the switched-off usage statistics, telemetry and update checks: Qwen Code's "
      "web_fetch tool reaches the network when a call of it is allowed",
      "Qwen Code's PreToolUse hooks fire only after its permission is granted (and fail open on a hook error): a "
      "deny's reason does not reach the model (it reads Qwen's own text), and the run warns "
      "DENY_REASON_NOT_DELIVERED"};
  if (spec.deny_only)
    a.ambient_inputs.push_back(
        "deny-only: no permissions.ask rule; Qwen Code's default rules decide every call (its read tools run "
        "unasked), and any permission they ask is answered cancel (no one else can grant it)");
  note_observe_mode(spec, a.ambient_inputs,
                    "observe mode answers every call with allow, delivered as abstain under the deny-only policy: "
                    "every call that asks is then cancelled",
                    "observe mode allows every call, answered proceed_once");
  p.notes = {"model " + model + " on the Anthropic wire at " + base + "; permission rules: " +
             (spec.deny_only ? "Qwen Code's defaults (deny-only)" : "every tool asks (permissions.ask)")};
  return finish_plan(std::move(*draft), spec);
}

}  // namespace mh::adapters::qwen
