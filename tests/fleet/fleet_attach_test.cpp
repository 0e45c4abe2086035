// Attach across hosts (docs/fleet.md, Attach across hosts; issue 26 §5), against a real 3-node
// nats-server cluster on loopback and two real daemons, each on its own node, hosting runs of the
// stand-in harness: a run on h1 attached from h0 is handed its pending call (again after an
// attach that dropped), and the decisions
// sent on that attach are the owner's to apply — an allow runs the call, a deny does not, each
// answered by exactly one command.result, a second controller's late answer TOO_LATE; a peer of a
// uid the owner does not let control the run is refused; a remote controller that stays silent
// is denied by the owner's own deadline; a command the owner's full disk could not record is
// refused DISK_FULL there, as on its own socket; a relayed line is bounded by the owner's own
// line bound; and an owner host whose answers do not fit is refused by
// name, nothing of its bytes reaching the client.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <cstring>
#include <thread>

#include "daemon/fleet/command_relay.hpp"
#include "daemon/fleet/fleet_link.hpp"
#include "daemon/fleet/run_records.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/disk_filler.hpp"
#include "tests/support/fleet_peer.hpp"
#include "tests/support/nats_cluster.hpp"
#include "tests/support/peer_as_uid.hpp"
#include "tests/support/tmpfs_mount.hpp"

namespace mh::test {
namespace {

constexpr uid_t kNobody = 65534;

// A run on the stand-in harness (no model call): one Bash call, toolu_marker (`touch
// marker.txt`), in ask mode with `deadline_ms`; kept open after its turn, so a late answer meets
// an open run (TOO_LATE in its stream) and the test ends it with a halt.
std::string standin_run(std::uint64_t deadline_ms = 600000) {
  return R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
         R"("vendor_env":{"MH_STANDIN_SCRIPT":")" +
         (std::filesystem::path(MH_TEST_STANDIN_SCRIPTS) / "bash_marker.json").string() +
         R"("},"decisions":"ask","keep_open":true,"decision_deadline_ms":)" + std::to_string(deadline_ms) + "}";
}

// The command.result of `id` in what `c` read: from the stream, or (the run had closed) the
// `result` line that says it was not recorded.
std::optional<EventLine> result_of(SocketClient& c, const std::string& id, std::chrono::milliseconds timeout = 60s) {
  return c.wait_for(
      [&](const EventLine& l) {
        return (l.event() == "command.result" && l.str("id") == id) ||
               (l.str("reply") == "result" && l.str("command_id") == id);
      },
      timeout);
}

// `event` among the lines `c` read already, else the next one to come (wait_event reads on from
// the last line read; an earlier wait may have read past it).
std::optional<EventLine> read_or_wait(SocketClient& c, std::string_view event,
                                      std::chrono::milliseconds timeout = 60s) {
  for (const auto& l : c.lines())
    if (l.event() == event) return l;
  return c.wait_event(event, timeout);
}

std::string outcome_code_of(const EventLine& l) {
  const auto& outcome = l.object.at("outcome").as_object();
  if (outcome.at("result") == "ok") return "ok";
  return std::string(outcome.at("refused").at("code").as_string());
}

