// The run core's policies beyond deciding calls: the deny-only policy, steps (step.entered /
// step.left at frame boundaries), budgets, and a vendor that stops on its own.
#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

proto::Frame frame_of_step(std::string state, std::uint32_t index, std::vector<proto::OpKind> ops) {
  proto::Frame f;
  f.workflow_id = "development/default";
  f.workflow_version = "1";
  f.node_id = state;
  f.step = proto::StepRef{"development/default", state, index, 1};
  for (auto op : ops)
    f.operations.push_back(proto::Operation{op, {}, {}});
  proto::seal(f);
  return f;
}

std::string frame_set_line(const std::string& id, const proto::Frame& frame, const std::string& extra = "") {
  return R"({"format":"metaharness.command/1","id":")" + id + R"(","command":"frame.set","frame":)" +
         proto::canonical_json(proto::frame_to_json(frame, true)) + extra + "}";
}

// A suite of its own: the fixture class is this file's copy.
class RunCorePolicy : public RunCoreTest {};

const std::string kDecideAllow =
    R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"allow"}})";

// ---------------------------------------------------------------------------------------------
// Deny-only
// ---------------------------------------------------------------------------------------------

TEST_F(RunCorePolicy, DenyOnlyDeliversTheEmbeddersAllowAsAbstainAndRecordsBoth) {
  spec.deny_only = true;
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", kBash));
  command(kDecideAllow);
  EXPECT_TRUE(result_for("d1").outcome.is_ok());
  EXPECT_TRUE(decision_of(answer_for("hk-1")).as_object().empty())
      << "abstain is an empty hook output: the vendor's own rules decide";
  auto decided = only<proto::ev::ToolDecided>();
  EXPECT_TRUE(std::holds_alternative<proto::decision::Abstain>(decided.decision));
  ASSERT_TRUE(decided.requested);
  EXPECT_TRUE(std::holds_alternative<proto::decision::Allow>(*decided.requested));
  EXPECT_EQ(decided.decided_by, proto::DecidedBy::embedder);
  feed(lines::result());
  core->wind_up({proto::ProcessKind::exited, 0, 0}, now);
  auto census = only<proto::ev::SessionEnded>().census;
  EXPECT_EQ(census.abstained, 1u);
  EXPECT_EQ(census.allowed, 0u) << "nothing was granted";
}

TEST_F(RunCorePolicy, DenyOnlyTurnsAFrameAdmissionIntoAbstainAndDeliversDenialsAsTheyAre) {
  spec.deny_only = true;
  open_and_begin(proto::DecisionMode::frame, frame_admitting({proto::OpKind::shell}));
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::tool_use("toolu_2", "Read", json::object{{"file_path", "a.txt"}}));
  auto decided = all<proto::ev::ToolDecided>();
  ASSERT_EQ(decided.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<proto::decision::Abstain>(decided[0].decision));
  EXPECT_TRUE(decided[0].requested && std::holds_alternative<proto::decision::Allow>(*decided[0].requested));
  EXPECT_TRUE(std::holds_alternative<proto::decision::Deny>(decided[1].decision));
  EXPECT_FALSE(decided[1].requested) << "a deny is delivered as it is";
}

TEST_F(RunCorePolicy, DenyOnlyRefusesAReplaceByName) {
  spec.deny_only = true;
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  command(
      R"({"format":"metaharness.command/1","id":"r1","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"replace","input":{"command":"ls"}}})");
  auto r = result_for("r1");
  ASSERT_TRUE(r.outcome.refusal);
  EXPECT_EQ(r.outcome.refusal->code, proto::RefusalCode::UNSUPPORTED_CONTROL);
  EXPECT_NE(r.outcome.refusal->reason.find("deny-only"), std::string::npos);
  EXPECT_EQ(core->pending_count(), 1u) << "the call still waits for a decision the run can deliver";
}

// ---------------------------------------------------------------------------------------------
// Steps
// ---------------------------------------------------------------------------------------------

