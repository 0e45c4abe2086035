// `metaharness run claude` with the stand-in as the claude binary (METAHARNESS_CLAUDE_BIN):
// the same kinds of end-to-end tests as tests/claude/claude_run_test.cpp runs against the real
// CLI, at a fraction of the cost. Passing here shows the stand-in is faithful enough to stand in
// for the real CLI in daemon tests.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "protocol/completeness.hpp"
#include "protocol/frame.hpp"
#include "tests/standin/standin_support.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {
namespace {

// The parent pid of a live process, from /proc (0 when it is gone).
int parent_of(int pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close_paren = stat.rfind(')');
  if (close_paren == std::string::npos) return 0;
  std::istringstream rest(stat.substr(close_paren + 2));
  std::string state;
  int ppid = 0;
  rest >> state >> ppid;
  return ppid;
}

// The shared governed-run fixture (tests/support/governed_run.hpp: the helpers, and the closing
// checks on every stream and every command), with the stand-in in place of the real CLI.
class StandinRun : public GovernedRun {
 protected:
  StandinRun() : GovernedRun("claude") {}

  void start(const std::string& script_name, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {metaharness_binary().string(),
                                     "run",
                                     "claude",
                                     "-p",
                                     "go",
                                     "--model-endpoint",
                                     "http://127.0.0.1:9",  // never called
                                     "--vendor-env",
                                     "MH_STANDIN_SCRIPT=" + standin_script(script_name).string(),
                                     "--run-dir",
                                     run_dir().string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process = std::make_unique<CliProcess>(argv, environment_with("METAHARNESS_CLAUDE_BIN", standin_binary().string()));
  }

  std::vector<EventLine> tool_results(const std::string& call_id) const {
    std::vector<EventLine> out;
    for (const auto& e : process->events_named("tool.result"))
      if (e.str("call_id") == call_id) out.push_back(e);
    return out;
  }
};

TEST_F(StandinRun, FrameAdmittingNoShellDeniesBashAndTheVendorsDenialsPassThroughToSessionEnded) {
  start("bash_marker", {"--frame", write_frame({protocol::OpKind::file_read}).string()});
  process->close_stdin();
  auto decided = process->wait_for_event("tool.decided");
  ASSERT_TRUE(decided) << process->stderr_text();
  EXPECT_EQ(decided->str("decided_by"), "frame");
  EXPECT_EQ(decided->object.at("decision").as_object().at("decision"), "deny");
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt")) << "the denied command must not have run";

  auto started = process->events_named("session.started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].str("harness_version"), "2.1.197");
  auto ended = process->events_named("session.ended");
  ASSERT_EQ(ended.size(), 1u);
  const auto& denials = ended[0].object.at("permission_denials").as_array();
  ASSERT_EQ(denials.size(), 1u);
  EXPECT_EQ(denials[0].as_object().at("tool_name"), "Bash");
  EXPECT_EQ(denials[0].as_object().at("tool_use_id"), "toolu_marker");
  EXPECT_EQ(ended[0].object.at("census").as_object().at("denied").to_number<int>(), 1);
  EXPECT_EQ(process->events().back().event(), "stream.closed");
  EXPECT_EQ(process->events().back().str("reason"), "completed");
}

TEST_F(StandinRun, AskModeAllowRunsTheCommand) {
  start("bash_marker", {"--decisions", "ask"});
  auto requested = process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << process->stderr_text();
  EXPECT_TRUE(requested->object.at("decision_required").as_bool());
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"allow"})"));
  auto result = result_for("c1");
  ASSERT_TRUE(result);
  EXPECT_EQ(outcome_code(*result), "ok");
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "marker.txt"));
  auto decided = process->events_named("tool.decided");
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_EQ(decided[0].str("decided_by"), "embedder");
  auto results = tool_results("toolu_marker");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].object.at("is_error").as_bool());
}

