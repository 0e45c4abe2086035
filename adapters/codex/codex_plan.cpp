// The Codex launch plan: `codex app-server` with a scratch CODEX_HOME whose config.toml names the
// model endpoint, switches off what nothing could gate, pins the project untrusted and installs
// the PreToolUse hook. What every vendor's plan shares is common_plan's (adapters/plan_common).
#include <sstream>

#include "adapters/codex/codex_internal.hpp"
#include "adapters/plan_common.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters::codex {

namespace {

constexpr std::string_view kHookSocketEnv = "METAHARNESS_HOOK_SOCKET";
constexpr std::string_view kHookDeadlineEnv = "METAHARNESS_HOOK_DEADLINE_S";
constexpr std::string_view kTokenEnv = "METAHARNESS_MODEL_TOKEN";

// Variables the plan sets besides HOME, PATH, TMPDIR, CODEX_HOME and the run marker.
constexpr std::array<std::string_view, 3> kOwnedEnv = {kHookSocketEnv, kHookDeadlineEnv, kTokenEnv};

std::string toml_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out + "\"";
}

std::string config_toml(const RunSpec& spec, const std::filesystem::path& work, const std::filesystem::path& hook,
                        std::uint64_t codex_timeout_s) {
  std::ostringstream toml;
  toml << "# Written by metaharness for run " << spec.run_id << ": one governed Codex run.\n"
       << "model = " << toml_string(spec.model.value_or(std::string(kDefaultModel))) << "\n"
       << "model_provider = \"metaharness\"\n"
       << "# Hosted web search runs on the provider's side, where nothing can gate it: off.\n"
       << "web_search = \"disabled\"\n"
       << "# The project root is the working directory itself: no AGENTS.md above it is read (by default\n"
       << "# Codex reads one in every directory from the git root down to the working directory).\n"
       << "project_root_markers = []\n\n"
       << "[features]\n"
       << "# No interactive TTY sessions: write_stdin, which no hook or approval sees, has nothing to write into.\n"
       << "unified_exec_tty = false\n\n"
       << "[model_providers.metaharness]\n"
       << "name = \"metaharness model endpoint\"\n"
       << "base_url = " << toml_string(spec.model_endpoint->base_url + "/v1") << "\n"
       << "wire_api = \"responses\"\n"
       << "env_key = \"" << kTokenEnv << "\"\n";
  for (const auto& [key, value] : spec.vendor_options)
    toml << key << " = " << value << "\n";
  toml << "\n# The project stays untrusted: no project rules or hooks can pre-approve anything, and Codex\n"
       << "# reads no AGENTS.md of it.\n"
       << "[projects." << toml_string(work.string()) << "]\n"
       << "trust_level = \"untrusted\"\n\n"
       << "[[hooks.PreToolUse]]\n"
       << "matcher = \"*\"\n"
       << "[[hooks.PreToolUse.hooks]]\n"
       << "type = \"command\"\n"
       << "command = " << toml_string(hook.string()) << "\n"
       << "timeout = " << codex_timeout_s << "\n";
  return toml.str();
}

}  // namespace

