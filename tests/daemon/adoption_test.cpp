// Runs outlive the daemon (runs.supervise): with the REAL Claude CLI against scripted model
// endpoints that are not the daemon's (each its own `metaharness model serve`, so the model is
// still there while no daemon is), the daemon is killed with SIGKILL while one run waits for a
// decision, one is inside a tool call and one is idle between turns. The next daemon adopts all
// three: the pending call is decided, the tool call's result arrives, the idle run takes its next
// message; each closes `completed`, its stream complete and contiguous with a RUN_ADOPTED warning
// where the gap was. A deadline that ran out while no daemon was there is applied at adoption (and
// a later answer is TOO_LATE); a stop with runs.on_stop = "detach" leaves the runs to the next
// start; a supervisor that dies takes its run with it (SUPERVISOR_LOST), nothing left running.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <regex>

#include "daemon/supervisor/supervisor_link.hpp"
#include "protocol/completeness.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/governed_run.hpp"
#include "tests/support/peer_as_uid.hpp"

namespace mh::test {
namespace {

using daemon::end_stale_supervisor;

// A scripted model endpoint of its own for one run: it outlives the daemon under test.
class ModelServer {
 public:
  ModelServer(const std::filesystem::path& dir, const std::string& name, const std::string& scenario) {
    auto file = dir / (name + ".scenario.json");
    std::ofstream(file) << scenario;
    process_ = std::make_unique<CliProcess>(
        std::vector<std::string>{metaharness_binary().string(), "model", "serve", "--scenario", file.string()});
    auto line = process_->next_line(30s);
    auto parsed = line ? protocol::parse_json(*line) : std::nullopt;
    if (parsed && parsed->is_object()) {
      base_url_ = std::string(parsed->get_object().at("base_url").get_string());
      token_ = std::string(parsed->get_object().at("token").get_string());
    }
  }
  bool up() const { return !base_url_.empty(); }
  std::string endpoint_json() const {
    return protocol::canonical_json(json::object{{"base_url", base_url_}, {"token", token_}});
  }

 private:
  std::unique_ptr<CliProcess> process_;
  std::string base_url_, token_;
};

std::string read_scenario(const std::string& name) {
  return read_file(source_dir() / "tests/scenarios/claude" / (name + ".json"));
}

class DaemonAdoption : public ::testing::Test {
 protected:
  static constexpr const char* kConfig =
      "[runs]\nsupervise = true\non_stop = \"detach\"\nadopt_within_ms = 120000\nidle_timeout_ms = 20000\n";

  void SetUp() override { start_daemon(); }
  void TearDown() override {
    // A run this test left open (a failed assertion) must not outlive it: end every supervisor of
    // this state directory, then the runs' processes go with their supervisors' vendors.
    for (const auto& run : std::filesystem::directory_iterator(dir.path() / "state" / "runs", ec_))
      end_stale_supervisor(run.path());
  }

  void start_daemon(const std::string& extra = "") {
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), std::string(kConfig) + extra);
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << "daemon stderr: " << daemon->stderr_text();
  }

  void kill_daemon() {
    daemon->signal(SIGKILL);
    daemon->wait_exit(30s);
  }

