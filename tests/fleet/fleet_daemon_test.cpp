// Three real daemons joined through a real 3-node nats-server cluster (docs/fleet.md), each
// daemon on its own node, hosting the stand-in harness (tests/standin) in place of the vendor
// CLI: runs submitted with "fleet": true are placed across the hosts by their room, each exactly
// once; each is read complete, byte for byte, from a host that does not own it; a command is
// routed to the owner and answered once; a host SIGKILLed with its NATS node has its runs closed
// by a survivor within the lease; a restarted daemon resumes publishing without gap or duplicate.
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

#include "tests/support/daemon_harness.hpp"
#include "tests/support/nats_cluster.hpp"

namespace mh::test {
namespace {

std::string standin_run(const std::string& script, const std::string& extra = "") {
  return R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
         R"("vendor_env":{"MH_STANDIN_SCRIPT":")" +
         (std::filesystem::path(MH_TEST_STANDIN_SCRIPTS) / script).string() + "\"}" +
         (extra.empty() ? "" : "," + extra) + "}";
}

std::string bash_ask_run() {
  return standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":600000)");
}

class FleetDaemons : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("fleet-daemons");
    cluster_ = new NatsCluster(dir_->path() / "nats");
    ASSERT_TRUE(cluster_->ready()) << cluster_->why() << "\n" << cluster_->log(0);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete dir_;
  }
  void TearDown() override {
    daemons.clear();
    for (int i = 0; i < cluster_->size(); ++i)
      cluster_->start(i);  // a test that killed a node leaves it back for the next
    // ... and back in JetStream: the next test's replicated streams need all three peers.
    ASSERT_TRUE(cluster_->ready()) << cluster_->why();
  }

  std::string prefix() const {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string p;
    for (char ch : name)
      if (std::isupper(static_cast<unsigned char>(ch))) p += static_cast<char>(std::tolower(ch));
    return "f" + p.substr(0, 12);
  }

  // Daemon i: host h<i>, on NATS node i only (so a node's loss is its host's loss).
  std::string config(int i, int max_active, int lease_ms) {
    return std::string("[vendor]\nclaude = \"") + MH_TEST_STANDIN +
           "\"\n[runs]\nmax_active = " + std::to_string(max_active) + "\nsandbox_read_only = [\"" +
           MH_TEST_STANDIN_SCRIPTS + "\"]\n[fleet]\nnats_urls = [\"" + cluster_->url(i) + "\"]\nhost_id = \"h" +
           std::to_string(i) + "\"\nreplicas = 3\nlease_ttl_ms = " + std::to_string(lease_ms) + "\nprefix = \"" +
           prefix() + "\"\nrequest_timeout_ms = 4000\n";
  }
  DaemonUnderTest& start(int i, int max_active = 100, int lease_ms = 3000) {
    auto home = dir_->path() / (prefix() + "-h" + std::to_string(i));
    std::filesystem::create_directories(home);
    auto& d = daemons[i];
    d.reset();
    d = std::make_unique<DaemonUnderTest>(home, config(i, max_active, lease_ms));
    EXPECT_TRUE(d->wait_notify("READY=1", 90s)) << d->stderr_text();
    return *d;
  }

  // The whole stream of `run` as `host` reads it from the fleet, to stream.closed. A refusal
  // FLEET_UNAVAILABLE (JetStream electing a leader after a node's loss) is asked again, within
  // the same bound.
  std::vector<EventLine> fleet_tail(int host, const std::string& run, std::chrono::milliseconds timeout = 120s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
      SocketClient c(daemons[host]->socket());
      c.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      auto done =
          c.wait_for([](const EventLine& l) { return l.str("reply") == "end" || l.str("reply") == "refused"; }, left);
      if (done && done->str("reply") == "end") {
        std::vector<EventLine> events;
        for (const auto& l : c.lines())
          if (!l.event().empty()) events.push_back(l);
        return events;
      }
      last = done ? done->raw : "no end";
      if (!done || done->str("code") != "FLEET_UNAVAILABLE") break;
    }
    ADD_FAILURE() << run << " from h" << host << ": " << last << "\n" << daemons[host]->stderr_text();
    return {};
  }

  std::int64_t lose_a_host(bool leaders_on_lost, int lease_ms);

  // A run waiting on its decision, submitted on host `host` itself (not through the queue): "" if refused.
  std::string submit_here(int host) {
    SocketClient c(daemons[host]->socket());
    auto reply = c.request(socket_request("submit", bash_ask_run()), 60s);
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }
  // Whether `reader`'s `get` names `owner` as the run's host within the bound (a run submitted on
  // its own host enters the fleet's records when its publisher starts).
  bool owner_known(int reader, const std::string& run, const std::string& owner) {
    return eventually(
        [&] {
          SocketClient c(daemons[reader]->socket());
          auto got = c.request(socket_request("get", R"("run_id":")" + run + "\""));
          return got && got->str("host") == owner;
        },
        60s);
  }

  static void expect_complete(const std::vector<EventLine>& events, const std::string& run) {
    ASSERT_FALSE(events.empty()) << run;
    for (std::size_t i = 0; i < events.size(); ++i)
      EXPECT_EQ(events[i].object.at("seq").to_number<std::uint64_t>(), i + 1) << run;  // no gap, no duplicate
    EXPECT_EQ(events.back().event(), "stream.closed") << run;
  }

  static TempDir* dir_;
  static NatsCluster* cluster_;
  std::map<int, std::unique_ptr<DaemonUnderTest>> daemons;
};
TempDir* FleetDaemons::dir_ = nullptr;
NatsCluster* FleetDaemons::cluster_ = nullptr;