TEST_F(RunCorePolicy, ALaunchFrameEntersItsStepBeforeTheFirstTurn) {
  auto frame = frame_of_step("implement", 2, {proto::OpKind::shell});
  open_and_begin(proto::DecisionMode::frame, frame);
  auto n = names();
  auto entered = std::find(n.begin(), n.end(), "step.entered");
  ASSERT_NE(entered, n.end());
  EXPECT_LT(std::find(n.begin(), n.end(), "session.started"), entered);
  EXPECT_EQ(*(entered + 1), "turn.started");
  auto e = only<proto::ev::StepEntered>();
  EXPECT_EQ(e.step.state, "implement");
  EXPECT_EQ(e.step.index, 2u);
  EXPECT_EQ(e.frame_digest, frame.digest);
}

TEST_F(RunCorePolicy, AFrameOfAnotherStepLeavesTheOldOneWithTheEmbeddersOutcomeAtTheBoundary) {
  auto first = frame_of_step("implement", 2, {proto::OpKind::shell});
  auto second = frame_of_step("verify", 3, {proto::OpKind::file_read});
  open_and_begin(proto::DecisionMode::frame, first, /*keep_open=*/true);
  command(frame_set_line("f1", second, R"(,"step_outcome":{"outcome":"completed"})"));
  EXPECT_TRUE(result_for("f1").outcome.is_ok());
  EXPECT_TRUE(all<proto::ev::StepLeft>().empty()) << "nothing changes before the boundary";
  feed(lines::result());  // the turn ends: the run idles, held open
  command(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"next"})");
  feed(lines::init());  // the next turn starts under the new frame
  auto left = only<proto::ev::StepLeft>();
  EXPECT_EQ(left.step.state, "implement");
  EXPECT_EQ(left.outcome.kind, proto::StepOutcome::Kind::completed);
  auto entered = all<proto::ev::StepEntered>();
  ASSERT_EQ(entered.size(), 2u);
  EXPECT_EQ(entered[1].step.state, "verify");
  EXPECT_EQ(entered[1].frame_digest, second.digest);
  auto n = names();
  auto l = std::find(n.begin(), n.end(), "step.left");
  EXPECT_EQ(*(l + 1), "step.entered");
  EXPECT_EQ(*(l + 2), "turn.started");
}

TEST_F(RunCorePolicy, AFrameForTheSameStepIsNoStepBoundaryAndTheRunEndLeavesTheOpenStep) {
  auto first = frame_of_step("implement", 2, {proto::OpKind::shell});
  auto same_step = frame_of_step("implement", 2, {proto::OpKind::shell, proto::OpKind::file_read});
  open_and_begin(proto::DecisionMode::frame, first, /*keep_open=*/true);
  command(frame_set_line("f1", same_step));
  feed(lines::result());
  command(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"next"})");
  feed(lines::init());
  EXPECT_EQ(all<proto::ev::StepEntered>().size(), 1u);
  EXPECT_TRUE(all<proto::ev::StepLeft>().empty());
  command(R"({"format":"metaharness.command/1","id":"h1","command":"halt"})");
  core->wind_up({proto::ProcessKind::signaled, 0, 9}, now);
  auto left = only<proto::ev::StepLeft>();
  EXPECT_EQ(left.outcome.kind, proto::StepOutcome::Kind::no_verdict);
  EXPECT_FALSE(left.outcome.reason.empty());
}

TEST_F(RunCorePolicy, AFrameSetWithoutAnOutcomeLeavesTheStepWithNoVerdict) {
  open_and_begin(proto::DecisionMode::frame, frame_of_step("a", 1, {proto::OpKind::shell}), true);
  command(frame_set_line("f1", frame_of_step("b", 2, {proto::OpKind::shell})));
  feed(lines::result());
  command(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"next"})");
  feed(lines::init());
  EXPECT_EQ(only<proto::ev::StepLeft>().outcome.kind, proto::StepOutcome::Kind::no_verdict);
}

// ---------------------------------------------------------------------------------------------
// Budgets
// ---------------------------------------------------------------------------------------------