  std::string submit(const ModelServer& model, const std::string& extra) {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","model_endpoint":)" +
                                                        model.endpoint_json() + "," + extra + "}"));
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }

  std::vector<EventLine> events_of(const std::string& id) {
    std::vector<EventLine> out;
    std::ifstream in(daemon->run_dir(id) / "events.jsonl");
    for (std::string line; std::getline(in, line);)
      out.push_back(to_event_line(line));
    return out;
  }
  std::string what_happened(const std::string& id) {
    auto run = daemon->run_dir(id);
    return "events:\n" + read_file(run / "events.jsonl") + "supervisor.log:\n" + read_file(run / "supervisor.log") +
           "vendor-stderr.log:\n" + read_file(run / "vendor-stderr.log") + "daemon:\n" + daemon->stderr_text();
  }
  bool has_event(const std::string& id, std::string_view name) {
    for (const auto& e : events_of(id))
      if (e.event() == name) return true;
    return false;
  }

  // Follows a run to its end through the (new) daemon; the events it read.
  std::vector<EventLine> follow(const std::string& id) { return follow_to_end(daemon->socket(), id, 180s); }

  void expect_adopted_and_complete(const std::string& id, const std::vector<EventLine>& events,
                                   std::size_t adoptions = 1) {
    ASSERT_FALSE(events.empty()) << id;
    EXPECT_EQ(events.back().event(), "stream.closed") << id;
    EXPECT_EQ(events.back().str("reason"), "completed") << id << ": " << events.back().raw;
    std::size_t adopted = 0, closed = 0;
    for (std::size_t i = 0; i < events.size(); ++i) {
      EXPECT_EQ(events[i].object.at("seq").to_number<std::uint64_t>(), i + 1) << id << ": seq contiguous";
      if (events[i].event() == "warning" && events[i].str("code") == "RUN_ADOPTED") ++adopted;
      if (events[i].event() == "stream.closed") ++closed;
    }
    EXPECT_EQ(adopted, adoptions) << id;
    EXPECT_EQ(closed, 1u) << id;
    auto verdict = protocol::check_stream(read_file(daemon->run_dir(id) / "events.jsonl"));
    EXPECT_TRUE(verdict.complete_and_well_formed()) << id << ": " << verdict.summary();
  }

  std::optional<int> supervisor_pid(const std::string& id) {
    auto state = protocol::parse_json(read_file(daemon->run_dir(id) / "supervisor.json"));
    if (!state || !state->is_object()) return std::nullopt;
    return static_cast<int>(state->get_object().at("supervisor_pid").to_number<std::int64_t>());
  }

  // A run of one Bash call (`command`) in ask mode on its own model server, stopped at its
  // tool.requested: its id in `id`.
  void start_pending_run(const std::string& name, const std::string& command, std::string& id,
                         int deadline_ms = 120000) {
    model = std::make_unique<ModelServer>(dir.path(), name, one_bash_call_scenario(command));
    ASSERT_TRUE(model->up());
    id = submit(*model, R"("decisions":"ask","decision_deadline_ms":)" + std::to_string(deadline_ms));
    ASSERT_TRUE(eventually([&] { return has_event(id, "tool.requested"); }, 90s)) << what_happened(id);
  }

  // Attaches `control` to the run, from `from_seq`.
  void attach(SocketClient& control, const std::string& id, int from_seq) {
    control.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":)" + std::to_string(from_seq)));
    ASSERT_TRUE(control.wait_reply("attached"));
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
  std::unique_ptr<ModelServer> model;
  std::error_code ec_;
};