TEST_F(FleetDaemons, ThirtyRunsArePlacedAcrossThreeHostsOnceEachAndReadCompleteFromAnother) {
  // Room for ten each, and every run waits on a decision: the only way to place thirty is ten
  // on each host.
  for (int i = 0; i < 3; ++i)
    start(i, 10);
  std::map<std::string, std::string> host_of;
  std::map<std::string, int> per_host;
  {
    SocketClient c(daemons[0]->socket());
    for (int n = 0; n < 30; ++n) {
      auto reply =
          c.request(socket_request("submit", bash_ask_run() + R"(,"fleet":true)", "s" + std::to_string(n)), 120s);
      ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
      ASSERT_EQ(reply->str("placement"), "placed") << reply->raw;
      host_of[reply->str("run_id")] = reply->str("host");
      ++per_host[reply->str("host")];
    }
  }
  ASSERT_EQ(host_of.size(), 30u);
  EXPECT_EQ(per_host, (std::map<std::string, int>{{"h0", 10}, {"h1", 10}, {"h2", 10}}));
  // Exactly once: each run's directory is on its host and on no other.
  for (auto& [run, host] : host_of)
    for (int i = 0; i < 3; ++i)
      EXPECT_EQ(std::filesystem::exists(daemons[i]->run_dir(run)), host == "h" + std::to_string(i)) << run << " h" << i;
  // `get` from any host says whose it is; `list` with fleet lists all thirty.
  {
    SocketClient c(daemons[1]->socket());
    auto one = host_of.begin();
    auto got = c.request(socket_request("get", R"("run_id":")" + one->first + "\""));
    ASSERT_TRUE(got) << "no reply";
    EXPECT_EQ(got->str("host"), one->second) << got->raw;
    auto listed = c.request(socket_request("list", R"("fleet":true)"));
    ASSERT_TRUE(listed && listed->object.contains("runs"));
    std::set<std::string> ids;
    for (auto& r : listed->object.at("runs").as_array())
      ids.insert(std::string(r.as_object().at("run_id").as_string()));
    for (auto& [run, host] : host_of)
      EXPECT_TRUE(ids.count(run)) << run;
  }
  // A decision from another host: routed to the owner, answered once, attributed to the peer and host.
  std::string routed;
  for (auto& [run, host] : host_of)
    if (host == "h1") routed = run;
  {
    SocketClient watch(daemons[0]->socket());
    watch.send(socket_request("tail", R"("run_id":")" + routed + R"(","from_seq":1,"follow":true,"fleet":true)"));
    ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << daemons[0]->stderr_text();
    SocketClient c(daemons[0]->socket());
    auto result = c.request(socket_request("command",
                                           R"("run_id":")" + routed +
                                               R"(","command":{"format":"metaharness.command/1","id":"d1",)"
                                               R"("command":"tool.decide","call_id":"toolu_marker",)"
                                               R"("decision":"allow"})",
                                           "c1"),
                            120s);
    ASSERT_TRUE(result) << "no reply";
    EXPECT_EQ(result->str("reply"), "result") << result->raw;
    EXPECT_EQ(result->str("id"), "c1") << result->raw;
    auto decided = watch.wait_event("tool.decided", 120s);
    ASSERT_TRUE(decided);
    auto peer = decided->object.at("peer").as_object();
    EXPECT_EQ(std::string(peer.at("via").as_string()), "fleet:h0") << decided->raw;
    ASSERT_TRUE(watch.wait_event("command.result", 120s));
    EXPECT_EQ(watch.events_named("command.result").size(), 1u);  // answered once
  }
  // Every run halted from h0 (routed to its owner for twenty of them), then read whole from a
  // host that does not own it: byte for byte the owner's file.
  {
    SocketClient c(daemons[0]->socket());
    for (auto& [run, host] : host_of) {
      auto halted = c.request(socket_request("halt", R"("run_id":")" + run + "\""), 120s);
      ASSERT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
    }
  }
  for (auto& [run, host] : host_of) {
    int owner = host.back() - '0', reader = (owner + 1) % 3;
    auto events = fleet_tail(reader, run);
    expect_complete(events, run);
    std::string fleet_bytes;
    for (auto& e : events)
      fleet_bytes += e.raw + "\n";
    EXPECT_EQ(fleet_bytes, read_file(daemons[owner]->run_dir(run) / "events.jsonl")) << run;
  }
}

