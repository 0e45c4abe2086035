// The common part of every launch plan (adapters/plan_common): each shared refusal, in its order
// and in its words, once on a stand-in adapter and then through both real adapters; the scratch
// layout, the constructed environment in its order, the run marker, the shared attestation rows
// sorted once; the vendor's package version.
#include "adapters/plan_common.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "adapters/claude/claude_adapter.hpp"
#include "adapters/claude/claude_reader.hpp"
#include "adapters/codex/codex_adapter.hpp"
#include "adapters/registry.hpp"
#include "adapters/session.hpp"
#include "adapters/vendor_descriptor.hpp"

namespace mh::adapters {
namespace {

namespace fs = std::filesystem;
namespace proto = mh::protocol;

// A directory of its own per test, removed after it.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("mh-plan-common-" + name + "-" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  fs::path file(const std::string& name, const std::string& contents = "") const {
    std::ofstream(path / name) << contents;
    return path / name;
  }
};

// An adapter that is nothing but what common_plan asks of one: an id, a capability table (steer
// refused, everything else honoured) and a deadline bound.
class StandInAdapter final : public Adapter {
 public:
  StandInAdapter() {
    table_.adapter_id = "fake";
    using proto::CommandName;
    for (auto c : {CommandName::tool_decide, CommandName::frame_set, CommandName::message_inject,
                   CommandName::permission_set, CommandName::interrupt, CommandName::halt})
      table_.commands[c] = {true, {}, "yes"};
    table_.commands[CommandName::steer] = {false, proto::RefusalCode::UNSUPPORTED_CONTROL, "no steer here"};
  }
  std::string_view id() const override { return "fake"; }
  const proto::CapabilityTable& capabilities() const override { return table_; }
  std::string_view model_wire() const override { return "anthropic"; }
  std::variant<LaunchPlan, LaunchRefusal> plan(const RunSpec&, const RunPaths&) const override {
    return LaunchRefusal{};
  }
  std::unique_ptr<AdapterSession> open_session(const RunSpec&, const LaunchPlan&) const override { return nullptr; }
  std::vector<proto::Event> translate(std::string_view, const std::string&) const override { return {}; }
  std::optional<std::string> installed_version(std::string&) const override { return std::nullopt; }
  std::uint64_t max_decision_deadline_ms() const override { return 60'000; }

 private:
  proto::CapabilityTable table_;
};

constexpr std::array<std::string_view, 1> kFakeOwned = {"FAKE_TOKEN"};
constexpr std::array<std::string_view, 1> kFakeBreakers = {"FAKE_NO_HOOKS"};
constexpr std::array<std::string_view, 2> kFakeOptions = {"retries", "depth"};

VendorRules fake_rules(const fs::path& binary) {
  return VendorRules{.binary = binary,
                     .config_env = "FAKE_HOME",
                     .config_home = "home/.fake",
                     .owned_env = kFakeOwned,
                     .seam_breakers = kFakeBreakers,
                     .seam_breaker_effect = "switches the hooks off",
                     .vendor_options = kFakeOptions,
                     .own_env_summary = "the fake token",
                     .credential_detail = "FAKE_TOKEN",
                     .version_source = "the first record"};
}

RunSpec good_spec() {
  RunSpec spec;
  spec.run_id = "r1";
  spec.prompt = "go";
  spec.decision_deadline_ms = 55'000;
  spec.model_endpoint = ModelEndpoint{"http://127.0.0.1:9", "tok"};
  return spec;
}

template <class Planned>  // a PlanDraft or a LaunchPlan
std::string refusal_message(const std::variant<Planned, LaunchRefusal>& planned) {
  if (auto* r = std::get_if<LaunchRefusal>(&planned)) return r->message;
  return "(planned)";
}

// A refusal at start, with `message`, carrying exactly one command.result, for the start command
// `result_id`: that result's refusal (nullopt, and the test failed, when the plan is otherwise).
std::optional<proto::Refusal> start_refusal(const std::variant<PlanDraft, LaunchRefusal>& planned,
                                            std::string_view message, std::string_view result_id) {
  const auto* refused = std::get_if<LaunchRefusal>(&planned);
  if (!refused) {
    ADD_FAILURE() << "planned, where it should refuse: " << message;
    return std::nullopt;
  }
  EXPECT_EQ(refused->message, message);
  if (refused->command_results.size() != 1) {
    ADD_FAILURE() << refused->command_results.size() << " command results, not 1: " << message;
    return std::nullopt;
  }
  EXPECT_EQ(refused->command_results[0].id, result_id);
  return refused->command_results[0].outcome.refusal;
}

// Each refusal, in order: the spec breaks every rule, and each fix uncovers the next refusal.
TEST(CommonPlan, RefusesEachSharedReasonInItsOrderAndWords) {
  TempDir dir("order");
  StandInAdapter adapter;
  const fs::path binary = dir.path / "fake-cli";
  VendorRules rules = fake_rules(binary);
  RunPaths paths{dir.path / "run", dir.path / "scratch"};
  RunSpec spec = good_spec();
  spec.requires_commands = {proto::CommandName::steer};
  spec.decisions = proto::DecisionMode::observe;
  spec.frame = proto::Frame{};
  spec.prompt.clear();
  spec.decision_deadline_ms = 60'001;
  spec.model_endpoint.reset();
  spec.vendor_env = {{"FAKE_NO_HOOKS", "1"}};
  spec.vendor_options = {{"bogus", "1"}};

  auto unhonoured = start_refusal(common_plan(adapter, spec, paths, rules),
                                  "the run needs controls the fake adapter cannot honour", "start/steer");
  ASSERT_TRUE(unhonoured);
  EXPECT_EQ(unhonoured->code, proto::RefusalCode::UNSUPPORTED_CONTROL);

  spec.requires_commands.clear();
  auto framed =
      start_refusal(common_plan(adapter, spec, paths, rules), "observe mode refuses a frame", "start/tool.decide");
  ASSERT_TRUE(framed);
  EXPECT_EQ(framed->reason,
            "observe mode allows every call, so a frame would be told to the model and enforced by nothing; use "
            "decisions frame (or ask) with a frame");

  spec.frame.reset();
  EXPECT_EQ(refusal_message(common_plan(adapter, spec, paths, rules)), "the run has no prompt");
  spec.prompt = "go";
  EXPECT_EQ(refusal_message(common_plan(adapter, spec, paths, rules)), *refuse_deadline(adapter, 60'001));
  spec.decision_deadline_ms = 60'000;
  EXPECT_EQ(refusal_message(common_plan(adapter, spec, paths, rules)),
            "no model endpoint: give a scripted scenario (--model-scenario) or an endpoint (--model-endpoint)");
  spec.model_endpoint = ModelEndpoint{"http://127.0.0.1:9", "tok"};
  EXPECT_EQ(refusal_message(common_plan(adapter, spec, paths, rules)),
            "declared vendor environment refused: FAKE_NO_HOOKS switches the hooks off");
  spec.vendor_env = {{"LC_NUMERIC", "C"}};
  EXPECT_EQ(refusal_message(common_plan(adapter, spec, paths, rules)),
            "unknown fake vendor option \"bogus\" (known: retries, depth)");
  spec.vendor_options = {{"retries", "two"}};
  EXPECT_EQ(refusal_message(common_plan(adapter, spec, paths, rules)),
            "fake vendor option retries must be a non-negative integer, not \"two\"");
  spec.vendor_options = {{"retries", "2"}};
  EXPECT_EQ(refusal_message(common_plan(adapter, spec, paths, rules)),
            "the pinned fake CLI is not at " + binary.string() +
                " (run ./run setup, or set METAHARNESS_FAKE_BIN / the config's fake binary)");
  dir.file("fake-cli");
  EXPECT_TRUE(std::holds_alternative<PlanDraft>(common_plan(adapter, spec, paths, rules)));
}

TEST(CommonPlan, ARunMayNotDeclareWhatThePlanSets) {
  TempDir dir("owned");
  StandInAdapter adapter;
  VendorRules rules = fake_rules(dir.file("fake-cli"));
  for (std::string name : {"HOME", "PATH", "TMPDIR", "FAKE_HOME", "METAHARNESS_RUN", "FAKE_TOKEN"}) {
    RunSpec spec = good_spec();
    spec.vendor_env = {{name, "x"}};
    EXPECT_EQ(
        refusal_message(common_plan(adapter, spec, RunPaths{dir.path / "run", dir.path / "scratch"}, rules)),
        "declared vendor environment refused: " + name + " is set by the launch plan itself and cannot be overridden");
  }
}

TEST(CommonPlan, AVendorThatTakesNoOptionsRefusesEveryOneByName) {
  TempDir dir("no-options");
  StandInAdapter adapter;
  VendorRules rules = fake_rules(dir.file("fake-cli"));
  rules.vendor_options = {};
  RunSpec spec = good_spec();
  spec.vendor_options = {{"zeta", "1"}, {"alpha", "1"}};
  EXPECT_EQ(refusal_message(common_plan(adapter, spec, RunPaths{dir.path / "run", dir.path / "scratch"}, rules)),
            "unknown fake vendor option \"alpha\"; fake knows none")
      << "the first key, by name";
}

TEST(CommonPlan, TheDraftHoldsTheLayoutTheEnvironmentAndTheSharedRowsSortedOnce) {
  TempDir dir("draft");
  StandInAdapter adapter;
  VendorRules rules = fake_rules(dir.file("fake-cli"));
  RunSpec spec = good_spec();
  spec.vendor_env = {{"FAKE_RETRIES", "1"}};
  spec.deny_only = true;
  spec.hermetic = proto::HermeticMode::strict;
  ::setenv("TZ", "UTC", 1);  // passed through; the test's own environment otherwise is not
  ::setenv("MH_PLAN_COMMON_SECRET", "1", 1);
  auto planned = common_plan(adapter, spec, RunPaths{"run", "scratch"}, rules);
  ASSERT_TRUE(std::holds_alternative<PlanDraft>(planned)) << refusal_message(planned);
  PlanDraft draft = std::get<PlanDraft>(std::move(planned));

  const fs::path scratch = fs::absolute("scratch");
  EXPECT_EQ(draft.scratch.home, scratch / "home") << "absolute: the vendor's cwd is not ours";
  EXPECT_EQ(draft.scratch.config_home, scratch / "home/.fake");
  EXPECT_EQ(draft.scratch.tmp, scratch / "tmp");
  EXPECT_EQ(draft.scratch.work, scratch / "work");
  const LaunchPlan& p = draft.plan;
  EXPECT_EQ(p.adapter, "fake");
  EXPECT_EQ(p.program, rules.binary);
  EXPECT_EQ(p.cwd, scratch / "work");
  EXPECT_EQ(p.directories,
            (std::vector<fs::path>{scratch / "home", scratch / "home/.fake", scratch / "tmp", scratch / "work"}));
  EXPECT_EQ(p.transcript_path, fs::absolute("run") / "vendor-stdout.jsonl");
  EXPECT_EQ(p.stdin_log_path, fs::absolute("run") / "vendor-stdin.jsonl");
  EXPECT_EQ(p.run_marker, (std::pair<std::string, std::string>{"METAHARNESS_RUN", "r1"}));

  // The vendor adds its own variables to the draft; the marker and the declared ones come last.
  draft.plan.env.emplace_back("FAKE_TOKEN", "tok");
  draft.plan.attestation.imposed.push_back({proto::HermeticRow::h1a, "vendor row"});
  draft.plan.attestation.unavailable.push_back({proto::HermeticRow::h11, "vendor gap"});
  LaunchPlan done = finish_plan(std::move(draft), spec);
  std::vector<std::string> names;
  for (const auto& [name, value] : done.env)
    names.push_back(name);
  std::vector<std::string> expected;
  for (auto name : {"LANG", "LC_ALL"})
    if (std::getenv(name)) expected.emplace_back(name);
  for (auto name : {"TZ", "HOME", "FAKE_HOME", "PATH", "TMPDIR", "FAKE_TOKEN", "METAHARNESS_RUN", "FAKE_RETRIES"})
    expected.emplace_back(name);
  EXPECT_EQ(names, expected);
  std::map<std::string, std::string> env(done.env.begin(), done.env.end());
  EXPECT_EQ(env["HOME"], (scratch / "home").string());
  EXPECT_EQ(env["FAKE_HOME"], (scratch / "home/.fake").string());
  EXPECT_EQ(env["TMPDIR"], (scratch / "tmp").string());
  EXPECT_EQ(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
  EXPECT_EQ(env["TZ"], "UTC");
  EXPECT_EQ(env["METAHARNESS_RUN"], "r1");

  const auto& a = done.attestation;
  EXPECT_EQ(a.mode, proto::HermeticMode::strict);
  EXPECT_TRUE(a.deny_only);
  EXPECT_EQ(a.decisions, proto::DecisionMode::frame);
  std::vector<proto::HermeticRow> imposed, unavailable;
  for (const auto& r : a.imposed)
    imposed.push_back(r.row);
  for (const auto& r : a.unavailable)
    unavailable.push_back(r.row);
  using proto::HermeticRow;
  EXPECT_EQ(imposed, (std::vector<HermeticRow>{HermeticRow::h1a, HermeticRow::h3, HermeticRow::h4, HermeticRow::h6,
                                               HermeticRow::h7}))
      << "the vendor's rows and the shared ones, sorted";
  EXPECT_EQ(unavailable, (std::vector<HermeticRow>{HermeticRow::h9, HermeticRow::h10, HermeticRow::h11}));
  EXPECT_EQ(a.imposed[1].how,
            "environment constructed from an allowlist (LANG, LC_ALL, TZ passed through) plus HOME, FAKE_HOME, PATH, "
            "TMPDIR, the fake token and the run marker");
  EXPECT_EQ(a.imposed[2].how,
            "no API key in the environment: a per-run bearer token for the configured model endpoint (FAKE_TOKEN)");
  EXPECT_EQ(a.imposed[4].how, "working directory " + (scratch / "work").string() + " inside the run's scratch");
  EXPECT_EQ(a.unavailable[0].why, "the plan runs no doctor; the version is read from the first record");
}

TEST(CommonPlan, AnOperatorWorkingDirectoryIsUsedAsGivenAndIsAGapOnH7) {
  TempDir dir("cwd");
  StandInAdapter adapter;
  RunSpec spec = good_spec();
  spec.cwd = (dir.path / "project").string();
  auto planned =
      common_plan(adapter, spec, RunPaths{dir.path / "run", dir.path / "scratch"}, fake_rules(dir.file("fake-cli")));
  ASSERT_TRUE(std::holds_alternative<PlanDraft>(planned)) << refusal_message(planned);
  LaunchPlan p = finish_plan(std::get<PlanDraft>(std::move(planned)), spec);
  EXPECT_EQ(p.cwd, dir.path / "project");
  EXPECT_EQ(std::count(p.directories.begin(), p.directories.end(), dir.path / "project"), 0)
      << "the operator's directory is not the plan's to create";
  for (const auto& r : p.attestation.imposed)
    EXPECT_NE(r.row, proto::HermeticRow::h7);
  ASSERT_FALSE(p.attestation.unavailable.empty());
  EXPECT_EQ(p.attestation.unavailable[0].row, proto::HermeticRow::h7);
  EXPECT_EQ(p.attestation.unavailable[0].why, "the operator named the working directory " + *spec.cwd);
}

// ---------------------------------------------------------------------------------------------
// Through both adapters: the same refusals in the same words, and the same common plan
// ---------------------------------------------------------------------------------------------

class BothAdapters : public ::testing::TestWithParam<std::string> {
 protected:
  BothAdapters() : dir_("both-" + GetParam()) {
    config_.vendor_dir = dir_.path / "vendor";
    config_.binaries[GetParam()] = dir_.file(GetParam());
    config_.binaries["codex-hook"] = dir_.file("mh-codex-hook");
    registry_.emplace(config_);
    adapter_ = registry_->find(GetParam());
  }
  std::variant<LaunchPlan, LaunchRefusal> plan(const RunSpec& spec) const {
    return adapter_->plan(spec, RunPaths{dir_.path / "run", dir_.path / "scratch"});
  }
  RunSpec spec() const {
    RunSpec s = good_spec();
    s.adapter = GetParam();
    return s;
  }
  std::string config_env() const { return GetParam() == "claude" ? "CLAUDE_CONFIG_DIR" : "CODEX_HOME"; }

  TempDir dir_;
  HostConfig config_;
  std::optional<AdapterRegistry> registry_;
  const Adapter* adapter_ = nullptr;
};

TEST_P(BothAdapters, RefuseWhatEveryAdapterRefusesInTheSameWords) {
  ASSERT_NE(adapter_, nullptr);
  RunSpec s = spec();
  s.decisions = proto::DecisionMode::observe;
  s.frame = proto::Frame{};
  EXPECT_EQ(refusal_message(plan(s)), "observe mode refuses a frame");
  s = spec();
  s.prompt.clear();
  EXPECT_EQ(refusal_message(plan(s)), "the run has no prompt");
  s = spec();
  s.decision_deadline_ms = adapter_->max_decision_deadline_ms() + 1;
  EXPECT_EQ(refusal_message(plan(s)), *refuse_deadline(*adapter_, s.decision_deadline_ms));
  s = spec();
  s.model_endpoint.reset();
  EXPECT_EQ(refusal_message(plan(s)),
            "no model endpoint: give a scripted scenario (--model-scenario) or an endpoint (--model-endpoint)");
  for (std::string name : {std::string("HOME"), std::string("PATH"), std::string("TMPDIR"),
                           std::string("METAHARNESS_RUN"), config_env()}) {
    s = spec();
    s.vendor_env = {{name, "x"}};
    EXPECT_EQ(refusal_message(plan(s)), "declared vendor environment refused: " + name +
                                            " is set by the launch plan itself and cannot be overridden");
  }
  s = spec();
  s.vendor_options = {{"bogus", "1"}};
  EXPECT_NE(refusal_message(plan(s)).find("unknown " + GetParam() + " vendor option \"bogus\""), std::string::npos)
      << refusal_message(plan(s));
  fs::remove(config_.binaries[GetParam()]);
  EXPECT_EQ(refusal_message(plan(spec())),
            "the pinned " + GetParam() + " CLI is not at " + config_.binaries[GetParam()].string() +
                " (run ./run setup, or set " +
                (GetParam() == "claude" ? "METAHARNESS_CLAUDE_BIN" : "METAHARNESS_CODEX_BIN") + " / the config's " +
                GetParam() + " binary)");
}

TEST_P(BothAdapters, PlanTheCommonPartTheSameWay) {
  ASSERT_NE(adapter_, nullptr);
  RunSpec s = spec();
  s.vendor_env = {{"HTTPS_PROXY", "http://127.0.0.1:3128"}};
  auto planned = plan(s);
  ASSERT_TRUE(std::holds_alternative<LaunchPlan>(planned)) << refusal_message(planned);
  const LaunchPlan& p = std::get<LaunchPlan>(planned);
  const fs::path scratch = fs::absolute(dir_.path / "scratch");
  EXPECT_EQ(p.program, config_.binaries[GetParam()]);
  EXPECT_EQ(p.cwd, scratch / "work");
  ASSERT_GE(p.env.size(), 2u);
  EXPECT_EQ(p.env[p.env.size() - 2], (std::pair<std::string, std::string>{"METAHARNESS_RUN", "r1"}));
  EXPECT_EQ(p.env.back(), (std::pair<std::string, std::string>{"HTTPS_PROXY", "http://127.0.0.1:3128"}))
      << "the declared environment comes last";
  std::map<std::string, std::string> env(p.env.begin(), p.env.end());
  EXPECT_EQ(env["HOME"], (scratch / "home").string());
  EXPECT_TRUE(env.count(config_env()));
  EXPECT_EQ(env["PATH"], "/usr/local/bin:/usr/bin:/bin");
  auto sorted = [](const auto& rows) {
    return std::is_sorted(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.row < y.row; });
  };
  EXPECT_TRUE(sorted(p.attestation.imposed));
  EXPECT_TRUE(sorted(p.attestation.unavailable));
  std::set<proto::HermeticRow> rows;
  for (const auto& r : p.attestation.imposed)
    EXPECT_TRUE(rows.insert(r.row).second) << "one row once";
  for (const auto& r : p.attestation.unavailable)
    EXPECT_TRUE(rows.insert(r.row).second) << "one row once";
  for (auto row : {proto::HermeticRow::h3, proto::HermeticRow::h4, proto::HermeticRow::h6, proto::HermeticRow::h7,
                   proto::HermeticRow::h9, proto::HermeticRow::h10})
    EXPECT_TRUE(rows.count(row)) << "a shared row is in every plan";
}

TEST_P(BothAdapters, TheInstalledVersionIsThePackageManifestsUnlessTheBinaryIsOverridden) {
  ASSERT_NE(adapter_, nullptr);
  std::string error;
  EXPECT_EQ(adapter_->installed_version(error), std::nullopt);
  EXPECT_EQ(error, "the " + GetParam() + " binary is overridden; its package manifest is unknown");

  HostConfig plain;
  plain.vendor_dir = dir_.path / "vendor";
  const fs::path manifest = GetParam() == "claude" ? "node_modules/@anthropic-ai/claude-code/package.json"
                                                   : "node_modules/@openai/codex/package.json";
  AdapterRegistry unpinned(plain);
  error.clear();
  EXPECT_EQ(unpinned.find(GetParam())->installed_version(error), std::nullopt);
  EXPECT_EQ(error, "no readable package manifest at " + (plain.vendor_dir / manifest).string());
  fs::create_directories((plain.vendor_dir / manifest).parent_path());
  std::ofstream(plain.vendor_dir / manifest) << R"({"name":"x","version":"9.8.7"})";
  EXPECT_EQ(unpinned.find(GetParam())->installed_version(error), "9.8.7");
}

// The daemon digests vendor_program() before it creates a run, so that the plan's own digest is a
// stat: it is the program the plan execs, overridden or the vendor folder's default.
TEST_P(BothAdapters, TheVendorProgramIsTheProgramThePlanExecs) {
  ASSERT_NE(adapter_, nullptr);
  auto overridden = plan(spec());
  ASSERT_TRUE(std::holds_alternative<LaunchPlan>(overridden)) << refusal_message(overridden);
  EXPECT_EQ(vendor_program(config_, GetParam()), std::get<LaunchPlan>(overridden).program);

  HostConfig plain;
  plain.vendor_dir = dir_.path / "vendor";
  plain.binaries["codex-hook"] = config_.binaries["codex-hook"];
  const fs::path default_binary = find_vendor(GetParam())->default_binary(plain.vendor_dir);
  fs::create_directories(default_binary.parent_path());
  std::ofstream(default_binary) << "";
  AdapterRegistry defaults(plain);
  auto planned = defaults.find(GetParam())->plan(spec(), RunPaths{dir_.path / "run", dir_.path / "scratch"});
  ASSERT_TRUE(std::holds_alternative<LaunchPlan>(planned)) << refusal_message(planned);
  EXPECT_EQ(vendor_program(plain, GetParam()), std::get<LaunchPlan>(planned).program);
  EXPECT_EQ(vendor_program(plain, "no-such-vendor"), std::nullopt);
}

INSTANTIATE_TEST_SUITE_P(ClaudeAndCodex, BothAdapters, ::testing::Values("claude", "codex"));

// Issue 24, item 1: a declared variable that loads or injects code reached bwrap as root. Every
// such variable is refused by name, for every adapter, and a name that is not a variable name is
// refused as such; ordinary ones pass.
TEST(DeclaredVendorEnv, EveryVariableThatLoadsCodeIsRefusedByName) {
  for (std::string name : {"LD_PRELOAD",
                           "LD_AUDIT",
                           "LD_LIBRARY_PATH",
                           "LD_anything",
                           "GCONV_PATH",
                           "GLIBC_TUNABLES",
                           "OPENSSL_CONF",
                           "NODE_OPTIONS",
                           "NODE_PATH",
                           "NODE_REPL_EXTERNAL_MODULE",
                           "BUN_OPTIONS",
                           "BUN_INSPECT",
                           "BUN_INSPECT_PRELOAD",
                           "BUN_BE_BUN",
                           "BASH_ENV",
                           "ENV",
                           "BASH_FUNC_ls",
                           "SHELLOPTS",
                           "BASHOPTS",
                           "PROMPT_COMMAND",
                           "PS4",
                           "ZDOTDIR",
                           "PYTHONSTARTUP",
                           "PYTHONPATH",
                           "PYTHONHOME",
                           "PERL5OPT",
                           "PERL5LIB",
                           "RUBYOPT",
                           "RUBYLIB",
                           "JAVA_TOOL_OPTIONS",
                           "GIT_CONFIG_COUNT"}) {
    auto refused = refuse_declared_vendor_env({{"HTTPS_PROXY", "http://127.0.0.1:3128"}, {name, "x"}});
    ASSERT_TRUE(refused) << name;
    EXPECT_EQ(refused->rfind("declared vendor environment refused: " + name + " ", 0), 0u) << *refused;
    EXPECT_NE(refused->find("a run may not declare a variable that loads code"), std::string::npos) << *refused;
  }
  for (std::string name : {"", "1A", "A-B", "A B", "BASH_FUNC_ls%%", "A\nB"}) {
    auto refused = refuse_declared_vendor_env({{name, "x"}});
    ASSERT_TRUE(refused) << name;
    EXPECT_NE(refused->find("is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"), std::string::npos) << *refused;
  }
  for (std::string name : {"CLAUDE_CODE_MAX_RETRIES", "HTTPS_PROXY", "LC_NUMERIC", "_x1", "LDFLAGS", "NODEJS_X"})
    EXPECT_FALSE(refuse_declared_vendor_env({{name, "x"}})) << name;
  EXPECT_EQ(refuse_declared_vendor_env({{"A", std::string("x\0y", 3)}}),
            "declared vendor environment refused: the value of A holds a NUL byte");
}

TEST_P(BothAdapters, RefuseAVariableThatLoadsCodeBeforeAnythingSpawns) {
  ASSERT_NE(adapter_, nullptr);
  for (std::string name : {"LD_PRELOAD", "LD_AUDIT", "NODE_OPTIONS"}) {
    RunSpec s = spec();
    s.vendor_env = {{name, "/tmp/x.so"}};
    EXPECT_EQ(refusal_message(plan(s)), *refuse_declared_vendor_env(s.vendor_env));
    EXPECT_EQ(refusal_message(plan(s)).rfind("declared vendor environment refused: " + name, 0), 0u);
  }
}

TEST(ReadPackageVersion, IsTheManifestsVersionStringOrUnknown) {
  TempDir dir("manifest");
  EXPECT_EQ(read_package_version(dir.file("ok.json", R"({"version":"2.1.197"})")), "2.1.197");
  EXPECT_EQ(read_package_version(dir.file("number.json", R"({"version":2})")), std::nullopt);
  EXPECT_EQ(read_package_version(dir.file("none.json", R"({"name":"x"})")), std::nullopt);
  EXPECT_EQ(read_package_version(dir.file("torn.json", R"({"version":)")), std::nullopt);
  EXPECT_EQ(read_package_version(dir.path / "absent.json"), std::nullopt);
}

}  // namespace
}  // namespace mh::adapters
