// The failure a run's close is (protocol/run_failure.hpp), judged from the events its record holds.
#include "protocol/run_failure.hpp"

#include <gtest/gtest.h>

namespace mh::protocol {
namespace {

ev::Warning warning(std::string code, std::string message = "what happened") {
  return ev::Warning{std::move(code), std::move(message)};
}

RunFailure judged(const std::vector<EventPayload>& events, CloseReason reason, ProcessTermination process = {}) {
  FailureWitness witness;
  for (const auto& e : events)
    witness.observe(e);
  auto failure = witness.judge(reason, process);
  EXPECT_TRUE(failure.has_value());
  EXPECT_TRUE(failure && is_failure_category(failure->category)) << (failure ? failure->category : "");
  return failure.value_or(RunFailure{});
}

TEST(RunFailure, ACompletedRunHasNone) {
  FailureWitness witness;
  witness.observe(warning("VENDOR_EXITED"));
  EXPECT_FALSE(witness.judge(CloseReason::completed, {}));
}

TEST(RunFailure, EachCloseReasonAndSignalIsItsCategoryAndSaysWhetherToRetry) {
  struct Case {
    std::vector<EventPayload> events;
    CloseReason reason;
    std::string category;
    bool retryable;
  };
  ev::SessionEnded limited;
  limited.api_error_status = "429";
  ev::SessionEnded overloaded;
  overloaded.api_error_status = "529";
  ev::SessionEnded unauthorized;
  unauthorized.api_error_status = "401";
  ev::RateLimit rejected;
  rejected.info.status = "rejected";
  ev::RateLimit allowed;
  allowed.info.status = "allowed";
  const std::vector<Case> cases = {
      {{warning("BUDGET_EXHAUSTED")}, CloseReason::budget, "budget", false},
      {{}, CloseReason::budget, "budget", false},
      {{}, CloseReason::steer_halt, "halted", false},
      {{warning("RUN_STALLED")}, CloseReason::steer_halt, "stalled", true},
      {{}, CloseReason::killed, "daemon", true},
      {{warning("RUN_UNGOVERNED")}, CloseReason::killed, "daemon", true},
      {{warning("RECOVERED_AFTER_RESTART")}, CloseReason::error, "daemon", true},
      {{warning("SUPERVISOR_LOST")}, CloseReason::error, "daemon", true},
      {{warning("HOST_LOST")}, CloseReason::error, "daemon", true},
      {{warning("LAUNCH_REFUSED")}, CloseReason::error, "launch", false},
      {{warning("LAUNCH_FAILED")}, CloseReason::error, "launch", true},
      {{warning("RUN_FAILED")}, CloseReason::error, "launch", false},
      {{ev::AuthExpired{}}, CloseReason::error, "auth", false},
      {{unauthorized}, CloseReason::error, "auth", false},
      {{limited}, CloseReason::error, "rate_limit", true},
      {{rejected}, CloseReason::error, "rate_limit", true},
      {{overloaded}, CloseReason::error, "upstream", true},
      {{warning("GATEWAY_UPSTREAM_UNREACHABLE")}, CloseReason::error, "upstream", true},
      {{warning("VENDOR_EXITED")}, CloseReason::error, "vendor_exit", true},
      {{allowed}, CloseReason::error, "vendor_exit", true},
      {{}, CloseReason::error, "vendor_exit", true},
      // The most specific signal wins: an expired credential is why the vendor then exited.
      {{ev::AuthExpired{}, warning("VENDOR_EXITED")}, CloseReason::error, "auth", false},
      {{warning("VENDOR_EXITED"), limited}, CloseReason::error, "rate_limit", true},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    auto failure = judged(cases[i].events, cases[i].reason);
    EXPECT_EQ(failure.category, cases[i].category) << "case " << i;
    EXPECT_EQ(failure.retryable, cases[i].retryable) << "case " << i;
    EXPECT_FALSE(failure.detail.empty()) << "case " << i;
  }
}

// Issue 27 §2: only the RUN_STALLED that halted the run (on_stall = "halt") makes its halt a
// stall; a warn-only one followed later by a person's halt is that person's halt.
TEST(RunFailure, OnlyAStallThatHaltedMakesTheHaltStalled) {
  ev::Warning halting = warning("RUN_STALLED");
  halting.stall = ev::StallReport{12000, "tool.result", "Bash", 10000, OnStall::halt};
  ev::Warning warn_only = halting;
  warn_only.stall->on_stall = OnStall::warn;
  RunFailure stalled = judged({halting}, CloseReason::steer_halt);
  EXPECT_EQ(stalled.category, "stalled");
  EXPECT_TRUE(stalled.retryable);
  RunFailure halted = judged({warn_only}, CloseReason::steer_halt);
  EXPECT_EQ(halted.category, "halted");
  EXPECT_FALSE(halted.retryable);
}

TEST(RunFailure, TheDetailQuotesTheSignalAndIsBoundedOnACharacterBoundary) {
  auto failure =
      judged({warning("LAUNCH_REFUSED", "vendor_env CLAUDE_CODE_SIMPLE switches the seam off")}, CloseReason::error);
  EXPECT_EQ(failure.detail, "LAUNCH_REFUSED: vendor_env CLAUDE_CODE_SIMPLE switches the seam off");
  std::string long_message;
  while (long_message.size() < 2000)
    long_message += "é";
  auto bounded = judged({warning("VENDOR_EXITED", long_message)}, CloseReason::error);
  EXPECT_LE(bounded.detail.size(), kMaxFailureDetail);
  EXPECT_EQ(bounded.detail.substr(bounded.detail.size() - 3), "...");
  std::string body = bounded.detail.substr(0, bounded.detail.size() - 3);
  EXPECT_EQ(body.back(), static_cast<char>("é"[1])) << "cut after a whole character";
  ProcessTermination signaled{ProcessKind::signaled, 0, 9};
  EXPECT_EQ(judged({}, CloseReason::error, signaled).detail,
            "the run ended in error: the vendor was killed by signal 9");
}

}  // namespace
}  // namespace mh::protocol