// Milliseconds since the epoch of a line's recorded_at ("2026-12-01T09:30:00.123Z"): when the
// survivor made its close, on the same clock as the test's.
std::int64_t recorded_ms(const EventLine& line) {
  std::string t = line.str("recorded_at");
  std::tm tm{};
  if (t.size() < 23 || !strptime(t.c_str(), "%Y-%m-%dT%H:%M:%S", &tm)) return 0;
  return static_cast<std::int64_t>(timegm(&tm)) * 1000 + std::stoi(t.substr(20, 3));
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Host h2 and its NATS node n2 SIGKILLed while two runs of h2 wait on a decision; the streams,
// buckets and leases the close needs (events, run records, leases) led by n2 (`leaders_on_lost`)
// or by a survivor node. What each run's close must hold, and how long after the kill the
// survivor made it (its stream.closed's recorded_at).
std::int64_t FleetDaemons::lose_a_host(bool leaders_on_lost, int lease_ms) {
  for (int i = 0; i < 3; ++i)
    start(i, 100, lease_ms);
  std::vector<std::string> runs;
  for (int n = 0; n < 2; ++n) {
    runs.push_back(submit_here(2));  // submitted on h2 itself (not through the queue): still the fleet's
    if (runs.back().empty()) return -1;
  }
  // Each run mid-flight and visible fleet-wide (waiting on its decision). A run submitted on its
  // own host enters the fleet's records when its publisher starts: `get` from h0 says when.
  std::vector<std::unique_ptr<SocketClient>> watches;
  for (auto& run : runs) {
    EXPECT_TRUE(owner_known(0, run, "h2"));
    watches.push_back(std::make_unique<SocketClient>(daemons[0]->socket()));
    watches.back()->send(
        socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
    EXPECT_TRUE(watches.back()->wait_event("tool.requested", 120s)) << daemons[0]->stderr_text();
  }
  std::string upper = prefix();
  for (auto& ch : upper)
    ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  const std::vector<std::string> needed = {upper + "_EVENTS", "KV_" + prefix() + "_runs", "KV_" + prefix() + "_hosts"};
  for (const auto& stream : needed) {
    EXPECT_TRUE(cluster_->move_leader(stream, 2, leaders_on_lost)) << stream;
    std::printf("host loss: %s led by %s\n", stream.c_str(), cluster_->leader(stream).c_str());
  }
  const std::int64_t killed_ms = wall_ms();
  auto killed_at = std::chrono::steady_clock::now();
  daemons[2]->signal(SIGKILL);
  cluster_->kill(2);
  std::int64_t closed_after = 0;
  for (std::size_t n = 0; n < runs.size(); ++n) {
    auto closed = watches[n]->wait_event("stream.closed", 120s);
    EXPECT_TRUE(closed) << daemons[0]->stderr_text() << daemons[1]->stderr_text();
    if (!closed) return -1;
    closed_after = std::max(closed_after, recorded_ms(*closed) - killed_ms);
  }
  auto seen = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - killed_at);
  std::printf(
      "host loss (%s): closed by a survivor %lld ms after the SIGKILL, seen through h0's tail after %lld ms "
      "(lease %d ms)\n",
      leaders_on_lost ? "n2 led the events, records and leases" : "n2 led none of them",
      static_cast<long long>(closed_after), static_cast<long long>(seen.count()), lease_ms);
  for (int i = 0; i < 2; ++i)
    for (const auto& l : read_lines(dir_->path() / "nats" / ("n" + std::to_string(i)) / "nats.log"))
      if (l.find("leader") != std::string::npos &&
          (l.find(prefix()) != std::string::npos || l.find(upper) != std::string::npos ||
           l.find("metadata") != std::string::npos))
        std::printf("  n%d: %s\n", i, l.c_str());
  for (std::size_t n = 0; n < runs.size(); ++n) {
    auto closed = watches[n]->events_named("stream.closed");
    EXPECT_EQ(closed.size(), 1u);
    if (closed.size() != 1) return -1;
    EXPECT_EQ(closed.front().str("reason"), "error");
    std::vector<EventLine> events;
    for (const auto& l : watches[n]->lines())
      if (!l.event().empty()) events.push_back(l);
    expect_complete(events, runs[n]);
    EXPECT_GE(events.size(), 2u);
    if (events.size() < 2) return -1;
    auto warning = events[events.size() - 2];
    EXPECT_EQ(warning.event(), "warning");
    EXPECT_EQ(warning.str("code"), "HOST_LOST");
    EXPECT_NE(warning.str("message").find("host h2"), std::string::npos) << warning.raw;
    EXPECT_EQ(watches[n]->events_named("warning").size(), 1u);  // one survivor closed it
    // Every stream is complete from the other survivor too, and its record says who closed it.
    expect_complete(fleet_tail(1, runs[n]), runs[n]);
    EXPECT_TRUE(eventually(
        [&] {
          SocketClient c(daemons[1]->socket());
          auto got = c.request(socket_request("get", R"("run_id":")" + runs[n] + "\""));
          return got && got->str("fleet_state") == "closed" &&
                 (got->str("closed_by") == "h0" || got->str("closed_by") == "h1");
        },
        60s))
        << runs[n];
  }
  return closed_after;
}

