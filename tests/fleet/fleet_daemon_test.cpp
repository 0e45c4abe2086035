// Three real daemons joined through a real 3-node nats-server cluster (docs/fleet.md), each
// daemon on its own node, hosting runs of the REAL pinned Claude CLI against the scripted model
// endpoint (the stand-in harness, tests/standin, only for the load test of thirty runs): runs
// submitted with "fleet": true are placed across the hosts by their room, each exactly once; each
// is read complete, byte for byte, from a host that does not own it; a command is routed to the
// owner and answered once, for a peer of the run's own uid only; a host SIGKILLed with its NATS
// node has its runs closed by a survivor within the lease; a restarted daemon publishes what it
// wrote while its node was away, without gap or duplicate; the command line's fleet verbs do the
// same as a user types them.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "daemon/fleet/fleet_link.hpp"
#include "daemon/fleet/request_claims.hpp"
#include "daemon/supervisor/supervisor_link.hpp"
#include "protocol/digest.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/disk_filler.hpp"
#include "tests/support/fleet_peer.hpp"
#include "tests/support/nats_cluster.hpp"
#include "tests/support/peer_as_uid.hpp"
#include "tests/support/tmpfs_mount.hpp"

namespace mh::test {
namespace {

// A scenario file of tests/scenarios/claude as one compact line, to embed in a request.
std::string scenario_json(const std::string& name) {
  auto v = protocol::parse_json(read_file(source_dir() / "tests/scenarios/claude" / (name + ".json")));
  return v ? protocol::canonical_json(*v) : "null";
}

// A run of the pinned Claude CLI against the endpoint its daemon hosts for it, playing
// bash_marker (one Bash call, toolu_marker, then "Done."), in ask mode: it waits on the decision.
std::string bash_ask_run() {
  return R"("run":{"adapter":"claude","prompt":"go","model_scenario":)" + scenario_json("bash_marker") +
         R"(,"decisions":"ask","decision_deadline_ms":600000})";
}

// The same run on the stand-in harness, for the load test.
std::string standin_bash_ask_run() {
  return R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
         R"("vendor_env":{"MH_STANDIN_SCRIPT":")" +
         (std::filesystem::path(MH_TEST_STANDIN_SCRIPTS) / "bash_marker.json").string() +
         R"("},"decisions":"ask","decision_deadline_ms":600000})";
}

// A socket `command` request deciding bash_marker's call: allow.
std::string allow_marker(const std::string& run, const std::string& command_id, const std::string& request_id = "t") {
  return socket_request(
      "command",
      R"("run_id":")" + run + R"(","command":)" + tool_decide(command_id, "toolu_marker", R"({"decision":"allow"})"),
      request_id);
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
    // A daemon this test SIGKILLed left its runs to their supervisors (runs.supervise), the pinned
    // CLI still waiting on its decision: end every supervisor of this test's state directories,
    // and each run's processes go with it.
    std::error_code ec;
    for (const auto& home : homes_)
      for (const auto& run : std::filesystem::directory_iterator(home / "state" / "runs", ec))
        daemon::end_stale_supervisor(run.path());
    homes_.clear();
    if (!public_home_.empty()) std::filesystem::remove_all(public_home_, ec);
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

  // Daemon i: host h<i>, on NATS node i only (so a node's loss is its host's loss), running the
  // pinned Claude CLI (the stand-in harness when `on_standin_`). `extra`: more of the config.
  std::string config(int i, int max_active, int lease_ms, const std::string& extra) {
    std::string vendor, read_only;
    if (on_standin_) {
      vendor = std::string("[vendor]\nclaude = \"") + MH_TEST_STANDIN + "\"\n";
      read_only = std::string("sandbox_read_only = [\"") + MH_TEST_STANDIN_SCRIPTS + "\"]\n";
    }
    // Root (this test) is a control peer here, not an admin: a peer host may act only for a uid
    // its placing or owning host does not treat as admin (docs/fleet.md, Trust), and the test's
    // peers are root. The cluster asks nobody who connects: loopback, said so in the config.
    const std::string access = extra.find("[access]") == std::string::npos ? access_as_control() : "";
    return vendor + "[runs]\nmax_active = " + std::to_string(max_active) + "\n" + read_only + access +
           "[fleet]\nnats_urls = [\"" + cluster_->url(i) + "\"]\nhost_id = \"h" + std::to_string(i) +
           "\"\nreplicas = 3\nlease_ttl_ms = " + std::to_string(lease_ms) + "\nprefix = \"" + prefix() +
           "\"\nrequest_timeout_ms = 4000\ninsecure_no_credentials = true\n" + extra;
  }
  // [access] making root (and `more` uids) control peers, not admins.
  static std::string access_as_control(const std::string& more = "") {
    return "[access]\nroot_is_admin = false\nowner_is_admin = false\ncontrol_uids = [0" + more + "]\n";
  }
  // `home`: the daemon's directory (default: one under the suite's); `env`: more of its environment.
  DaemonUnderTest& start(int i, int max_active = 100, int lease_ms = 3000, std::filesystem::path home = {},
                         const std::string& extra = "", std::vector<std::string> env = {}) {
    if (home.empty()) home = dir_->path() / (prefix() + "-h" + std::to_string(i));
    std::filesystem::create_directories(home);
    if (std::find(homes_.begin(), homes_.end(), home) == homes_.end()) homes_.push_back(home);
    auto& d = daemons[i];
    // A daemon this test killed left its open runs to their supervisors: the next daemon of its
    // home is made before the killed one's harness lets go, so that the harness does not end them
    // (clean_up_after: a newer daemon of the state dir goes on) and the new daemon adopts them.
    std::unique_ptr<DaemonUnderTest> killed = std::move(d);
    if (killed && killed->running()) killed.reset();
    d = std::make_unique<DaemonUnderTest>(home, config(i, max_active, lease_ms, extra), std::move(env));
    killed.reset();
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
    ADD_FAILURE() << run << " from h" << host << ": " << last << "\n" << evidence();
    return {};
  }

  // For a failure after a node's loss: every daemon's log and what each NATS node said of its
  // leaders, warnings and errors (its last 60 such lines).
  std::string evidence() const {
    std::string out;
    for (const auto& [i, d] : daemons)
      if (d) out += "--- daemon h" + std::to_string(i) + ":\n" + d->stderr_text();
    for (int i = 0; i < cluster_->size(); ++i) {
      std::vector<std::string> said;
      std::istringstream in(cluster_->log(i));
      for (std::string l; std::getline(in, l);)
        if (l.find("leader") != std::string::npos || l.find("[WRN]") != std::string::npos ||
            l.find("[ERR]") != std::string::npos)
          said.push_back(l);
      out += "--- NATS node n" + std::to_string(i) + ":\n";
      for (std::size_t k = said.size() > 60 ? said.size() - 60 : 0; k < said.size(); ++k)
        out += said[k] + "\n";
    }
    return out;
  }

  std::int64_t lose_a_host(bool leaders_on_lost, int lease_ms);
  void placed_once_though_held_as_its_host_stops(const std::string& hold, const std::string& given_back_why);

  // A run waiting on its decision, submitted on host `host` itself (not through the queue): "" if refused.
  std::string submit_here(int host) {
    SocketClient c(daemons[host]->socket());
    auto reply = c.request(socket_request("submit", bash_ask_run()), 60s);
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }
  // `host`'s `get` of `run`, asked again (each within 30 s) until `wanted` holds of its answer or
  // `timeout` has passed: the last answer, nullopt if none came.
  std::optional<EventLine> get_until(int host, const std::string& run,
                                     const std::function<bool(const EventLine&)>& wanted,
                                     std::chrono::milliseconds timeout) {
    std::optional<EventLine> got;
    eventually(
        [&] {
          SocketClient c(daemons[host]->socket());
          got = c.request(socket_request("get", R"("run_id":")" + run + "\""), 30s);
          return got && wanted(*got);
        },
        timeout);
    return got;
  }

  // A run waiting on its decision on h0, whose lines to its tool.requested h1 has read from the
  // fleet; long leases (nobody closes it meanwhile). `h0_env`: more of h0's environment. "" (the
  // failure said) if it got no further.
  // `run_out`: where to say the run's id.
  void host_back_after_its_lease_ran_out(std::vector<std::string> h1_env, std::vector<std::string> h0_env = {},
                                         std::string* run_out = nullptr);
  // Run `run` (on h0, waiting on its call) allowed there and read to its stream.closed: its lines,
  // or none (with the failure added) when it did not get there.
  std::vector<EventLine> allowed_to_its_end_on_h0(const std::string& run) {
    SocketClient c(daemons[0]->socket());
    auto result = c.request(allow_marker(run, "d1"), 120s);
    if (!result || result->str("reply") != "result") {
      ADD_FAILURE() << run << ": the allow was not answered: " << (result ? result->raw : "no reply");
      return {};
    }
    auto local = follow_to_end(daemons[0]->socket(), run, 120s);
    if (local.empty() || local.back().event() != "stream.closed") {
      ADD_FAILURE() << run << ": no stream.closed on h0\n" << what_happened(0, run);
      return {};
    }
    return local;
  }
  // h1's get of `run` says, within the bound, that its record is marked closed as its owner's own
  // close (no closer named), with all `lines` of it.
  void expect_marked_closed_by_its_owner(const std::string& run, std::size_t lines) {
    auto read = get_until(
        1, run, [](const EventLine& l) { return l.str("fleet_state") == "closed"; }, 60s);
    ASSERT_TRUE(read && read->str("fleet_state") == "closed") << (read ? read->raw : "no reply") << "\n" << evidence();
    EXPECT_EQ(read->str("state"), "closed") << read->raw;
    EXPECT_FALSE(read->object.contains("closed_by")) << read->raw;  // its owner's own close
    EXPECT_EQ(read->object.at("last_seq").to_number<std::uint64_t>(), lines) << read->raw;
  }
  std::string run_on_h0_read_from_h1(std::vector<std::string> h0_env = {}) {
    start(0, 100, 60000, {}, "", std::move(h0_env));
    start(1, 100, 60000);
    const std::string run = submit_here(0);
    if (run.empty()) return "";
    if (!owner_known(1, run, "h0")) {
      ADD_FAILURE() << run << ": h1 never named h0 its host\n" << evidence();
      return "";
    }
    SocketClient watch(daemons[1]->socket());
    watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
    if (!watch.wait_event("tool.requested", 120s)) {
      ADD_FAILURE() << run << ": h1 never read its tool.requested from the fleet\n" << evidence();
      return "";
    }
    return run;
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

  // What a run left on its host, for a failure's message.
  std::string what_happened(int host, const std::string& run) {
    auto d = daemons[host]->run_dir(run);
    return "events:\n" + read_file(d / "events.jsonl") + "vendor-stderr.log:\n" + read_file(d / "vendor-stderr.log") +
           "supervisor.log:\n" + read_file(d / "supervisor.log") + "daemon:\n" + daemons[host]->stderr_text();
  }

  // The owner's event lines from `from_seq` on, each with its newline: what a reader of the fleet
  // from that seq must get, byte for byte.
  std::string owners_lines_from(int owner, const std::string& run, std::uint64_t from_seq) {
    std::string out;
    auto lines = read_lines(daemons[owner]->run_dir(run) / "events.jsonl");
    for (std::size_t i = from_seq - 1; i < lines.size(); ++i)
      out += lines[i] + "\n";
    return out;
  }

  static TempDir* dir_;
  static NatsCluster* cluster_;
  std::map<int, std::unique_ptr<DaemonUnderTest>> daemons;
  bool on_standin_ = false;
  std::vector<std::filesystem::path> homes_;  // every daemon directory this test used
  std::filesystem::path public_home_;         // one a second uid may reach (removed at the end)
};
TempDir* FleetDaemons::dir_ = nullptr;
NatsCluster* FleetDaemons::cluster_ = nullptr;