std::variant<LaunchPlan, LaunchRefusal> make_plan(const Adapter& adapter, const HostConfig& config, const RunSpec& spec,
                                                  const RunPaths& paths) {
  VendorRules rules{.binary = configured_binary(config, "codex", default_binary(config.vendor_dir)),
                    .config_env = "CODEX_HOME",
                    .config_home = "codex-home",
                    .owned_env = kOwnedEnv,
                    .seam_breakers = {},
                    .seam_breaker_effect = "",
                    .vendor_options = kVendorOptions,
                    .own_env_summary = "the model token, the hook channel",
                    .credential_detail = "env_key",
                    .version_source = "initialize"};
  auto drafted = common_plan(adapter, spec, paths, rules);
  auto* draft = std::get_if<PlanDraft>(&drafted);
  if (!draft) return std::get<LaunchRefusal>(std::move(drafted));
  std::error_code ec;
  std::filesystem::path hook = configured_binary(config, "codex-hook", {});
  if (hook.empty() || !std::filesystem::is_regular_file(hook, ec))
    return LaunchRefusal{{},
                         "the PreToolUse hook program mh-codex-hook is not at " +
                             (hook.empty() ? std::string("(unknown)") : hook.string()) +
                             " (it is built beside metaharness; set METAHARNESS_CODEX_HOOK_BIN or the config's "
                             "codex_hook)"};
  LaunchPlan& p = draft->plan;
  const std::filesystem::path& work = draft->scratch.work;
  const std::filesystem::path& codex_home = draft->scratch.config_home;

  p.args = {"app-server"};
  p.hook_channel = HookChannel{std::string(kHookSocketEnv), "@metaharness/hook/" + spec.run_id};
  // The hook must outlast the decision deadline (so a deny for silence is ours), and give up
  // before Codex's own hook timeout (which fails open).
  std::uint64_t deadline_s = (spec.decision_deadline_ms + 999) / 1000;
  std::uint64_t hook_gives_up_s = deadline_s + 20;
  std::uint64_t codex_timeout_s = deadline_s + 30;
  p.files.push_back(ScratchFile{codex_home / "config.toml", config_toml(spec, work, hook, codex_timeout_s), 0600});

  p.env.emplace_back(std::string(kTokenEnv), spec.model_endpoint->token);
  p.env.emplace_back(std::string(kHookSocketEnv), p.hook_channel->address);
  p.env.emplace_back(std::string(kHookDeadlineEnv), std::to_string(hook_gives_up_s));

  using proto::HermeticRow;
  auto& a = p.attestation;
  a.imposed.insert(
      a.imposed.end(),
      {
          {HermeticRow::h1a, "CODEX_HOME=" + codex_home.string() + " (a fresh scratch home): no plugin, no rules/"},
          {HermeticRow::h2, "a fresh CODEX_HOME holds only metaharness's config.toml; the project is pinned untrusted"},
          {HermeticRow::h5, "config.toml configures no MCP server"},
          {HermeticRow::h8, "hooks run with their trust bypassed per thread (bypass_hook_trust), never skipped"},
          // Under an operator's --cwd too: Codex reads no AGENTS.md of an untrusted project (its own
          // or above it), and what it did load is checked before the first turn.
          {HermeticRow::h11,
           "the project " + work.string() +
               " is pinned untrusted, and Codex reads no AGENTS.md of an untrusted project; project_root_markers = [] "
               "keeps the project root at the working directory, so none above it is read either; the fresh "
               "CODEX_HOME holds none; and the run stops before its first turn if Codex reports loading any "
               "instruction file (thread/start instructionSources)"},
      });
  if (spec.deny_only)
    a.ambient_inputs = {
        "deny-only: approval policy never; Codex's sandbox and rules decide every call the hook does not deny, "
        "and a sandbox refusal is final (Codex rejects escalations under never)",
        "deny-only: the PreToolUse hook is the only seam for shell commands and patches; mh-codex-hook denies "
        "on its own failures, but Codex fails open if the hook process itself crashes or times out",
        "no network isolation beyond Codex's own sandbox",
        "write_stdin is still offered to the model; with TTY sessions off it has nothing to write into"};
  else
    a.ambient_inputs = {
        "Codex re-runs an accepted command without its sandbox when the sandboxed attempt is denied, with no second "
        "approval (observed on 0.171.0): an allow overrides the read-only and workspace-write postures",
        "no network isolation beyond Codex's own sandbox",
        "write_stdin is still offered to the model; with TTY sessions off it has nothing to write into"};
  // Observe mode allows every call; whether that grants is the deny-only policy's to say.
  note_observe_mode(spec, a.ambient_inputs,
                    "observe mode answers every call with allow, delivered as abstain under the deny-only policy (the "
                    "hook's no opinion): Codex's own sandbox and rules decide every call",
                    "observe mode accepts every approval, and an accept on this wire grants: Codex runs the call, and "
                    "re-runs it without its sandbox if the sandbox refuses it");
  p.notes = {std::string("approval policy ") + (spec.deny_only ? "never (deny-only)" : "untrusted") +
             " per thread; hook timeout " + std::to_string(codex_timeout_s) + " s; the hook gives up (denying) after " +
             std::to_string(hook_gives_up_s) + " s"};
  return finish_plan(std::move(*draft), spec);
}

}  // namespace mh::adapters::codex