TEST_F(DaemonAdoption, AKilledDaemonLosesNoRunPendingADecisionInsideAToolCallOrIdle) {
  ModelServer pending_model(dir.path(), "pending", one_bash_call_scenario("echo decided > decided.txt"));
  ModelServer tool_model(dir.path(), "tool", one_bash_call_scenario("sleep 4; echo ran > ran.txt"));
  ModelServer idle_model(dir.path(), "idle", read_scenario("two_turns_keep_open"));
  ASSERT_TRUE(pending_model.up() && tool_model.up() && idle_model.up());
  std::string pending = submit(pending_model, R"("decisions":"ask","decision_deadline_ms":120000)");
  std::string tool = submit(tool_model, R"("decisions":"observe")");
  std::string idle = submit(idle_model, R"("decisions":"observe","keep_open":true)");
  ASSERT_TRUE(eventually([&] { return has_event(pending, "tool.requested"); }, 90s));
  ASSERT_TRUE(eventually([&] { return has_event(tool, "tool.requested"); }, 90s));
  ASSERT_TRUE(eventually([&] { return has_event(idle, "turn.ended"); }, 90s));
  ASSERT_FALSE(has_event(tool, "tool.result")) << "the call is still running when the daemon dies";

  kill_daemon();
  start_daemon();

  SocketClient control(daemon->socket());
  control.send(socket_request("attach", R"("run_id":")" + pending + R"(","from_seq":0)"));
  ASSERT_TRUE(control.wait_reply("attached")) << daemon->stderr_text();
  // The adopted run's pending call is handed to the controller with the time it has left.
  auto offered = control.wait_reply("pending");
  ASSERT_TRUE(offered) << daemon->stderr_text();
  EXPECT_EQ(offered->str("call_id"), "toolu_probe") << offered->raw;
  auto remaining = offered->object.at("remaining_ms").to_number<std::int64_t>();
  EXPECT_GT(remaining, 0);
  EXPECT_LE(remaining, 120000) << "the time it has left, not a fresh deadline";
  control.send(R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_probe",)"
               R"("decision":{"decision":"allow"}})");
  SocketClient inject(daemon->socket());
  inject.send(socket_request("attach", R"("run_id":")" + idle + R"(","from_seq":0)"));
  ASSERT_TRUE(inject.wait_reply("attached"));
  inject.send(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"again"})");

  auto pending_events = follow(pending);
  auto tool_events = follow(tool);
  auto idle_events = follow(idle);
  expect_adopted_and_complete(pending, pending_events);
  expect_adopted_and_complete(tool, tool_events);
  expect_adopted_and_complete(idle, idle_events);
  EXPECT_EQ(read_file(daemon->run_dir(pending) / "scratch/work/decided.txt"), "decided\n");
  EXPECT_EQ(read_file(daemon->run_dir(tool) / "scratch/work/ran.txt"), "ran\n");
  std::size_t turns = 0;
  for (const auto& e : idle_events)
    turns += e.event() == "turn.ended";
  EXPECT_EQ(turns, 2u) << "the idle run took its next message after the adoption";
  // Nothing of the vendor was lost: every byte it wrote is in the transcript, and was read.
  // The supervisor is released after stream.closed is written: it leaves shortly after.
  for (const auto& id : {pending, tool, idle}) {
    auto supervisor_alive = [&] {
      auto pid = supervisor_pid(id);
      return std::filesystem::exists(daemon->run_dir(id) / "supervisor.sock") && pid && ::kill(*pid, 0) == 0 &&
             read_file("/proc/" + std::to_string(*pid) + "/status").find("State:\tZ") == std::string::npos;
    };
    EXPECT_TRUE(eventually([&] { return !supervisor_alive(); }, 30s))
        << id << ": its supervisor left once the run closed";
  }
}

TEST_F(DaemonAdoption, ADeadlineThatRanOutWhileNoDaemonWasThereIsAppliedAtAdoption) {
  std::string id;
  ASSERT_NO_FATAL_FAILURE(start_pending_run("deadline", "echo never > never.txt", id, 2000));
  kill_daemon();
  // Longer than the deadline: it runs out while no daemon is there.
  auto gone_at = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - gone_at < 2500ms)
    ASSERT_FALSE(has_event(id, "tool.decided")) << "nothing decides while no daemon is there";
  start_daemon();
  SocketClient control(daemon->socket());
  ASSERT_NO_FATAL_FAILURE(attach(control, id, 1));
  auto decided = control.wait_event("tool.decided", 60s);
  ASSERT_TRUE(decided);
  EXPECT_EQ(decided->object.at("decision").at("decision").as_string(), "deny") << decided->raw;
  control.send(tool_decide("late", "toolu_probe", R"({"decision":"allow"})"));
  auto late = control.wait_for([](const EventLine& e) { return e.event() == "command.result"; }, 60s);
  ASSERT_TRUE(late);
  EXPECT_NE(late->raw.find("TOO_LATE"), std::string::npos) << late->raw;
  auto events = follow(id);
  expect_adopted_and_complete(id, events);
  EXPECT_FALSE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/never.txt"));
}

TEST_F(DaemonAdoption, AStopWithOnStopDetachLeavesTheRunToTheNextStart) {
  std::string id;
  ASSERT_NO_FATAL_FAILURE(start_pending_run("detach", "echo after > after.txt", id));
  daemon->signal(SIGTERM);
  EXPECT_EQ(daemon->wait_exit(60s), 0) << daemon->stderr_text();
  EXPECT_FALSE(has_event(id, "stream.closed")) << "the stop left the run open";
  auto pid = supervisor_pid(id);
  ASSERT_TRUE(pid);
  EXPECT_EQ(::kill(*pid, 0), 0) << "its supervisor still holds it";
  start_daemon();
  SocketClient control(daemon->socket());
  ASSERT_NO_FATAL_FAILURE(attach(control, id, 0));
  control.send(tool_decide("d1", "toolu_probe", R"({"decision":"allow"})"));
  auto events = follow(id);
  expect_adopted_and_complete(id, events);
  EXPECT_EQ(read_file(daemon->run_dir(id) / "scratch/work/after.txt"), "after\n");
}