TEST_F(FleetDaemons, ThirtyRunsArePlacedAcrossThreeHostsOnceEachAndReadCompleteFromAnother) {
  // A load test: the stand-in harness in place of the vendor CLI. Room for ten each, and every
  // run waits on a decision: the only way to place thirty is ten on each host.
  on_standin_ = true;
  for (int i = 0; i < 3; ++i)
    start(i, 10);
  std::map<std::string, std::string> host_of;
  std::map<std::string, int> per_host;
  {
    SocketClient c(daemons[0]->socket());
    for (int n = 0; n < 30; ++n) {
      auto reply = c.request(
          socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true)", "s" + std::to_string(n)), 120s);
      ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
      ASSERT_EQ(reply->str("placement"), "placed") << reply->raw;
      host_of[reply->str("run_id")] = reply->str("host");
      ++per_host[reply->str("host")];
    }
  }
  ASSERT_EQ(host_of.size(), 30u);
  EXPECT_EQ(per_host, (std::map<std::string, int>{{"h0", 10}, {"h1", 10}, {"h2", 10}}));
  // Exactly once: each run's directory is on its host and on no other (`placed` is said once the
  // host has made the run).
  for (auto& [run, host] : host_of) {
    const int owner = host.back() - '0';
    EXPECT_TRUE(std::filesystem::exists(daemons[owner]->run_dir(run))) << run;
    for (int i = 0; i < 3; ++i)
      if (i != owner) {
        EXPECT_FALSE(std::filesystem::exists(daemons[i]->run_dir(run))) << run << " h" << i;
      }
  }
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

TEST_F(FleetDaemons, ARunJustSubmittedOnOneHostIsFoundAtOnceFromAnotherInTheDocumentedVocabulary) {
  // A run submitted on h0 itself enters the fleet's records when h0's publisher claims it, a
  // moment after the submitter was answered: a `get` or a `tail --fleet` on h1 right after the
  // answer waits for the record (bounded by request_timeout_ms) instead of refusing UNKNOWN_RUN.
  // Each of twenty runs is asked for at once, alternately by `get` first and by `tail` first.
  // Its `state` from h1 is the fleet's word for it, `open` (its host alone knows turn or idle).
  on_standin_ = true;
  start(0);
  start(1);
  SocketClient submitter(daemons[0]->socket());
  SocketClient reader(daemons[1]->socket());
  std::vector<std::string> runs;
  for (int n = 0; n < 20; ++n) {
    auto submitted = submitter.request(socket_request("submit", standin_bash_ask_run(), "s" + std::to_string(n)), 60s);
    ASSERT_TRUE(submitted && submitted->str("reply") == "submitted") << (submitted ? submitted->raw : "no reply");
    const std::string run = submitted->str("run_id");
    runs.push_back(run);
    auto ask_get = [&] {
      auto got = reader.request(socket_request("get", R"("run_id":")" + run + "\"", "g" + std::to_string(n)), 60s);
      ASSERT_TRUE(got) << "no reply";
      ASSERT_EQ(got->str("reply"), "run") << n << ": " << got->raw;
      EXPECT_EQ(got->str("host"), "h0") << got->raw;
      EXPECT_TRUE(got->str("state") == "open" || got->str("state") == "closed") << got->raw;
      EXPECT_EQ(got->str("fleet_state"), "open") << got->raw;
    };
    auto ask_tail = [&] {
      auto tailing =
          reader.request(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":false,"fleet":true)",
                                        "t" + std::to_string(n)),
                         60s);
      ASSERT_TRUE(tailing) << "no reply";
      ASSERT_EQ(tailing->str("reply"), "tailing") << n << ": " << tailing->raw;
      EXPECT_EQ(tailing->str("host"), "h0") << tailing->raw;
      ASSERT_TRUE(reader.wait_reply("end", 60s));
    };
    if (n % 2 == 0) {
      ask_tail();
      ask_get();
    } else {
      ask_get();
      ask_tail();
    }
    if (HasFatalFailure()) return;
  }
  // Mid-flight (waiting on its decision), from h1: `open`, never a word of neither vocabulary.
  SocketClient watch(daemons[1]->socket());
  watch.send(socket_request("tail", R"("run_id":")" + runs.front() + R"(","from_seq":1,"follow":true,"fleet":true)"));
  ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << daemons[0]->stderr_text();
  auto got = reader.request(socket_request("get", R"("run_id":")" + runs.front() + "\""), 60s);
  ASSERT_TRUE(got) << "no reply";
  EXPECT_EQ(got->str("state"), "open") << got->raw;
  for (const auto& run : runs) {
    auto halted = submitter.request(socket_request("halt", R"("run_id":")" + run + "\""), 60s);
    EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
  }
  ASSERT_TRUE(watch.wait_event("stream.closed", 120s));
  EXPECT_TRUE(eventually(
      [&] {
        auto closed = reader.request(socket_request("get", R"("run_id":")" + runs.front() + "\""), 60s);
        return closed && closed->str("state") == "closed";
      },
      60s));
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
    EXPECT_TRUE(closed) << evidence();
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
    std::string last;
    EXPECT_TRUE(eventually(
        [&] {
          SocketClient c(daemons[1]->socket());
          auto got = c.request(socket_request("get", R"("run_id":")" + runs[n] + "\""));
          last = got ? got->raw : "no reply";
          return got && got->str("fleet_state") == "closed" &&
                 (got->str("closed_by") == "h0" || got->str("closed_by") == "h1");
        },
        60s))
        << runs[n] << ": h1 answered " << last << "\n"
        << evidence();
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

