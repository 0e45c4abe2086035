// The daemon, driven over its socket, hosting runs of the REAL Claude CLI against the scripted
// endpoint: one test per behaviour of issue 4 (the stand-in harness covers the same behaviours at
// volume in daemon_standin_test.cpp).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
#include <set>

#include "daemon/process/vendor_install_record.hpp"
#include "daemon/process/vendor_provenance.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/completeness.hpp"
#include "protocol/frame.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {
namespace {

// A scenario file as one compact line, to embed in a request.
std::string scenario_json(const std::string& name) {
  auto v = protocol::parse_json(read_file(source_dir() / "tests/scenarios/claude" / (name + ".json")));
  return v ? protocol::canonical_json(*v) : "null";
}

std::string frame_json(std::vector<protocol::OpKind> ops) {
  return protocol::canonical_json(protocol::frame_to_json(sealed_test_frame(std::move(ops)), true));
}

class DaemonCli : public ::testing::Test {
 protected:
  void SetUp() override { start_daemon(); }

  void start_daemon(const std::string& config = "") {
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), config);
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << "daemon stderr: " << daemon->stderr_text();
  }

  // Submits a run and returns its id.
  std::string submit(const std::string& scenario, const std::string& extra_run_fields = "") {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request(
        "submit", R"("run":{"adapter":"claude","prompt":"go","model_scenario":)" + scenario_json(scenario) +
                      (extra_run_fields.empty() ? "" : "," + extra_run_fields) + "}"));
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }

  // `metaharness submit <adapter> ... --decisions ask` from the command line: the run id it prints.
  std::string submit_from_command_line(const std::string& adapter, const std::string& scenario) {
    CliProcess submitted({metaharness_binary().string(), "submit", adapter, "-p", "go", "--decisions", "ask",
                          "--model-scenario", (source_dir() / "tests/scenarios" / adapter / scenario).string(),
                          "--socket", daemon->socket().string()});
    submitted.close_stdin();
    auto id_line = submitted.next_line(30s);
    EXPECT_EQ(submitted.finish(30s), 0) << submitted.stderr_text();
    EXPECT_TRUE(id_line && std::filesystem::exists(daemon->run_dir(*id_line))) << "submit prints the run id";
    return id_line.value_or("");
  }

  // Attaches `control` to a run from its first line and waits until `calls` distinct calls are
  // asked (each check on the way made by `check`): their ids.
  std::set<std::string> attach_until_asked(SocketClient& control, const std::string& id, std::size_t calls,
                                           const std::function<void(const EventLine&)>& check = {}) {
    control.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
    std::set<std::string> asked;
    while (asked.size() < calls) {
      auto r = control.wait_for(
          [&](const EventLine& e) { return e.event() == "tool.requested" && !asked.count(e.str("call_id")); }, 120s);
      EXPECT_TRUE(r) << "asked so far: " << asked.size();
      if (!r) break;
      if (check) check(*r);
      asked.insert(r->str("call_id"));
    }
    return asked;
  }

  // The run closed `completed` on `control`'s stream, its file complete, and `get` (a fresh
  // connection) names its adapter: the reply, for the caller's own checks.
  std::optional<EventLine> expect_completed_run_of(SocketClient& control, const std::string& id,
                                                   const std::string& adapter) {
    auto closed = control.events_named("stream.closed");
    EXPECT_EQ(closed.size(), 1u);
    if (closed.size() == 1) {
      EXPECT_EQ(closed[0].str("reason"), "completed");
    }
    expect_complete(id);
    SocketClient observer(daemon->socket());
    auto got = observer.request(socket_request("get", R"("run_id":")" + id + "\""));
    EXPECT_TRUE(got);
    if (got) {
      EXPECT_NE(got->raw.find(R"("adapter":")" + adapter + "\""), std::string::npos) << got->raw;
    }
    return got;
  }

  // Follows a run's stream to its end on a fresh connection.
  std::vector<EventLine> follow(const std::string& id, std::uint64_t from = 1) {
    return follow_to_end(daemon->socket(), id, 120s, from);
  }

  void expect_complete(const std::string& id) {
    auto verdict = protocol::check_stream(read_file(daemon->run_dir(id) / "events.jsonl"));
    EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
  }

  // A vendor folder of the test's own: every entry of the pinned one linked, but its own
  // installed.json, so H9's standard is the test's. The config that points the daemon at it.
  std::filesystem::path own_vendor() const { return dir.path() / "vendor"; }
  std::string own_vendor_config() {
    namespace fs = std::filesystem;
    const fs::path real = fs::canonical(fs::path(build_info::default_vendor_dir));
    EXPECT_TRUE(fs::exists(real / "node_modules")) << "the pinned vendor CLIs (./run setup) are needed";
    fs::create_directories(own_vendor());
    for (const auto& e : fs::directory_iterator(real))
      if (e.path().filename() != daemon::kInstallRecordFile && !fs::exists(own_vendor() / e.path().filename()))
        fs::create_symlink(e.path(), own_vendor() / e.path().filename());
    // The links' targets are shown to the sandbox as the folder itself would be.
    return "[vendor]\ndir = \"" + own_vendor().string() + "\"\n[runs]\nsandbox_read_only = [\"" + real.string() +
           "\"]\n";
  }
  // Records `sha256` as the claude binary `vendor install` installed, in the test's vendor folder.
  void record_claude(const std::string& sha256) {
    daemon::InstallRecord record;
    record.recorded_at = "2026-12-06T18:00:00.000Z";
    record.binaries.push_back({"claude", "@anthropic-ai/claude-code", "2.1.197", "/the/recorded/claude", sha256});
    auto problem = record.write(daemon::InstallRecord::path_in(own_vendor()));
    EXPECT_FALSE(problem) << *problem;
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
};