TEST_F(FleetDaemons, AHostKilledWithItsNodeHasItsRunsClosedByOneSurvivorWithinTheLease) {
  // n2 leads nothing the close needs: what is left is the lease. h2's last renewal was at most a
  // renewal tick (lease/3) before the kill, so its lease is gone by kill + lease; a survivor
  // sweeps every lease/3 and closes at its next sweep: kill + lease + lease/3, and a second for
  // the close's own publishes on a loaded 2-CPU machine.
  constexpr int kLeaseMs = 3000;
  auto took = lose_a_host(false, kLeaseMs);
  ASSERT_GE(took, 0);
  EXPECT_LE(took, kLeaseMs + kLeaseMs / 3 + 1000);
}

TEST_F(FleetDaemons, AHostKilledWithTheNodeLeadingTheFleetsStreamsHasItsRunsClosedOnceJetStreamElectsAgain) {
  // n2 leads the events stream, the records and the leases: nothing can be written until
  // JetStream elects new leaders, which nats-server 2.9 does 4-9 s after the last heartbeat
  // (1 s apart) of the dead leader (server/raft.go: minElectionTimeout, maxElectionTimeout, not
  // configurable). Every lease may run out meanwhile, so the survivors judge only once their own
  // renewals have been taken for a whole lease again: kill + 10 s + lease + lease/3, and a second.
  constexpr int kLeaseMs = 3000;
  auto took = lose_a_host(true, kLeaseMs);
  ASSERT_GE(took, 0);
  EXPECT_LE(took, 10000 + kLeaseMs + kLeaseMs / 3 + 1000);
}