TEST_F(DaemonAdoption, ARunAdoptedOnceIsAdoptedAgainAfterTheNextKill) {
  // The second daemon's replay must state again what the first adoption stated (its RUN_ADOPTED)
  // and what the launch stated (the containment's warnings), each at its place in the stream.
  std::string id;
  ASSERT_NO_FATAL_FAILURE(start_pending_run("twice", "echo twice > twice.txt", id));
  for (int round = 0; round < 2; ++round) {
    kill_daemon();
    start_daemon();
    ASSERT_TRUE(eventually(
        [&] {
          std::size_t adopted = 0;
          for (const auto& e : events_of(id))
            adopted += e.event() == "warning" && e.str("code") == "RUN_ADOPTED";
          return adopted == static_cast<std::size_t>(round + 1);
        },
        60s))
        << "round " << round << ": " << what_happened(id);
  }
  SocketClient control(daemon->socket());
  ASSERT_NO_FATAL_FAILURE(attach(control, id, 0));
  control.send(tool_decide("d1", "toolu_probe", R"({"decision":"allow"})"));
  auto events = follow(id);
  expect_adopted_and_complete(id, events, 2);
  EXPECT_EQ(read_file(daemon->run_dir(id) / "scratch/work/twice.txt"), "twice\n");
}

// Live pids (zombies excluded) whose command line names `text` (a run's id is in its supervisor's
// spec path and in every sandbox path bwrap is given).
std::vector<int> processes_naming(const std::string& text) {
  std::vector<int> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string argv = read_file(entry.path() / "cmdline");
    if (argv.find(text) == std::string::npos) continue;
    if (read_file(entry.path() / "status").find("State:\tZ") != std::string::npos) continue;
    out.push_back(std::stoi(name));
  }
  return out;
}

// Issue 24: a daemon killed between spawning a run's supervisor and recording the run's start
// left a journal with no start; the next daemon adopted the run as `launching`, where a shutdown
// did nothing: its SIGTERM "halted" it, waited out the grace, and left supervisor, bwrap and vendor
// running and the run's cgroup behind. The supervisor is held (a gate before its exec) until the
// first daemon is dead, so the window is hit every time.
TEST_F(DaemonAdoption, ASigtermThatHaltsEndsARunAdoptedBeforeItsStartWasRecorded) {
  daemon.reset();
  const auto gate = dir.path() / "gate";
  const auto held = dir.path() / "held";
  ASSERT_EQ(::mkfifo(gate.c_str(), 0600), 0);
  const auto wrapper = dir.path() / "held-supervisor";
  std::ofstream(wrapper) << "#!/bin/sh\n: > '" << held.string() << "'\nread _ < '" << gate.string() << "'\nexec '"
                         << (metaharness_binary().parent_path() / "metaharness-supervisor").string() << "' \"$@\"\n";
  std::filesystem::permissions(wrapper, std::filesystem::perms::owner_all);
  const std::string config = "[runs]\nsupervise = true\nsupervisor = \"" + wrapper.string() +
                             "\"\nadopt_within_ms = 120000\nshutdown_grace_ms = 8000\n";
  daemon = std::make_unique<DaemonUnderTest>(dir.path(), config);
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  std::string id;
  {
    SocketClient c(daemon->socket());
    // The model is the daemon's own (model_scenario): it goes with the daemon, as in the report.
    auto reply = c.request(socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","model_scenario":)" +
                                                        one_bash_call_scenario("true") + "}"));
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    id = reply->str("run_id");
  }
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(held); })) << "the daemon spawned the supervisor";
  kill_daemon();
  {
    std::ofstream open_gate(gate);
    open_gate << "go\n";
  }
  ASSERT_TRUE(eventually([&] { return supervisor_pid(id).has_value(); })) << what_happened(id);
  auto supervisor = supervisor_pid(id);

  daemon = std::make_unique<DaemonUnderTest>(dir.path(), config);
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  ASSERT_TRUE(eventually([&] {
    for (const auto& e : events_of(id))
      if (e.event() == "warning" && e.str("code") == "RUN_ADOPTED") return true;
    return false;
  })) << what_happened(id);
  daemon->signal(SIGTERM);
  EXPECT_EQ(daemon->wait_exit(60s), 0) << daemon->stderr_text();
  EXPECT_EQ(daemon->stderr_text().find("did not close within the shutdown grace"), std::string::npos)
      << daemon->stderr_text();
  auto events = events_of(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed") << what_happened(id);
  EXPECT_EQ(events.back().str("reason"), "killed") << events.back().raw;
  // Nothing of the run is left: not its supervisor, not bwrap, not the vendor, not its cgroup.
  EXPECT_TRUE(eventually([&] { return processes_naming(id).empty(); }, 10s))
      << "still running: " << processes_naming(id).size() << " process(es) naming the run";
  EXPECT_TRUE(supervisor.has_value());
  EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty());
  ASSERT_TRUE(daemon->cgroup_parent());
  EXPECT_FALSE(std::filesystem::exists(*daemon->cgroup_parent() / id)) << "the run's cgroup is gone";
}