TEST_F(DaemonCli, ASubmittedRunIsGovernedAndItsStreamIsDurableBeforeAnyoneSeesIt) {
  std::string id = submit("bash_marker", R"("frame":)" + frame_json({protocol::OpKind::file_read}));
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  EXPECT_EQ(events.back().str("reason"), "completed");
  bool denied = false;
  for (const auto& e : events)
    if (e.event() == "tool.decided" && e.object.at("decision").as_object().at("decision") == "deny") denied = true;
  EXPECT_TRUE(denied);
  EXPECT_FALSE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/marker.txt"));
  // The file holds exactly what the reader was sent.
  auto lines = read_lines(daemon->run_dir(id) / "events.jsonl");
  ASSERT_EQ(lines.size(), events.size());
  for (std::size_t i = 0; i < lines.size(); ++i)
    EXPECT_EQ(lines[i], events[i].raw);
  for (auto f : {"vendor-stdout.jsonl", "vendor-stdin.jsonl", "vendor-stderr.log", "spec.json", "plan.json"})
    EXPECT_TRUE(std::filesystem::exists(daemon->run_dir(id) / f)) << f;
  expect_complete(id);
}

// Issue 24: a relative [vendor] path was kept relative, so every run failed where it named nothing
// ("bwrap: Can't find source path"). It is the config file's directory's: the daemon (whose own
// working directory is elsewhere) runs the real CLI from a folder named relative to its config.
TEST_F(DaemonCli, ARelativeVendorFolderIsTheConfigFilesDirectorysAndItsRunsStart) {
  const auto vendor = std::filesystem::relative(std::filesystem::path(build_info::default_vendor_dir), dir.path());
  ASSERT_FALSE(vendor.empty() || vendor.is_absolute()) << vendor;
  // The daemon starts in "/" (it inherits the test's working directory), where the relative path
  // names nothing whatever the checkout's layout: read from the daemon's directory it would fail.
  const std::filesystem::path daemon_cwd = "/";
  ASSERT_FALSE(std::filesystem::exists(daemon_cwd / vendor / "node_modules"))
      << "the test needs a path that names nothing from the daemon's working directory";
  const std::filesystem::path test_cwd = std::filesystem::current_path();
  std::filesystem::current_path(daemon_cwd);
  start_daemon("[vendor]\ndir = \"" + vendor.string() + "\"\n");
  std::filesystem::current_path(test_cwd);
  std::string id = submit("bash_marker", R"("frame":)" + frame_json({protocol::OpKind::file_read}));
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  EXPECT_EQ(events.back().str("reason"), "completed") << read_file(daemon->run_dir(id) / "events.jsonl");
  expect_complete(id);
}

TEST_F(DaemonCli, ReplayFromTheStartTheMiddleAndTheEndThenFollowLiveWithNoGapOrDuplicate) {
  std::string id = submit("two_turns_keep_open", R"("keep_open":true)");
  SocketClient control(daemon->socket());
  control.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  ASSERT_TRUE(control.wait_event("turn.ended"));
  auto first_turn = read_lines(daemon->run_dir(id) / "events.jsonl");
  ASSERT_GE(first_turn.size(), 4u);
  std::uint64_t middle = first_turn.size() / 2;

  // Three readers: from 1, from the middle, from the end; all follow.
  SocketClient from_start(daemon->socket()), from_middle(daemon->socket()), from_end(daemon->socket());
  from_start.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
  from_middle.send(
      socket_request("tail", R"("run_id":")" + id + R"(","from_seq":)" + std::to_string(middle) + R"(,"follow":true)"));
  from_end.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":0,"follow":true)"));
  for (auto* c : {&from_start, &from_middle, &from_end})
    ASSERT_TRUE(c->wait_reply("tailing"));

  // More happens live: a second turn, then a halt.
  control.send(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"again"})");
  ASSERT_TRUE(control.wait_for(
      [](const EventLine& e) { return e.event() == "turn.ended" && e.object.at("turn").to_number<int>() == 2; }));
  control.send(R"({"format":"metaharness.command/1","id":"h","command":"halt","reason":"done"})");
  for (auto* c : {&from_start, &from_middle, &from_end})
    ASSERT_TRUE(c->wait_reply("end", 60s));

  auto all = read_lines(daemon->run_dir(id) / "events.jsonl");
  auto seqs = [](const SocketClient& c) {
    std::vector<std::uint64_t> out;
    for (const auto& l : c.lines())
      if (!l.event().empty()) out.push_back(l.object.at("seq").to_number<std::uint64_t>());
    return out;
  };
  auto expect_run = [&](const std::vector<std::uint64_t>& got, std::uint64_t first) {
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got.front(), first);
    for (std::size_t i = 1; i < got.size(); ++i)
      ASSERT_EQ(got[i], got[i - 1] + 1) << "a gap or a duplicate";
    EXPECT_EQ(got.back(), all.size()) << "up to stream.closed";
  };
  expect_run(seqs(from_start), 1);
  expect_run(seqs(from_middle), middle);
  expect_run(seqs(from_end), first_turn.size() + 1);
  expect_complete(id);
}

