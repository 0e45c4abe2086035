// `metaharness run claude` with the stand-in as the claude binary (METAHARNESS_CLAUDE_BIN): the
// shared behaviours (tests/support/shared_behaviours.hpp) the real CLIs run, at a fraction of the
// cost (Standin.*), and a crash only the stand-in can stage. Passing here shows the stand-in is
// faithful enough to stand in for the real CLI in daemon tests.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "protocol/completeness.hpp"
#include "protocol/frame.hpp"
#include "tests/standin/standin_support.hpp"
#include "tests/support/governed_run.hpp"
#include "tests/support/shared_behaviours.hpp"

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

// The shared behaviours (tests/support/shared_behaviours.hpp) with the stand-in: its scripts,
// and what its records show beyond the shared checks.
class StandinVendor : public VendorBase<StandinRun> {
 public:
  // Marked while a tool runs: the stand-in and its setsid'd background sleep.
  static inline const VendorFacts facts{.adapter = "claude",
                                        .one_shell_call = "bash_marker",
                                        .auth_expired_words = "OAuth token has expired",
                                        .marked_processes_while_a_tool_runs = 2,
                                        .ends_before_later_commands_arrive = true};

 protected:
  void expect_frame_denial_extras() {
    auto started = process->events_named("session.started");
    ASSERT_EQ(started.size(), 1u);
    EXPECT_EQ(started[0].str("harness_version"), "2.1.197");
    expect_one_vendor_denial("Bash", "toolu_marker");
  }
  void expect_allow_extras(const EventLine& /*requested*/) {
    auto results = tool_results("toolu_marker");
    ASSERT_EQ(results.size(), 1u);
    EXPECT_FALSE(results[0].object.at("is_error").as_bool());
  }
  // The stand-in has no model to tell: the reason is the tool result, and the vendor's denial.
  void expect_deny_reason_delivered(const std::string& reason, std::size_t /*requests_before*/) {
    auto results = tool_results("toolu_marker");
    ASSERT_EQ(results.size(), 1u);
    EXPECT_TRUE(results[0].object.at("is_error").as_bool());
    EXPECT_EQ(results[0].str("content"), reason);
    auto ended = process->events_named("session.ended");
    ASSERT_EQ(ended.size(), 1u);
    EXPECT_EQ(ended[0].object.at("permission_denials").as_array().size(), 1u);
  }
  // The background sleep escaped the tree: no process of the run is its parent, so only the
  // marker can find it (what a tool's `(setsid sleep &)` does under the real CLI).
  void expect_before_halt(const std::string& /*run_id*/, const std::vector<int>& marked) {
    std::set<int> run_pids(marked.begin(), marked.end());
    auto escaped = std::find_if(marked.begin(), marked.end(), [&](int pid) {
      return read_file("/proc/" + std::to_string(pid) + "/comm") == "sleep\n" && !run_pids.count(parent_of(pid));
    });
    EXPECT_NE(escaped, marked.end()) << "the background sleep should have been re-parented out of the run";
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Standin, SharedRun, StandinVendor);
INSTANTIATE_TYPED_TEST_SUITE_P(Standin, ReplaceRun, StandinVendor);

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

}  // namespace
}  // namespace mh::test