// A halting stop ends every run, whatever becomes of it: a run that cannot close within the
// shutdown grace (here its supervisor is stopped, so the vendor's end never reaches the daemon)
// has its supervisor and every process of its cgroup killed before the daemon exits.
TEST_F(DaemonAdoption, AHaltingStopLeavesNothingOfARunThatCouldNotCloseInItsGrace) {
  daemon.reset();
  daemon = std::make_unique<DaemonUnderTest>(
      dir.path(), "[runs]\nsupervise = true\nhalt_grace_ms = 500\nshutdown_grace_ms = 3000\n");
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  std::string id;
  ASSERT_NO_FATAL_FAILURE(start_pending_run("stuck", "echo x > x.txt", id));
  auto supervisor = supervisor_pid(id);
  ASSERT_TRUE(supervisor);
  ASSERT_EQ(::kill(*supervisor, SIGSTOP), 0);
  daemon->signal(SIGTERM);
  EXPECT_EQ(daemon->wait_exit(60s), 0) << daemon->stderr_text();
  EXPECT_NE(daemon->stderr_text().find("did not close within the shutdown grace"), std::string::npos)
      << "the run could not close: " << daemon->stderr_text();
  EXPECT_TRUE(eventually([&] { return processes_naming(id).empty(); }, 10s))
      << processes_naming(id).size() << " process(es) of the run outlived the stop";
  ASSERT_TRUE(daemon->cgroup_parent());
  EXPECT_FALSE(std::filesystem::exists(*daemon->cgroup_parent() / id)) << "the run's cgroup is gone";
}

// Issue 24: RUN_ADOPTED said the time since the run's last input ("20 s" for a 0.05 s outage).
// The gap it states is the supervisor's measure of the outage: within what the test saw of it,
// however long the run had been quiet before.
TEST_F(DaemonAdoption, RunAdoptedStatesHowLongNoDaemonGovernedItNotHowLongTheRunWasQuiet) {
  std::string id;
  ASSERT_NO_FATAL_FAILURE(start_pending_run("words", "echo words > words.txt", id));
  // A quiet run: its last input (the call's request) is 3 s old before the daemon goes.
  const auto quiet_from = std::chrono::steady_clock::now();
  const auto recorded = events_of(id).size();
  while (std::chrono::steady_clock::now() - quiet_from < 3s)
    ASSERT_EQ(events_of(id).size(), recorded) << "nothing happens to a run that waits for a decision";
  const auto before_kill = std::chrono::steady_clock::now();
  kill_daemon();
  start_daemon();
  std::optional<EventLine> adopted;
  ASSERT_TRUE(eventually([&] {
    for (const auto& e : events_of(id))
      if (e.event() == "warning" && e.str("code") == "RUN_ADOPTED") adopted = e;
    return adopted.has_value();
  })) << what_happened(id);
  const double outage_bound = std::chrono::duration<double>(std::chrono::steady_clock::now() - before_kill).count();
  std::smatch m;
  const std::string message = adopted->str("message");
  ASSERT_TRUE(std::regex_search(message, m, std::regex(R"(no daemon governed it for ([0-9.]+) s)"))) << message;
  const double stated = std::stod(m[1].str());
  EXPECT_LE(stated, outage_bound + 0.001) << message << " (the outage lasted at most " << outage_bound << " s)";
  EXPECT_GE(stated, 0.0) << message;
  SocketClient control(daemon->socket());
  ASSERT_NO_FATAL_FAILURE(attach(control, id, 0));
  control.send(tool_decide("d1", "toolu_probe", R"({"decision":"allow"})"));
  expect_adopted_and_complete(id, follow(id));
}