TEST_F(DaemonCli, AControllerThatReattachesIsHandedThePendingCallWithItsRemainingDeadline) {
  std::string id = submit("bash_marker", R"("decisions":"ask","decision_deadline_ms":60000)");
  std::string call;
  {
    SocketClient first(daemon->socket());
    first.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
    auto requested = first.wait_event("tool.requested");
    ASSERT_TRUE(requested);
    call = requested->str("call_id");
  }  // the controller's connection drops with the call still pending
  SocketClient second(daemon->socket());
  second.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":0)", "a2"));
  ASSERT_TRUE(second.wait_reply("attached"));
  auto pending = second.wait_reply("pending");
  ASSERT_TRUE(pending) << "the re-attached controller must be handed the pending call";
  EXPECT_EQ(pending->str("call_id"), call);
  auto remaining = pending->object.at("remaining_ms").to_number<std::int64_t>();
  EXPECT_GT(remaining, 0);
  EXPECT_LT(remaining, 60000);
  second.send(tool_decide("d1", call, R"({"decision":"allow"})"));
  auto decided = second.wait_event("tool.decided");
  ASSERT_TRUE(decided);
  EXPECT_EQ(decided->str("decided_by"), "embedder");
  const auto& peer = decided->object.at("peer").as_object();
  EXPECT_EQ(peer.at("uid").to_number<std::int64_t>(), static_cast<std::int64_t>(::getuid()));
  EXPECT_EQ(peer.at("pid").to_number<std::int64_t>(), static_cast<std::int64_t>(::getpid()));
  ASSERT_TRUE(second.wait_reply("end", 60s));
  EXPECT_TRUE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/marker.txt"));
  expect_complete(id);
}

TEST_F(DaemonCli, TwoControllersRacingOneAnswerIsTakenTheOtherIsTooLate) {
  std::string id = submit("bash_marker", R"("decisions":"ask")");
  SocketClient a(daemon->socket()), b(daemon->socket());
  a.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)", "a"));
  b.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)", "b"));
  auto requested = a.wait_event("tool.requested");
  ASSERT_TRUE(requested && b.wait_event("tool.requested"));
  std::string call = requested->str("call_id");
  a.send(tool_decide("from-a", call, R"({"decision":"allow"})"));
  b.send(tool_decide("from-b", call, R"({"decision":"deny","reason":"b says no"})"));
  ASSERT_TRUE(a.wait_reply("end", 60s));
  std::map<std::string, std::string> outcome;
  int decided = 0;
  for (const auto& line : read_lines(daemon->run_dir(id) / "events.jsonl")) {
    auto v = protocol::parse_json(line)->as_object();
    if (v.at("event") == "tool.decided") ++decided;
    if (v.at("event") == "command.result") {
      const auto& o = v.at("outcome").as_object();
      outcome[std::string(v.at("id").as_string())] =
          o.at("result") == "ok" ? "ok" : std::string(o.at("refused").as_object().at("code").as_string());
    }
  }
  EXPECT_EQ(decided, 1) << "the call is decided once";
  ASSERT_EQ(outcome.size(), 2u);
  EXPECT_EQ(outcome["from-a"] == "ok" ? outcome["from-b"] : outcome["from-a"], "TOO_LATE");
  EXPECT_TRUE(outcome["from-a"] == "ok" || outcome["from-b"] == "ok");
  expect_complete(id);
}

TEST_F(DaemonCli, TheDeadlineRunsWithNoControllerAttached) {
  std::string id = submit("bash_marker", R"("decisions":"ask","decision_deadline_ms":1500)");
  auto events = follow(id);
  bool by_deadline = false;
  for (const auto& e : events)
    if (e.event() == "tool.decided") by_deadline = e.str("decided_by") == "deadline";
  EXPECT_TRUE(by_deadline) << "silence is denied by the deadline, never left hanging";
  EXPECT_FALSE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/marker.txt"));
  expect_complete(id);
}

TEST_F(DaemonCli, AChildThatIsKilledAbandonsItsPendingCallsAndClosesError) {
  std::string id = submit("bash_marker", R"("decisions":"ask","decision_deadline_ms":60000)");
  SocketClient control(daemon->socket());
  control.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  ASSERT_TRUE(control.wait_event("tool.requested"));
  SocketClient getter(daemon->socket());
  auto run = getter.request(socket_request("get", R"("run_id":")" + id + "\""));
  ASSERT_TRUE(run);
  int pid = static_cast<int>(run->object.at("pid").to_number<std::int64_t>());
  ASSERT_GT(pid, 0);
  ::kill(pid, SIGKILL);
  auto closed = control.wait_event("stream.closed", 60s);
  ASSERT_TRUE(closed);
  EXPECT_EQ(closed->str("reason"), "error");
  const auto& process = closed->object.at("process").as_object();
  EXPECT_EQ(process.at("kind"), "signaled");
  EXPECT_EQ(process.at("signal").to_number<int>(), SIGKILL);
  bool abandoned = false;
  for (const auto& e : control.events_named("warning"))
    abandoned |= e.str("code") == "PENDING_CALL_ABANDONED";
  EXPECT_TRUE(abandoned);
  expect_complete(id);
}