class FleetAttach : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("fleet-attach");
    cluster_ = new NatsCluster(dir_->path() / "nats");
    ASSERT_TRUE(cluster_->ready()) << cluster_->why() << "\n" << cluster_->log(0);
  }
  static void TearDownTestSuite() {
    delete cluster_;
    delete dir_;
  }

  void SetUp() override {
    // h0 lives where a second uid can reach its socket (every directory above it lets others
    // pass, the socket is 0666, and that uid is a control peer there); h1 owns the runs.
    char templ[] = "/tmp/mh-fleet-attach-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr) << std::strerror(errno);
    public_home_ = templ;
    namespace fs = std::filesystem;
    const auto pass = fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec;
    fs::permissions(public_home_, pass);
    fs::create_directories(public_home_ / "h0");
    fs::permissions(public_home_ / "h0", pass);
    const bool root = ::geteuid() == 0;
    h0_ = std::make_unique<DaemonUnderTest>(
        public_home_ / "h0",
        config(0, root ? "[paths]\nsocket_mode = \"0666\"\n" + access(", " + std::to_string(kNobody)) : access()));
    ASSERT_TRUE(h0_->wait_notify("READY=1", 90s)) << h0_->stderr_text();
    fs::create_directories(dir_->path() / (prefix() + "-h1"));
    h1_ = std::make_unique<DaemonUnderTest>(dir_->path() / (prefix() + "-h1"), config(1, access()));
    ASSERT_TRUE(h1_->wait_notify("READY=1", 90s)) << h1_->stderr_text();
  }
  void TearDown() override {
    h0_.reset();
    h1_.reset();
    std::error_code ec;
    if (!public_home_.empty()) std::filesystem::remove_all(public_home_, ec);
  }

  // Each test its own subjects, streams and buckets.
  std::string prefix() const {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::string p;
    for (char ch : name)
      if (std::isupper(static_cast<unsigned char>(ch))) p += static_cast<char>(std::tolower(ch));
    return "a" + p.substr(0, 12);
  }
  // Root (this test) a control peer, not an admin: a peer host acts only for a uid its owning
  // host does not treat as admin (docs/fleet.md, Trust).
  static std::string access(const std::string& more = "") {
    return "[access]\nroot_is_admin = false\nowner_is_admin = false\ncontrol_uids = [0" + more + "]\n";
  }
  std::string config(int i, const std::string& extra) const {
    return std::string("[vendor]\nclaude = \"") + MH_TEST_STANDIN + "\"\n[runs]\nsandbox_read_only = [\"" +
           MH_TEST_STANDIN_SCRIPTS + "\"]\n" + extra + "[fleet]\nnats_urls = [\"" + cluster_->url(i) +
           "\"]\nhost_id = \"h" + std::to_string(i) + "\"\nreplicas = 3\nlease_ttl_ms = 60000\nprefix = \"" + prefix() +
           "\"\nrequest_timeout_ms = 4000\ninsecure_no_credentials = true\n";
  }

  // A run on h1, its call waiting (read on h1 itself), known to h0 as h1's.
  std::string run_waiting_on_h1(std::uint64_t deadline_ms = 600000, bool wait_for_call = true) {
    SocketClient c(h1_->socket());
    auto reply = c.request(socket_request("submit", standin_run(deadline_ms)), 60s);
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    if (!reply) return "";
    const std::string run = reply->str("run_id");
    if (wait_for_call) {
      SocketClient watch(h1_->socket());
      watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
      EXPECT_TRUE(watch.wait_event("tool.requested", 60s)) << h1_->stderr_text();
    }
    EXPECT_TRUE(eventually(
        [&] {
          SocketClient g(h0_->socket());
          auto got = g.request(socket_request("get", R"("run_id":")" + run + "\""));
          return got && got->str("host") == "h1";
        },
        60s))
        << h0_->stderr_text();
    return run;
  }

  // Host `i` again, on a home of its own, its lines bounded at 4 KiB (server.max_line_bytes).
  void restart_with_small_lines(int i) {
    auto& host = i == 0 ? h0_ : h1_;
    host.reset();
    const auto home = dir_->path() / (prefix() + "-h" + std::to_string(i) + "-small");
    std::filesystem::create_directories(home);
    host = std::make_unique<DaemonUnderTest>(home, config(i, access() + "[server]\nmax_line_bytes = 4096\n"));
    ASSERT_TRUE(host->wait_notify("READY=1", 90s)) << host->stderr_text();
  }
  // A deny of the waiting call whose reason alone is over those 4 KiB.
  static std::string deny_over_the_bound() {
    return tool_decide("big", "toolu_marker", R"({"decision":"deny","reason":")" + std::string(8000, 'r') + R"("})");
  }

  // Attaches `c` (on h0) to `run` from seq 1: its `attached` reply.
  static std::optional<EventLine> attach(SocketClient& c, const std::string& run) {
    c.send(socket_request("attach", R"("run_id":")" + run + R"(","from_seq":1)", "a1"));
    return c.wait_for([](const EventLine& l) { return !l.str("reply").empty(); }, 60s);
  }

  std::filesystem::path marker(const std::string& run) const { return h1_->run_dir(run) / "scratch/work/marker.txt"; }

  // Ends `run` with a halt routed from h0, and reads `c` to its `end`.
  void halt_and_end(SocketClient& c, const std::string& run) {
    SocketClient h(h0_->socket());
    auto halted = h.request(socket_request("halt", R"("run_id":")" + run + "\""), 60s);
    EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
    EXPECT_TRUE(c.wait_event("stream.closed", 60s)) << h1_->stderr_text();
    EXPECT_TRUE(c.wait_reply("end", 60s));
  }

  // How many command.result lines of `id` `c` read, in the stream and as `result` lines.
  static int results_of(const SocketClient& c, const std::string& id) {
    int n = 0;
    for (const auto& l : c.lines())
      if ((l.event() == "command.result" && l.str("id") == id) ||
          (l.str("reply") == "result" && l.str("command_id") == id))
        ++n;
    return n;
  }

  static TempDir* dir_;
  static NatsCluster* cluster_;
  std::filesystem::path public_home_;
  std::unique_ptr<DaemonUnderTest> h0_, h1_;
};

