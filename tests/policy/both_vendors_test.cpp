// The run's own policies, on every real CLI against the scripted endpoint: budgets end a run with
// reason budget (and a usd budget needs a price), frames enter and leave their steps (a frame set
// mid-run included), and a vendor that stops on its own is named in the stream. The same test,
// word for word, for each adapter.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "protocol/completeness.hpp"
#include "protocol/frame.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {
namespace {

// The model each run names, priced (or not) in the config the test writes: one of its wire's
// (opencode and Qwen Code speak the Anthropic wire, Gemini CLI the Gemini wire).
std::string model_of(const std::string& adapter) {
  return adapter == "codex" ? "gpt-5.5" : adapter == "gemini" ? "gemini-2.5-flash" : "claude-sonnet-4-5";
}

class BothVendors : public ::testing::TestWithParam<std::string> {
 protected:
  const std::string& adapter() const { return GetParam(); }
  std::filesystem::path run_dir() const { return dir.path() / "run"; }
  // The shared scripts name a tool call per wire; opencode shares Claude's wire but not its tool
  // names, so it plays its own script of the same name (the same steps, in its own tools), as
  // Qwen Code does, and Gemini CLI on its own wire.
  std::filesystem::path shared(const std::string& name) const {
    if (adapter() == "opencode" || adapter() == "gemini" || adapter() == "qwen")
      return source_dir() / "tests/scenarios" / adapter() / (name + ".json");
    return source_dir() / "tests/scenarios/shared" / (name + ".json");
  }

  std::unique_ptr<CliProcess> start(const std::string& scenario, std::vector<std::string> extra,
                                    std::optional<std::vector<std::string>> env = std::nullopt) {
    std::vector<std::string> argv = {
        metaharness_binary().string(), "run",       adapter(),         "-p", "go", "--model-scenario",
        shared(scenario).string(),     "--run-dir", run_dir().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<CliProcess>(argv, std::move(env));
  }

  std::filesystem::path write_prices(double input_per_mtok) {
    auto path = dir.path() / "prices.toml";
    std::ofstream(path) << "[prices.\"" << model_of(adapter()) << "\"]\ninput_per_mtok = " << input_per_mtok
                        << "\noutput_per_mtok = " << input_per_mtok << "\ncache_read_per_mtok = " << input_per_mtok
                        << "\ncache_creation_per_mtok = " << input_per_mtok << "\n";
    return path;
  }

  std::filesystem::path write_frame(const std::string& name, const std::string& state, std::uint32_t index) {
    protocol::Frame f = sealed_test_frame({protocol::OpKind::shell});
    f.node_id = state;
    f.step = protocol::StepRef{"tests", state, index, 1};
    protocol::seal(f);
    auto path = dir.path() / (name + ".json");
    std::ofstream(path) << protocol::frame_document(f);
    return path;
  }

  void expect_complete_stream() {
    auto verdict = protocol::check_stream(read_file(run_dir() / "events.jsonl"));
    EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

std::vector<std::string> names_of(const CliProcess& p) {
  std::vector<std::string> out;
  for (const auto& e : p.events())
    out.emplace_back(e.event());
  return out;
}

std::ptrdiff_t index_of(const std::vector<std::string>& names, const std::string& name, std::size_t nth = 0) {
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == name && nth-- == 0) return static_cast<std::ptrdiff_t>(i);
  return -1;
}

TEST_P(BothVendors, AUsdBudgetAtTheModelsPriceEndsTheRunWithReasonBudget) {
  // $1 a token: the first usage record crosses a budget of a hundredth of a cent.
  auto p = start("two_turns", {"--model", model_of(adapter()), "--config", write_prices(1e6).string(), "--budget",
                               "usd=0.0001", "--keep-open"});
  auto warning = p->wait_for_event("warning", 90s);
  ASSERT_TRUE(warning) << p->stderr_text();
  EXPECT_EQ(warning->str("code"), "BUDGET_EXHAUSTED");
  EXPECT_NE(warning->str("message").find("usd budget of $0.0001"), std::string::npos) << warning->raw;
  EXPECT_EQ(p->finish(120s), 5) << "exit 5: budget. " << p->stderr_text();
  EXPECT_EQ(p->events().back().event(), "stream.closed");
  EXPECT_EQ(p->events().back().str("reason"), "budget");
  auto names = names_of(*p);
  EXPECT_LT(index_of(names, "usage"), index_of(names, "warning")) << "the usage that crossed is recorded first";
  expect_complete_stream();
}

TEST_P(BothVendors, AUsdBudgetForAModelWithNoPriceIsRefusedBeforeAnythingSpawns) {
  auto p = start("two_turns",
                 {"--model", "a-model-nobody-priced", "--config", write_prices(1.0).string(), "--budget", "usd=5"});
  EXPECT_EQ(p->finish(60s), 2) << p->stderr_text();
  auto warnings = p->events_named("warning");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].str("code"), "LAUNCH_REFUSED");
  EXPECT_NE(warnings[0].str("message").find("no price for a-model-nobody-priced"), std::string::npos);
  EXPECT_TRUE(p->events_named("session.started").empty()) << "nothing was spawned";
  EXPECT_FALSE(std::filesystem::exists(run_dir() / "vendor-stdout.jsonl") &&
               std::filesystem::file_size(run_dir() / "vendor-stdout.jsonl") > 0);
}

TEST_P(BothVendors, AToolCallsBudgetDeniesTheCallThatCrossesItAndNothingRuns) {
  auto p = start("marker", {"--budget", "tool_calls=0", "--frame",
                            write_frame("frame", "step", 1).string()});  // the frame would admit the shell
  auto decided = p->wait_for_event("tool.decided", 90s);
  ASSERT_TRUE(decided) << p->stderr_text();
  EXPECT_EQ(decided->str("decided_by"), "adapter");
  EXPECT_EQ(decided->object.at("decision").as_object().at("decision"), "deny");
  EXPECT_EQ(p->finish(120s), 5) << p->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(run_dir() / "scratch/work/marker.txt")) << "the crossing call never ran";
  EXPECT_EQ(p->events().back().str("reason"), "budget");
  expect_complete_stream();
}