TEST_F(DaemonCli, SigtermStopsAcceptingHaltsEveryRunAndExitsZero) {
  std::string a = submit("sleep_then_more", R"("decisions":"observe")");
  std::string b = submit("two_turns_keep_open", R"("keep_open":true)");
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(daemon->run_dir(a) / "scratch/work/started.txt"); }));
  ASSERT_TRUE(daemon->wait_notify("2 active run(s)")) << "STATUS carries the run counts";
  daemon->signal(SIGTERM);
  EXPECT_TRUE(daemon->wait_notify("STOPPING=1"));
  EXPECT_EQ(daemon->wait_exit(60s), 0) << daemon->stderr_text();
  for (const auto& id : {a, b}) {
    auto lines = read_lines(daemon->run_dir(id) / "events.jsonl");
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines.back().find("\"event\":\"stream.closed\""), std::string::npos) << id;
    EXPECT_NE(lines.back().find("\"reason\":\"killed\""), std::string::npos) << lines.back();
    expect_complete(id);
    EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "no process of run " << id << " survives";
  }
}

TEST_F(DaemonCli, ARunsSlotIsFreeAsSoonAsItsStreamHasClosed) {
  // runs.max_active = 1: a client that has read a run's `end` submits the next one at once, and
  // is never refused BUSY for the run it has just seen close.
  daemon.reset();
  start_daemon("[runs]\nmax_active = 1\n");
  for (int round = 0; round < 4; ++round) {
    std::string id = submit("bash_marker", R"("decisions":"observe")");
    ASSERT_FALSE(id.empty()) << "round " << round;
    auto events = follow(id);
    ASSERT_FALSE(events.empty());
    EXPECT_EQ(events.back().event(), "stream.closed");
  }
}

TEST_F(DaemonCli, RunsSpreadOverTheIoThreadsAreDecidedByControllersOnTheirOwnThreadOrAnother) {
  // [server] threads = 3: one io_context each, runs in turn on each (io_pool.hpp). Two controllers
  // attach with their first line, so each is served on its run's thread (connection_home.hpp);
  // the third asks `status` first, so it stays on the main thread while its run is on another,
  // and every hand-off of its decision crosses threads. Each run is decided and completes.
  daemon.reset();
  start_daemon("[server]\nthreads = 3\n");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i)
    ids.push_back(submit("bash_marker", R"("decisions":"ask")"));
  std::vector<std::unique_ptr<SocketClient>> controllers;
  for (int i = 0; i < 3; ++i)
    controllers.push_back(std::make_unique<SocketClient>(daemon->socket()));
  auto& elsewhere = *controllers[2];
  ASSERT_TRUE(elsewhere.request(socket_request("status")));
  for (int i = 0; i < 3; ++i)
    controllers[i]->send(socket_request("attach", R"("run_id":")" + ids[i] + R"(","from_seq":1)"));
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    auto requested = controllers[i]->wait_event("tool.requested");
    ASSERT_TRUE(requested);
    controllers[i]->send(tool_decide("d" + std::to_string(i), requested->str("call_id"), R"({"decision":"allow"})"));
  }
  for (int i = 0; i < 3; ++i) {
    SCOPED_TRACE("run " + std::to_string(i));
    ASSERT_TRUE(controllers[i]->wait_reply("end", 60s));
    auto decided = controllers[i]->events_named("tool.decided");
    ASSERT_EQ(decided.size(), 1u);
    EXPECT_EQ(decided[0].str("decided_by"), "embedder");
    auto closed = controllers[i]->events_named("stream.closed");
    ASSERT_EQ(closed.size(), 1u);
    EXPECT_EQ(closed[0].str("reason"), "completed");
    EXPECT_TRUE(std::filesystem::exists(daemon->run_dir(ids[i]) / "scratch/work/marker.txt"));
    expect_complete(ids[i]);
  }
}