// h1 stopped (SIGSTOP) past its lease while its run waits on a decision: h0 closes the run in
// the fleet. h1 comes back (SIGCONT), finds the fleet's copy closed, and says so in the run's
// own stream — a warning HOST_LOST_RETURNED, before the run's own stream.closed (the local
// stream stays complete) — and publishes nothing more. `h1_env`, `h0_env`: test hooks for each.
void FleetDaemons::host_back_after_its_lease_ran_out(std::vector<std::string> h1_env, std::vector<std::string> h0_env,
                                                     std::string* run_out) {
  constexpr int kLeaseMs = 2000;
  start(0, 100, kLeaseMs, {}, "", std::move(h0_env));
  start(1, 100, kLeaseMs, {}, "", std::move(h1_env));
  const std::string run = submit_here(1);
  ASSERT_FALSE(run.empty());
  if (run_out) *run_out = run;
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
    auto decided = c.request(allow_marker(run, "d1"), 120s);
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

TEST_F(FleetDaemons, AHostBackAfterItsLeaseRanOutSaysSoInItsOwnStreamAndPublishesNoMore) {
  host_back_after_its_lease_ran_out({});
}

TEST_F(FleetDaemons, AHostBackAfterItsLeaseRanOutWhoseFirstLookAtTheFleetFailsLooksAgainAndSaysSo) {
  // h1's first read of the run's fleet copy after the lapse fails (the test hook, as a NATS that
  // did not answer): it is asked again, so the warning still comes while the run waits on its
  // decision, not only once the run writes its next line.
  host_back_after_its_lease_ran_out({"MH_TEST_FLEET_FAIL_LAPSE_READ=1"});
  EXPECT_NE(daemons[1]->stderr_text().find("after the lease lapsed: the test hook MH_TEST_FLEET_FAIL_LAPSE_READ"),
            std::string::npos)
      << daemons[1]->stderr_text();
}

TEST_F(FleetDaemons, AHostBackAfterItsLeaseRanOutMarksClosedByTheSurvivorARecordTheSurvivorCouldNotMark) {
  // h0 closes h1's run in the fleet but cannot mark its record (the test hook fails every mark
  // of h0's sweep, as a NATS that never took them); once h1 holds its lease again the sweep no
  // longer looks at the run. h1, back, reads the record (its first two reads fail: the test hook)
  // and marks it closed by h0, the closer h0's HOST_LOST warning names. Before, the record read
  // open for as long as h1 lived.
  std::string run;
  host_back_after_its_lease_ran_out({"MH_TEST_FLEET_FAIL_CLOSED_RECORD_READ=2"},
                                    {"MH_TEST_FLEET_FAIL_SWEEP_MARK=1000000"}, &run);
  if (HasFatalFailure()) return;
  auto read = get_until(
      0, run, [](const EventLine& l) { return l.str("fleet_state") == "closed"; }, 60s);
  ASSERT_TRUE(read && read->str("fleet_state") == "closed") << (read ? read->raw : "no reply") << "\n" << evidence();
  EXPECT_EQ(read->str("closed_by"), "h0") << read->raw;
  const std::string log = daemons[1]->stderr_text();
  EXPECT_NE(log.find("reading its record: the test hook MH_TEST_FLEET_FAIL_CLOSED_RECORD_READ"), std::string::npos)
      << log;
  EXPECT_NE(log.find("its record marked closed by host h0"), std::string::npos) << log;
  EXPECT_NE(daemons[0]->stderr_text().find("test hook MH_TEST_FLEET_FAIL_SWEEP_MARK"), std::string::npos);
}

TEST_F(FleetDaemons, ARestartedDaemonWhoseRunASurvivorClosedButCouldNotMarkSaysSoAndMarksItClosedByTheSurvivor) {
  // h1 is killed while its run waits on a decision (its supervisor keeps the run); h0 closes the
  // run in the fleet once h1's lease ran out, but cannot mark its record (the test hook fails
  // every mark of h0's sweep). h1, started again, adopts the run, finds the fleet's copy closed
  // by a line not its own and the record still open: it says so in the run's own stream, naming
  // h0 (whose HOST_LOST warning is the line before the close), and marks the record closed by h0.
  // Before, the restarted host said nothing and the record read open for as long as h1 lived.
  constexpr int kLeaseMs = 2000;
  on_standin_ = true;
  start(0, 100, kLeaseMs, {}, "", {"MH_TEST_FLEET_FAIL_SWEEP_MARK=1000000"});
  start(1, 100, kLeaseMs);
  std::string run;
  {
    SocketClient c(daemons[1]->socket());
    auto reply = c.request(socket_request("submit", standin_bash_ask_run()), 60s);
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    run = reply->str("run_id");
  }
  ASSERT_TRUE(owner_known(0, run, "h1"));
  SocketClient watch(daemons[0]->socket());
  watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
  ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << evidence();
  daemons[1]->signal(SIGKILL);
  EXPECT_EQ(daemons[1]->wait_exit(30s), 128 + SIGKILL);
  auto closed = watch.wait_event("stream.closed", 60s);
  ASSERT_TRUE(closed) << evidence();
  auto unmarked = get_until(
      0, run, [](const EventLine& l) { return l.str("state") == "closed"; }, 60s);
  ASSERT_TRUE(unmarked && unmarked->str("state") == "closed") << (unmarked ? unmarked->raw : "no reply");
  EXPECT_EQ(unmarked->str("fleet_state"), "open") << "the hook kept h0's mark out: " << unmarked->raw;
  start(1, 100, kLeaseMs);
  SocketClient tail(daemons[1]->socket());
  tail.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
  auto warned = tail.wait_for(
      [](const EventLine& l) { return l.event() == "warning" && l.str("code") == "HOST_LOST_RETURNED"; }, 120s);
  ASSERT_TRUE(warned) << "supervisor.log:\n" << read_file(daemons[1]->run_dir(run) / "supervisor.log") << evidence();
  EXPECT_NE(warned->str("message").find("host h0"), std::string::npos) << warned->raw;
  auto read = get_until(
      0, run, [](const EventLine& l) { return l.str("fleet_state") == "closed"; }, 60s);
  ASSERT_TRUE(read && read->str("fleet_state") == "closed") << (read ? read->raw : "no reply") << "\n" << evidence();
  EXPECT_EQ(read->str("closed_by"), "h0") << read->raw;
  EXPECT_EQ(read->object.at("last_seq").to_number<std::uint64_t>(), closed->object.at("seq").to_number<std::uint64_t>())
      << read->raw;
  SocketClient c(daemons[1]->socket());
  auto halted = c.request(socket_request("halt", R"("run_id":")" + run + "\""), 120s);
  EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
}

