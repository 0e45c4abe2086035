// The adapter verbs as a user meets them, for every adapter: `capabilities` prints the table,
// `doctor` compares the installed CLI with the pin (0 on pin, 1 off pin, 2 cannot tell), and
// `plan` prints the launch plan as a value (and refuses what the adapter would refuse) without
// spawning anything.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <boost/json/serialize.hpp>
#include <fstream>
#include <sstream>

#include "metaharness/build_info.hpp"
#include "protocol/json.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {
namespace {

using Output = CliOutput;

Output run_verb(std::vector<std::string> args, std::optional<std::vector<std::string>> env = std::nullopt) {
  args.insert(args.begin(), metaharness_binary().string());
  return run_to_end(std::move(args), std::move(env));
}

json::object parsed(const Output& o) {
  auto v = protocol::parse_json(o.out);
  EXPECT_TRUE(v && v->is_object()) << o.out << o.err;
  return v && v->is_object() ? v->as_object() : json::object{};
}

// Our environment plus one entry (for the binary overrides).
std::vector<std::string> environment_with(const std::string& entry) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    env.emplace_back(*e);
  env.push_back(entry);
  return env;
}

std::filesystem::path scenario(const std::string& adapter) {
  return source_dir() / "tests/scenarios" / adapter / (adapter == "claude" ? "bash_marker.json" : "marker.json");
}

class AdapterVerbs : public ::testing::TestWithParam<std::string> {};

TEST_P(AdapterVerbs, CapabilitiesPrintEveryTierCommandAndDecisionMode) {
  auto o = run_verb({"capabilities", GetParam()});
  ASSERT_EQ(o.status, 0) << o.err;
  auto table = parsed(o);
  EXPECT_EQ(table.at("adapter").as_object().at("id").as_string(), GetParam());
  for (auto tier : {"registration", "call", "turn", "kill"})
    EXPECT_TRUE(table.at("tiers").as_object().contains(tier)) << tier;
  for (auto command : {"tool.decide", "frame.set", "message.inject", "steer", "permission.set", "interrupt", "halt"})
    EXPECT_TRUE(table.at("commands").as_object().contains(command)) << command;
  for (auto mode : {"frame", "ask", "observe"})
    EXPECT_TRUE(table.at("decision_modes").as_object().contains(mode));
  EXPECT_EQ(table.at("tiers").as_object().at("call"), "delivered");
  // The run's body is a host property: the table names it, its fallbacks, and where it is stated.
  ASSERT_TRUE(table.contains("containment")) << o.out;
  const auto& containment = table.at("containment").as_object();
  EXPECT_EQ(containment.at("property_of"), "host");
  EXPECT_EQ(containment.at("reported_by"), "status.containment");
  for (auto part : {"cgroup", "marker-sweep"})
    EXPECT_TRUE(containment.at("end").as_object().contains(part)) << part;
  EXPECT_NE(json::serialize(containment.at("end")).find("CGROUP_UNAVAILABLE"), std::string::npos);
  for (auto part : {"sandbox", "identity", "network"})
    EXPECT_TRUE(containment.contains(part)) << part;
  for (auto network : {"gateway", "host"})
    EXPECT_TRUE(containment.at("network").as_object().contains(network)) << network;
  // The wire an upstream must serve for this adapter (docs/gateway.md).
  EXPECT_EQ(table.at("model_wire"), GetParam() == "codex"    ? "openai-responses"
                                    : GetParam() == "gemini" ? "gemini"
                                                             : "anthropic")
      << o.out;
}

TEST_P(AdapterVerbs, DoctorIsOnPinForTheInstalledCli) {
  auto o = run_verb({"doctor", GetParam()});
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find(GetParam() + ": on pin"), std::string::npos) << o.out;
}

TEST_P(AdapterVerbs, DoctorSaysOffPinForAnotherVersionAndCannotTellForNoBinary) {
  TempDir dir("doctor_" + GetParam());
  auto fake = dir.path() / GetParam();
  std::ofstream(fake) << "#!/bin/sh\necho '0.0.1 (not the pin)'\n";
  ::chmod(fake.c_str(), 0755);
  std::string upper = GetParam();
  std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
  std::string variable = "METAHARNESS_" + upper + "_BIN=";

  auto off = run_verb({"doctor", GetParam()}, environment_with(variable + fake.string()));
  EXPECT_EQ(off.status, 1) << off.out << off.err;
  EXPECT_NE(off.out.find("OFF PIN"), std::string::npos) << off.out;

  auto missing = run_verb({"doctor", GetParam()}, environment_with(variable + (dir.path() / "absent").string()));
  EXPECT_EQ(missing.status, 2) << missing.out << missing.err;
  EXPECT_NE(missing.out.find("cannot tell"), std::string::npos) << missing.out;
}

