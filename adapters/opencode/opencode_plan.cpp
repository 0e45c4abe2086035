#include "adapters/opencode/opencode_plan.hpp"

#include <fstream>
#include <sstream>

#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/opencode/opencode_plugin.hpp"
#include "adapters/plan_common.hpp"
#include "adapters/registry.hpp"
#include "protocol/digest.hpp"
#include "protocol/json.hpp"

namespace mh::adapters::opencode {

namespace {

// Variables the plan sets besides HOME, PATH, TMPDIR, XDG_CONFIG_HOME and the run marker.
constexpr std::array<std::string_view, 15> kOwnedEnv = {
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
    "OPENCODE_CONFIG",
    "OPENCODE_DISABLE_AUTOUPDATE",
    "OPENCODE_DISABLE_MODELS_FETCH",
    "OPENCODE_DISABLE_PROJECT_CONFIG",
    "OPENCODE_DISABLE_CLAUDE_CODE",
    "OPENCODE_DISABLE_DEFAULT_PLUGINS",
    "OPENCODE_DISABLE_EXTERNAL_SKILLS",
    "OPENCODE_DISABLE_LSP_DOWNLOAD",
    "OPENCODE_DISABLE_SHARE",
    "npm_config_registry",
    kHookSocketEnv,
    kHookDeadlineEnv,
};
// Declared variables that would put rules or plugins beside (or instead of) the generated ones.
constexpr std::array<std::string_view, 3> kSeamBreakers = {"OPENCODE_CONFIG_CONTENT", "OPENCODE_CONFIG_DIR",
                                                           "OPENCODE_PERMISSION"};

std::optional<std::string> read_small_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  if (text.str().size() > (1u << 20)) return std::nullopt;
  return text.str();
}

// The seam plugin as the launch declares it: metaharness installs it into every run, so it is
// part of the declared plugin set the hermetic floor holds session.started.plugins to (H1a), as
// the reference's installed plugins are. Its digest is the plugin tree digest (reference §2.5) of
// the plugin directory, which holds only this file.
proto::InstalledPlugin seam_plugin(const std::filesystem::path& plugin_dir) {
  const std::string tree = std::string(kPluginFile) + " " + proto::sha256_hex(plugin_source()) + "\n";
  return proto::InstalledPlugin{
      .name = std::string(kPluginName),
      .source = "metaharness (built in: opencode's call seam)",
      .installed_at = (plugin_dir / std::string(kPluginFile)).string(),
      .digest = proto::sha256_hex(tree),
      .loaded_by =
          "opencode loads every file in $XDG_CONFIG_HOME/opencode/plugin at start (the plan's own file, "
          "written fresh); its tool.execute.before hook then asks the run before every call, which is "
          "how the run sees it loaded"};
}

}  // namespace

std::string config_json(const ModelEndpoint& endpoint, std::string_view model, bool ask_every_call) {
  std::string base = endpoint.base_url;
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  json::object provider{// Bundled in the binary: no install is attempted for it.
                        {"npm", "@ai-sdk/anthropic"},
                        {"name", "metaharness"},
                        {"options", json::object{{"baseURL", base + "/v1"}, {"apiKey", endpoint.token}}},
                        {"models", json::object{{model, json::object{{"name", model}}}}}};
  std::string qualified = std::string(kProviderId) + "/" + std::string(model);
  json::object config{{"provider", json::object{{kProviderId, std::move(provider)}}},
                      {"model", qualified},
                      // The session title is asked of the small model: the same endpoint, never a hosted default.
                      {"small_model", qualified},
                      // A reject otherwise ends the whole turn; with it the model reads the refusal and goes on.
                      {"experimental", json::object{{"continue_loop_on_deny", true}}},
                      {"autoupdate", false},
                      {"share", "disabled"},
                      // No MCP server: nothing reaches out but the model endpoint.
                      {"mcp", json::object{}}};
  // Every call of every tool asks over ACP before its side effect (observed: bash, write, read,
  // edit, glob, grep, todowrite); without it nothing asks.
  if (ask_every_call) config["permission"] = "ask";
  return protocol::canonical_json(config);
}