TEST_F(FleetDaemons, AnAttachFromAnotherHostReadsTheOwnersBytesAndItsDecisionIsAnsweredOnce) {
  // A run on h1, attached from h0: `attached` names the owner, the waiting call comes as
  // `pending`, a decision sent on the attach is the owner's to record (once, attributed to the
  // deciding connection's uid and pid, via fleet:h0), and the stream is the owner's file byte for
  // byte to its stream.closed. A peer of another uid, which h0 lets control its own runs, is
  // refused the run by its owner: a peer host's peer commands only its own uid's runs.
  //
  // h0 lives where a second uid can reach its socket: every directory above it lets others pass
  // (a checkout's need not), the socket is 0666, and that uid has the control role on h0.
  constexpr uid_t kNobody = 65534;
  const bool second_uid = ::geteuid() == 0;
  std::filesystem::path h0_home;
  if (second_uid) {
    char templ[] = "/tmp/mh-fleet-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr) << std::strerror(errno);
    public_home_ = templ;
    std::filesystem::permissions(public_home_, std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                                   std::filesystem::perms::others_exec);
    h0_home = public_home_ / "h0";
    std::filesystem::create_directories(h0_home);
    std::filesystem::permissions(h0_home, std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                              std::filesystem::perms::others_exec);
  }
  start(0, 100, 60000, h0_home,
        second_uid ? "[paths]\nsocket_mode = \"0666\"\n" + access_as_control(", " + std::to_string(kNobody)) : "");
  start(1, 100, 60000);
  const std::string run = submit_here(1);
  ASSERT_FALSE(run.empty());
  {
    SocketClient watch(daemons[1]->socket());
    watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << daemons[1]->stderr_text();
  }
  ASSERT_TRUE(owner_known(0, run, "h1"));
  if (second_uid) {
    // Routed to h1 with the peer's uid, and refused there; the call still waits (below).
    std::string why;
    auto line = first_line_as(kNobody, daemons[0]->socket(), allow_marker(run, "n1", "u1"), why);
    ASSERT_FALSE(line.empty()) << why;
    auto refused = to_event_line(line);
    EXPECT_EQ(refused.str("reply"), "refused") << line;
    EXPECT_EQ(refused.str("code"), "FORBIDDEN") << line;
    EXPECT_NE(refused.str("reason").find("only its own uid's runs"), std::string::npos) << line;
  } else {
    std::printf("not root: the refusal of a second uid's routed command is not tried\n");
  }
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
  a.send(tool_decide("d1", "toolu_marker", R"({"decision":"allow"})"));
  auto decided = a.wait_event("tool.decided", 120s);
  ASSERT_TRUE(decided) << daemons[1]->stderr_text();
  // The deciding connection is this process's, on h0: its uid and pid, as h0 read them.
  const auto& peer = decided->object.at("peer").as_object();
  EXPECT_EQ(std::string(peer.at("via").as_string()), "fleet:h0") << decided->raw;
  EXPECT_EQ(peer.at("uid").to_number<std::int64_t>(), static_cast<std::int64_t>(::getuid())) << decided->raw;
  EXPECT_EQ(peer.at("pid").to_number<std::int64_t>(), static_cast<std::int64_t>(::getpid())) << decided->raw;
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
  EXPECT_EQ(results_d1, 1);                              // answered once
  EXPECT_EQ(a.events_named("tool.decided").size(), 1u);  // and the refused peer decided nothing
  EXPECT_EQ(bytes, read_file(daemons[1]->run_dir(run) / "events.jsonl"));
  ASSERT_TRUE(late.wait_event("stream.closed", 120s));
  auto first_late =
      std::find_if(late.lines().begin(), late.lines().end(), [](const EventLine& l) { return !l.event().empty(); });
  ASSERT_NE(first_late, late.lines().end());
  EXPECT_EQ(first_late->object.at("seq").to_number<std::uint64_t>(), late_from);
}

TEST_F(FleetDaemons, ARestartedDaemonPublishesWhatItWroteWhileItsNodeWasAwayWithoutGapOrDuplicate) {
  // h0 publishes through node n0 only; h1 reads. Long leases: nobody closes h0's run meanwhile.
  // The run ends before h0 is killed (what is tested is what the next daemon publishes of it, not
  // an adoption), so the model endpoint h0 hosts for it need not outlive h0.
  // The run's first lines, to its tool.requested, reach the fleet: h0's publisher is past its
  // start (its claim and resume point, which need n0; and a daemon cannot start without its node,
  // so n0 is stopped only now, with the run under way).
  const std::string run = run_on_h0_read_from_h1();
  ASSERT_FALSE(run.empty());
  // n0 stopped, not killed: h0's connection to it stays up (no reconnect elsewhere), and every
  // publish waits on it, times out and is tried again. The call decided on h0 itself: the run goes
  // on to its end, every line from here on on h0's disk only.
  StoppedNode n0(cluster_->pid(0));
  ASSERT_TRUE(n0.stopped());
  {
    SocketClient c(daemons[0]->socket());
    auto result = c.request(allow_marker(run, "d1"), 120s);
    ASSERT_TRUE(result && result->str("reply") == "result") << (result ? result->raw : "no reply");
  }
  auto local = follow_to_end(daemons[0]->socket(), run, 120s);
  ASSERT_FALSE(local.empty());
  ASSERT_EQ(local.back().event(), "stream.closed") << daemons[0]->stderr_text();
  const std::uint64_t local_end = local.size();
  // What the fleet holds meanwhile, from h1 (once JetStream answers without n0: what n0 led is
  // led again by n1 or n2 within seconds). h0 publishes one line at a time, the same line on each
  // try, so of what waits in n0's socket buffer at most that one line lands when n0 goes on: the
  // rest is the restarted daemon's to publish, from its disk. Two lines at least: a daemon that
  // resumed from its own end instead of the fleet's would leave a gap.
  auto got = get_until(
      1, run, [](const EventLine& l) { return l.str("reply") == "run"; }, 90s);
  ASSERT_TRUE(got && got->str("reply") == "run") << (got ? got->raw : "no reply") << "\n" << evidence();
  const std::uint64_t fleet_end = got->object.at("last_seq").to_number<std::uint64_t>();
  EXPECT_LE(fleet_end + 2, local_end) << "fleet " << fleet_end << ", h0's disk " << local_end;
  std::printf("restart: the fleet held %llu of the %llu lines on h0's disk when h0 was killed\n",
              static_cast<unsigned long long>(fleet_end), static_cast<unsigned long long>(local_end));
  daemons[0]->signal(SIGKILL);
  EXPECT_EQ(daemons[0]->wait_exit(30s), 128 + SIGKILL);
  n0.resume();
  ASSERT_TRUE(cluster_->ready()) << cluster_->why();
  // The next daemon finds the run on its disk, resumes from the fleet's end and publishes the rest.
  start(0, 100, 60000);
  auto events = fleet_tail(1, run);
  expect_complete(events, run);
  EXPECT_EQ(events.size(), local_end);  // nothing was written after the kill: the run had closed
  std::string fleet_bytes;
  for (auto& e : events)
    fleet_bytes += e.raw + "\n";
  EXPECT_EQ(fleet_bytes, read_file(daemons[0]->run_dir(run) / "events.jsonl"));
}

// A tail's consumer that lives and delivers nothing: what JetStream left a reading host after its
// cluster lost and elected again its metadata leader (CI, twice; reproduced once in four runs of
// the test above, h1's tail silent for its whole 120 s while the fleet held every line). libnats
// remakes a consumer whose heartbeats stop, not one whose heartbeats go on. Made deterministic by
// a test hook (kDeafFollowersEnv): h1's first follower drops everything it is handed. The tail
// hears nothing for 5 s, finds the fleet holds lines it never handed on, makes its consumer again
// from where it stands, and reads the whole run, each line once and in order, to its end.
TEST_F(FleetDaemons, ATailWhoseConsumerDeliversNothingIsMadeAgainAndReadsEveryLineOnce) {
  start(0, 100, 60000);
  start(1, 100, 60000, {}, "", {"MH_TEST_FLEET_DEAF_FOLLOWERS=1"});
  const std::string run = submit_here(0);
  ASSERT_FALSE(run.empty());
  ASSERT_TRUE(owner_known(1, run, "h0")) << evidence();
  SocketClient tail(daemons[1]->socket());
  tail.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
  ASSERT_TRUE(tail.wait_event("tool.requested", 60s)) << "the deaf consumer was never made again\n" << evidence();
  EXPECT_NE(daemons[1]->stderr_text().find("its consumer was made again from seq 1"), std::string::npos)
      << daemons[1]->stderr_text();
  auto local = allowed_to_its_end_on_h0(run);
  ASSERT_FALSE(local.empty());
  auto ended = tail.wait_for([](const EventLine& l) { return l.str("reply") == "end"; }, 120s);
  ASSERT_TRUE(ended) << evidence();
  std::vector<EventLine> events;
  std::string fleet_bytes;
  for (const auto& l : tail.lines())
    if (!l.event().empty()) {
      events.push_back(l);
      fleet_bytes += l.raw + "\n";
    }
  expect_complete(events, run);
  EXPECT_EQ(fleet_bytes, read_file(daemons[0]->run_dir(run) / "events.jsonl"));
}