TEST_F(FleetDaemons, AHostBackAfterItsLeaseRanOutSaysSoInItsOwnStreamAndPublishesNoMore) {
  // h1 stopped (SIGSTOP) past its lease while its run waits on a decision: h0 closes the run in
  // the fleet. h1 comes back (SIGCONT), finds the fleet's copy closed, and says so in the run's
  // own stream — a warning HOST_LOST_RETURNED, before the run's own stream.closed (the local
  // stream stays complete) — and publishes nothing more.
  constexpr int kLeaseMs = 2000;
  start(0, 100, kLeaseMs);
  start(1, 100, kLeaseMs);
  const std::string run = submit_here(1);
  ASSERT_FALSE(run.empty());
  SocketClient watch(daemons[0]->socket());
  ASSERT_TRUE(owner_known(0, run, "h1"));
  watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
  ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << daemons[0]->stderr_text();
  daemons[1]->signal(SIGSTOP);
  auto closed = watch.wait_event("stream.closed", 60s);
  daemons[1]->signal(SIGCONT);
  ASSERT_TRUE(closed) << daemons[0]->stderr_text();
  const std::uint64_t fleet_end = closed->object.at("seq").to_number<std::uint64_t>();
  // Back on h1, its lease taken again: h1 finds the fleet's copy closed and says so in the run's
  // stream while the run still waits on its decision. Then the decision lets the run go on (its
  // lines are h1's only now) to its own end.
  {
    SocketClient tail(daemons[1]->socket());
    tail.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
    auto warned = tail.wait_for(
        [](const EventLine& l) { return l.event() == "warning" && l.str("code") == "HOST_LOST_RETURNED"; }, 120s);
    ASSERT_TRUE(warned) << daemons[1]->stderr_text();
    EXPECT_NE(warned->str("message").find("host h0"), std::string::npos) << warned->raw;
    SocketClient c(daemons[1]->socket());
    auto decided = c.request(socket_request("command", R"("run_id":")" + run +
                                                           R"(","command":{"format":"metaharness.command/1","id":"d1",)"
                                                           R"("command":"tool.decide","call_id":"toolu_marker",)"
                                                           R"("decision":"allow"})"),
                             120s);
    ASSERT_TRUE(decided && decided->str("reply") == "result") << (decided ? decided->raw : "no reply");
    ASSERT_TRUE(tail.wait_event("tool.result", 120s)) << daemons[1]->stderr_text();  // it ran, on h1
    ASSERT_TRUE(tail.wait_event("stream.closed", 120s)) << daemons[1]->stderr_text();
  }
  auto local = read_lines(daemons[1]->run_dir(run) / "events.jsonl");
  int warnings = 0;
  for (const auto& l : local)
    if (l.find("\"HOST_LOST_RETURNED\"") != std::string::npos) ++warnings;
  EXPECT_EQ(warnings, 1);
  auto checked =
      run_to_end({metaharness_binary().string(), "check-stream", (daemons[1]->run_dir(run) / "events.jsonl").string()});
  EXPECT_EQ(checked.status, 0) << checked.out << checked.err;
  // The fleet's copy ends with h0's close: nothing of h1's after it.
  auto fleet = fleet_tail(0, run);
  expect_complete(fleet, run);
  ASSERT_FALSE(fleet.empty());
  EXPECT_EQ(fleet.back().object.at("seq").to_number<std::uint64_t>(), fleet_end);
  EXPECT_EQ(fleet[fleet.size() - 2].str("code"), "HOST_LOST");
}