TEST_F(DaemonCli, AfterASigkillTheNextStartClosesCutOffRunsAndKillsTheirLeftovers) {
  // Without supervision (on by default, tests/daemon/adoption_test.cpp) a run dies with its daemon.
  const std::string unsupervised = "[runs]\nsupervise = false\n";
  daemon.reset();
  start_daemon(unsupervised);
  std::string id = submit("sleep_then_more", R"("decisions":"observe")");
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(daemon->run_dir(id) / "scratch/work/started.txt"); }));
  daemon->signal(SIGKILL);
  daemon->wait_exit(30s);
  auto events_path = daemon->run_dir(id) / "events.jsonl";
  auto before = read_lines(events_path);
  ASSERT_FALSE(before.empty());
  EXPECT_EQ(before.back().find("stream.closed"), std::string::npos);
  // A torn line, as a crash in the middle of a write would leave.
  std::ofstream(events_path, std::ios::app)
      << R"({"format":"metaharness.event/1","seq":)" << before.size() + 1 << R"(,"run":"torn)";
  EXPECT_FALSE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "the setsid'd tool process outlived the daemon";

  start_daemon(unsupervised);  // same state dir
  auto after = read_lines(events_path);
  ASSERT_EQ(after.size(), before.size() + 2) << "every complete line kept, the torn one cut, two appended";
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(after[i], before[i]);
  EXPECT_NE(after[after.size() - 2].find("RECOVERED_AFTER_RESTART"), std::string::npos);
  EXPECT_NE(after.back().find("\"reason\":\"error\""), std::string::npos);
  EXPECT_NE(after.back().find(R"("failure":{"category":"daemon","retryable":true,"detail":"RECOVERED_AFTER_RESTART: )"),
            std::string::npos)
      << after.back();
  // What the run's cgroup counted is read before the recovery removes it (absent only for a run
  // that had none, and said so at its start).
  bool had_cgroup = std::none_of(before.begin(), before.end(), [](const std::string& l) {
    return l.find("CGROUP_UNAVAILABLE") != std::string::npos;
  });
  EXPECT_EQ(after.back().find("\"resources\":{") != std::string::npos, had_cgroup) << after.back();
  if (had_cgroup) {
    EXPECT_NE(after.back().find("\"processes_killed\":"), std::string::npos) << after.back();
  }
  expect_complete(id);
  EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "leftovers are killed at start";
}

TEST_F(DaemonCli, BadSocketInputIsAnsweredByNameAndTheConnectionStaysUsable) {
  SocketClient c(daemon->socket());
  c.send(std::string(2 << 20, 'x'));
  auto r = c.wait_reply("refused");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->str("code"), "LINE_TOO_LONG");
  for (auto [line, code] : std::vector<std::pair<std::string, std::string>>{
           {"{not json", "NOT_JSON"},
           {R"({"request":"list"})", "UNKNOWN_FORMAT"},
           {R"({"format":"metaharness.socket/2","request":"list"})", "UNKNOWN_FORMAT"},
           {socket_request("explode"), "UNKNOWN_REQUEST"},
           {socket_request("get", R"("run_id":"no-such-run")"), "UNKNOWN_RUN"},
           {socket_request("get"), "MALFORMED"},
           {R"({"format":"metaharness.command/1","id":"c","command":"halt"})", "NOT_ATTACHED"}}) {
    auto reply = c.request(line);
    ASSERT_TRUE(reply) << line;
    EXPECT_EQ(reply->str("reply"), "refused") << line;
    EXPECT_EQ(reply->str("code"), code) << line;
  }
  auto status = c.request(socket_request("status"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->str("reply"), "status") << "still usable after all of that";

  // On an attached connection, a bad command is answered in the run's stream.
  std::string id = submit("bash_marker", R"("decisions":"ask")");
  // A from_seq no stream can start at is refused, whatever number JSON can spell.
  for (std::string from : {"18446744073709551615", "-1", "1.5", "1e300", "\"1\""}) {
    auto reply = c.request(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":)" + from));
    ASSERT_TRUE(reply) << from;
    EXPECT_EQ(reply->str("code"), "MALFORMED") << from;
  }
  SocketClient control(daemon->socket());
  control.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  ASSERT_TRUE(control.wait_event("tool.requested"));
  control.send("{oops");
  control.send(tool_decide("ghost", "toolu_ghost", R"({"decision":"allow"})"));
  auto malformed =
      control.wait_for([](const EventLine& e) { return e.event() == "command.result" && e.str("id") == "-"; });
  ASSERT_TRUE(malformed);
  auto ghost =
      control.wait_for([](const EventLine& e) { return e.event() == "command.result" && e.str("id") == "ghost"; });
  ASSERT_TRUE(ghost);
  EXPECT_EQ(ghost->object.at("outcome").as_object().at("refused").as_object().at("code"), "UNKNOWN_CALL");
  control.send(socket_request("halt", R"("run_id":")" + id + "\""));
  control.send(R"({"format":"metaharness.command/1","id":"h","command":"halt"})");
  ASSERT_TRUE(control.wait_reply("end", 60s));
  expect_complete(id);
}