// Any host may publish into a run's events subject (docs/fleet.md, Trust). A line forged there
// with the largest seq there is, the fleet's last while the run waits on its call, is passed on as
// it is and moves a tail nowhere: a following tail does not wrap its next seq, or remake its
// consumer and hand the forged line on again after each silence (only the stream's own sequences
// say a tail is behind); a tail that does not follow ends once it has read the stream to where it
// stood, though the seqs never reach the forged one, its next seq the real lines' end.
TEST_F(FleetDaemons, ALineForgedFarAheadNeitherStallsAFleetTailNorIsHandedOnAgain) {
  start(0, 100, 60000);
  start(1, 100, 60000);
  const std::string run = submit_here(0);
  ASSERT_FALSE(run.empty());
  ASSERT_TRUE(owner_known(1, run, "h0")) << evidence();
  SocketClient tail(daemons[1]->socket());
  tail.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
  ASSERT_TRUE(tail.wait_event("tool.requested", 60s)) << evidence();
  // The forger: another host's connection to the cluster, publishing into the run's subject.
  fleet::FleetConfig forger;
  forger.nats_urls = {cluster_->url(2)};
  forger.host_id = "forger";
  forger.prefix = prefix();
  forger.insecure_no_credentials = true;
  auto link = fleet::FleetLink::connect(forger);
  ASSERT_TRUE(link) << link.error().text;
  const std::string forged = R"({"format":"metaharness.event/1","seq":18446744073709551615,"run":")" + run +
                             R"(","event":"opaque","forged":true})";
  const std::string subject = (*link)->names().events_subject(run);
  ASSERT_EQ(natsConnection_PublishString((*link)->nc(), subject.c_str(), forged.c_str()), NATS_OK);
  ASSERT_EQ(natsConnection_Flush((*link)->nc()), NATS_OK);
  auto is_forged = [](const EventLine& l) { return l.raw.find(R"("forged":true)") != std::string::npos; };
  ASSERT_TRUE(tail.wait_for(is_forged, 60s)) << "the forged line is passed on as it is\n" << evidence();
  // Two of the tail's 5 s silences, the forged line the fleet's last: it is not handed on again.
  auto count_forged = [&] {
    std::size_t n = 0;
    for (const auto& l : tail.lines())
      n += is_forged(l);
    return n;
  };
  EXPECT_FALSE(tail.wait_for([&](const EventLine&) { return count_forged() > 1; }, 12s))
      << "the forged line came again: " << count_forged() << "\n"
      << daemons[1]->stderr_text();
  EXPECT_EQ(daemons[1]->stderr_text().find("its consumer was made again"), std::string::npos)
      << daemons[1]->stderr_text();
  // What the following tail got of the run's own lines: all the fleet holds (the owner, finding
  // a line it did not write the fleet's last, publishes no more: docs/fleet.md, Trust).
  std::size_t real_lines = 0;
  for (const auto& l : tail.lines())
    real_lines += !l.event().empty() && !is_forged(l);
  // A tail that does not follow, from the first line: the real lines and the forged one, then its end.
  SocketClient once(daemons[1]->socket());
  once.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":false,"fleet":true)"));
  auto ended = once.wait_for([](const EventLine& l) { return l.str("reply") == "end"; }, 60s);
  ASSERT_TRUE(ended) << "a tail that does not follow waited for the forged seq\n" << evidence();
  std::vector<EventLine> real;
  std::size_t forged_seen = 0;
  for (const auto& l : once.lines()) {
    if (l.event().empty()) continue;
    if (is_forged(l))
      ++forged_seen;
    else
      real.push_back(l);
  }
  EXPECT_EQ(forged_seen, 1u);
  ASSERT_EQ(real.size(), real_lines);
  for (std::size_t i = 0; i < real.size(); ++i)
    EXPECT_EQ(real[i].object.at("seq").to_number<std::uint64_t>(), i + 1);  // no gap, no duplicate
  EXPECT_EQ(ended->object.at("next_seq").to_number<std::uint64_t>(), real_lines + 1) << ended->raw;
}

TEST_F(FleetDaemons, AReadOfAnotherHostsRunThatTheFleetCannotAnswerIsRefusedByNameNotCalledUnknownOrEmpty) {
  // With every NATS node stopped, every fleet read of h1 times out (whichever node it is connected
  // to: libnats may move to one it discovered): its `get` and a command it would route are refused
  // FLEET_UNAVAILABLE, naming the run, not UNKNOWN_RUN (the run is there) and not a `run` holding
  // none of its lines (last_seq 0). With the nodes going on again, the same `get` reads the run,
  // its lines included.
  const std::string run = run_on_h0_read_from_h1();
  ASSERT_FALSE(run.empty());
  auto refused_unread = [&](const std::optional<EventLine>& got) {
    ASSERT_TRUE(got) << evidence();
    EXPECT_EQ(got->str("reply"), "refused") << got->raw << "\n" << evidence();
    EXPECT_EQ(got->str("code"), "FLEET_UNAVAILABLE") << got->raw;
    EXPECT_NE(got->str("reason").find("run " + run + ": the fleet could not be read"), std::string::npos) << got->raw;
  };
  {
    StoppedNode n0(cluster_->pid(0)), n1(cluster_->pid(1)), n2(cluster_->pid(2));
    ASSERT_TRUE(n0.stopped() && n1.stopped() && n2.stopped());
    SocketClient c(daemons[1]->socket());
    refused_unread(c.request(socket_request("get", R"("run_id":")" + run + "\""), 60s));
    refused_unread(c.request(allow_marker(run, "d1"), 60s));
  }
  // The nodes go on: once JetStream answers h1 again, the same read gives the run and its lines.
  auto read = get_until(
      1, run, [](const EventLine& l) { return l.str("reply") == "run"; }, 90s);
  ASSERT_TRUE(read && read->str("reply") == "run") << (read ? read->raw : "no reply") << daemons[1]->stderr_text();
  EXPECT_EQ(read->str("host"), "h0") << read->raw;
  EXPECT_GE(read->object.at("last_seq").to_number<std::uint64_t>(), 2u) << read->raw;
}

TEST_F(FleetDaemons, ARunsOwnCloseWhoseRecordCouldNotBeMarkedIsMarkedOnceTheFleetAnswers) {
  // h0's first three tries to mark its records closed fail (the test hook, as a NATS that did not
  // answer): the run it closes itself is still marked closed in the fleet, by its owner (no
  // closer named), so another host's get says closed. A record left open would read as a run
  // still going for as long as h0 holds its lease (the sweep looks only at lost hosts' runs).
  const std::string run = run_on_h0_read_from_h1({"MH_TEST_FLEET_FAIL_OWN_CLOSE=3"});
  ASSERT_FALSE(run.empty());
  const auto local = allowed_to_its_end_on_h0(run);
  ASSERT_FALSE(local.empty());
  expect_marked_closed_by_its_owner(run, local.size());
  // Each failed try was said, and tried again.
  const std::string log = daemons[0]->stderr_text();
  int said = 0;
  for (std::size_t at = 0;
       (at = log.find("its record is not marked closed yet (the test hook", at)) != std::string::npos; ++at)
    ++said;
  EXPECT_EQ(said, 3) << log;
}

TEST_F(FleetDaemons, ARestartedDaemonMarksAsClosedTheRecordOfARunWhoseCloseItPublishedButCouldNotMark) {
  // h0 cannot mark its records closed (the test hook fails every try, as a NATS that never took
  // the mark): its run ends, its stream.closed reaches the fleet, its record stays open. h0 is
  // killed (its tries end with it) and started again without the hook: it finds the fleet's copy
  // closed by its own line and marks the record closed as the owner's own close (no closer), so
  // another host's get says closed. Before, the record read open for as long as h0 lived.
  const std::string run = run_on_h0_read_from_h1({"MH_TEST_FLEET_FAIL_OWN_CLOSE=1000000"});
  ASSERT_FALSE(run.empty());
  const auto local = allowed_to_its_end_on_h0(run);
  ASSERT_FALSE(local.empty());
  auto published = get_until(
      1, run, [](const EventLine& l) { return l.str("state") == "closed"; }, 60s);
  ASSERT_TRUE(published && published->str("state") == "closed") << (published ? published->raw : "no reply");
  EXPECT_EQ(published->str("fleet_state"), "open") << "the hook kept the mark out: " << published->raw;
  daemons[0]->signal(SIGKILL);
  EXPECT_EQ(daemons[0]->wait_exit(30s), 128 + SIGKILL);
  start(0, 100, 60000);
  expect_marked_closed_by_its_owner(run, local.size());
}