TEST_F(RunCorePolicy, ATurnsBudgetRefusesTheTurnBeyondItAndEndsTheRunWithReasonBudget) {
  spec.budget.turns = 1;
  open_and_begin(proto::DecisionMode::frame, std::nullopt, /*keep_open=*/true);
  feed(lines::result());
  EXPECT_FALSE(fx.terminated) << "one turn is within the budget";
  command(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"again"})");
  auto r = result_for("m1");
  ASSERT_TRUE(r.outcome.refusal);
  EXPECT_EQ(r.outcome.refusal->code, proto::RefusalCode::TOO_LATE);
  auto warning = only<proto::ev::Warning>();
  EXPECT_EQ(warning.code, "BUDGET_EXHAUSTED");
  EXPECT_NE(warning.message.find("turns budget of 1"), std::string::npos) << warning.message;
  EXPECT_TRUE(fx.terminated);
  EXPECT_EQ(core->wind_up({proto::ProcessKind::signaled, 0, 9}, now), proto::CloseReason::budget);
  EXPECT_TRUE(all<proto::ev::Injection>().empty() ||
              all<proto::ev::Injection>().back().origin != std::optional<std::string>("message.inject"))
      << "the refused text never went into the conversation";
}

TEST_F(RunCorePolicy, AToolCallsBudgetDeniesTheCallThatCrossesItAndHalts) {
  spec.budget.tool_calls = 1;
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::tool_use("toolu_2", "Bash", kBash));
  auto decided = all<proto::ev::ToolDecided>();
  ASSERT_EQ(decided.size(), 2u) << "the pending first call is abandoned, the second refused";
  for (const auto& d : decided) {
    EXPECT_TRUE(std::holds_alternative<proto::decision::Deny>(d.decision));
    EXPECT_EQ(d.decided_by, proto::DecidedBy::adapter);
  }
  EXPECT_EQ(decided[0].call_id, "toolu_2");
  EXPECT_NE(std::get<proto::decision::Deny>(decided[0].decision).reason.find("tool_calls budget"), std::string::npos);
  EXPECT_EQ(all<proto::ev::ToolRequested>().size(), 2u) << "the crossing call is still recorded";
  EXPECT_EQ(fx.spend.tool_calls, 2u);
  EXPECT_TRUE(fx.terminated);
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 0, 0}, now), proto::CloseReason::budget);
}

TEST_F(RunCorePolicy, ATokenBudgetStopsTheRunAfterTheUsageThatCrossedItIsRecorded) {
  spec.budget.output_tokens = 1;
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::text("one"));  // 5 in, 1 out: within
  EXPECT_FALSE(fx.terminated);
  feed(lines::text_with_usage("two", 5, 3, "req_9"));
  EXPECT_TRUE(fx.terminated);
  EXPECT_EQ(fx.spend.output_tokens, 4u);
  EXPECT_EQ(fx.spend.input_tokens, 10u);
  auto n = names();
  auto usage = std::find(n.rbegin(), n.rend(), "usage");
  auto warning = std::find(n.rbegin(), n.rend(), "warning");
  EXPECT_LT(usage.base(), warning.base()) << "the usage that crossed is recorded before the warning";
  EXPECT_NE(only<proto::ev::Warning>().message.find("output_tokens budget of 1 token(s)"), std::string::npos);
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 0, 0}, now), proto::CloseReason::budget);
}

TEST_F(RunCorePolicy, AUsdBudgetIsMeteredAtTheModelsPriceAndCrossedWhenExceeded) {
  PriceTable prices;
  prices.set("claude-opus-*", ModelPrice{1'000'000.0, 1'000'000.0, std::nullopt, std::nullopt});  // $1 a token
  options.prices = &prices;
  spec.budget.usd = 10.0;
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::text("one"));  // 5 + 1 tokens: $6
  ASSERT_TRUE(fx.spend.usd);
  EXPECT_DOUBLE_EQ(*fx.spend.usd, 6.0);
  EXPECT_FALSE(fx.terminated);
  feed(lines::text_with_usage("two", 5, 1));
  EXPECT_TRUE(fx.terminated);
  auto warning = only<proto::ev::Warning>();
  EXPECT_EQ(warning.code, "BUDGET_EXHAUSTED");
  EXPECT_NE(warning.message.find("usd budget of $10.0"), std::string::npos) << warning.message;
  EXPECT_NE(warning.message.find("$12.0 spent"), std::string::npos) << warning.message;
}

