// Parking (issue 27 §5) on the REAL Claude Code CLI (2.1.197) against the scripted endpoint: a
// call pending longer than --park-after is answered "defer", the vendor ends its turn
// (tool_deferred) and its process exits; a later decision (the embedder's, or the call's own
// deadline) resumes the session with --resume, and the vendor runs the call or not by it. The
// stream stays one stream: one session.started, contiguous seqs (check-stream), warnings
// RUN_PARKED and RUN_RESUMED where it parked and resumed.
#include <gtest/gtest.h>

#include <fstream>

#include "tests/claude/claude_run.hpp"
#include "tests/support/shared_behaviours.hpp"

namespace mh::test {
namespace {

class ClaudePark : public ClaudeRun {
 protected:
  std::optional<EventLine> warning(const std::string& code) {
    return process->wait_for([&](const EventLine& e) { return e.event() == "warning" && e.str("code") == code; }, 60s);
  }
  // The run's processes are gone once the vendor exits: the CLI's own children list is empty.
  // Polled with a bound (the vendor exits on its own once its stdin is closed).
  bool vendor_gone(std::chrono::seconds bound = 30s) {
    const auto until = std::chrono::steady_clock::now() + bound;
    const std::string path =
        "/proc/" + std::to_string(process->pid()) + "/task/" + std::to_string(process->pid()) + "/children";
    while (std::chrono::steady_clock::now() < until) {
      std::ifstream in(path);
      std::string children;
      std::getline(in, children);
      if (in.good() || in.eof())
        if (children.find_first_not_of(' ') == std::string::npos) return true;
      std::this_thread::sleep_for(50ms);  // a poll with a bound, not a synchronisation
    }
    return false;
  }
  // Parked: the turn ended tool_deferred, RUN_PARKED said so, the vendor's process is gone and
  // the command has not run.
  void expect_parked() {
    auto parked = warning("RUN_PARKED");
    ASSERT_TRUE(parked) << process->stderr_text();
    EXPECT_NE(parked->str("message").find("toolu_marker"), std::string::npos);
    auto ended = process->events_named("turn.ended");
    ASSERT_FALSE(ended.empty());
    EXPECT_EQ(ended.back().str("stop_reason"), "tool_deferred");
    EXPECT_TRUE(vendor_gone()) << "the parked vendor's process must exit";
    EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt")) << "nothing ran while parked";
  }
  // One stream: one session.started, RUN_PARKED before RUN_RESUMED, a second turn, and the
  // binary's own check-stream says complete.
  void expect_one_stream() {
    EXPECT_EQ(process->events_named("session.started").size(), 1u);
    std::vector<std::string> order;
    for (const auto& e : process->events())
      if (e.event() == "warning" && (e.str("code") == "RUN_PARKED" || e.str("code") == "RUN_RESUMED"))
        order.push_back(e.str("code"));
    EXPECT_EQ(order, (std::vector<std::string>{"RUN_PARKED", "RUN_RESUMED"}));
    EXPECT_EQ(process->events_named("turn.started").size(), 2u);
    EXPECT_EQ(process->events().back().event(), "stream.closed");
    EXPECT_EQ(process->events().back().str("reason"), "completed");
    auto checked = run_to_end({metaharness_binary().string(), "check-stream", (run_dir() / "events.jsonl").string()});
    EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
  }
};

TEST_F(ClaudePark, AParkedCallAllowedLaterResumesTheSessionAndRuns) {
  start("bash_marker", {"--decisions", "ask", "--park-after", "200ms", "--decision-deadline-ms", "300000"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  expect_parked();
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"allow"})"));
  ASSERT_TRUE(warning("RUN_RESUMED")) << process->stderr_text();
  EXPECT_EQ(outcome_code(*result_for("c1")), "ok");
  auto result = process->wait_for_event("tool.result");
  ASSERT_TRUE(result) << process->stderr_text();
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "marker.txt")) << "the allowed call ran after the resume";
  auto decided = process->events_named("tool.decided");
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_EQ(decided[0].str("decided_by"), "embedder");
  expect_one_stream();
}

TEST_F(ClaudePark, AParkedCallDeniedLaterDoesNotRunAndTheReasonReachesTheModel) {
  start("bash_marker", {"--decisions", "ask", "--park-after", "200ms", "--decision-deadline-ms", "300000"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  expect_parked();
  // Quotes and shell syntax: the reason is data wherever the resume carries it (a settings hook).
  const std::string reason = "SUPERVISOR: not after a night's thought either; $(touch pwned) `touch pwned2` '";
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"deny","reason":")" + reason + "\"}"));
  ASSERT_TRUE(warning("RUN_RESUMED")) << process->stderr_text();
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt")) << "the denied call must not run";
  EXPECT_FALSE(std::filesystem::exists(work() / "pwned") || std::filesystem::exists(work() / "pwned2"))
      << "the reason was run as shell";
  bool reached_model = false;
  for (const auto& body : logged_request_bodies(run_dir()))
    if (protocol::canonical_json(body).find(reason) != std::string::npos) reached_model = true;
  EXPECT_TRUE(reached_model) << "the resumed session's next model request carries the deny reason";
  expect_one_stream();
}

// A parked call is still bound by its decision deadline: nobody decides, the deadline denies it,
// the session is resumed to deliver that deny, and nothing runs.
TEST_F(ClaudePark, AParkedCallNobodyDecidesIsDeniedByItsDeadlineAndTheSessionResumes) {
  start("bash_marker", {"--decisions", "ask", "--park-after", "200ms", "--decision-deadline-ms", "4000"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  expect_parked();
  auto decided = process->wait_for_event("tool.decided");
  ASSERT_TRUE(decided) << process->stderr_text();
  EXPECT_EQ(decided->str("decided_by"), "deadline");
  ASSERT_TRUE(warning("RUN_RESUMED")) << process->stderr_text();
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt"));
  expect_one_stream();
}

// A call decided before park_after never parks: no defer, one turn, one process.
TEST_F(ClaudePark, ACallDecidedBeforeParkAfterIsNeverParked) {
  start("bash_marker", {"--decisions", "ask", "--park-after", "10m"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"allow"})"));
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "marker.txt"));
  for (const auto& e : process->events_named("warning"))
    EXPECT_NE(e.str("code"), "RUN_PARKED");
  EXPECT_EQ(process->events_named("turn.started").size(), 1u);
}

}  // namespace
}  // namespace mh::test