// Issue 24: a run whose supervisor had already given up (its adopt bound ran out) was logged
// "adopted" and shown live (`starting`) for the 10 s an attach retried "connection refused" on its
// dead socket, and a SIGTERM then took 9.5 s. It is recovered at once: closed before the daemon
// is ready, never listed live.
TEST_F(DaemonAdoption, ARunWhoseSupervisorHadGivenUpIsRecoveredAtOnceAndNeverShownLive) {
  daemon.reset();
  const std::string config = "[runs]\nsupervise = true\nadopt_within_ms = 1000\n";
  daemon = std::make_unique<DaemonUnderTest>(dir.path(), config);
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  std::string id;
  ASSERT_NO_FATAL_FAILURE(start_pending_run("gaveup", "echo x > x.txt", id));
  kill_daemon();
  const std::string spec = (daemon->run_dir(id) / "supervisor-spec.json").string();
  ASSERT_TRUE(eventually([&] { return processes_naming(spec).empty(); }, 60s))
      << "the supervisor gives up after its adopt bound: " << read_file(daemon->run_dir(id) / "supervisor.log");
  ASSERT_TRUE(std::filesystem::exists(daemon->run_dir(id) / "supervisor.sock")) << "its socket is left, dead";

  daemon = std::make_unique<DaemonUnderTest>(dir.path(), config);
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  {
    SocketClient c(daemon->socket());
    auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
    ASSERT_TRUE(got) << daemon->stderr_text();
    EXPECT_EQ(got->str("state"), "closed") << "never shown live: " << got->raw;
  }
  EXPECT_EQ(daemon->stderr_text().find("run " + id + ": adopted"), std::string::npos) << daemon->stderr_text();
  auto events = events_of(id);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back().event(), "stream.closed");
  EXPECT_EQ(events[events.size() - 2].str("code"), "RECOVERED_AFTER_RESTART") << events[events.size() - 2].raw;
  EXPECT_NE(events[events.size() - 2].str("message").find("had ended"), std::string::npos)
      << events[events.size() - 2].raw;
  auto verdict = protocol::check_stream(read_file(daemon->run_dir(id) / "events.jsonl"));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary();
}

TEST_F(DaemonAdoption, ARunWhoseSupervisorDiesIsKilledAndClosedSayingSo) {
  std::string id;
  ASSERT_NO_FATAL_FAILURE(start_pending_run("lost", "echo x > x.txt", id));
  auto pid = supervisor_pid(id);
  ASSERT_TRUE(pid);
  ASSERT_EQ(::kill(*pid, SIGKILL), 0);
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  bool lost = false;
  for (const auto& e : events)
    lost = lost || (e.event() == "warning" && e.str("code") == "SUPERVISOR_LOST");
  EXPECT_TRUE(lost) << "the close says why";
  auto verdict = protocol::check_stream(read_file(daemon->run_dir(id) / "events.jsonl"));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary();
  EXPECT_FALSE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/x.txt"));
}

