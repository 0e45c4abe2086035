#include "adapters/plan_common.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "adapters/offline.hpp"
#include "adapters/registry.hpp"
#include "adapters/session.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters {

namespace {

// The caller's environment reaches the vendor only through this allowlist (locale and time
// zone); everything else is constructed by the plan.
constexpr std::array<std::string_view, 3> kPassThroughEnv = {"LANG", "LC_ALL", "TZ"};
constexpr std::string_view kRunMarker = "METAHARNESS_RUN";
constexpr std::string_view kPath = "/usr/local/bin:/usr/bin:/bin";

// Declared variables that make something load or run code of the caller's choosing, refused for
// every adapter (a name ending in '*' is a prefix). Why they matter: the vendor, the shells its
// tool calls run and the interpreters those start all read them, as the run's user; and one slip
// that let them reach a privileged program before the drop to the run's user (bwrap, setpriv)
// ran the caller's code as root. The clean environment of those programs (sandbox.hpp) is the
// first guard; this list is the second, at the door.
struct CodeLoadingEnv {
  std::string_view name;
  std::string_view what;
};
constexpr CodeLoadingEnv kCodeLoadingEnv[] = {
    // The dynamic loader and glibc: every program of the run.
    {"LD_*", "is read by the dynamic loader (LD_PRELOAD, LD_AUDIT, LD_LIBRARY_PATH load libraries into every program)"},
    {"GCONV_PATH", "makes glibc load character-conversion modules from a path of the caller's"},
    {"GLIBC_TUNABLES", "changes glibc's behaviour in every program (and has been a way into privileged ones)"},
    {"OPENSSL_CONF", "makes OpenSSL (node's included) read a config that can load an engine or provider"},
    {"OPENSSL_ENGINES", "makes OpenSSL load engines from a path of the caller's"},
    {"OPENSSL_MODULES", "makes OpenSSL load providers from a path of the caller's"},
    // Node: the npm CLIs themselves, or their launchers.
    {"NODE_*", "is read by node (NODE_OPTIONS --require/--import, NODE_PATH, NODE_REPL_EXTERNAL_MODULE load code)"},
    // Bun: a vendor binary may be Bun-compiled.
    {"BUN_*", "is read by Bun (BUN_OPTIONS --preload, BUN_INSPECT*, BUN_BE_BUN run code in a Bun-compiled binary)"},
    // The shells tool calls run.
    {"BASH_ENV", "is a script every non-interactive bash runs first"},
    {"ENV", "is a script sh and interactive bash run first"},
    {"BASH_FUNC_*", "defines exported bash functions, which every bash imports"},
    {"SHELLOPTS", "sets bash options (xtrace with PS4 runs commands) in every bash"},
    {"BASHOPTS", "sets bash options in every bash"},
    {"PROMPT_COMMAND", "is a command bash runs before each prompt"},
    {"PS4", "is expanded (running its command substitutions) by bash's xtrace"},
    {"ZDOTDIR", "names the directory whose startup files zsh runs"},
    // The interpreters tools commonly start.
    {"PYTHONSTARTUP", "is a file interactive python runs first"},
    {"PYTHONPATH", "puts modules of the caller's before python's own"},
    {"PYTHONHOME", "replaces python's standard library"},
    {"PYTHONUSERBASE", "puts a site-packages of the caller's on python's path"},
    {"PYTHONBREAKPOINT", "names a callable python imports and runs at breakpoint()"},
    {"PYTHONINSPECT", "makes python enter its interactive mode after a script"},
    {"PERL5OPT", "adds options (-M modules) to every perl"},
    {"PERL5LIB", "puts modules of the caller's before perl's own"},
    {"PERLLIB", "puts modules of the caller's before perl's own"},
    {"PERL5DB", "is code perl's debugger runs"},
    {"RUBYOPT", "adds options (-r libraries) to every ruby"},
    {"RUBYLIB", "puts libraries of the caller's before ruby's own"},
    {"JAVA_TOOL_OPTIONS", "adds options (-javaagent) to every JVM"},
    {"_JAVA_OPTIONS", "adds options (-javaagent) to every JVM"},
    {"JDK_JAVA_OPTIONS", "adds options (-javaagent) to every java launcher"},
    {"GIT_CONFIG_*", "sets git configuration (core.fsmonitor, core.sshCommand run programs) for every git"},
    {"GIT_EXEC_PATH", "makes git run its subcommands from a path of the caller's"},
};

bool valid_env_name(std::string_view name) {
  auto head = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (name.empty() || !head(name.front())) return false;
  return std::all_of(name.begin() + 1, name.end(), [&](char c) { return head(c) || (c >= '0' && c <= '9'); });
}

LaunchRefusal refuse(std::string message) {
  return LaunchRefusal{{}, std::move(message)};
}

bool listed(std::span<const std::string_view> list, std::string_view name) {
  return std::find(list.begin(), list.end(), name) != list.end();
}

// A declared vendor variable that would take the seam away, or override what the plan owns.
std::optional<std::string> denied_vendor_env(std::string_view name, const VendorRules& rules) {
  if (listed(rules.seam_breakers, name)) return std::string(name) + " " + std::string(rules.seam_breaker_effect);
  const std::array<std::string_view, 5> always_owned = {"HOME", "PATH", "TMPDIR", rules.config_env, kRunMarker};
  if (listed(always_owned, name) || listed(rules.owned_env, name))
    return std::string(name) + " is set by the launch plan itself and cannot be overridden";
  return std::nullopt;
}

std::optional<std::string> refuse_vendor_option(std::string_view adapter, const std::string& key,
                                                const std::string& value, const VendorRules& rules) {
  const std::string id(adapter);
  if (rules.vendor_options.empty()) return "unknown " + id + " vendor option \"" + key + "\"; " + id + " knows none";
  if (!listed(rules.vendor_options, key)) {
    std::string known;
    for (auto k : rules.vendor_options)
      known += (known.empty() ? "" : ", ") + std::string(k);
    return "unknown " + id + " vendor option \"" + key + "\" (known: " + known + ")";
  }
  if (value.empty() || value.find_first_not_of("0123456789") != std::string::npos)
    return id + " vendor option " + key + " must be a non-negative integer, not \"" + value + "\"";
  return std::nullopt;
}

std::optional<LaunchRefusal> refuse_spec(const Adapter& adapter, const RunSpec& spec, const VendorRules& rules) {
  const std::string id(adapter.id());
  if (auto refused = refuse_unhonoured_commands(spec, adapter.capabilities()); !refused.empty())
    return LaunchRefusal{std::move(refused), "the run needs controls the " + id + " adapter cannot honour"};
  if (spec.decisions == proto::DecisionMode::observe && spec.frame)
    return LaunchRefusal{
        {proto::ev::CommandResult{
            "start/tool.decide",
            proto::CommandOutcome::refused(proto::RefusalCode::UNSUPPORTED_CONTROL,
                                           "observe mode allows every call, so a frame would be told to the model and "
                                           "enforced by nothing; use decisions frame (or ask) with a frame")}},
        "observe mode refuses a frame"};
  if (spec.prompt.empty()) return refuse("the run has no prompt");
  if (auto too_long = refuse_deadline(adapter, spec.decision_deadline_ms)) return refuse(*too_long);
  if (!spec.model_endpoint)
    return refuse("no model endpoint: give a scripted scenario (--model-scenario) or an endpoint (--model-endpoint)");
  if (auto refused = refuse_declared_vendor_env(spec.vendor_env)) return refuse(*refused);
  for (const auto& [name, value] : spec.vendor_env)
    if (auto why = denied_vendor_env(name, rules)) return refuse("declared vendor environment refused: " + *why);
  for (const auto& [key, value] : spec.vendor_options)
    if (auto why = refuse_vendor_option(adapter.id(), key, value, rules)) return refuse(*why);
  std::error_code ec;
  if (!std::filesystem::is_regular_file(rules.binary, ec)) {
    std::string upper = id;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    return refuse("the pinned " + id + " CLI is not at " + rules.binary.string() +
                  " (run ./run setup, or set METAHARNESS_" + upper + "_BIN / the config's " + id + " binary)");
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> code_loading_vendor_env(std::string_view name) {
  if (!valid_env_name(name))
    return "\"" + proto::excerpt(std::string(name), 40) + "\" is not a variable name ([A-Za-z_][A-Za-z0-9_]*)";
  for (const auto& rule : kCodeLoadingEnv) {
    std::string_view pattern = rule.name;
    bool prefix = pattern.back() == '*';
    if (prefix ? name.substr(0, pattern.size() - 1) == pattern.substr(0, pattern.size() - 1) : name == pattern)
      return std::string(name) + " " + std::string(rule.what) + ": a run may not declare a variable that loads code" +
             (prefix ? " (" + std::string(pattern) + ")" : std::string());
  }
  return std::nullopt;
}

std::optional<std::string> refuse_declared_vendor_env(const std::map<std::string, std::string>& vendor_env) {
  for (const auto& [name, value] : vendor_env) {
    if (auto why = code_loading_vendor_env(name)) return "declared vendor environment refused: " + *why;
    if (value.find('\0') != std::string::npos)
      return "declared vendor environment refused: the value of " + name + " holds a NUL byte";
  }
  return std::nullopt;
}

std::variant<PlanDraft, LaunchRefusal> common_plan(const Adapter& adapter, const RunSpec& spec, const RunPaths& paths,
                                                   const VendorRules& rules) {
  if (auto refused = refuse_spec(adapter, spec, rules)) return std::move(*refused);

  // Every path the vendor sees is absolute: its cwd differs from ours.
  const std::filesystem::path scratch = std::filesystem::absolute(paths.scratch);
  const std::filesystem::path run_dir = std::filesystem::absolute(paths.run_dir);
  PlanDraft draft;
  ScratchLayout& s = draft.scratch;
  s.home = scratch / "home";
  s.config_home = scratch / rules.config_home;
  s.tmp = scratch / "tmp";
  s.work = spec.cwd ? std::filesystem::absolute(*spec.cwd) : scratch / "work";

  LaunchPlan& p = draft.plan;
  p.adapter = std::string(adapter.id());
  p.program = rules.binary;
  p.cwd = s.work;
  p.directories = {s.home, s.config_home, s.tmp};
  if (!spec.cwd) p.directories.push_back(s.work);
  p.transcript_path = run_dir / "vendor-stdout.jsonl";
  p.stdin_log_path = run_dir / "vendor-stdin.jsonl";
  p.run_marker = {std::string(kRunMarker), spec.run_id};

  for (auto name : kPassThroughEnv)
    if (const char* v = std::getenv(std::string(name).c_str())) p.env.emplace_back(std::string(name), v);
  p.env.emplace_back("HOME", s.home.string());
  p.env.emplace_back(std::string(rules.config_env), s.config_home.string());
  p.env.emplace_back("PATH", std::string(kPath));
  p.env.emplace_back("TMPDIR", s.tmp.string());

  using proto::HermeticRow;
  auto& a = p.attestation;
  a.mode = spec.hermetic;
  a.deny_only = spec.deny_only;
  a.decisions = spec.decisions;
  a.imposed = {
      {HermeticRow::h3, "environment constructed from an allowlist (LANG, LC_ALL, TZ passed through) plus HOME, " +
                            std::string(rules.config_env) + ", PATH, TMPDIR, " + std::string(rules.own_env_summary) +
                            " and the run marker"},
      {HermeticRow::h4,
       "no API key in the environment: a per-run bearer token for the configured model endpoint" +
           (rules.credential_detail.empty() ? std::string() : " (" + std::string(rules.credential_detail) + ")")},
      {HermeticRow::h6, "no credential file is copied: the model endpoint's per-run token is the only credential"},
  };
  if (spec.cwd)
    a.unavailable.push_back({HermeticRow::h7, "the operator named the working directory " + *spec.cwd});
  else
    a.imposed.push_back({HermeticRow::h7, "working directory " + s.work.string() + " inside the run's scratch"});
  a.unavailable.push_back(
      {HermeticRow::h9, "the plan runs no doctor; the version is read from " + std::string(rules.version_source)});
  a.unavailable.push_back({HermeticRow::h10, "the run pins no input tree"});
  return draft;
}

LaunchPlan finish_plan(PlanDraft draft, const RunSpec& spec) {
  LaunchPlan& p = draft.plan;
  p.env.push_back(p.run_marker);
  for (const auto& [name, value] : spec.vendor_env)
    p.env.emplace_back(name, value);
  auto by_row = [](const auto& x, const auto& y) { return x.row < y.row; };
  std::stable_sort(p.attestation.imposed.begin(), p.attestation.imposed.end(), by_row);
  std::stable_sort(p.attestation.unavailable.begin(), p.attestation.unavailable.end(), by_row);
  return std::move(p);
}

std::filesystem::path configured_binary(const HostConfig& config, std::string_view adapter,
                                        std::filesystem::path fallback) {
  if (auto it = config.binaries.find(std::string(adapter)); it != config.binaries.end()) return it->second;
  return fallback;
}

std::optional<std::filesystem::path> vendor_program(const HostConfig& config, std::string_view adapter) {
  const VendorDescriptor* vendor = find_vendor(adapter);
  if (!vendor) return std::nullopt;
  return configured_binary(config, adapter, vendor->default_binary(config.vendor_dir));
}

std::optional<std::string> read_package_version(const std::filesystem::path& manifest) {
  std::ifstream in(manifest, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  auto v = proto::parse_json(text.str());
  if (!v || !v->is_object()) return std::nullopt;
  return proto::string_at(v->get_object(), "version");
}

std::optional<std::string> installed_package_version(const HostConfig& config, std::string_view adapter,
                                                     const std::filesystem::path& manifest, std::string& error) {
  if (config.binaries.count(std::string(adapter))) {
    error = "the " + std::string(adapter) + " binary is overridden; its package manifest is unknown";
    return std::nullopt;
  }
  const std::filesystem::path path = config.vendor_dir / manifest;
  auto version = read_package_version(path);
  if (!version) error = "no readable package manifest at " + path.string();
  return version;
}

std::vector<proto::Event> translate_with_session(const Adapter& adapter, AdapterSession& session,
                                                 std::string_view transcript, const std::string& run_id) {
  OfflineSink offline(adapter, run_id);
  AdapterOutputs outputs;
  read_transcript(transcript, [&](const proto::FramedLine& line) {
    session.on_vendor_line(line, outputs);
    offline.fold(outputs);
  });
  session.on_vendor_end(outputs);
  offline.fold(outputs);
  return offline.finish(session.session_ended());
}

void note_observe_mode(const RunSpec& spec, std::vector<std::string>& ambient_inputs, std::string under_deny_only,
                       std::string granting) {
  if (spec.decisions != protocol::DecisionMode::observe) return;
  ambient_inputs.push_back(spec.deny_only ? std::move(under_deny_only) : std::move(granting));
}

}  // namespace mh::adapters