TEST_P(AdapterVerbs, PlanIsAValueWithAConstructedEnvironmentAndSpawnsNothing) {
  TempDir dir("plan_" + GetParam());
  auto env = environment_with("MH_TEST_SECRET_THAT_MUST_NOT_LEAK=1");
  auto o = run_verb({"plan", GetParam(), "-p", "x", "--model-scenario", scenario(GetParam()).string(), "--run-dir",
                     (dir.path() / "run").string(), "--vendor-env", "MH_DECLARED=declared-secret-value"},
                    env);
  ASSERT_EQ(o.status, 0) << o.err;
  auto plan = parsed(o);
  EXPECT_EQ(plan.at("adapter").as_string(), GetParam());
  std::string environment = protocol::canonical_json(plan.at("env"));
  EXPECT_EQ(environment.find("MH_TEST_SECRET_THAT_MUST_NOT_LEAK"), std::string::npos)
      << "the environment is built, not inherited";
  EXPECT_NE(environment.find("METAHARNESS_RUN="), std::string::npos);
  // A declared value may be a secret whatever its name (issue 24 item 3): named, never printed.
  EXPECT_NE(environment.find("MH_DECLARED=(redacted)"), std::string::npos) << environment;
  EXPECT_EQ(environment.find("declared-secret-value"), std::string::npos) << environment;
  if (GetParam() == "opencode") {
    // Its token is in the generated config file (mode 0600), whose contents a plan never prints.
    bool config = false;
    for (const auto& f : plan.at("files").as_array())
      if (f.at("path").as_string().ends_with("opencode/opencode.json")) config = f.at("mode") == 0600;
    EXPECT_TRUE(config) << protocol::canonical_json(plan.at("files"));
  } else {
    EXPECT_NE(environment.find("(redacted)"), std::string::npos) << "the model token is never printed";
  }
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "run" / "vendor-stdout.jsonl")) << "nothing was spawned";
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "run" / "scratch")) << "no scratch file was written";

  // The native binary, not a node wrapper: the pid is the CLI's own. Gemini CLI and Qwen Code ship
  // no native binary: their entry is the bundle's own script, which `env` execs node over in place
  // (and GEMINI_CLI_NO_RELAUNCH / QWEN_CODE_NO_RELAUNCH keep it from relaunching itself), so the
  // pid is the CLI's as well.
  std::string program(plan.at("program").as_string());
  std::ifstream elf(program, std::ios::binary);
  char magic[19] = {};
  elf.read(magic, 19);
  if (GetParam() == "gemini" || GetParam() == "qwen")
    EXPECT_EQ(std::string(magic, 19), "#!/usr/bin/env node") << program;
  else
    EXPECT_EQ(std::string(magic, 4),
              "\x7f"
              "ELF")
        << program;
}

INSTANTIATE_TEST_SUITE_P(EveryAdapter, AdapterVerbs,
                         ::testing::Values("claude", "codex", "opencode", "gemini", "qwen"));

TEST(ClaudePlan, HooksStayOnAndSettingsAreNotRead) {
  auto o = run_verb({"plan", "claude", "-p", "x", "--model-scenario", scenario("claude").string()});
  ASSERT_EQ(o.status, 0) << o.err;
  auto args = protocol::canonical_json(parsed(o).at("args"));
  EXPECT_NE(args.find(R"("--setting-sources","")"), std::string::npos) << args;
  EXPECT_NE(args.find("--strict-mcp-config"), std::string::npos);
  EXPECT_EQ(args.find("--bare"), std::string::npos) << "--bare silently disables hooks";
  EXPECT_EQ(args.find("--safe-mode"), std::string::npos);
}