TEST_P(BothVendors, AFrameEntersItsStepAndAFrameOfAnotherStepLeavesItAtTheNextBoundary) {
  auto first = write_frame("first", "implement", 1);
  protocol::Frame second = sealed_test_frame({protocol::OpKind::shell});
  second.node_id = "verify";
  second.step = protocol::StepRef{"tests", "verify", 2, 1};
  protocol::seal(second);
  auto p = start("two_turns", {"--frame", first.string(), "--keep-open"});
  ASSERT_TRUE(p->wait_for_event("turn.ended", 90s)) << p->stderr_text();
  p->send(R"({"format":"metaharness.command/1","id":"f1","command":"frame.set","frame":)" +
          protocol::canonical_json(protocol::frame_to_json(second, true)) +
          R"(,"step_outcome":{"outcome":"completed"}})");
  p->send(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"go on"})");
  auto second_turn_ended = [](const EventLine& e) {
    return e.event() == "turn.ended" && e.object.at("turn").to_number<int>() == 2;
  };
  ASSERT_TRUE(p->wait_for(second_turn_ended, 90s)) << p->stderr_text();
  p->close_stdin();
  EXPECT_EQ(p->finish(120s), 0) << p->stderr_text();

  auto names = names_of(*p);
  auto entered = p->events_named("step.entered");
  auto left = p->events_named("step.left");
  ASSERT_EQ(entered.size(), 2u);
  ASSERT_EQ(left.size(), 2u) << "the second step is left when the run ends";
  EXPECT_EQ(entered[0].object.at("step").as_object().at("state"), "implement");
  EXPECT_EQ(entered[1].object.at("step").as_object().at("state"), "verify");
  EXPECT_EQ(entered[1].str("frame_digest"), second.digest);
  EXPECT_EQ(left[0].object.at("step").as_object().at("state"), "implement");
  EXPECT_EQ(left[0].object.at("outcome").as_object().at("outcome"), "completed");
  EXPECT_EQ(left[1].object.at("outcome").as_object().at("outcome"), "no_verdict");
  // session.started, step.entered, turn.started; then step.left, step.entered, the second turn.
  EXPECT_LT(index_of(names, "session.started"), index_of(names, "step.entered"));
  EXPECT_EQ(index_of(names, "step.entered") + 1, index_of(names, "turn.started"));
  EXPECT_EQ(index_of(names, "step.left") + 1, index_of(names, "step.entered", 1));
  EXPECT_EQ(index_of(names, "step.entered", 1) + 1, index_of(names, "turn.started", 1));
  expect_complete_stream();
}

TEST_P(BothVendors, AVendorThatExitsBeforeItOpensASessionIsNamedInTheStream) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    env.emplace_back(*e);
  std::string variable = "METAHARNESS_" + adapter() + "_BIN";  // the one-shot run's binary override
  std::transform(variable.begin(), variable.end(), variable.begin(), [](unsigned char c) { return std::toupper(c); });
  env.push_back(variable + "=" + (source_dir() / "tests/policy/exits_at_once.sh").string());
  auto p = start("two_turns", {}, env);
  EXPECT_EQ(p->finish(60s), 3) << p->stderr_text();
  auto warnings = p->events_named("warning");
  ASSERT_EQ(warnings.size(), 1u) << "the stream says why it closes error";
  EXPECT_EQ(warnings[0].str("code"), "VENDOR_EXITED");
  EXPECT_NE(warnings[0].str("message").find("exited with status 7 before it opened a session"), std::string::npos)
      << warnings[0].raw;
  EXPECT_NE(warnings[0].str("message").find("no script for this vendor"), std::string::npos)
      << "its stderr is quoted: " << warnings[0].raw;
  EXPECT_EQ(p->events().back().str("reason"), "error");
  expect_complete_stream();
}

INSTANTIATE_TEST_SUITE_P(Adapters, BothVendors, ::testing::Values("claude", "codex", "opencode", "gemini", "qwen"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace mh::test