TempDir* FleetAttach::dir_ = nullptr;
NatsCluster* FleetAttach::cluster_ = nullptr;

TEST_F(FleetAttach, AnAllowSentOnAnAttachFromAnotherHostRunsTheCallAndALateAnswerIsTooLate) {
  const std::string run = run_waiting_on_h1();
  ASSERT_FALSE(run.empty());
  // A controller that attaches and drops without a word holds nothing: the next attach (here,
  // from the same host) is offered the same call, with no more time left than the first was.
  std::uint64_t first_remaining = 0;
  {
    SocketClient dropped(h0_->socket());
    auto first = attach(dropped, run);
    ASSERT_TRUE(first && first->str("reply") == "attached") << (first ? first->raw : "no reply");
    auto offered = dropped.wait_reply("pending", 60s);
    ASSERT_TRUE(offered);
    first_remaining = offered->object.at("remaining_ms").to_number<std::uint64_t>();
  }
  SocketClient a(h0_->socket());
  auto attached = attach(a, run);
  ASSERT_TRUE(attached);
  ASSERT_EQ(attached->str("reply"), "attached") << attached->raw;
  EXPECT_EQ(attached->str("host"), "h1");
  // The waiting call is offered, naming the seq of its tool.requested (which the stream carries).
  auto pending = a.wait_reply("pending", 60s);
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->str("call_id"), "toolu_marker");
  EXPECT_EQ(pending->str("id"), "a1");
  auto requested = a.wait_event("tool.requested", 60s);
  ASSERT_TRUE(requested);
  EXPECT_EQ(pending->object.at("requested_seq").to_number<std::uint64_t>(),
            requested->object.at("seq").to_number<std::uint64_t>());
  EXPECT_GT(pending->object.at("remaining_ms").to_number<std::uint64_t>(), 0u);
  EXPECT_LE(pending->object.at("remaining_ms").to_number<std::uint64_t>(), first_remaining);
  a.send(tool_decide("d1", "toolu_marker", R"({"decision":"allow"})"));
  auto decided = a.wait_event("tool.decided", 60s);
  ASSERT_TRUE(decided) << h1_->stderr_text();
  EXPECT_EQ(decided->object.at("decision").at("decision"), "allow") << decided->raw;
  EXPECT_EQ(decided->str("decided_by"), "embedder") << decided->raw;
  EXPECT_EQ(decided->object.at("peer").at("via"), "fleet:h0") << decided->raw;
  auto d1 = result_of(a, "d1");
  ASSERT_TRUE(d1) << h1_->stderr_text();
  EXPECT_EQ(d1->event(), "command.result") << d1->raw;  // recorded in the run's stream
  EXPECT_EQ(outcome_code_of(*d1), "ok") << d1->raw;
  // The call ran on h1: its result is in the stream and its file in h1's work directory.
  ASSERT_TRUE(read_or_wait(a, "tool.result")) << h1_->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(marker(run))) << "the allowed call did not run";
  // A second answer to the decided call is too late: one command.result, in the stream.
  a.send(tool_decide("d2", "toolu_marker", R"({"decision":"deny","reason":"changed my mind"})"));
  auto d2 = result_of(a, "d2");
  ASSERT_TRUE(d2) << h1_->stderr_text();
  EXPECT_EQ(d2->event(), "command.result") << d2->raw;
  EXPECT_EQ(outcome_code_of(*d2), "TOO_LATE") << d2->raw;
  halt_and_end(a, run);
  EXPECT_EQ(results_of(a, "d1"), 1);
  EXPECT_EQ(results_of(a, "d2"), 1);
  EXPECT_EQ(a.events_named("tool.decided").size(), 1u);
}

