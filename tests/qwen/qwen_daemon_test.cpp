// The daemon hosts Qwen Code as it hosts the other vendors: `metaharness submit qwen ...` runs
// the real `qwen --acp` contained (its supervisor, sandbox and cgroup), its ACP permission
// requests reach a controller attached over the socket, each call is decided there as Gemini asks
// it, and the stream ends complete.
#include <gtest/gtest.h>

#include "tests/support/daemon_harness.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {
namespace {

TEST(QwenDaemon, HostsAQwenRunWhosePermissionRequestsAreDecidedByTheController) {
  TempDir dir("qwen-daemon");
  DaemonUnderTest daemon(dir.path());
  ASSERT_TRUE(daemon.wait_notify("READY=1")) << "daemon stderr: " << daemon.stderr_text();
  CliProcess submitted({metaharness_binary().string(), "submit", "qwen", "-p", "go", "--decisions", "ask",
                        "--model-scenario", (source_dir() / "tests/scenarios/qwen/three_calls.json").string(),
                        "--socket", daemon.socket().string()});
  submitted.close_stdin();
  auto id_line = submitted.next_line(30s);
  ASSERT_EQ(submitted.finish(30s), 0) << submitted.stderr_text();
  ASSERT_TRUE(id_line);
  const std::string id = *id_line;

  SocketClient control(daemon.socket());
  control.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  // Qwen Code asks the calls of one message one at a time: each is decided as it is asked.
  for (const std::string call : {"a", "b", "c"}) {
    const std::string call_id = "toolu_" + call;
    auto asked = control.wait_for(
        [&](const EventLine& e) { return e.event() == "tool.requested" && e.str("call_id") == call_id; }, 120s);
    ASSERT_TRUE(asked) << "call " << call << " was never asked; daemon stderr: " << daemon.stderr_text();
    EXPECT_EQ(asked->str("seam"), "control_request") << asked->raw;
    const bool deny = call == "c";  // the last: a cancel ends Qwen's turn
    control.send(R"({"format":"metaharness.command/1","id":"d-)" + call + R"(","command":"tool.decide","call_id":")" +
                 call_id + R"(","decision":)" +
                 (deny ? R"({"decision":"deny","reason":"not c"})" : R"({"decision":"allow"})") + "}");
  }
  ASSERT_TRUE(control.wait_reply("end", 120s));
  auto closed = control.events_named("stream.closed");
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].str("reason"), "completed") << closed[0].raw;
  auto work = daemon.run_dir(id) / "scratch/work";
  EXPECT_TRUE(std::filesystem::exists(work / "a.txt"));
  EXPECT_TRUE(std::filesystem::exists(work / "b.txt"));
  EXPECT_FALSE(std::filesystem::exists(work / "c.txt")) << "the denied call never ran";
}

}  // namespace
}  // namespace mh::test