TEST(CodexPlan, AppServerWithAScratchCodexHomeAndTheHookChannel) {
  auto o = run_verb({"plan", "codex", "-p", "x", "--model-scenario", scenario("codex").string()});
  ASSERT_EQ(o.status, 0) << o.err;
  auto plan = parsed(o);
  EXPECT_EQ(protocol::canonical_json(plan.at("args")), R"(["app-server"])");
  std::string environment = protocol::canonical_json(plan.at("env"));
  EXPECT_NE(environment.find("CODEX_HOME="), std::string::npos);
  EXPECT_NE(environment.find("METAHARNESS_HOOK_SOCKET=@metaharness/hook/"), std::string::npos);
  EXPECT_TRUE(plan.contains("hook_channel"));
  auto files = protocol::canonical_json(plan.at("files"));
  EXPECT_NE(files.find("codex-home/config.toml"), std::string::npos) << files;
}

TEST(CodexPlan, AnUnknownVendorOptionIsRefusedByName) {
  auto o = run_verb({"plan", "codex", "-p", "x", "--model-scenario", scenario("codex").string(), "--vendor-option",
                     "approval_policy=never"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("unknown codex vendor option \"approval_policy\""), std::string::npos) << o.err;
}

// Every verb that takes an ADAPTER names, in its help, every adapter the build pins a CLI for.
TEST(AdapterVerbsHelp, EveryVerbTakingAnAdapterNamesEveryPinnedOne) {
  for (auto verb : {"run", "submit", "plan", "capabilities", "doctor", "translate"}) {
    auto o = run_verb({verb, "--help"});
    EXPECT_EQ(o.status, 0) << verb << ": " << o.err;
    std::istringstream lines(o.out);
    std::string adapter_line;
    for (std::string line; std::getline(lines, line) && adapter_line.empty();)
      if (line.find_first_not_of(' ') != std::string::npos &&
          line.compare(line.find_first_not_of(' '), 7, "ADAPTER") == 0)
        adapter_line = line;
    ASSERT_FALSE(adapter_line.empty()) << verb << " --help lists its ADAPTER: " << o.out;
    for (const auto& pin : build_info::vendor_pins)
      EXPECT_NE(adapter_line.find(pin.adapter), std::string::npos) << verb << ": " << adapter_line;
  }
}

// docs/cli.md: a usage error exits 2 for every verb (CLI11's own codes, 105-109, leaked before:
// an outside tester found them undocumented); --help and --version exit 0. A negative --from was
// taken as "unset" (the whole stream); `decide … replace` without --input said "not JSON".
TEST(UsageErrors, ExitTwoForEveryVerbAndNameWhatIsWrong) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"submit", "claude", "--frobnicate"},
                                             {"submit", "claude", "-p", "x", "--decisions", "maybe"},
                                             {"submit", "claude", "--model-scenario", "f.json"},
                                             {"run", "claude", "--bogus"},
                                             {"viewer", "--role", "god"},
                                             {"vendor", "list", "--helpers", "--json", "--nope"},
                                             {"tail", "r", "--from", "-3"},
                                             {"attach", "r", "--from", "-2"},
                                             {"nosuchverb"}}) {
    auto o = run_verb(args);
    std::string joined;
    for (const auto& a : args)
      joined += a + " ";
    EXPECT_EQ(o.status, 2) << joined << ": " << o.err;
    EXPECT_FALSE(o.err.empty()) << joined << ": a usage error says what is wrong";
  }
  auto replace = run_verb({"decide", "r", "toolu_1", "replace"});
  EXPECT_EQ(replace.status, 2);
  EXPECT_NE(replace.err.find("replace needs --input"), std::string::npos) << replace.err;
  // A deny with no reason, or a reason of blanks, is refused before it is sent (no socket here).
  for (const std::vector<std::string>& deny : std::vector<std::vector<std::string>>{
           {"decide", "r", "toolu_1", "deny"}, {"decide", "r", "toolu_1", "deny", "--reason", " \u00a0 "}}) {
    auto o = run_verb(deny);
    EXPECT_EQ(o.status, 2) << o.err;
    EXPECT_NE(o.err.find("a deny needs a non-empty reason"), std::string::npos) << o.err;
    EXPECT_NE(o.err.find("--reason"), std::string::npos) << o.err;
  }
  EXPECT_EQ(run_verb({"--help"}).status, 0);
  EXPECT_EQ(run_verb({"--version"}).status, 0);
  EXPECT_EQ(run_verb({"tail", "--help"}).status, 0);
}

TEST(AdapterVerbsRefusals, AnUnknownAdapterIsNamed) {
  auto o = run_verb({"capabilities", "nosuch"});
  EXPECT_EQ(o.status, 2);
  EXPECT_NE(o.err.find("unknown adapter \"nosuch\""), std::string::npos) << o.err;
}

}  // namespace
}  // namespace mh::test