TEST_F(FleetAttach, ADenyFromAnotherHostKeepsTheCallFromRunningAndTheOwnersOwnControllerIsTooLate) {
  // Two controllers on one run: one attached on the owner, one across hosts. The first answer is
  // taken; the other gets TOO_LATE. Both read the same stream.
  const std::string run = run_waiting_on_h1();
  ASSERT_FALSE(run.empty());
  SocketClient local(h1_->socket());
  local.send(socket_request("attach", R"("run_id":")" + run + R"(","from_seq":1)", "l1"));
  ASSERT_TRUE(local.wait_reply("pending", 60s));
  SocketClient remote(h0_->socket());
  auto attached = attach(remote, run);
  ASSERT_TRUE(attached && attached->str("reply") == "attached") << (attached ? attached->raw : "no reply");
  ASSERT_TRUE(remote.wait_reply("pending", 60s));
  remote.send(tool_decide("r1", "toolu_marker", R"({"decision":"deny","reason":"not on this host"})"));
  auto decided = remote.wait_event("tool.decided", 60s);
  ASSERT_TRUE(decided) << h1_->stderr_text();
  EXPECT_EQ(decided->object.at("decision").at("decision"), "deny") << decided->raw;
  EXPECT_EQ(decided->object.at("peer").at("via"), "fleet:h0") << decided->raw;
  auto r1 = result_of(remote, "r1");
  ASSERT_TRUE(r1);
  EXPECT_EQ(outcome_code_of(*r1), "ok") << r1->raw;
  local.send(tool_decide("l2", "toolu_marker", R"({"decision":"allow"})"));
  auto l2 = result_of(local, "l2");
  ASSERT_TRUE(l2) << h1_->stderr_text();
  EXPECT_EQ(outcome_code_of(*l2), "TOO_LATE") << l2->raw;
  // The remote controller reads the other's late answer too, from the fleet.
  auto l2_remote = result_of(remote, "l2");
  ASSERT_TRUE(l2_remote);
  EXPECT_EQ(outcome_code_of(*l2_remote), "TOO_LATE");
  // The denied call's result says so, and its file was never made.
  auto result = read_or_wait(remote, "tool.result");
  ASSERT_TRUE(result) << h1_->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(marker(run))) << "the denied call ran";
  halt_and_end(remote, run);
  EXPECT_FALSE(std::filesystem::exists(marker(run))) << "the denied call ran";
  EXPECT_EQ(results_of(remote, "r1"), 1);
  EXPECT_EQ(results_of(remote, "l2"), 1);
  EXPECT_EQ(remote.events_named("tool.decided").size(), 1u);
}