TEST_F(RunCorePolicy, AUsageOfAnUnpricedModelMakesTheCostUnknownNotZero) {
  PriceTable prices;
  prices.set("some-other-model", ModelPrice{1.0, 1.0, 1.0, 1.0});
  options.prices = &prices;
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::text("one"));
  EXPECT_TRUE(fx.spend.usd) << "a request's figures are judged at the turn's end";
  feed(lines::result_without_usage());
  EXPECT_FALSE(fx.spend.usd) << "an unpriced usage makes the spend unknown";
  EXPECT_EQ(fx.spend.unpriced_model, "claude-opus-4-8");
  EXPECT_FALSE(fx.terminated) << "without a usd budget the run goes on";
}

TEST_F(RunCorePolicy, AnUnpricedRequestIsPricedByTheVendorsCostForItsTurn) {
  PriceTable prices;
  prices.set("some-other-model", ModelPrice{1.0, 1.0, 1.0, 1.0});
  options.prices = &prices;
  spec.budget.usd = 100.0;
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::text("one"));
  feed(lines::result());  // modelUsage: claude-opus-4-8 at the vendor's $0.00065
  EXPECT_FALSE(fx.terminated) << "the turn's figures carry the vendor's own cost";
  ASSERT_TRUE(fx.spend.usd);
  EXPECT_DOUBLE_EQ(*fx.spend.usd, 0.00065);
  EXPECT_EQ(fx.spend.output_tokens, 0u) << "the turn's figures (modelUsage gives no output) replaced the request's";
}

TEST_F(RunCorePolicy, AUsdBudgetThatCanNoLongerBeMeteredStopsTheRun) {
  PriceTable prices;
  prices.set("claude-opus-4-8", ModelPrice{1.0, 1.0, std::nullopt, std::nullopt});
  options.prices = &prices;
  spec.budget.usd = 100.0;
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::line({{"type", "assistant"},
                    {"message", json::object{{"id", "msg_9"},
                                             {"role", "assistant"},
                                             {"model", "claude-haiku-9"},
                                             {"content", json::array{json::object{{"type", "text"}, {"text", "sub"}}}},
                                             {"usage", json::object{{"input_tokens", 5}, {"output_tokens", 1}}}}}}));
  EXPECT_FALSE(fx.terminated) << "judged at the turn's end, where the vendor's cost could price it";
  feed(lines::result_without_usage());
  EXPECT_TRUE(fx.terminated);
  EXPECT_NE(only<proto::ev::Warning>().message.find("claude-haiku-9 has no price"), std::string::npos);
}

TEST_F(RunCorePolicy, AWallBudgetIsArmedAtStartAndEndsTheRunWhenItFires) {
  spec.budget.wall_ms = 5000;
  open_and_begin(proto::DecisionMode::frame);
  ASSERT_TRUE(fx.wall_budget_at);
  EXPECT_EQ(*fx.wall_budget_at, now + 5000ms);
  now += 5000ms;
  core->on_wall_budget(now);
  EXPECT_NE(only<proto::ev::Warning>().message.find("wall_ms budget of 5000 ms"), std::string::npos);
  EXPECT_TRUE(fx.terminated);
  EXPECT_EQ(core->wind_up({proto::ProcessKind::signaled, 0, 9}, now), proto::CloseReason::budget);
}