// The daemon hosts Codex exactly as it hosts Claude: `metaharness submit codex ...` from the
// command line, a controller attached over the socket decides every call (the hook channel's
// calls too: the run's hook socket lives in the daemon), and the stream ends complete.
TEST_F(DaemonCli, HostsACodexRunSubmittedFromTheCommandLineWithEveryCallDecidedByTheController) {
  std::string id = submit_from_command_line("codex", "every_kind.json");
  ASSERT_FALSE(id.empty());

  SocketClient control(daemon->socket());
  attach_until_asked(control, id, 6, [&control](const EventLine& r) {
    std::string call = r.str("call_id");
    control.send(R"({"format":"metaharness.command/1","id":"d-)" + call + R"(","command":"tool.decide","call_id":")" +
                 call + R"(","decision":{"decision":"deny","reason":"not here"}})");
  });
  ASSERT_TRUE(control.wait_reply("end", 120s));
  std::map<std::string, std::string> seams;
  std::size_t denied_by_us = 0;
  for (const auto& e : control.lines()) {
    if (e.event() == "tool.requested") seams[e.str("call_id")] = e.str("seam");
    if (e.event() == "tool.decided" && e.str("decided_by") == "embedder") {
      ++denied_by_us;
      EXPECT_EQ(e.object.at("peer").as_object().at("pid").to_number<int>(), ::getpid())
          << "the decision names its peer";
    }
  }
  EXPECT_EQ(denied_by_us, 6u);
  EXPECT_EQ(seams["call_image"], "hook");
  EXPECT_EQ(seams["call_ls"], "control_request");
  auto work = daemon->run_dir(id) / "scratch/work";
  for (auto file : {"m_ls.txt", "m_cat.txt", "m_pipe.txt", "m_login.txt", "m_patch.txt"})
    EXPECT_FALSE(std::filesystem::exists(work / file)) << file;
  for (auto f : {"vendor-stdout.jsonl", "vendor-stdin.jsonl", "vendor-hooks.jsonl", "spec.json", "plan.json"})
    EXPECT_TRUE(std::filesystem::exists(daemon->run_dir(id) / f)) << f;
  auto got = expect_completed_run_of(control, id, "codex");
  ASSERT_TRUE(got);
  EXPECT_EQ(got->object.at("turns").to_number<int>(), 1) << "a closed run keeps its turn count";
  EXPECT_TRUE(got->object.at("pid").is_null()) << "no vendor process after the run: null, not 0";
}

// The daemon hosts opencode exactly as the others: `metaharness submit opencode ...`, the seam
// plugin's requests reach the run through the run's hook channel (held by its supervisor), a
// controller attached over the socket decides, and the stream ends complete.
TEST_F(DaemonCli, HostsAnOpencodeRunWhosePluginSeamIsDecidedByTheController) {
  std::string id = submit_from_command_line("opencode", "three_calls.json");
  ASSERT_FALSE(id.empty());

  SocketClient control(daemon->socket());
  std::set<std::string> asked =
      attach_until_asked(control, id, 3, [](const EventLine& r) { EXPECT_EQ(r.str("seam"), "hook") << r.raw; });
  ASSERT_EQ(asked.size(), 3u);
  for (const auto& call : asked) {
    bool deny = call == "toolu_b";
    control.send(R"({"format":"metaharness.command/1","id":"d-)" + call + R"(","command":"tool.decide","call_id":")" +
                 call + R"(","decision":)" +
                 (deny ? R"({"decision":"deny","reason":"not b"})" : R"({"decision":"allow"})") + "}");
  }
  ASSERT_TRUE(control.wait_reply("end", 120s));
  auto work = daemon->run_dir(id) / "scratch/work";
  EXPECT_TRUE(std::filesystem::exists(work / "a.txt"));
  EXPECT_FALSE(std::filesystem::exists(work / "b.txt")) << "the denied call never ran";
  EXPECT_TRUE(std::filesystem::exists(work / "c.txt"));
  EXPECT_TRUE(std::filesystem::exists(daemon->run_dir(id) / "vendor-hooks.jsonl"));
  EXPECT_TRUE(expect_completed_run_of(control, id, "opencode"));
}

// Issue 9, item 2, the observed case on the real Codex: a command whose output is over 1 MiB.
// Codex caps what it reports near 1 MiB, so its item/completed record is a vendor line over 1 MiB
// and the tool.result carrying it would be too; the writer cuts it to the event line bound, the
// stream is complete for check-stream, and translate reads the retained transcript's record as a
// tool.result too (not as an opaque line over its bound).
TEST_F(DaemonCli, ACodexCommandOutputOverOneMebibyteIsCutToTheLineBoundAndEveryReaderTakesIt) {
  const std::string scenario =
      R"({"format":"metaharness.scenario/1","wires":["responses"],"steps":[)"
      R"({"name":"big","content":[{"type":"tool_call","id":"call_big","name":"exec_command",)"
      R"("input":{"cmd":"head -c 3000000 /dev/zero | tr '\\0' x","max_output_tokens":1000000}}]},)"
      R"({"name":"answer","content":[{"type":"text","text":"Done."}]}]})";
  SocketClient c(daemon->socket());
  auto reply = c.request(socket_request(
      "submit", R"("run":{"adapter":"codex","prompt":"go","decisions":"observe","model_scenario":)" + scenario + "}"));
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
  std::string id = reply->str("run_id");
  auto events = follow(id);
  std::optional<EventLine> result;
  for (const auto& e : events) {
    EXPECT_LE(e.raw.size(), 1048576u) << e.event();
    if (e.event() == "tool.result" && e.str("call_id") == "call_big") result = e;
  }
  ASSERT_TRUE(result) << "the command's result is a tool.result";
  auto whole = result->object.at("bytes").to_number<std::uint64_t>();
  EXPECT_GT(whole, 1000000u) << "Codex reported the capped output near 1 MiB";
  const auto& cut = result->object.at("cut").as_array();
  ASSERT_EQ(cut.size(), 1u) << result->raw.substr(0, 300);
  EXPECT_EQ(cut[0].as_object().at("field"), "content");
  EXPECT_EQ(cut[0].as_object().at("bytes").to_number<std::uint64_t>(), whole) << "bytes is the whole output";
  EXPECT_EQ(cut[0].as_object().at("kept").to_number<std::uint64_t>(), result->object.at("content").as_string().size());
  expect_complete(id);

  auto transcript = daemon->run_dir(id) / "vendor-stdout.jsonl";
  auto translate =
      run_to_end({metaharness_binary().string(), "translate", "codex", transcript.string()}, std::nullopt, 60s);
  const std::string& translated = translate.out;
  EXPECT_EQ(translate.status, 0) << translate.err;
  auto verdict = protocol::check_stream(translated);
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
  bool translated_result = false;
  for (std::size_t at = 0; at < translated.size();) {
    auto nl = translated.find('\n', at);
    auto line = protocol::parse_json(std::string_view(translated).substr(at, nl - at));
    at = nl + 1;
    ASSERT_TRUE(line);
    const auto& o = line->as_object();
    if (o.at("event") == "tool.result" && o.at("call_id") == "call_big") translated_result = o.contains("cut");
  }
  EXPECT_TRUE(translated_result) << "translate reads the over-1-MiB vendor record as the run did, and cuts it";
}