TEST_F(FleetAttach, AnAttachByAUidTheOwnerDoesNotLetControlTheRunIsRefusedAndDecidesNothing) {
  if (::geteuid() != 0) GTEST_SKIP() << "a second uid needs root";
  // root's run on h1; uid 65534 is a control peer on h0 (of its own runs), so h0 lets it ask,
  // and h1, the owner, refuses it: a peer host's peer controls only its own uid's runs.
  const std::string run = run_waiting_on_h1();
  ASSERT_FALSE(run.empty());
  std::string why;
  const std::string line = first_line_as(
      kNobody, h0_->socket(), socket_request("attach", R"("run_id":")" + run + R"(","from_seq":1)", "n1"), why);
  ASSERT_FALSE(line.empty()) << why;
  auto refused = to_event_line(line);
  EXPECT_EQ(refused.str("reply"), "refused") << line;
  EXPECT_EQ(refused.str("code"), "FORBIDDEN") << line;
  EXPECT_EQ(refused.str("id"), "n1") << line;
  EXPECT_NE(refused.str("reason").find("only its own uid's runs"), std::string::npos) << line;
  // Nothing was decided: the run's own uid attaches from h0 and is offered the call still waiting.
  EXPECT_EQ(read_file(h1_->run_dir(run) / "events.jsonl").find("\"tool.decided\""), std::string::npos);
  SocketClient a(h0_->socket());
  auto attached = attach(a, run);
  ASSERT_TRUE(attached && attached->str("reply") == "attached") << (attached ? attached->raw : "no reply");
  auto pending = a.wait_reply("pending", 60s);
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->str("call_id"), "toolu_marker");
  halt_and_end(a, run);
}

TEST_F(FleetAttach, ACallItsRemoteControllerLeavesUnansweredIsDeniedByTheOwnersDeadline) {
  // A 3 s deadline on h1; the controller attached from h0 says nothing. The owner's deadline
  // denies the call (decided_by "deadline"), the call never runs, and an answer after it is TOO_LATE.
  const std::string run = run_waiting_on_h1(3000, /*wait_for_call=*/false);
  ASSERT_FALSE(run.empty());
  SocketClient a(h0_->socket());
  auto attached = attach(a, run);
  ASSERT_TRUE(attached && attached->str("reply") == "attached") << (attached ? attached->raw : "no reply");
  auto decided = a.wait_event("tool.decided", 60s);
  ASSERT_TRUE(decided) << h1_->stderr_text();
  EXPECT_EQ(decided->str("decided_by"), "deadline") << decided->raw;
  EXPECT_EQ(decided->object.at("decision").at("decision"), "deny") << decided->raw;
  ASSERT_TRUE(read_or_wait(a, "tool.result")) << h1_->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(marker(run))) << "the call ran without an answer";
  a.send(tool_decide("late", "toolu_marker", R"({"decision":"allow"})"));
  auto late = result_of(a, "late");
  ASSERT_TRUE(late) << h1_->stderr_text();
  EXPECT_EQ(late->event(), "command.result") << late->raw;
  EXPECT_EQ(outcome_code_of(*late), "TOO_LATE") << late->raw;
  halt_and_end(a, run);
  EXPECT_EQ(results_of(a, "late"), 1);
  EXPECT_FALSE(std::filesystem::exists(marker(run)));
}