std::variant<LaunchPlan, LaunchRefusal> make_plan(const Adapter& adapter, const HostConfig& config, const RunSpec& spec,
                                                  const RunPaths& paths) {
  VendorRules rules{.binary = configured_binary(config, "opencode", default_binary(config.vendor_dir)),
                    .config_env = "XDG_CONFIG_HOME",
                    .config_home = "xdg/config",
                    .owned_env = kOwnedEnv,
                    .seam_breakers = kSeamBreakers,
                    .seam_breaker_effect = "would put configuration, rules or plugins beside the generated ones",
                    .vendor_options = {},
                    .own_env_summary =
                        "XDG_DATA_HOME, XDG_CACHE_HOME, XDG_STATE_HOME, OPENCODE_CONFIG, the "
                        "OPENCODE_DISABLE_* switches, a dead npm registry, the hook channel",
                    .credential_detail = "in the generated config file, mode 0600",
                    .version_source = "initialize (agentInfo.version)"};
  auto drafted = common_plan(adapter, spec, paths, rules);
  auto* draft = std::get_if<PlanDraft>(&drafted);
  if (!draft) return std::get<LaunchRefusal>(std::move(drafted));

  // The plugin's package, installed once on the host: without it in the config dir, opencode
  // waits ~2.5 minutes at start for an npm install that cannot succeed offline.
  const std::filesystem::path package = plugin_package_dir(config.vendor_dir);
  auto manifest = read_small_file(package / "package.json");
  auto lock = read_small_file(package / "package-lock.json");
  std::error_code ec;
  if (!manifest || !lock || !std::filesystem::is_directory(package / "node_modules/@opencode-ai/plugin", ec))
    return LaunchRefusal{{},
                         "opencode's plugin package (@opencode-ai/plugin, for the call seam) is not installed at " +
                             package.string() + " (run ./run setup, or metaharness vendor install)"};

  LaunchPlan& p = draft->plan;
  const std::filesystem::path scratch = std::filesystem::absolute(paths.scratch);
  const std::filesystem::path& work = draft->scratch.work;
  const std::filesystem::path xdg = draft->scratch.config_home.parent_path();
  const std::filesystem::path config_dir = draft->scratch.config_home / "opencode";
  // In a directory of the plan's own: only those are visible inside the run's sandbox.
  const std::filesystem::path config_file = scratch / "opencode" / "opencode.json";

  p.args = {"acp", "--cwd", work.string()};
  p.directories.insert(p.directories.end(), {config_file.parent_path(), config_dir, config_dir / "plugin", xdg / "data",
                                             xdg / "cache", xdg / "state"});
  const std::string model = spec.model.value_or(std::string(kDefaultModel));
  // 0600: it carries the run's token.
  p.files.push_back(ScratchFile{config_file, config_json(*spec.model_endpoint, model, !spec.deny_only), 0600});
  p.files.push_back(ScratchFile{config_dir / "plugin" / std::string(kPluginFile), std::string(plugin_source()), 0644});
  p.attestation.installed_plugins.push_back(seam_plugin(config_dir / "plugin"));
  // The manifest and lock copied (opencode reads them to judge its install in sync), the
  // packages linked: a read-only tree shared by every run.
  p.files.push_back(ScratchFile{config_dir / "package.json", *manifest, 0644});
  p.files.push_back(ScratchFile{config_dir / "package-lock.json", *lock, 0644});
  p.links.push_back(ScratchLink{config_dir / "node_modules", package / "node_modules"});

  p.hook_channel = HookChannel{std::string(kHookSocketEnv), "@metaharness/hook/" + spec.run_id};
  // The plugin must outlast the decision deadline, so a deny for silence is the run's.
  const std::uint64_t deadline_s = (spec.decision_deadline_ms + 999) / 1000;
  const std::uint64_t plugin_gives_up_s = deadline_s + 20;
  for (auto [name, value] : std::initializer_list<std::pair<std::string_view, std::string>>{
           {"XDG_DATA_HOME", (xdg / "data").string()},  // its sessions database and log
           {"XDG_CACHE_HOME", (xdg / "cache").string()},
           {"XDG_STATE_HOME", (xdg / "state").string()},
           {"OPENCODE_CONFIG", config_file.string()},
           {"OPENCODE_DISABLE_AUTOUPDATE", "1"},
           {"OPENCODE_DISABLE_MODELS_FETCH", "1"},
           {"OPENCODE_DISABLE_PROJECT_CONFIG", "1"},
           {"OPENCODE_DISABLE_CLAUDE_CODE", "1"},
           {"OPENCODE_DISABLE_DEFAULT_PLUGINS", "1"},
           {"OPENCODE_DISABLE_EXTERNAL_SKILLS", "1"},
           {"OPENCODE_DISABLE_LSP_DOWNLOAD", "1"},
           {"OPENCODE_DISABLE_SHARE", "1"},
           {"npm_config_registry", std::string(kDeadRegistry)},
           {kHookSocketEnv, p.hook_channel->address},
           {kHookDeadlineEnv, std::to_string(plugin_gives_up_s)},
       })
    p.env.emplace_back(std::string(name), std::move(value));

  using proto::HermeticRow;
  auto& a = p.attestation;
  a.imposed.insert(
      a.imposed.end(),
      {
          {HermeticRow::h1a, "XDG_CONFIG_HOME=" + draft->scratch.config_home.string() +
                                 " (fresh): the only plugin is metaharness's seam, declared in installed_plugins; "
                                 "OPENCODE_DISABLE_DEFAULT_PLUGINS=1"},
          {HermeticRow::h2, "the only configuration is the generated " + config_file.string() +
                                "; OPENCODE_DISABLE_PROJECT_CONFIG=1 (no project opencode.json or .opencode dir)"},
          {HermeticRow::h5, "the generated config configures no MCP server (mcp = {})"},
          {HermeticRow::h8, "the seam plugin's tool.execute.before decides every call and fails closed"},
      });
  if (spec.cwd)
    a.unavailable.push_back({HermeticRow::h11, "the operator named the working directory " + *spec.cwd +
                                                   ": opencode may read an AGENTS.md there, and does not report it"});
  else
    a.imposed.push_back({HermeticRow::h11,
                         "the work dir is a fresh scratch directory; OPENCODE_DISABLE_CLAUDE_CODE=1 "
                         "and the scratch HOME holds no AGENTS.md or CLAUDE.md"});
  a.ambient_inputs = {
      "no network isolation beyond the dead npm registry and the switched-off fetches: opencode's webfetch tool "
      "reaches the network when a call of it is allowed",
      "opencode writes a file after an approved edit even when the client refuses its fs/write_text_file notice "
      "(observed on 1.18.33): the refusal is recorded, the seam's decision is what gates the write"};
  if (spec.deny_only)
    a.ambient_inputs.push_back(
        "deny-only: no \"permission\": \"ask\" rule; opencode's own default rules decide every call the seam does "
        "not deny, and any permission they ask is rejected (no one else can grant it)");
  note_observe_mode(spec, a.ambient_inputs,
                    "observe mode answers every call with allow, delivered as abstain under the deny-only policy: "
                    "opencode's own default rules decide every call",
                    "observe mode allows every call at the seam, and the allow grants: the ACP permission that follows "
                    "is answered allow_once");
  p.notes = {"the seam plugin gives up (denying) after " + std::to_string(plugin_gives_up_s) +
             " s; permission rules: " + (spec.deny_only ? "opencode's defaults (deny-only)" : "ask for every tool")};
  return finish_plan(std::move(*draft), spec);
}

}  // namespace mh::adapters::opencode