TEST_F(FleetDaemons, TheFleetVerbsSubmitListAndTailAsAUserTypesThem) {
  // `metaharness submit --fleet` on h0 places the run on a host (stdout its id, stderr the host);
  // `tail --fleet RUN --from SEQ -f --json` from another host follows it from its waiting call to
  // its end; `decide` from there is routed to the owner; `ls --fleet --json` from a third host
  // names the run's host and the three hosts; `tail --fleet RUN --from SEQ --json` after the end
  // gives exactly the lines from SEQ on. Each tail is the owner's bytes.
  for (int i = 0; i < 3; ++i)
    start(i, 100, 60000);
  auto verb = [&](int host, std::vector<std::string> args) {
    args.insert(args.begin(), metaharness_binary().string());
    args.insert(args.end(), {"--socket", daemons[host]->socket().string()});
    return args;
  };
  auto submitted = run_to_end(
      verb(0, {"submit", "claude", "-p", "go", "--decisions", "ask", "--decision-deadline-ms", "600000",
               "--model-scenario", (source_dir() / "tests/scenarios/claude/bash_marker.json").string(), "--fleet"}),
      std::nullopt, 120s);
  ASSERT_EQ(submitted.status, 0) << submitted.err;
  const std::string run = submitted.out.substr(0, submitted.out.find('\n'));
  ASSERT_EQ(submitted.out, run + "\n") << "stdout is the run id alone";
  const std::string said = "placed on host h";
  auto at = submitted.err.find(said);
  ASSERT_NE(at, std::string::npos) << submitted.err;
  const int owner = submitted.err[at + said.size()] - '0';
  ASSERT_TRUE(owner >= 0 && owner < 3) << submitted.err;
  const int reader = (owner + 1) % 3, lister = (owner + 2) % 3;
  // `placed` is said once the owner has made the run: it knows the run by id at once.
  {
    SocketClient c(daemons[owner]->socket());
    auto got = c.request(socket_request("get", R"("run_id":")" + run + "\""));
    ASSERT_TRUE(got && got->str("reply") == "run") << (got ? got->raw : "no reply") << what_happened(owner, run);
  }
  // Waiting on its decision: the follower starts at that line, the middle of the run's stream.
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(std::filesystem::exists(daemons[i]->run_dir(run)), i == owner) << "h" << i;
  std::uint64_t requested_seq = 0;
  {
    SocketClient watch(daemons[owner]->socket());
    watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
    auto requested = watch.wait_event("tool.requested", 120s);
    ASSERT_TRUE(requested) << what_happened(owner, run);
    requested_seq = requested->object.at("seq").to_number<std::uint64_t>();
  }
  CliProcess follower(verb(reader, {"tail", "--fleet", run, "--from", std::to_string(requested_seq), "-f", "--json"}));
  follower.close_stdin();
  auto first = follower.wait_for([](const EventLine& l) { return !l.event().empty(); }, 120s);
  ASSERT_TRUE(first) << follower.stderr_text();
  EXPECT_EQ(first->object.at("seq").to_number<std::uint64_t>(), requested_seq) << first->raw;
  auto decided = run_to_end(verb(reader, {"decide", run, "toolu_marker", "allow"}), std::nullopt, 120s);
  EXPECT_EQ(decided.status, 0) << decided.out << decided.err;
  ASSERT_TRUE(follower.wait_for_event("stream.closed", 120s)) << follower.stderr_text();
  std::string followed;
  for (const auto& l : follower.events())
    followed += l.raw + "\n";
  followed += follower.read_out(60s);  // nothing after stream.closed
  EXPECT_EQ(follower.finish(60s), 0) << follower.stderr_text();
  EXPECT_EQ(followed, owners_lines_from(owner, run, requested_seq));
  // The fleet's list from the third host: the run on its owner, and the three hosts.
  auto listed = run_to_end(verb(lister, {"ls", "--fleet", "--json"}), std::nullopt, 60s);
  ASSERT_EQ(listed.status, 0) << listed.err;
  auto parsed = protocol::parse_json(listed.out);
  ASSERT_TRUE(parsed && parsed->is_object()) << listed.out;
  const auto& both = parsed->as_object();
  ASSERT_TRUE(both.contains("runs") && both.contains("hosts")) << listed.out;
  std::set<std::string> hosts;
  for (const auto& h : both.at("hosts").as_array())
    hosts.insert(std::string(h.as_string()));
  EXPECT_EQ(hosts, (std::set<std::string>{"h0", "h1", "h2"})) << listed.out;
  std::map<std::string, std::string> host_of;
  for (const auto& r : both.at("runs").as_array())
    host_of[std::string(r.as_object().at("run_id").as_string())] = std::string(r.as_object().at("host").as_string());
  EXPECT_EQ(host_of, (std::map<std::string, std::string>{{run, "h" + std::to_string(owner)}})) << listed.out;
  // A tail from the middle, after the end, from the third host: exactly the lines from there on.
  const std::uint64_t total = read_lines(daemons[owner]->run_dir(run) / "events.jsonl").size();
  const std::uint64_t middle = total / 2 + 1;
  auto tailed =
      run_to_end(verb(lister, {"tail", "--fleet", run, "--from", std::to_string(middle), "--json"}), std::nullopt, 60s);
  EXPECT_EQ(tailed.status, 0) << tailed.err;
  EXPECT_EQ(tailed.out, owners_lines_from(owner, run, middle));
}

// Every run directory on the hosts this test started: the runs they made, whoever placed them.
std::set<std::string> runs_on(const std::map<int, std::unique_ptr<DaemonUnderTest>>& daemons) {
  std::set<std::string> runs;
  std::error_code ec;
  for (const auto& [i, d] : daemons)
    for (const auto& run : std::filesystem::directory_iterator(d->state_dir() / "runs", ec))
      runs.insert(run.path().filename().string());
  return runs;
}

// Soak finding 6: a fleet spec that reaches a host as that host stops. h1, the submitter, has
// room for one run and holds one (waiting on its decision), so h0 is the only host that pulls
// from the queue (a fetch h1 began before its run was admitted may still take the spec: h1 then
// refuses it BUSY and gives it back, and it reaches h0 all the same). h0 holds the spec it fetched (the test hook
// MH_TEST_FLEET_HOLD_OFFERS, `hold`: before it claims it, until the daemon begins to stop; or once claimed, until its
// fleet stops, its io threads gone) and is sent SIGTERM with the spec in hand. The run must then be made exactly once,
// by the host that stays, as soon as that host has room — never named h0's and left unmade (h0 claimed it and never
// made it, and a survivor closed it HOST_LOST), never dropped from the queue (refused SHUTTING_DOWN).
void FleetDaemons::placed_once_though_held_as_its_host_stops(const std::string& hold,
                                                             const std::string& given_back_why) {
  on_standin_ = true;
  constexpr int kLeaseMs = 3000;
  start(1, 1, kLeaseMs);
  std::string busy;
  {
    SocketClient c(daemons[1]->socket());
    auto reply = c.request(socket_request("submit", standin_bash_ask_run()), 60s);
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    busy = reply->str("run_id");
  }
  start(0, 100, kLeaseMs, {}, "", {"MH_TEST_FLEET_HOLD_OFFERS=" + hold});
  SocketClient submitter(daemons[1]->socket());
  submitter.send(socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true)", "f1"));
  const std::string holding = "test hook: holding the spec of run ";
  std::string run;
  ASSERT_TRUE(eventually(
      [&] {
        const std::string log = daemons[0]->stderr_text();
        auto at = log.find(holding);
        if (at == std::string::npos) return false;
        auto end = log.find_first_of(" ,", at + holding.size());
        if (end == std::string::npos) return false;  // the line is still being written
        run = log.substr(at + holding.size(), end - at - holding.size());
        return true;
      },
      60s))
      << daemons[0]->stderr_text();
  daemons[0]->signal(SIGTERM);
  EXPECT_EQ(daemons[0]->wait_exit(60s), 0) << daemons[0]->stderr_text();
  // h1 gets room: the spec h0 did not place is h1's to take.
  {
    SocketClient c(daemons[1]->socket());
    auto halted = c.request(socket_request("halt", R"("run_id":")" + busy + "\""), 60s);
    ASSERT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
  }
  auto answer = submitter.wait_for([](const EventLine& l) { return !l.str("reply").empty(); }, 60s);
  ASSERT_TRUE(answer) << "no reply";
  ASSERT_EQ(answer->str("reply"), "submitted") << answer->raw;
  EXPECT_EQ(answer->str("run_id"), run) << answer->raw;
  EXPECT_NE(answer->str("host"), "h0") << answer->raw;  // "placed" on h1, or "queued" until h1 had room
  const std::string h0_log = daemons[0]->stderr_text();
  EXPECT_NE(h0_log.find("fleet: run " + run + ": its spec goes back to the queue unplaced: " + given_back_why),
            std::string::npos)
      << h0_log;
  EXPECT_EQ(h0_log.find("fleet: placed run " + run), std::string::npos) << h0_log;
  // Made on h1, and there only (h0 has no trace of it), and it runs: its call waits on a decision.
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(daemons[1]->run_dir(run) / "events.jsonl"); }, 60s))
      << "h0:\n"
      << h0_log << "\nh1:\n"
      << daemons[1]->stderr_text();
  EXPECT_EQ(runs_on(daemons), (std::set<std::string>{busy, run}));
  {
    SocketClient watch(daemons[1]->socket());
    watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << what_happened(1, run);
  }
  // The fleet's record names h1, open: the run was never closed HOST_LOST as h0's.
  SocketClient c(daemons[1]->socket());
  auto listed = c.request(socket_request("list", R"("fleet":true)"), 60s);
  ASSERT_TRUE(listed && listed->object.contains("runs")) << (listed ? listed->raw : "no reply");
  bool recorded = false;
  for (const auto& r : listed->object.at("runs").as_array()) {
    const auto& o = r.as_object();
    if (o.at("run_id").as_string() != run) continue;
    recorded = true;
    EXPECT_EQ(std::string(o.at("host").as_string()), "h1") << listed->raw;
    EXPECT_EQ(std::string(o.at("state").as_string()), "open") << listed->raw;
  }
  EXPECT_TRUE(recorded) << listed->raw;
  EXPECT_EQ(daemons[1]->stderr_text().find("host h0 lost its lease"), std::string::npos) << daemons[1]->stderr_text();
  auto halted = c.request(socket_request("halt", R"("run_id":")" + run + "\""), 60s);
  EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
}