TEST_F(RunCorePolicy, ABudgetKeptOutsideTheRunStopsItWithTheHostsWords) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  core->on_budget_exhausted("the daily usd budget of uid 1000 ($5.0) is exhausted: $5.2 spent today", now);
  auto warnings = all<proto::ev::Warning>();
  ASSERT_FALSE(warnings.empty());
  EXPECT_EQ(warnings.front().code, "BUDGET_EXHAUSTED");
  EXPECT_NE(warnings.front().message.find("daily usd budget of uid 1000"), std::string::npos);
  EXPECT_EQ(core->pending_count(), 0u) << "pending calls are abandoned";
  EXPECT_EQ(core->wind_up({proto::ProcessKind::signaled, 0, 9}, now), proto::CloseReason::budget);
}

// ---------------------------------------------------------------------------------------------
// Sub-agents
// ---------------------------------------------------------------------------------------------

TEST_F(RunCorePolicy, ASubAgentsTaskPromptIsAnInjectionFromTheSpawningAgent) {
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::line(
      {{"type", "user"},
       {"message", json::object{{"role", "user"},
                                {"content", json::array{json::object{{"type", "text"}, {"text", "list the files"}}}}}},
       {"parent_tool_use_id", "toolu_agent"}}));
  auto injection = only<proto::ev::Injection>();
  EXPECT_EQ(injection.text, "list the files");
  EXPECT_EQ(injection.origin, "subagent");
}

TEST_F(RunCorePolicy, ACallReAskedWithAnotherInputKeepsTheAgentThatMadeIt) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::line(
      {{"type", "assistant"},
       {"message",
        json::object{{"id", "msg_s"},
                     {"role", "assistant"},
                     {"model", "claude-opus-4-8"},
                     {"content", json::array{json::object{
                                     {"type", "tool_use"}, {"id", "toolu_sub"}, {"name", "Bash"}, {"input", kBash}}}}}},
       {"parent_tool_use_id", "toolu_agent"}}));
  ASSERT_EQ(only<proto::ev::ToolRequested>().agent, "toolu_agent");
  json::object other{{"command", "rm -rf /"}, {"description", "not what was presented"}};
  json::object hook_input{{"hook_event_name", "PreToolUse"},
                          {"tool_name", "Bash"},
                          {"tool_input", other},
                          {"tool_use_id", "toolu_sub"},
                          {"agent_id", "toolu_agent"}};
  feed(lines::line({{"type", "control_request"},
                    {"request_id", "hk-9"},
                    {"request", json::object{{"subtype", "hook_callback"}, {"input", hook_input}}}}));
  auto requested = all<proto::ev::ToolRequested>();
  ASSERT_EQ(requested.size(), 2u);
  EXPECT_EQ(all<proto::ev::Warning>().back().code, "REQUEST_MUTATED");
  EXPECT_EQ(requested[1].agent, "toolu_agent") << "the re-presentation names the same agent";
}

// ---------------------------------------------------------------------------------------------
// A vendor that stops on its own
// ---------------------------------------------------------------------------------------------

TEST_F(RunCorePolicy, AVendorThatExitsBeforeItOpensASessionIsNamedWithItsStderr) {
  open(proto::DecisionMode::frame);
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 2, 0}, now, "mh-standin-claude: no script given"),
            proto::CloseReason::error);
  auto warning = only<proto::ev::Warning>();
  EXPECT_EQ(warning.code, "VENDOR_EXITED");
  EXPECT_NE(warning.message.find("exited with status 2 before it opened a session"), std::string::npos)
      << warning.message;
  EXPECT_NE(warning.message.find("no script given"), std::string::npos);
}

TEST_F(RunCorePolicy, AVendorThatDiesMidTurnIsNamedTooButANormalEndIsNot) {
  open_and_begin(proto::DecisionMode::frame);
  EXPECT_EQ(core->wind_up({proto::ProcessKind::signaled, 0, 9}, now), proto::CloseReason::error);
  EXPECT_NE(only<proto::ev::Warning>().message.find("killed by signal 9 while the run was in progress"),
            std::string::npos);
}

TEST_F(RunCorePolicy, ANormalEndCarriesNoVendorExitWarning) {
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::result());
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 0, 0}, now), proto::CloseReason::completed);
  EXPECT_TRUE(all<proto::ev::Warning>().empty());
}

}  // namespace
}  // namespace mh::daemon