// Issue 24 item 3: a vendor_env value is a secret whatever its name. `get` shows its name with
// the value redacted, to the owner and to an observer of another uid (the attack: `nobody`,
// granted observe, reading another uid's run), before and after an adoption; spec.json and
// plan.json (0640) hold none of it; the only file that does is the supervisor's own spec (0600),
// which no reply reads. The vendor still gets the value, and the run adopted after a SIGKILL of
// its daemon carries on: nothing re-reads the value.
TEST_F(DaemonAdoption, AVendorEnvValueIsInNoReplyNorSpecJsonAndTheRunStillAdopts) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to be a second uid (nobody)";
  constexpr uid_t kNobody = 65534;
  // The observer must reach the socket: every directory above it must let `nobody` pass.
  for (auto p = dir.path(); p != p.root_path(); p = p.parent_path()) {
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0) << p;
    if ((st.st_mode & S_IXOTH) == 0) GTEST_SKIP() << p << " does not let another uid pass to the socket";
  }
  const std::string access =
      "[paths]\nsocket_mode = \"0666\"\n[access]\nobserve_uids = [" + std::to_string(kNobody) + "]\n";
  daemon.reset();
  ASSERT_NO_FATAL_FAILURE(start_daemon(access));
  const std::string secret = "secretvalue-b7e1";
  model = std::make_unique<ModelServer>(dir.path(), "secret", one_bash_call_scenario("echo \"$FOO\" > foo.txt"));
  ASSERT_TRUE(model->up());
  std::string id =
      submit(*model, R"("decisions":"ask","decision_deadline_ms":120000,"vendor_env":{"FOO":")" + secret + "\"}");
  ASSERT_TRUE(eventually([&] { return has_event(id, "tool.requested"); }, 90s)) << what_happened(id);

  const std::string get = socket_request("get", R"("run_id":")" + id + "\"");
  auto nothing_told = [&](const std::string& when) {
    SocketClient owner(daemon->socket());
    auto mine = owner.request(get);
    ASSERT_TRUE(mine && mine->str("reply") == "run") << when << ": " << (mine ? mine->raw : "no reply");
    EXPECT_EQ(mine->raw.find(secret), std::string::npos) << when << ", the owner: " << mine->raw;
    const auto& env = mine->object.at("spec").as_object().at("vendor_env").as_object();
    EXPECT_EQ(env.at("FOO"), "(redacted)") << when << ": the name stays, the value goes";
    std::string why;
    std::string theirs = first_line_as(kNobody, daemon->socket(), get, why);
    ASSERT_FALSE(theirs.empty()) << when << ", the observer: " << why;
    EXPECT_NE(theirs.find(R"("reply":"run")"), std::string::npos) << when << ": the observer may get it: " << theirs;
    EXPECT_EQ(theirs.find(secret), std::string::npos) << when << ", the observer of another uid: " << theirs;
    EXPECT_NE(theirs.find(R"x("FOO":"(redacted)")x"), std::string::npos) << theirs;
  };
  ASSERT_NO_FATAL_FAILURE(nothing_told("live"));
  // No file of the run directory holds the value but the supervisor's own spec, readable by
  // nobody but the daemon's uid.
  for (const auto& entry : std::filesystem::directory_iterator(daemon->run_dir(id))) {
    if (!entry.is_regular_file()) continue;
    const std::string name = entry.path().filename().string();
    if (name == "supervisor-spec.json") {
      EXPECT_NE(read_file(entry.path()).find(secret), std::string::npos) << "the supervisor launches with it";
      struct stat st {};
      ASSERT_EQ(::stat(entry.path().c_str(), &st), 0);
      EXPECT_EQ(st.st_mode & 07777, 0600u) << name;
      continue;
    }
    EXPECT_EQ(read_file(entry.path()).find(secret), std::string::npos) << name << " holds the value";
  }
  auto stored = protocol::parse_json(read_file(daemon->run_dir(id) / "spec.json"));
  ASSERT_TRUE(stored && stored->is_object());
  EXPECT_EQ(stored->as_object().at("vendor_env").as_object().at("FOO"), "(redacted)");

  kill_daemon();
  ASSERT_NO_FATAL_FAILURE(start_daemon(access));
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& e : events_of(id))
          if (e.event() == "warning" && e.str("code") == "RUN_ADOPTED") return true;
        return false;
      },
      60s))
      << what_happened(id);
  ASSERT_NO_FATAL_FAILURE(nothing_told("adopted"));
  SocketClient control(daemon->socket());
  ASSERT_NO_FATAL_FAILURE(attach(control, id, 0));
  control.send(tool_decide("d1", "toolu_probe", R"({"decision":"allow"})"));
  auto events = follow(id);
  expect_adopted_and_complete(id, events);
  EXPECT_EQ(read_file(daemon->run_dir(id) / "scratch/work/foo.txt"), secret + "\n")
      << "the vendor had the value all along";
}