TEST_F(FleetDaemons, ASpecFetchedAsItsHostBeginsToStopIsPlacedOnceByAHostThatStays) {
  // Released as h0 begins to stop (its io threads still run): h0 would claim it and refuse it
  // SHUTTING_DOWN, for good, or its io would be gone before it made the run.
  placed_once_though_held_as_its_host_stops("fetched_until_stopping", "this host is stopping");
}

TEST_F(FleetDaemons, ASpecClaimedWhenItsHostsFleetStopsIsPlacedOnceByAHostThatStays) {
  // Claimed by h0 (its record names h0), released once h0's fleet stops, its io threads gone:
  // the soak's case (nothing on h0 can make the run any more, and h0's record of it stayed).
  placed_once_though_held_as_its_host_stops("claimed_until_stopped", "this host began to stop as it claimed it");
}

TEST_F(FleetDaemons, ASpecQueuedWhileTheHostWithRoomHasAFullDiskWaitsAndIsMadeThereOnceItHasRoom) {
  // A full disk is its host's refusal, not the spec's. Before, a host whose state directory was
  // full pulled a spec, was refused DISK_FULL by its own submit and dropped the spec from the
  // queue for good (Term): its submitter had been told "queued", and the run was never made,
  // anywhere, even once the disk had room. h1, the submitter, has room for one run and holds one,
  // so h0 is the only host with room; h0's home is a tmpfs the test fills. h0 must take nothing
  // from the queue while it is full, and make the run, once, when it has room again.
  on_standin_ = true;
  start(1, 1);
  std::string busy;
  {
    SocketClient c(daemons[1]->socket());
    auto reply = c.request(socket_request("submit", standin_bash_ask_run()), 60s);
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    busy = reply->str("run_id");
  }
  const auto home = dir_->path() / (prefix() + "-h0-tmpfs");
  TmpfsMount mount(home, "32m");
  if (!mount.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << mount.error();
  start(0, 100, 3000, home);
  std::string run;
  {
    DiskFiller filler(daemons[0]->state_dir() / "filler");
    ASSERT_TRUE(filler.filled());
    SocketClient submitter(daemons[1]->socket());
    auto answer = submitter.request(socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true)"), 60s);
    ASSERT_TRUE(answer && answer->str("reply") == "submitted") << (answer ? answer->raw : "no reply");
    EXPECT_EQ(answer->str("placement"), "queued") << answer->raw;
    run = answer->str("run_id");
    ASSERT_FALSE(run.empty()) << answer->raw;
    EXPECT_FALSE(std::filesystem::exists(daemons[0]->run_dir(run)));
    const std::string h0_log = daemons[0]->stderr_text();
    // Either h0 looked at its disk before it pulled (it pulls nothing), or a pull under way as the
    // disk filled brought it the spec, which its submit refused DISK_FULL and it gave back: in
    // both, the spec is still queued, and h0 says it takes none while its disk is full.
    EXPECT_NE(h0_log.find("fleet: this host takes no spec from the queue while its disk is full"), std::string::npos)
        << h0_log;
    const auto refused_here = h0_log.find("refused here: DISK_FULL");
    if (refused_here != std::string::npos) {
      EXPECT_NE(h0_log.find("its spec goes back to the queue unplaced: refused here DISK_FULL", refused_here),
                std::string::npos)
          << h0_log;
    }
  }
  // Room again: h0 takes the spec from the queue and makes the run, there only.
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(daemons[0]->run_dir(run) / "events.jsonl"); }, 60s))
      << "h0:\n"
      << daemons[0]->stderr_text() << "\nh1:\n"
      << daemons[1]->stderr_text();
  EXPECT_EQ(runs_on(daemons), (std::set<std::string>{busy, run}));
  SocketClient watch(daemons[0]->socket());
  watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << what_happened(0, run);
  EXPECT_NE(daemons[0]->stderr_text().find("fleet: placed run " + run + " here"), std::string::npos);
  SocketClient c(daemons[0]->socket());
  auto halted = c.request(socket_request("halt", R"("run_id":")" + run + "\""), 60s);
  EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
  EXPECT_TRUE(watch.wait_event("stream.closed", 60s)) << what_happened(0, run);
  daemons[0].reset();  // before its disk is unmounted
}

TEST_F(FleetDaemons, ARequestIdSubmittedToTwoHostsMakesOneRunAndAnotherSpecUnderItIsAConflict) {
  // Issue 27 §1 across the fleet: a fleet submit whose reply was lost, retried on another host
  // with the same request id (holding '.' and ':', which a NATS key cannot), gets the first run's
  // id back (duplicate: true), never a second run; the same id with another spec is CONFLICT.
  on_standin_ = true;
  for (int i = 0; i < 2; ++i)
    start(i);
  const std::string request_id = R"("request_id":"job-7:attempt.1")";
  std::string run;
  {
    SocketClient c(daemons[0]->socket());
    auto first = c.request(socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true,)" + request_id), 120s);
    ASSERT_TRUE(first && first->str("reply") == "submitted") << (first ? first->raw : "no reply");
    EXPECT_FALSE(first->object.contains("duplicate")) << first->raw;
    run = first->str("run_id");
  }
  {
    SocketClient c(daemons[1]->socket());
    auto again = c.request(socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true,)" + request_id), 120s);
    ASSERT_TRUE(again && again->str("reply") == "submitted") << (again ? again->raw : "no reply");
    EXPECT_EQ(again->str("run_id"), run) << again->raw;
    ASSERT_TRUE(again->object.contains("duplicate")) << again->raw;
    EXPECT_TRUE(again->object.at("duplicate").as_bool()) << again->raw;
    EXPECT_EQ(again->str("placement"), "placed") << again->raw;
    std::string other = standin_bash_ask_run();
    other.replace(other.find(R"("prompt":"go")"), 13, R"("prompt":"stop")");
    auto conflict = c.request(socket_request("submit", other + R"(,"fleet":true,)" + request_id), 120s);
    ASSERT_TRUE(conflict) << "no reply";
    EXPECT_EQ(conflict->str("reply"), "refused") << conflict->raw;
    EXPECT_EQ(conflict->str("code"), "CONFLICT") << conflict->raw;
  }
  EXPECT_EQ(runs_on(daemons), (std::set<std::string>{run}));
  SocketClient c(daemons[1]->socket());
  auto halted = c.request(socket_request("halt", R"("run_id":")" + run + "\""), 120s);
  EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
}