TEST_F(FleetDaemons, AnAttachFromAnotherHostReadsTheOwnersBytesAndItsDecisionIsAnsweredOnce) {
  // A run on h1, attached from h0: `attached` names the owner, the waiting call comes as
  // `pending`, a decision sent on the attach is the owner's to record (once, attributed to the
  // peer via fleet:h0), and the stream is the owner's file byte for byte to its stream.closed.
  start(0, 100, 60000);
  start(1, 100, 60000);
  const std::string run = submit_here(1);
  ASSERT_FALSE(run.empty());
  {
    SocketClient watch(daemons[1]->socket());
    watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << daemons[1]->stderr_text();
  }
  ASSERT_TRUE(owner_known(0, run, "h1"));
  SocketClient a(daemons[0]->socket());
  a.send(socket_request("attach", R"("run_id":")" + run + R"(","from_seq":1)", "a1"));
  auto attached = a.wait_for([](const EventLine& l) { return !l.str("reply").empty(); }, 120s);
  ASSERT_TRUE(attached);
  ASSERT_EQ(attached->str("reply"), "attached") << attached->raw;
  EXPECT_EQ(attached->str("host"), "h1");
  auto pending = a.wait_for([](const EventLine& l) { return l.str("reply") == "pending"; }, 60s);
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->str("call_id"), "toolu_marker");
  auto requested = a.wait_event("tool.requested", 120s);
  ASSERT_TRUE(requested);
  // A reader from the end (from_seq 0) of the remote run starts after what the fleet holds now.
  SocketClient late(daemons[0]->socket());
  late.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":0,"follow":true)"));
  auto tailing = late.wait_for([](const EventLine& l) { return !l.str("reply").empty(); }, 60s);
  ASSERT_TRUE(tailing && tailing->str("reply") == "tailing") << (tailing ? tailing->raw : "no reply");
  const auto late_from = tailing->object.at("from_seq").to_number<std::uint64_t>();
  EXPECT_GT(late_from, requested->object.at("seq").to_number<std::uint64_t>());
  a.send(R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_marker",)"
         R"("decision":"allow"})");
  auto decided = a.wait_event("tool.decided", 120s);
  ASSERT_TRUE(decided) << daemons[1]->stderr_text();
  EXPECT_EQ(std::string(decided->object.at("peer").as_object().at("via").as_string()), "fleet:h0") << decided->raw;
  auto result =
      a.wait_for([](const EventLine& l) { return l.event() == "command.result" && l.str("id") == "d1"; }, 120s);
  ASSERT_TRUE(result) << daemons[1]->stderr_text();
  // The allowed call runs, the turn ends, and the run (not kept open) closes on its own.
  ASSERT_TRUE(a.wait_event("stream.closed", 120s)) << daemons[1]->stderr_text();
  ASSERT_TRUE(a.wait_for([](const EventLine& l) { return l.str("reply") == "end"; }, 60s));
  std::string bytes;
  int results_d1 = 0;
  for (const auto& l : a.lines()) {
    if (l.event().empty()) {
      EXPECT_NE(l.str("reply"), "result") << l.raw;  // every result was in the stream: none sent on its own
      continue;
    }
    bytes += l.raw + "\n";
    if (l.event() == "command.result" && l.str("id") == "d1") ++results_d1;
  }
  EXPECT_EQ(results_d1, 1);  // answered once
  EXPECT_EQ(bytes, read_file(daemons[1]->run_dir(run) / "events.jsonl"));
  ASSERT_TRUE(late.wait_event("stream.closed", 120s));
  auto first_late =
      std::find_if(late.lines().begin(), late.lines().end(), [](const EventLine& l) { return !l.event().empty(); });
  ASSERT_NE(first_late, late.lines().end());
  EXPECT_EQ(first_late->object.at("seq").to_number<std::uint64_t>(), late_from);
}

TEST_F(FleetDaemons, ARestartedDaemonResumesPublishingWithoutGapOrDuplicate) {
  // One host and a long lease: no survivor closes its run while it is away.
  start(0, 100, 60000);
  const std::string run = submit_here(0);
  ASSERT_FALSE(run.empty());
  {
    SocketClient watch(daemons[0]->socket());
    watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
    ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << daemons[0]->stderr_text();
  }
  daemons[0]->signal(SIGKILL);
  EXPECT_EQ(daemons[0]->wait_exit(30s), 128 + SIGKILL);
  // The next daemon recovers the run (closed locally, RECOVERED_AFTER_RESTART) or, supervised,
  // adopts it (RUN_ADOPTED, then the halt below closes it), and publishes the rest.
  start(0, 100, 60000);
  {
    SocketClient c(daemons[0]->socket());
    ASSERT_TRUE(c.request(socket_request("halt", R"("run_id":")" + run + "\""), 120s));
  }
  auto events = fleet_tail(0, run);
  expect_complete(events, run);
  std::string fleet_bytes;
  for (auto& e : events)
    fleet_bytes += e.raw + "\n";
  EXPECT_EQ(fleet_bytes, read_file(daemons[0]->run_dir(run) / "events.jsonl"));
}

}  // namespace
}  // namespace mh::test