TEST_F(FleetAttach, ACommandTheOwnersFullDiskCouldNotRecordIsRefusedDiskFullAndTheCallStillWaits) {
  // h1 again, its home on a tmpfs the test fills: a decision sent on an attach from h0, and a
  // command routed from h0, are refused by name on h1 before its run acts on them (as its own
  // socket refuses them, docs/socket-api.md DISK_FULL); once there is room the call is decided.
  const auto home = dir_->path() / (prefix() + "-h1-tmpfs");
  h1_.reset();  // a clean stop: its lease is dropped
  TmpfsMount mount(home, "32m");
  if (!mount.mounted()) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << mount.error();
  h1_ = std::make_unique<DaemonUnderTest>(home, config(1, access()));
  ASSERT_TRUE(h1_->wait_notify("READY=1", 90s)) << h1_->stderr_text();
  const std::string run = run_waiting_on_h1();
  ASSERT_FALSE(run.empty());
  SocketClient a(h0_->socket());
  auto attached = attach(a, run);
  ASSERT_TRUE(attached && attached->str("reply") == "attached") << (attached ? attached->raw : "no reply");
  ASSERT_TRUE(a.wait_reply("pending", 60s));
  {
    DiskFiller filler(h1_->state_dir() / "filler");
    ASSERT_TRUE(filler.filled());
    a.send(tool_decide("d1", "toolu_marker", R"({"decision":"allow"})"));
    auto refused = a.wait_reply("refused", 60s);
    ASSERT_TRUE(refused) << h1_->stderr_text();
    EXPECT_EQ(refused->str("code"), "DISK_FULL") << refused->raw;
    EXPECT_EQ(refused->str("id"), "d1") << refused->raw;
    SocketClient c(h0_->socket());
    auto routed = c.request(socket_request("command",
                                           R"("run_id":")" + run + R"(","command":)" +
                                               tool_decide("d2", "toolu_marker", R"({"decision":"allow"})"),
                                           "t"),
                            60s);
    ASSERT_TRUE(routed);
    EXPECT_EQ(routed->str("reply"), "refused") << routed->raw;
    EXPECT_EQ(routed->str("code"), "DISK_FULL") << routed->raw;
    EXPECT_EQ(routed->str("id"), "t") << routed->raw;
    EXPECT_EQ(read_file(h1_->run_dir(run) / "events.jsonl").find("\"tool.decided\""), std::string::npos);
  }
  // Room again: the call still waited, and is decided now.
  a.send(tool_decide("d3", "toolu_marker", R"({"decision":"allow"})"));
  auto d3 = result_of(a, "d3");
  ASSERT_TRUE(d3) << h1_->stderr_text();
  EXPECT_EQ(outcome_code_of(*d3), "ok") << d3->raw;
  ASSERT_TRUE(read_or_wait(a, "tool.result")) << h1_->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(marker(run)));
  halt_and_end(a, run);
  EXPECT_EQ(results_of(a, "d1"), 0);
  EXPECT_EQ(results_of(a, "d2"), 0);
  h1_.reset();  // before its disk is unmounted
}