TEST_F(FleetDaemons, ARequestIdClaimedByASubmitWhoseQueueingFailedIsPlacedByItsRetryUnderTheClaimedRunId) {
  // Issue 27 §1 across the fleet: a fleet submit claims its request id, then its queueing fails
  // (NATS lost between the two: that client was refused FLEET_UNAVAILABLE). The claim stays, naming
  // the run id that submit chose; nothing was queued and no host has a record. The client's retry
  // (same id, same spec) must make exactly that run, never a second one and never stranded. The
  // claim is made here directly, as the failed submit left it.
  on_standin_ = true;
  start(0);
  auto spec = protocol::parse_json("{" + standin_bash_ask_run() + "}");
  ASSERT_TRUE(spec && spec->is_object());
  const std::string digest = protocol::sha256_hex(protocol::canonical_json(spec->as_object().at("run")));
  const std::string claimed_run = "20261207T000000Z-0123456789ab";
  {
    auto link = connect_peer(cluster_->url(1), "failed-submitter", prefix());
    ASSERT_TRUE(link) << link.error().text;
    auto claimed = fleet::claim_request(**link, 0, "healed.1", fleet::RequestClaim{claimed_run, digest});
    ASSERT_TRUE(claimed) << claimed.error().text;
    ASSERT_FALSE(*claimed) << "the claim is this submitter's";
  }
  for (int attempt = 0; attempt < 2; ++attempt) {  // the retry, then one more: still the one run
    SocketClient c(daemons[0]->socket());
    auto reply =
        c.request(socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true,"request_id":"healed.1")"), 120s);
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : daemons[0]->stderr_text());
    EXPECT_EQ(reply->str("run_id"), claimed_run) << reply->raw;
    ASSERT_TRUE(reply->object.contains("duplicate")) << reply->raw;
    EXPECT_EQ(reply->str("placement"), "placed") << reply->raw;
  }
  EXPECT_EQ(runs_on(daemons), (std::set<std::string>{claimed_run}));
  SocketClient watch(daemons[0]->socket());
  watch.send(socket_request("tail", R"("run_id":")" + claimed_run + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << what_happened(0, claimed_run);
  SocketClient c(daemons[0]->socket());
  auto halted = c.request(socket_request("halt", R"("run_id":")" + claimed_run + "\""), 120s);
  EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
}

TEST_F(FleetDaemons, ASubmitWhoseSpecWasQueuedButWhosePlacementCouldNotBeReadSaysUnknownNotQueued) {
  // A fleet submit queues its spec, then reads where it was placed. When that read fails (the test
  // hook, as a NATS that did not answer) the answer must not say "queued" (no host had room): the
  // run may be placed already. It says "unknown", with the library's words, and is not refused
  // (the spec is queued: a refused client's retry without a request id would make a second run).
  on_standin_ = true;
  start(0, 100, 60000, {}, "", {"MH_TEST_FLEET_FAIL_PLACEMENT_READ=1"});
  SocketClient c(daemons[0]->socket());
  auto reply = c.request(socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true)"), 120s);
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : daemons[0]->stderr_text());
  const std::string run = reply->str("run_id");
  EXPECT_EQ(reply->str("placement"), "unknown") << reply->raw;
  EXPECT_TRUE(reply->object.at("host").is_null()) << reply->raw;
  EXPECT_NE(reply->str("placement_error").find("MH_TEST_FLEET_FAIL_PLACEMENT_READ"), std::string::npos) << reply->raw;
  // The spec was queued all the same: the one host with room makes the run (the answer came
  // before it did: the failed read did not wait), once. The tail may come while h0 is still making
  // it (its id reserved, no directory yet): read from the fleet then, never refused UNKNOWN_RUN
  // (it was, in 2 of 5 tries, before made_here in fleet_requests.cpp).
  ASSERT_TRUE(owner_known(0, run, "h0")) << what_happened(0, run);
  SocketClient watch(daemons[0]->socket());
  watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << [&] {
    std::string read;
    for (const auto& l : watch.lines())
      read += l.raw + "\n";
    return "the tail read:\n" + read;
  }() << what_happened(0, run);
  EXPECT_EQ(runs_on(daemons), (std::set<std::string>{run}));
  // The hook's one failure is spent: the next submit's placement is read, and said.
  auto next = c.request(socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true)"), 120s);
  ASSERT_TRUE(next && next->str("reply") == "submitted") << (next ? next->raw : "no reply");
  EXPECT_EQ(next->str("placement"), "placed") << next->raw;
  EXPECT_EQ(next->str("host"), "h0") << next->raw;
  for (const std::string& id : {run, next->str("run_id")}) {
    auto halted = c.request(socket_request("halt", R"("run_id":")" + id + "\""), 120s);
    EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
  }
}

TEST_F(FleetDaemons, ACommandForARunItsHostIsStillMakingFromTheQueueWaitsForItInsteadOfUnknownRun) {
  // h0 claims a queued spec and is held there (the test hook, until the test writes a file): the
  // submit has answered with the run's id, but no run of it is made yet. A halt sent meanwhile
  // must wait for the making (said in h0's log) and then halt the run, not be refused
  // UNKNOWN_RUN for a run its client was told of.
  on_standin_ = true;
  const std::filesystem::path go = dir_->path() / (prefix() + "-go");
  start(0, 100, 60000, {}, "", {"MH_TEST_FLEET_HOLD_OFFERS=claimed_until_file:" + go.string()});
  SocketClient c(daemons[0]->socket());
  auto reply = c.request(socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true)"), 120s);
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : daemons[0]->stderr_text());
  const std::string run = reply->str("run_id");
  EXPECT_EQ(reply->str("placement"), "queued") << "held before its making: " << reply->raw;
  SocketClient halt(daemons[0]->socket());
  halt.send(socket_request("halt", R"("run_id":")" + run + "\"", "h"));
  ASSERT_TRUE(eventually(
      [&] {
        return daemons[0]->stderr_text().find("a command for it waits: this host is making it") != std::string::npos;
      },
      60s))
      << daemons[0]->stderr_text();
  std::ofstream(go) << "go\n";
  auto halted = halt.wait_for([](const EventLine& l) { return !l.str("reply").empty(); }, 120s);
  ASSERT_TRUE(halted) << daemons[0]->stderr_text();
  EXPECT_EQ(halted->str("reply"), "result") << halted->raw;
  auto closed = get_until(
      0, run, [](const EventLine& l) { return l.str("state") == "closed"; }, 120s);
  ASSERT_TRUE(closed && closed->str("state") == "closed") << (closed ? closed->raw : "no reply");
}

TEST_F(FleetDaemons, OneRequestIdSubmittedToTwoHostsAtOnceMakesExactlyOneRun) {
  // Both hosts asked at the same moment: one claim wins, the other submit answers with its run.
  on_standin_ = true;
  for (int i = 0; i < 2; ++i)
    start(i);
  const std::string submit =
      socket_request("submit", standin_bash_ask_run() + R"(,"fleet":true,"request_id":"at-once.1")");
  SocketClient a(daemons[0]->socket()), b(daemons[1]->socket());
  a.send(submit);
  b.send(submit);
  auto replied = [](const EventLine& l) { return !l.str("reply").empty(); };
  auto from_a = a.wait_for(replied, 120s), from_b = b.wait_for(replied, 120s);
  ASSERT_TRUE(from_a && from_a->str("reply") == "submitted") << (from_a ? from_a->raw : "no reply");
  ASSERT_TRUE(from_b && from_b->str("reply") == "submitted") << (from_b ? from_b->raw : "no reply");
  EXPECT_EQ(from_a->str("run_id"), from_b->str("run_id")) << from_a->raw << "\n" << from_b->raw;
  EXPECT_EQ(from_a->object.contains("duplicate") + from_b->object.contains("duplicate"), 1) << from_a->raw << "\n"
                                                                                            << from_b->raw;
  EXPECT_EQ(runs_on(daemons), (std::set<std::string>{from_a->str("run_id")}));
  auto halted = a.request(socket_request("halt", R"("run_id":")" + from_a->str("run_id") + "\""), 120s);
  EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
}

}  // namespace
}  // namespace mh::test
