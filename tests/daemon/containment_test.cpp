// The body of a run under the daemon, with the REAL Claude CLI running the Bash calls the
// scripted model asks for (decisions observe: every call runs): what an allowed call starts —
// `env -i` + `setsid`, a double fork, a daemonizing child — is gone after the run's normal end and
// after `halt`; the run is not root under a root daemon, cannot read a file planted outside its
// sandbox or another run's record; a control peer may not name a cwd outside the workspace roots.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>

#include "protocol/completeness.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {
namespace {

// A one-Bash-call scenario, as one JSON line.
std::string bash_scenario(const std::string& command) {
  json::object input{{"command", command}, {"description", "probe"}};
  json::object call{{"type", "tool_call"}, {"id", "toolu_probe"}, {"name", "Bash"}, {"input", input}};
  json::object ask{{"name", "ask"}, {"content", json::array{call}}};
  json::object answer{{"name", "answer"}, {"content", json::array{json::object{{"type", "text"}, {"text", "Done."}}}}};
  json::object scenario{
      {"format", "metaharness.scenario/1"}, {"wires", json::array{"anthropic"}}, {"steps", json::array{ask, answer}}};
  return protocol::canonical_json(scenario);
}

// Processes whose command line holds `needle` (the unique sleeps the probe starts).
std::vector<int> processes_running(const std::string& needle) {
  std::vector<int> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    if (cmdline.find(needle) != std::string::npos && std::stoi(name) != ::getpid()) found.push_back(std::stoi(name));
  }
  return found;
}

class DaemonContainment : public ::testing::Test {
 protected:
  void SetUp() override { start_daemon(); }
  void TearDown() override {
    if (!token_.empty())
      for (int pid : processes_running("." + token_))
        ::kill(pid, SIGKILL);  // never leave ours behind
  }

  void start_daemon(const std::string& config = "") {
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), config);
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << "daemon stderr: " << daemon->stderr_text();
  }

  std::string submit(const std::string& scenario, const std::string& extra = "", std::string* refusal = nullptr) {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe",)"
                                                    R"("model_scenario":)" +
                                                        scenario + (extra.empty() ? "" : "," + extra) + "}"));
    if (refusal) {
      *refusal = reply ? reply->str("code") : "no reply";
      return reply && reply->str("reply") == "submitted" ? reply->str("run_id") : "";
    }
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }

  std::vector<EventLine> follow(const std::string& id) {
    SocketClient c(daemon->socket());
    c.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
    c.wait_reply("end", 120s);
    std::vector<EventLine> events;
    for (const auto& l : c.lines())
      if (!l.event().empty()) events.push_back(l);
    return events;
  }

  // The three escapes, each a sleep whose argument carries this test's token.
  std::string escapes() {
    token_ = std::to_string(::getpid()) + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    return "(env -i setsid sleep 1001." + token_ + " </dev/null >/dev/null 2>&1 &); " + "( (sleep 1002." + token_ +
           " </dev/null >/dev/null 2>&1 &) & ); " +
           "setsid sh -c 'cd /; exec </dev/null >/dev/null 2>&1; exec sleep 1003." + token_ + "' & ";
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
  std::string token_;
};

TEST_F(DaemonContainment, EscapeesOfAnAllowedCallAreGoneAfterTheRunsNormalEnd) {
  std::string id = submit(bash_scenario(escapes() + "touch started.txt"));
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  std::string record;
  for (const auto& e : events)
    record += e.raw + "\n";
  ASSERT_TRUE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/started.txt"))
      << "the call ran: " << record << read_file(daemon->run_dir(id) / "vendor-stderr.log");
  EXPECT_TRUE(processes_running("." + token_).empty()) << "an escapee outlived the run";
  auto verdict = protocol::check_stream(read_file(daemon->run_dir(id) / "events.jsonl"));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary();
}

TEST_F(DaemonContainment, EscapeesOfAnAllowedCallAreGoneAfterHalt) {
  std::string id = submit(bash_scenario(escapes() + "touch started.txt; sleep 300"));
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(daemon->run_dir(id) / "scratch/work/started.txt"); }));
  ASSERT_TRUE(eventually([&] { return processes_running("." + token_).size() >= 3; }))
      << "the three escapees run while the call does";
  SocketClient c(daemon->socket());
  c.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  ASSERT_TRUE(c.wait_reply("attached"));
  c.send(R"({"format":"metaharness.command/1","id":"h1","command":"halt","reason":"test"})");
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  EXPECT_TRUE(processes_running("." + token_).empty()) << "an escapee outlived the halt";
}

TEST_F(DaemonContainment, TheRunIsNotRootAndSeesNeitherAPlantedFileNorAnotherRun) {
  std::string first = submit(bash_scenario("true"));
  follow(first);
  std::ofstream(dir.path() / "planted.txt") << "secret";
  std::string probe = "{ id -u; id -un; cat " + (dir.path() / "planted.txt").string() + " && echo planted-read; cat " +
                      (daemon->run_dir(first) / "events.jsonl").string() +
                      " >/dev/null && echo other-run-read; ls -A /root | grep -q . && echo root-listed; "
                      "echo probed; } > probe.txt 2>/dev/null";
  std::string id = submit(bash_scenario(probe));
  follow(id);
  std::string out = read_file(daemon->run_dir(id) / "scratch/work/probe.txt");
  ASSERT_NE(out.find("probed"), std::string::npos) << out;
  EXPECT_EQ(out.find("planted-read"), std::string::npos) << out;
  EXPECT_EQ(out.find("other-run-read"), std::string::npos) << out;
  EXPECT_EQ(out.find("root-listed"), std::string::npos) << out;
  if (::geteuid() == 0) {
    EXPECT_NE(out.rfind("0\n", 0), 0u) << "the run ran as root: " << out;
    EXPECT_NE(out.find("mh-run"), std::string::npos) << out;
  }
}

TEST_F(DaemonContainment, AControlPeerMayNameACwdOnlyUnderTheWorkspaceRoots) {
  std::filesystem::create_directories(dir.path() / "roots/project");
  daemon.reset();
  start_daemon("[access]\nowner_is_admin = false\nroot_is_admin = false\ncontrol_uids = [" +
               std::to_string(::getuid()) + "]\n[runs]\nworkspace_roots = [\"" + (dir.path() / "roots").string() +
               "\"]\n");
  std::string code;
  EXPECT_EQ(submit(bash_scenario("true"), R"("cwd":"/root")", &code), "");
  EXPECT_EQ(code, "CWD_OUTSIDE_ROOTS");
  EXPECT_EQ(submit(bash_scenario("true"), R"("cwd":")" + (dir.path() / "roots/../roots2").string() + "\"", &code), "");
  EXPECT_EQ(code, "CWD_OUTSIDE_ROOTS") << "`..` does not climb out";
  std::string id = submit(bash_scenario("true"), R"("cwd":")" + (dir.path() / "roots/project").string() + "\"", &code);
  EXPECT_FALSE(id.empty()) << code;
  if (!id.empty()) follow(id);
}

}  // namespace
}  // namespace mh::test