TEST_F(StandinRun, AskModeReplaceRunsTheReplacedInputInstead) {
  start("bash_marker", {"--decisions", "ask"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  send("c1",
       decide_line("c1", "toolu_marker",
                   R"({"decision":"replace","input":{"command":"touch replaced.txt","description":"replaced"}})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "replaced.txt"));
  EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt"));
}

TEST_F(StandinRun, AskModeDenyCarriesTheReasonIntoTheToolResultAndTheDenials) {
  start("bash_marker", {"--decisions", "ask"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"deny","reason":"SUPERVISOR: not on my watch"})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt"));
  auto results = tool_results("toolu_marker");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_TRUE(results[0].object.at("is_error").as_bool());
  EXPECT_EQ(results[0].object.at("content"), "SUPERVISOR: not on my watch");
  auto ended = process->events_named("session.ended");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].object.at("permission_denials").as_array().size(), 1u);
}

TEST_F(StandinRun, SeveralCallsInOneMessageAreAllDeliveredThenDecidedInAnyOrder) {
  start("three_calls", {"--decisions", "ask"});
  std::set<std::string> seen;
  while (seen.size() < 3) {
    auto r = process->wait_for_event("tool.requested");
    ASSERT_TRUE(r) << "only " << seen.size() << " calls were delivered before an answer; " << process->stderr_text();
    seen.insert(r->str("call_id"));
  }
  EXPECT_TRUE(process->events_named("tool.decided").empty()) << "nothing was decided before we answered";
  send("dc", decide_line("dc", "toolu_c", R"({"decision":"allow"})"));
  send("db", decide_line("db", "toolu_b", R"({"decision":"deny","reason":"not b"})"));
  send("da", decide_line("da", "toolu_a", R"({"decision":"allow"})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "a.txt"));
  EXPECT_FALSE(std::filesystem::exists(work() / "b.txt"));
  EXPECT_TRUE(std::filesystem::exists(work() / "c.txt"));
  for (auto id : {"da", "db", "dc"})
    EXPECT_EQ(outcome_code(*result_for(id)), "ok");
}

TEST_F(StandinRun, InterruptDuringARunningToolEndsTheTurnAndTheNextMessageStartsANewOne) {
  start("sleep_then_more", {"--decisions", "observe"});
  std::string id = run_id();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(work() / "started.txt"); }))
      << "the tool never started; " << process->stderr_text();
  send("i1", command_line("i1", "interrupt", R"("reason":"enough")"));
  auto interrupted = result_for("i1");
  ASSERT_TRUE(interrupted);
  EXPECT_EQ(outcome_code(*interrupted), "ok");
  auto ended = process->wait_for_event("turn.ended");
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->object.at("turn").to_number<int>(), 1);

  send("m1", command_line("m1", "message.inject", R"("text":"carry on")"));
  auto next = process->wait_for(
      [](const EventLine& e) { return e.event() == "turn.started" && e.object.at("turn").to_number<int>() == 2; });
  ASSERT_TRUE(next) << "the injected message must start a new turn";
  auto text = process->wait_for_event("text");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->str("text"), "Picking up again.");
  EXPECT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_EQ(outcome_code(*result_for("m1")), "ok");
  EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "no process of the run outlives it";
}

TEST_F(StandinRun, HaltClosesSteerHaltAndLeavesNoProcessOfTheRunNotEvenOneThatEscapedTheTree) {
  start("sleep_then_more", {"--decisions", "observe", "--halt-grace-ms", "1000"});
  std::string id = run_id();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(work() / "started.txt"); })) << process->stderr_text();
  std::vector<int> marked;
  ASSERT_TRUE(eventually([&] {
    marked = processes_with_env("METAHARNESS_RUN=" + id);
    return marked.size() >= 2;
  })) << "the stand-in and its setsid'd background sleep should both carry the run marker";
  // The background sleep escaped the tree: no process of the run is its parent, so only the
  // marker can find it (what a tool's `(setsid sleep &)` does under the real CLI).
  std::set<int> run_pids(marked.begin(), marked.end());
  auto escaped = std::find_if(marked.begin(), marked.end(), [&](int pid) {
    return read_file("/proc/" + std::to_string(pid) + "/comm") == "sleep\n" && !run_pids.count(parent_of(pid));
  });
  EXPECT_NE(escaped, marked.end()) << "the background sleep should have been re-parented out of the run";
  send("h", command_line("h", "halt", R"("reason":"stop now")"));
  EXPECT_EQ(finish(), 4) << process->stderr_text();
  EXPECT_EQ(outcome_code(*result_for("h")), "ok");
  ASSERT_FALSE(process->events().empty());
  EXPECT_EQ(process->events().back().event(), "stream.closed");
  EXPECT_EQ(process->events().back().str("reason"), "steer-halt");
  EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "the whole run must be gone";
}

TEST_F(StandinRun, ACrashMidTurnClosesWithErrorAndTheSignalInProcess) {
  start("crash_mid_turn");
  process->close_stdin();
  EXPECT_EQ(finish(), 3) << process->stderr_text();
  ASSERT_FALSE(process->events().empty());
  const auto& closed = process->events().back();
  EXPECT_EQ(closed.event(), "stream.closed");
  EXPECT_EQ(closed.str("reason"), "error");
  const auto& how = closed.object.at("process").as_object();
  EXPECT_EQ(how.at("kind"), "signaled");
  EXPECT_EQ(how.at("signal").to_number<int>(), SIGSEGV);
  EXPECT_TRUE(process->events_named("session.ended").empty()) << "the CLI died before any result";
}

TEST_F(StandinRun, PersistentAuthFailureIsAuthExpiredThenSessionEndedThenStreamClosed) {
  start("auth_401");
  process->close_stdin();
  EXPECT_EQ(finish(), 3) << process->stderr_text();
  std::vector<std::string_view> order;
  for (const auto& e : process->events())
    if (e.event() == "auth.expired" || e.event() == "session.ended" || e.event() == "stream.closed")
      order.push_back(e.event());
  EXPECT_EQ(order, (std::vector<std::string_view>{"auth.expired", "session.ended", "stream.closed"}));
  auto expired = process->events_named("auth.expired");
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_NE(expired[0].str("detail").find("OAuth token has expired"), std::string::npos) << expired[0].raw;
  EXPECT_EQ(process->events().back().str("reason"), "error");
}

}  // namespace
}  // namespace mh::test
