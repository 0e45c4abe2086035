// The run's policy against Claude's own, on the real CLI: postures an allow would override are
// refused SHADOWED unless the run is deny-only, and under deny-only Claude's posture holds; the
// longest decision deadline the seam can hold is held, one more is refused; an unknown vendor
// option is refused by name.
#include <gtest/gtest.h>

#include "protocol/json.hpp"
#include "tests/claude/claude_run.hpp"

namespace mh::test {
namespace {

// (2^31 - 1 ms / 1000 - 30) * 1000: Claude's hook timeout (the deadline in seconds + 30) must
// fit its timer; at one second more Claude withdraws every call within ~15 ms (observed).
constexpr const char* kMaxDeadline = "2147453000";
constexpr const char* kMaxDeadlinePlusOne = "2147453001";

std::string refusal_reason(const EventLine& result) {
  return std::string(result.object.at("outcome").as_object().at("refused").as_object().at("reason").as_string());
}

TEST_F(ClaudeRun, WithoutDenyOnlyEveryPostureAnAllowWouldOverrideIsRefusedShadowed) {
  start("two_turns_keep_open", {"--decisions", "ask", "--keep-open"});
  ASSERT_TRUE(process->wait_for_event("turn.ended")) << process->stderr_text();
  for (std::string posture : {"plan", "default", "dontAsk", "acceptEdits", "auto"}) {
    send(posture, command_line(posture, "permission.set", "\"posture\":\"" + posture + "\""));
    auto result = result_for(posture);
    ASSERT_TRUE(result) << posture;
    EXPECT_EQ(outcome_code(*result), "SHADOWED") << posture;
    EXPECT_NE(refusal_reason(*result).find("deny-only"), std::string::npos) << result->raw;
  }
  // bypassPermissions refuses nothing an allow could override: it reaches Claude, which refuses
  // it in its own words (the run was not launched with --dangerously-skip-permissions).
  send("bypass", command_line("bypass", "permission.set", R"("posture":"bypassPermissions")"));
  auto bypass = result_for("bypass");
  ASSERT_TRUE(bypass);
  EXPECT_NE(outcome_code(*bypass), "SHADOWED");
  EXPECT_NE(refusal_reason(*bypass).find("--dangerously-skip-permissions"), std::string::npos) << bypass->raw;
  EXPECT_EQ(finish(), 0) << process->stderr_text();
  int mode_changes = 0;
  for (const auto& line : read_lines(run_dir() / "vendor-stdin.jsonl"))
    if (line.find("set_permission_mode") != std::string::npos) {
      ++mode_changes;
      EXPECT_NE(line.find("bypassPermissions"), std::string::npos) << "a refused posture reached Claude: " << line;
    }
  EXPECT_EQ(mode_changes, 1);
}

TEST_F(ClaudeRun, UnderDenyOnlyPlanPostureHoldsAgainstAnEmbeddersAllow) {
  start("write_after_first_turn", {"--decisions", "ask", "--keep-open", "--deny-only"});
  auto started = process->wait_for_event("session.started");
  ASSERT_TRUE(started) << process->stderr_text();
  EXPECT_TRUE(started->object.at("hermetic").as_object().at("deny_only").as_bool()) << "the attestation says so";
  ASSERT_TRUE(process->wait_for_event("turn.ended"));

  send("plan", command_line("plan", "permission.set", R"("posture":"plan")"));
  EXPECT_EQ(outcome_code(*result_for("plan")), "ok");
  send("go", command_line("go", "message.inject", R"("text":"go on")"));
  auto requested = process->wait_for(
      [](const EventLine& e) { return e.event() == "tool.requested" && e.str("call_id") == "toolu_write"; });
  ASSERT_TRUE(requested) << process->stderr_text();
  send("allow", decide_line("allow", "toolu_write", R"({"decision":"allow"})"));
  auto decided = process->wait_for_event("tool.decided");
  ASSERT_TRUE(decided);
  EXPECT_EQ(decided->object.at("decision").as_object().at("decision"), "abstain");
  EXPECT_EQ(decided->object.at("requested").as_object().at("decision"), "allow");
  EXPECT_EQ(decided->str("decided_by"), "embedder");
  auto result = process->wait_for(
      [](const EventLine& e) { return e.event() == "tool.result" && e.str("call_id") == "toolu_write"; });
  ASSERT_TRUE(result);
  EXPECT_TRUE(result->object.at("is_error").as_bool());
  EXPECT_NE(result->str("content").find("plan mode"), std::string::npos)
      << "Claude's plan mode refused: " << result->raw;
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_EQ(outcome_code(*result_for("allow")), "ok");
  EXPECT_FALSE(std::filesystem::exists(work() / "written.txt")) << "an allow must not override plan mode";
}

TEST(ClaudePlanAttestation, ObserveModeUnderDenyOnlySaysAllowsAreDeliveredAsAbstain) {
  auto scenario = source_dir() / "tests/scenarios/claude/bash_marker.json";
  auto plan_with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {metaharness_binary().string(),
                                     "plan",
                                     "claude",
                                     "-p",
                                     "go",
                                     "--model-scenario",
                                     scenario.string(),
                                     "--decisions",
                                     "observe"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto plan = run_to_end(std::move(argv), std::nullopt, 60s);
    EXPECT_EQ(plan.status, 0) << plan.err;
    auto v = protocol::parse_json(plan.out);
    EXPECT_TRUE(v && v->is_object()) << plan.out;
    return v && v->is_object() ? v->as_object().at("hermetic").as_object() : json::object{};
  };
  auto ambient = [](const json::object& hermetic) { return protocol::canonical_json(hermetic.at("ambient_inputs")); };

  auto granting = plan_with({});
  EXPECT_FALSE(granting.at("deny_only").as_bool());
  EXPECT_NE(ambient(granting).find("an allow on this wire grants"), std::string::npos) << ambient(granting);

  auto deny_only = plan_with({"--deny-only"});
  EXPECT_TRUE(deny_only.at("deny_only").as_bool());
  EXPECT_EQ(ambient(deny_only).find("grants"), std::string::npos) << ambient(deny_only);
  EXPECT_NE(ambient(deny_only).find("delivered as abstain"), std::string::npos) << ambient(deny_only);
}

TEST_F(ClaudeRun, TheLongestDeadlineTheSeamCanHoldIsHeldUntilTheEmbedderDecides) {
  start("bash_marker", {"--decisions", "ask", "--decision-deadline-ms", kMaxDeadline});
  auto requested = process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << process->stderr_text();
  EXPECT_EQ(std::to_string(requested->object.at("deadline_ms").to_number<std::uint64_t>()), kMaxDeadline);
  // An overflowing vendor timer withdraws the call within milliseconds; this one must not be
  // decided by anybody but us, so nothing may decide it in the next seconds.
  EXPECT_FALSE(process->wait_for([](const EventLine& e) { return e.event() == "tool.decided"; }, 3s))
      << "the vendor withdrew the call: its hook timeout overflowed";
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"allow"})"));
  auto result = result_for("c1");
  ASSERT_TRUE(result);
  EXPECT_EQ(outcome_code(*result), "ok");
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "marker.txt"));
  auto decided = process->events_named("tool.decided");
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_EQ(decided[0].str("decided_by"), "embedder");
}