TEST_F(FleetAttach, AnAttachedLineFromAPeerHostIsBoundedByTheOwnersOwnLineBound) {
  // h1 again, its lines bounded at 4 KiB. What reaches mh.cmd.h1 straight from NATS (a peer host,
  // or anyone holding the fleet's credentials) for root's run, as root: a line over h1's bound is
  // refused unread as h1's own connection would refuse it (in the stream, MALFORMED), so the deny
  // it carries decides nothing; a "too_long" sentence over 1 KiB is refused and recorded nowhere.
  ASSERT_NO_FATAL_FAILURE(restart_with_small_lines(1));
  const std::string run = run_waiting_on_h1();
  ASSERT_FALSE(run.empty());
  auto made = connect_peer(cluster_->url(2), "evil", prefix());
  ASSERT_TRUE(made) << made.error().text;
  auto& link = **made;
  const std::string subject = link.names().command_subject("h1");
  auto json_string = [](const std::string& text) {
    return protocol::canonical_json(boost::json::value(boost::json::string(text)));
  };
  const std::string deny = deny_over_the_bound();
  auto line_answer = fleet::relay_request(link, subject,
                                          R"({"kind":"line","run_id":")" + run + R"(","line":)" + json_string(deny) +
                                              R"(,"uid":0,"pid":1,"from_host":"evil"})",
                                          30s);
  ASSERT_TRUE(line_answer) << line_answer.error().text;
  auto answered = to_event_line(*line_answer);
  EXPECT_EQ(answered.str("reply"), "result") << *line_answer;
  EXPECT_EQ(outcome_code_of(answered), "MALFORMED") << *line_answer;
  EXPECT_NE(
      answered.object.at("outcome").at("refused").at("reason").as_string().find("is over this host's 4096-byte bound"),
      std::string::npos)
      << *line_answer;
  auto sentence_answer = fleet::relay_request(link, subject,
                                              R"({"kind":"line","run_id":")" + run + R"(","too_long":")" +
                                                  std::string(2000, 's') + R"(","uid":0,"pid":1,"from_host":"evil"})",
                                              30s);
  ASSERT_TRUE(sentence_answer) << sentence_answer.error().text;
  auto refused = to_event_line(*sentence_answer);
  EXPECT_EQ(refused.str("reply"), "refused") << *sentence_answer;
  EXPECT_EQ(refused.str("code"), "MALFORMED") << *sentence_answer;
  EXPECT_NE(refused.str("reason").find("\"too_long\" is over 1024 bytes"), std::string::npos) << *sentence_answer;
  // The call still waits: nothing was decided, and the long sentence is nowhere in the stream.
  const std::string events = read_file(h1_->run_dir(run) / "events.jsonl");
  EXPECT_EQ(events.find("\"tool.decided\""), std::string::npos);
  EXPECT_EQ(events.find(std::string(100, 's')), std::string::npos);
  SocketClient a(h0_->socket());
  auto attached = attach(a, run);
  ASSERT_TRUE(attached && attached->str("reply") == "attached") << (attached ? attached->raw : "no reply");
  auto pending = a.wait_reply("pending", 60s);
  ASSERT_TRUE(pending);
  EXPECT_EQ(pending->str("call_id"), "toolu_marker");
  halt_and_end(a, run);
}

TEST_F(FleetAttach, ALineOverTheBoundOnAnAttachAcrossHostsIsAnsweredBeforeTheLineSentAfterIt) {
  // h0 bounds its lines at 4 KiB. Attached there to h1's run, a client sends, in one write, a deny
  // over h0's bound and then an allow. The deny is refused unread (h0's framer) and relayed to the
  // owner as such; the allow goes after it. Each is answered in the order sent: the refusal of the
  // line over the bound first (it was relayed beside the next line and could land after it), then
  // the allow, which decides the call.
  ASSERT_NO_FATAL_FAILURE(restart_with_small_lines(0));
  const std::string run = run_waiting_on_h1();
  ASSERT_FALSE(run.empty());
  SocketClient a(h0_->socket());
  auto attached = attach(a, run);
  ASSERT_TRUE(attached && attached->str("reply") == "attached") << (attached ? attached->raw : "no reply");
  ASSERT_TRUE(a.wait_reply("pending", 60s));
  const std::string deny = deny_over_the_bound();
  a.send_raw(deny + "\n" + tool_decide("d1", "toolu_marker", R"({"decision":"allow"})") + "\n");
  auto d1 = result_of(a, "d1");
  ASSERT_TRUE(d1) << h1_->stderr_text();
  EXPECT_EQ(outcome_code_of(*d1), "ok") << d1->raw;
  // The answer to the line over the bound: a result naming no command (the line was not read),
  // refused, its reason h0's words about the line.
  auto is_oversized_answer = [](const EventLine& l) {
    const bool result = l.event() == "command.result" || l.str("reply") == "result";
    return result && l.object.contains("outcome") && outcome_code_of(l) != "ok" &&
           l.raw.find("4096-byte bound") != std::string::npos;
  };
  std::size_t oversized_at = a.lines().size(), d1_at = a.lines().size();
  for (std::size_t i = 0; i < a.lines().size(); ++i) {
    const EventLine& l = a.lines()[i];
    if (oversized_at == a.lines().size() && is_oversized_answer(l)) oversized_at = i;
    if (d1_at == a.lines().size() && ((l.event() == "command.result" && l.str("id") == "d1") ||
                                      (l.str("reply") == "result" && l.str("command_id") == "d1")))
      d1_at = i;
  }
  ASSERT_LT(oversized_at, a.lines().size()) << "the line over the bound was not answered before the allow's result";
  EXPECT_LT(oversized_at, d1_at) << a.lines()[oversized_at].raw;
  // The refused deny decided nothing: the allow did, and the call ran.
  auto decided = read_or_wait(a, "tool.decided");
  ASSERT_TRUE(decided) << h1_->stderr_text();
  EXPECT_EQ(decided->object.at("decision").at("decision"), "allow") << decided->raw;
  halt_and_end(a, run);
  EXPECT_EQ(a.events_named("tool.decided").size(), 1u);
}