// `get` carries the hermetic floor's verdicts: judged from session.started as soon as it exists
// (here while a call is pending), the same after the run; null under `hermetic: off`; every row
// unk for a run refused before anything was observed.
TEST_F(DaemonCli, GetCarriesTheHermeticVerdictsNullUnderOffUnknownWhenNothingWasObserved) {
  // H9 holds the binary to the daemon's install record: the test's, naming the real binary.
  daemon.reset();
  const std::string config = own_vendor_config();
  auto real = daemon::VendorProvenance::file_sha256(
      std::filesystem::canonical(own_vendor() / "node_modules/@anthropic-ai/claude-code-linux-x64/claude"));
  ASSERT_TRUE(real) << real.error();
  record_claude(*real);
  start_daemon(config);
  auto hermetic = [&](const std::string& id) {
    SocketClient c(daemon->socket());
    auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
    EXPECT_TRUE(got && got->object.contains("hermetic")) << (got ? got->raw : "no reply");
    return got && got->object.contains("hermetic") ? got->object.at("hermetic").as_object() : json::object{};
  };
  std::string id = submit("bash_marker", R"("decisions":"ask","decision_deadline_ms":60000,"hermetic":"strict")");
  SocketClient control(daemon->socket());
  control.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  auto requested = control.wait_event("tool.requested");
  ASSERT_TRUE(requested);
  json::object live = hermetic(id);
  EXPECT_EQ(live.at("mode"), "strict");
  EXPECT_EQ(live.at("gating"), "ok") << protocol::canonical_json(live);
  ASSERT_TRUE(live.at("rows").is_array());
  const auto& rows = live.at("rows").as_array();
  ASSERT_EQ(rows.size(), 12u);
  EXPECT_EQ(rows[0].as_object().at("id"), "h1a");
  EXPECT_EQ(rows[2].as_object().at("severity"), "advisory");
  EXPECT_EQ(rows[6].as_object().at("assertion"), "effect");
  for (const auto& r : rows) {
    EXPECT_EQ(r.as_object().at("verdict"), "ok") << protocol::canonical_json(r);
    EXPECT_FALSE(r.as_object().at("control").as_string().empty());
    EXPECT_FALSE(r.as_object().at("detail").as_string().empty());
  }
  control.send(tool_decide("d", requested->str("call_id"), R"({"decision":"deny","reason":"not now"})"));
  ASSERT_TRUE(control.wait_reply("end", 120s));
  EXPECT_EQ(hermetic(id), live) << "the verdicts are decided by session.started";

  std::string off = submit("bash_marker", R"("decisions":"observe","hermetic":"off")");
  follow(off);
  json::object none = hermetic(off);
  EXPECT_EQ(none.at("mode"), "off");
  EXPECT_TRUE(none.at("gating").is_null());
  EXPECT_TRUE(none.at("rows").is_null());

  std::string refused =
      submit("bash_marker", R"("decisions":"observe","frame":)" + frame_json({protocol::OpKind::file_read}));
  follow(refused);
  json::object unobserved = hermetic(refused);
  EXPECT_EQ(unobserved.at("mode"), "on");
  EXPECT_EQ(unobserved.at("gating"), "unk");
  for (const auto& r : unobserved.at("rows").as_array())
    EXPECT_EQ(r.as_object().at("verdict"), "unk") << protocol::canonical_json(r);
}