TEST_F(ClaudeRun, ADeadlineLongerThanTheSeamCanHoldIsRefusedAtStartNamingTheMaximum) {
  start("bash_marker", {"--decisions", "ask", "--decision-deadline-ms", kMaxDeadlinePlusOne});
  EXPECT_EQ(finish(), 2) << process->stderr_text();
  auto warnings = process->events_named("warning");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].str("code"), "LAUNCH_REFUSED");
  EXPECT_NE(warnings[0].str("message").find(kMaxDeadline), std::string::npos) << warnings[0].raw;
  EXPECT_FALSE(std::filesystem::exists(run_dir() / "vendor-stdout.jsonl")) << "nothing was spawned";
}

// `metaharness run` has no cgroup to put a limit in: a limit is refused at the start, by name,
// never ignored, and the run says on stderr that it is not contained.
TEST_F(ClaudeRun, ALimitIsRefusedAtStartBecauseTheOneShotRunIsNotContained) {
  start("bash_marker", {"--limit", "pids_max=64"});
  EXPECT_EQ(finish(), 2) << process->stderr_text();
  auto warnings = process->events_named("warning");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].str("code"), "LAUNCH_REFUSED");
  EXPECT_NE(warnings[0].str("message").find(R"(limits {"pids_max":64} cannot be enforced)"), std::string::npos)
      << warnings[0].raw;
  EXPECT_FALSE(std::filesystem::exists(run_dir() / "vendor-stdout.jsonl")) << "nothing was spawned";
  EXPECT_NE(process->stderr_text().find("this run is not contained"), std::string::npos) << process->stderr_text();
}

TEST_F(ClaudeRun, ABadLimitIsRefusedByNameBeforeTheRun) {
  start("bash_marker", {"--limit", "cpu_max_percent=0"});
  EXPECT_EQ(finish(), 2) << process->stderr_text();
  EXPECT_NE(process->stderr_text().find("--limit: limit cpu_max_percent is 0; expected 1 to 100000"), std::string::npos)
      << process->stderr_text();
}

TEST_F(ClaudeRun, AnUnknownVendorOptionIsRefusedByNameAtRunAndAtPlan) {
  const std::string message = "unknown claude vendor option \"bogus\"; claude knows none";
  start("bash_marker", {"--vendor-option", "bogus=1"});
  EXPECT_EQ(finish(), 2) << process->stderr_text();
  auto warnings = process->events_named("warning");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].str("code"), "LAUNCH_REFUSED");
  EXPECT_EQ(warnings[0].str("message"), message);
  EXPECT_FALSE(std::filesystem::exists(run_dir() / "vendor-stdout.jsonl")) << "nothing was spawned";

  CliProcess plan({metaharness_binary().string(), "plan", "claude", "-p", "go", "--model-scenario",
                   scenario("bash_marker").string(), "--vendor-option", "bogus=1"});
  plan.close_stdin();
  EXPECT_EQ(plan.finish(), 2);
  EXPECT_NE(plan.stderr_text().find(message), std::string::npos) << plan.stderr_text();
}

}  // namespace
}  // namespace mh::test