// Two Bash calls (toolu_first `first`, then toolu_second `second`), then an answer: a run that
// waits on two decisions.
std::string two_bash_calls_scenario(const std::string& first, const std::string& second) {
  auto ask = [](const std::string& name, const std::string& id, const std::string& command) {
    json::object input{{"command", command}, {"description", "probe"}};
    json::object call{{"type", "tool_call"}, {"id", id}, {"name", "Bash"}, {"input", input}};
    return json::object{{"name", name}, {"content", json::array{call}}};
  };
  json::object answer{{"name", "answer"}, {"content", json::array{json::object{{"type", "text"}, {"text", "Done."}}}}};
  json::object scenario{
      {"format", "metaharness.scenario/1"},
      {"wires", json::array{"anthropic"}},
      {"steps", json::array{ask("first", "toolu_first", first), ask("second", "toolu_second", second), answer}}};
  return protocol::canonical_json(scenario);
}

// Parking (issue 27 §5) in a supervised run: a parked run keeps its supervisor, not its vendor,
// so it outlives its daemon as any supervised run does. The run parks on its first call, is
// resumed by its decision (its supervisor spawns the vendor again) and parks again on its
// second; the daemon is then killed. The next daemon adopts the parked run — its journal replays
// the first park, the resume and the second park — and the second call's decision resumes it
// once more. One stream: one session.started, two RUN_PARKED, two RUN_RESUMED, one RUN_ADOPTED,
// completed; both calls ran.
TEST_F(DaemonAdoption, AParkedRunOutlivesItsDaemonAndTheNextOneResumesItOnItsDecision) {
  ModelServer m(dir.path(), "park", two_bash_calls_scenario("echo one > one.txt", "echo two > two.txt"));
  ASSERT_TRUE(m.up());
  const std::string id = submit(m, R"("decisions":"ask","decision_deadline_ms":600000,"park_after_ms":200)");
  ASSERT_FALSE(id.empty());
  // Parked `times` times, and its vendor gone: get says so, with no pid.
  auto parked = [&](std::size_t times) {
    if (count_events(events_of(id), "warning", "RUN_PARKED") != times) return false;
    SocketClient c(daemon->socket());
    auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
    return got && got->str("state") == "parked" && got->object.at("pid").is_null();
  };
  auto decide = [&](const std::string& command_id, const std::string& call_id) {
    SocketClient c(daemon->socket());
    auto result = c.request(socket_request("command", R"("run_id":")" + id + R"(","command":)" +
                                                          tool_decide(command_id, call_id, R"({"decision":"allow"})")));
    ASSERT_TRUE(result && result->str("reply") == "result") << (result ? result->raw : daemon->stderr_text());
    EXPECT_EQ(result->object.at("outcome").as_object().at("result"), "ok") << result->raw;
  };
  ASSERT_TRUE(eventually([&] { return parked(1); }, 120s)) << what_happened(id);
  auto supervisor = supervisor_pid(id);
  ASSERT_TRUE(supervisor);
  EXPECT_EQ(::kill(*supervisor, 0), 0) << "a parked run keeps its supervisor";
  ASSERT_NO_FATAL_FAILURE(decide("d1", "toolu_first"));
  ASSERT_TRUE(eventually([&] { return parked(2); }, 120s)) << what_happened(id);
  EXPECT_EQ(read_file(daemon->run_dir(id) / "scratch/work/one.txt"), "one\n");
  EXPECT_EQ(supervisor_pid(id), supervisor) << "one supervisor for the whole run";

  kill_daemon();
  start_daemon();
  ASSERT_TRUE(eventually([&] { return parked(2); }, 60s)) << "adopted as parked: " << what_happened(id);
  ASSERT_NO_FATAL_FAILURE(decide("d2", "toolu_second"));
  auto events = follow(id);
  expect_adopted_and_complete(id, events);
  EXPECT_EQ(count_events(events, "session.started"), 1u);
  EXPECT_EQ(count_events(events, "warning", "RUN_PARKED"), 2u);
  EXPECT_EQ(count_events(events, "warning", "RUN_RESUMED"), 2u);
  EXPECT_EQ(count_events(events, "warning", "RESUME_UNGOVERNED"), 0u);
  EXPECT_EQ(read_file(daemon->run_dir(id) / "scratch/work/two.txt"), "two\n") << what_happened(id);
}

}  // namespace
}  // namespace mh::test