TEST_F(FleetAttach, AnOwnerWhoseAnswersDoNotFitIsRefusedByNameAndNoneOfItsBytesReachTheClient) {
  // A forged owner: whoever holds the fleet's NATS credentials can record a run as its own and
  // serve its host's command subject. Its answers are read as a peer's bytes.
  auto made = connect_peer(cluster_->url(1), "evil", prefix());
  ASSERT_TRUE(made) << made.error().text;
  auto& link = **made;
  const std::string run = "20261206T000000Z-forged-" + prefix();
  auto claimed = fleet::claim_placement(link, run, "evil", /*launched=*/true);
  ASSERT_TRUE(claimed && *claimed == fleet::Claim::won);
  // The forged owner's requests run here, until the end of the test however it ends (an early
  // ASSERT included: a thread still joinable at its destruction would end the whole process).
  struct Executor {
    boost::asio::io_context io;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{io.get_executor()};
    std::thread runner{[this] { io.run(); }};
    ~Executor() {
      guard.reset();
      io.stop();
      runner.join();
    }
  } executor;
  auto& io = executor.io;
  const std::string forged_event =
      R"({"format":"metaharness.event/1","seq":1,"event":"tool.decided","call_id":"toolu_marker"})";
  std::atomic<int> asked{0};
  auto served = fleet::CommandServer::open(
      link, link.names().command_subject("evil"), io.get_executor(), [&](std::string body, fleet::Responder responder) {
        const bool pending = body.find(R"("kind":"pending")") != std::string::npos;
        // First attach: a pending call whose id is an object; then an empty list, and every
        // line answered with a forged event line.
        if (pending)
          responder.respond(asked++ == 0 ? R"({"pending":[{"call_id":{"x":1},"requested_seq":1,"remaining_ms":5}]})"
                                         : R"({"pending":[]})");
        else
          responder.respond(forged_event);
      });
  ASSERT_TRUE(served) << served.error().text;
  {
    SocketClient a(h0_->socket());
    auto refused = attach(a, run);
    ASSERT_TRUE(refused);
    EXPECT_EQ(refused->str("reply"), "refused") << refused->raw;
    EXPECT_EQ(refused->str("code"), "FLEET_UNAVAILABLE") << refused->raw;
    EXPECT_EQ(refused->str("id"), "a1") << refused->raw;
    EXPECT_NE(refused->str("reason").find("host evil answered a pending call 0 whose call_id"), std::string::npos)
        << refused->raw;
  }
  SocketClient a(h0_->socket());
  auto attached = attach(a, run);
  ASSERT_TRUE(attached && attached->str("reply") == "attached") << (attached ? attached->raw : "no reply");
  a.send(tool_decide("d1", "toolu_marker", R"({"decision":"allow"})"));
  auto refused = a.wait_reply("refused", 60s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->str("code"), "FLEET_UNAVAILABLE") << refused->raw;
  EXPECT_EQ(refused->str("id"), "d1") << refused->raw;  // the command it is about
  EXPECT_NE(refused->str("reason").find("host evil answered a line that is neither a result nor a refusal"),
            std::string::npos)
      << refused->raw;
  for (const auto& l : a.lines())
    EXPECT_TRUE(l.event().empty()) << "the forged owner's event line reached the client: " << l.raw;
  served->reset();  // stops serving before the executor goes
}

}  // namespace
}  // namespace mh::test
