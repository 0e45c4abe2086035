// What a Claude run spends, as the real CLI (2.1.197) reports it: each assistant record's usage is
// as of its message's start (output_tokens 1), so the budget meter takes the turn's own figures
// from the result record at the turn's end (usage of scope "turn").
#include <gtest/gtest.h>

#include "tests/claude/claude_run.hpp"

namespace mh::test {
namespace {

TEST_F(ClaudeRun, AnOutputTokensBudgetIsCrossedByTheTurnsTrueOutputNotTheRequestsFirstCount) {
  // The endpoint reports 50 output tokens for the one answer; the budget is 20.
  start("fifty_output_tokens", {"--budget", "output_tokens=20"});
  process->close_stdin();
  EXPECT_EQ(process->finish(120s), 5) << "exit 5: budget. " << process->stderr_text();
  auto warnings = process->events_named("warning");
  ASSERT_FALSE(warnings.empty()) << process->stderr_text();
  EXPECT_EQ(warnings[0].str("code"), "BUDGET_EXHAUSTED");
  EXPECT_NE(warnings[0].str("message").find("output_tokens budget of 20 token(s) is exhausted: 50 token(s)"),
            std::string::npos)
      << warnings[0].raw;
  EXPECT_EQ(process->events().back().str("reason"), "budget");

  std::vector<EventLine> requests, turns;
  for (const auto& u : process->events_named("usage"))
    (u.str("scope") == "turn" ? turns : requests).push_back(u);
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].str("scope"), "request");
  EXPECT_EQ(requests[0].object.at("usage").as_object().at("output_tokens").to_number<int>(), 1)
      << "the CLI's assistant record counts the message's start";
  ASSERT_EQ(turns.size(), 1u);
  const auto& turn = turns[0].object.at("usage").as_object();
  EXPECT_EQ(turn.at("output_tokens").to_number<int>(), 50);
  EXPECT_EQ(turn.at("input_tokens").to_number<int>(), 12);
  EXPECT_TRUE(turn.at("cost_usd").is_double()) << "the vendor's own cost for the turn: " << turns[0].raw;
}

}  // namespace
}  // namespace mh::test
