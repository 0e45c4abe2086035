// What Claude's API errors become on the stream (the real CLI, the scripted endpoint failing on
// purpose): a 401 Claude retried is a warning, and auth.expired is said once, when Claude gives
// up; a 429 is a rate_limit, resetting when Claude's retry delay elapses.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>

#include "protocol/json.hpp"
#include "tests/claude/claude_run.hpp"

namespace mh::test {
namespace {

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The run's arguments that let Claude retry a failed API call this many times.
std::vector<std::string> retrying(int times) {
  return {"--vendor-env", "CLAUDE_CODE_MAX_RETRIES=" + std::to_string(times)};
}

// The api_retry records of the run's retained transcript, in order.
std::vector<json::object> api_retries(const std::filesystem::path& run_dir) {
  std::vector<json::object> out;
  for (const auto& line : read_lines(run_dir / "vendor-stdout.jsonl")) {
    auto v = protocol::parse_json(line);
    if (v && v->is_object() && v->as_object().contains("subtype") && v->as_object().at("subtype") == "api_retry")
      out.push_back(v->as_object());
  }
  return out;
}

std::vector<std::string_view> names_among(const CliProcess& p, std::initializer_list<std::string_view> wanted) {
  std::vector<std::string_view> order;
  for (const auto& e : p.events())
    for (auto w : wanted)
      if (e.event() == w) order.push_back(e.event());
  return order;
}

// A run Claude gave up on: it exited 3 (error) after `retries` retries of the API call, and the
// events named in `among` came in `order`.
void expect_gave_up(int exit_status, CliProcess& p, const std::filesystem::path& run_dir, std::size_t retries,
                    std::initializer_list<std::string_view> among, const std::vector<std::string_view>& order) {
  EXPECT_EQ(exit_status, 3) << p.stderr_text();
  ASSERT_EQ(api_retries(run_dir).size(), retries);
  EXPECT_EQ(names_among(p, among), order);
}

TEST_F(ClaudeRun, A401ThatClaudeRetriedAndRecoveredFromIsAWarningNeverAuthExpired) {
  start("auth_401_once", retrying(2));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  ASSERT_EQ(api_retries(run_dir()).size(), 1u) << "Claude retried the 401 once";
  EXPECT_TRUE(process->events_named("auth.expired").empty()) << "the credential worked on the retry";
  auto warnings = process->events_named("warning");
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].str("code"), "VENDOR_AUTH_RETRY");
  EXPECT_NE(warnings[0].str("message").find("attempt 1 of 2"), std::string::npos) << warnings[0].raw;
  EXPECT_NE(warnings[0].str("message").find("authentication_failed"), std::string::npos) << warnings[0].raw;
  EXPECT_EQ(process->events_named("text").back().str("text"), "Recovered.");
  EXPECT_EQ(process->events().back().str("reason"), "completed");
}

TEST_F(ClaudeRun, A401ThatClaudeRetriesAndThenGivesUpOnIsOneAuthExpired) {
  start("auth_401", retrying(2));
  ASSERT_NO_FATAL_FAILURE(expect_gave_up(finish(), *process, run_dir(), 2, {"warning", "auth.expired", "session.ended"},
                                         {"warning", "warning", "auth.expired", "session.ended"}));
  auto expired = process->events_named("auth.expired");
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_NE(expired[0].str("detail").find("OAuth token has expired"), std::string::npos) << expired[0].raw;
  auto warnings = process->events_named("warning");
  EXPECT_NE(warnings[1].str("message").find("attempt 2 of 2"), std::string::npos) << warnings[1].raw;
  EXPECT_EQ(process->events().back().str("reason"), "error");
}

TEST_F(ClaudeRun, A429IsARateLimitThatResetsWhenClaudesRetryDelayElapses) {
  auto before = unix_ms_now();
  start("rate_limited_once", retrying(2));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  auto after = unix_ms_now();
  auto retries = api_retries(run_dir());
  ASSERT_EQ(retries.size(), 1u);
  double delay = retries[0].at("retry_delay_ms").to_number<double>();
  EXPECT_GE(delay, 2000) << "Claude honours retry-after: 2";

  auto limits = process->events_named("rate_limit");
  ASSERT_EQ(limits.size(), 1u);
  const auto& info = limits[0].object.at("info").as_object();
  EXPECT_EQ(info.at("status"), "429");
  EXPECT_TRUE(info.at("window").is_null());
  EXPECT_TRUE(info.at("utilization").is_null());
  EXPECT_TRUE(info.at("using_overage").is_null());
  // Unix seconds: when the line was read plus the vendor's delay, rounded up.
  auto resets_at = info.at("resets_at").to_number<std::int64_t>();
  EXPECT_GE(resets_at, static_cast<std::int64_t>(std::ceil((before + delay) / 1000.0)));
  EXPECT_LE(resets_at, static_cast<std::int64_t>(std::ceil((after + delay) / 1000.0)));
  for (const auto& e : process->events_named("opaque"))
    EXPECT_NE(e.str("vendor_subtype"), "api_retry") << "the 429 retry is mapped, not opaque";

  // Offline there is no time the line was read: the reset is unknown, never invented.
  CliProcess translate({metaharness_binary().string(), "translate", "claude",
                        (run_dir() / "vendor-stdout.jsonl").string(), "--run", "audit-429"});
  translate.close_stdin();
  ASSERT_EQ(translate.finish(), 0);
  auto offline = translate.events_named("rate_limit");
  ASSERT_EQ(offline.size(), 1u);
  EXPECT_EQ(offline[0].object.at("info").as_object().at("status"), "429");
  EXPECT_TRUE(offline[0].object.at("info").as_object().at("resets_at").is_null());
}

TEST_F(ClaudeRun, A429ClaudeGivesUpOnIsOneMoreRateLimitBeforeTheTurnEnds) {
  start("rate_limited_for_good", retrying(1));
  ASSERT_NO_FATAL_FAILURE(expect_gave_up(finish(), *process, run_dir(), 1,
                                         {"rate_limit", "turn.ended", "session.ended"},
                                         {"rate_limit", "rate_limit", "turn.ended", "session.ended"}));
  auto limits = process->events_named("rate_limit");
  ASSERT_EQ(limits.size(), 2u);
  EXPECT_FALSE(limits[0].object.at("info").as_object().at("resets_at").is_null()) << "the retry's delay is known";
  const auto& gave_up = limits[1].object.at("info").as_object();
  EXPECT_EQ(gave_up.at("status"), "429");
  EXPECT_TRUE(gave_up.at("resets_at").is_null()) << "Claude gives no reset time when it gives up";
  EXPECT_EQ(process->events_named("session.ended")[0].str("api_error_status"), "429");
  EXPECT_TRUE(process->events_named("auth.expired").empty());
}

}  // namespace
}  // namespace mh::test