// Issue 27 section 6: `get` judges H9 as `metaharness audit` does, the attested binary's digest
// against the install record of the daemon's vendor folder, read at each `get`: the same digest
// ok, another a gap, no record or one that cannot be read unknown with the reason (a FIFO in its
// place refused, not waited on). `audit` of the run directory with the same record agrees.
TEST_F(DaemonCli, GetJudgesTheAttestedBinaryAgainstTheDaemonsInstallRecord) {
  daemon.reset();
  start_daemon(own_vendor_config());
  std::string id = submit("bash_marker", R"("decisions":"observe","hermetic":"strict")");
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(events.back().str("reason"), "completed") << read_file(daemon->run_dir(id) / "events.jsonl");
  std::string attested;
  for (const auto& e : events)
    if (e.event() == "session.started")
      attested = std::string(e.object.at("hermetic").at("vendor_binary").at("sha256").as_string());
  ASSERT_EQ(attested.size(), 64u);
  const auto record = daemon::InstallRecord::path_in(own_vendor());
  auto h9 = [&] {
    SocketClient c(daemon->socket());
    auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
    EXPECT_TRUE(got && got->object.contains("hermetic")) << (got ? got->raw : "no reply");
    if (!got || !got->object.contains("hermetic")) return json::object{};
    for (const auto& r : got->object.at("hermetic").at("rows").as_array())
      if (r.as_object().at("id") == "h9") return r.as_object();
    ADD_FAILURE() << "no h9 row: " << got->raw;
    return json::object{};
  };
  auto audited_h9 = [&] {
    auto audit = run_to_end({metaharness_binary().string(), "audit", daemon->run_dir(id).string(), "--json",
                             "--install-record", record.string()},
                            std::nullopt, 60s);
    auto doc = protocol::parse_json(audit.out);
    EXPECT_TRUE(doc && doc->is_object()) << audit.out << audit.err;
    if (doc && doc->is_object())
      for (const auto& r : doc->at("rows").as_array())
        if (r.as_object().at("id") == "h9") return r.as_object();
    return json::object{};
  };
  auto detail = [](const json::object& row) { return std::string(row.at("detail").as_string()); };

  record_claude(attested);
  json::object same = h9();
  EXPECT_EQ(same.at("verdict"), "ok") << protocol::canonical_json(same);
  EXPECT_NE(detail(same).find("as `vendor install` recorded for @anthropic-ai/claude-code 2.1.197"), std::string::npos)
      << detail(same);
  EXPECT_EQ(protocol::canonical_json(same), protocol::canonical_json(audited_h9())) << "get and audit agree";

  record_claude(std::string(64, '0'));
  json::object other = h9();
  EXPECT_EQ(other.at("verdict"), "gap") << protocol::canonical_json(other);
  EXPECT_NE(detail(other).find("is not the @anthropic-ai/claude-code 2.1.197 binary `vendor install` recorded"),
            std::string::npos)
      << detail(other);
  EXPECT_EQ(protocol::canonical_json(other), protocol::canonical_json(audited_h9())) << "get and audit agree";

  std::filesystem::remove(record);
  json::object none = h9();
  EXPECT_EQ(none.at("verdict"), "unk") << protocol::canonical_json(none);
  EXPECT_NE(detail(none).find("no install record at " + record.string()), std::string::npos) << detail(none);

  std::ofstream(record) << "{";
  json::object torn = h9();
  EXPECT_EQ(torn.at("verdict"), "unk") << protocol::canonical_json(torn);
  EXPECT_NE(detail(torn).find("the install record " + record.string() + " is not a JSON object"), std::string::npos)
      << detail(torn);

  std::filesystem::remove(record);
  ASSERT_EQ(::mkfifo(record.c_str(), 0644), 0);
  json::object fifo = h9();
  EXPECT_EQ(fifo.at("verdict"), "unk") << protocol::canonical_json(fifo);
  EXPECT_NE(detail(fifo).find("the install record " + record.string() + " is not a regular file"), std::string::npos)
      << detail(fifo);
}

TEST_F(DaemonCli, APeerWithNoRoleGetsOneLineThenTheConnectionCloses) {
  daemon.reset();
  start_daemon("[access]\nowner_is_admin = false\nroot_is_admin = false\n");
  SocketClient c(daemon->socket());
  auto line = c.next_line(10s);
  ASSERT_TRUE(line);
  auto refused = protocol::parse_json(*line)->as_object();
  EXPECT_EQ(refused.at("reply"), "refused");
  EXPECT_EQ(refused.at("code"), "FORBIDDEN");
  EXPECT_NE(std::string(refused.at("reason").as_string()).find("uid " + std::to_string(::getuid())), std::string::npos);
  EXPECT_FALSE(c.next_line(10s)) << "then the connection closes";
  EXPECT_TRUE(c.eof());
}

TEST_F(DaemonCli, AnObserverMayListButNotSubmit) {
  daemon.reset();
  start_daemon("[access]\nowner_is_admin = false\nroot_is_admin = false\nobserve_uids = [" +
               std::to_string(::getuid()) + "]\n");
  SocketClient c(daemon->socket());
  auto list = c.request(socket_request("list"));
  ASSERT_TRUE(list);
  EXPECT_EQ(list->str("reply"), "runs");
  auto submit = c.request(socket_request("submit", R"("run":{"adapter":"claude","prompt":"x"})"));
  ASSERT_TRUE(submit);
  EXPECT_EQ(submit->str("code"), "FORBIDDEN");
  EXPECT_FALSE(c.next_line(10s));
}

}  // namespace
}  // namespace mh::test
