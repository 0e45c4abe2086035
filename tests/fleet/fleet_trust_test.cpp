// Who a fleet trusts (docs/fleet.md, Trust), against real nats-servers and real daemons: a fleet
// without NATS credentials starts only when its config names the risk, and says so; what anyone
// who reaches NATS can forge (a queued spec for uid 0 or with LD_PRELOAD in its vendor_env, a
// routed command claiming uid 0) is refused by the host it reaches, as an attacker inside a run
// would send it (straight to NATS, no daemon of its own); and the nats-server authorization the
// project ships (config/nats-server-fleet.conf) lets each host do its part, and nobody else in.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <mutex>
#include <random>

#include "daemon/fleet/command_relay.hpp"
#include "daemon/fleet/fleet_link.hpp"
#include "daemon/fleet/placement.hpp"
#include "daemon/fleet/run_records.hpp"
#include "protocol/json.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/nats_cluster.hpp"

namespace mh::test {
namespace {

// A run on the stand-in harness (no model call, no real CLI): one Bash call that waits on its
// decision.
std::string standin_run_object(const std::string& more = "") {
  return R"({"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
         R"("vendor_env":{"MH_STANDIN_SCRIPT":")" +
         (std::filesystem::path(MH_TEST_STANDIN_SCRIPTS) / "bash_marker.json").string() +
         R"("},"decisions":"ask","decision_deadline_ms":600000)" + more + "}";
}

std::string vendor_standin() {
  return std::string("[vendor]\nclaude = \"") + MH_TEST_STANDIN + "\"\n[runs]\nsandbox_read_only = [\"" +
         MH_TEST_STANDIN_SCRIPTS + "\"]\n";
}

// Root (this test) as a control peer, not an admin, as a fleet needs its submitters to be.
const char* const kRootAsControl = "[access]\nroot_is_admin = false\nowner_is_admin = false\ncontrol_uids = [0]\n";

std::string random_text(std::size_t n) {
  static const char kChars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  std::random_device rd;
  std::string out;
  for (std::size_t i = 0; i < n; ++i)
    out += kChars[rd() % (sizeof kChars - 1)];
  return out;
}

// A run id as a submitter makes one, unique to this test process.
std::string forged_run_id(const std::string& tag) {
  return "20261206T000000Z-" + tag + "-" + random_text(8);
}

class FleetTrust : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = std::make_unique<TempDir>("fleet-trust"); }

  // The config of host `host` on `urls`, with `more` in [fleet] and `extra` after it.
  static std::string fleet_config(const std::string& host, const std::string& urls, const std::string& more,
                                  int replicas = 1) {
    return "[fleet]\nnats_urls = " + urls + "\nhost_id = \"" + host + "\"\nreplicas = " + std::to_string(replicas) +
           "\nlease_ttl_ms = 6000\nrequest_timeout_ms = 4000\n" + more;
  }

  // What an attacker with the NATS URL and nothing else holds: a link with no credentials.
  std::unique_ptr<fleet::FleetLink> attacker_link(const std::string& url) {
    fleet::FleetConfig c;
    c.nats_urls = {url};
    c.host_id = "evil";
    c.replicas = 1;
    auto made = fleet::FleetLink::connect(c);
    EXPECT_TRUE(made) << (made ? "" : made.error().text);
    return made ? std::move(*made) : nullptr;
  }

  // A daemon's directory under the test's.
  std::filesystem::path home(const std::string& name) const {
    auto h = dir_->path() / name;
    std::filesystem::create_directories(h);
    return h;
  }

  std::unique_ptr<TempDir> dir_;
};

TEST_F(FleetTrust, AFleetWithoutCredentialsStartsOnlyWhenItsConfigNamesTheRiskAndWarnsOfIt) {
  NatsCluster nats(dir_->path() / "nats", 1);
  ASSERT_TRUE(nats.ready(1)) << nats.why() << "\n" << nats.log(0);
  const std::string urls = "[\"" + nats.url(0) + "\"]";
  {
    // No credentials, nothing said: refused before anything is asked of NATS, naming the key.
    std::ofstream(dir_->path() / "c.toml") << fleet_config("h0", urls, "");
    CliProcess p({metaharness_binary().string(), "daemon", "--config", (dir_->path() / "c.toml").string(), "--socket",
                  (dir_->path() / "s").string(), "--state-dir", (dir_->path() / "st").string()});
    EXPECT_EQ(p.finish(60s), 2);
    EXPECT_NE(p.stderr_text().find("fleet.credentials: not set; a fleet without NATS credentials"), std::string::npos)
        << p.stderr_text();
  }
  {
    // Said, but for a server that is not on loopback: refused too.
    std::ofstream(dir_->path() / "c.toml")
        << fleet_config("h0", "[\"nats://192.0.2.1:4222\"]", "insecure_no_credentials = true\n");
    CliProcess p({metaharness_binary().string(), "daemon", "--config", (dir_->path() / "c.toml").string(), "--socket",
                  (dir_->path() / "s").string(), "--state-dir", (dir_->path() / "st").string()});
    EXPECT_EQ(p.finish(60s), 2);
    EXPECT_NE(p.stderr_text().find("fleet.insecure_no_credentials: only for NATS servers on loopback"),
              std::string::npos)
        << p.stderr_text();
  }
  // Said, on loopback: it starts, and warns of it at every start.
  for (int start = 0; start < 2; ++start) {
    DaemonUnderTest d(home("h0"), fleet_config("h0", urls, "insecure_no_credentials = true\n"));
    ASSERT_TRUE(d.wait_notify("READY=1", 90s)) << d.stderr_text();
    EXPECT_NE(d.stderr_text().find("fleet: INSECURE: fleet.insecure_no_credentials = true"), std::string::npos)
        << d.stderr_text();
  }
}

constexpr std::uint32_t kNobody = 65534;

// A queued spec as it reaches a host: the run, its owner's uid, the host it claims to come from.
std::string envelope(const std::string& run, std::uint32_t uid) {
  return R"({"run":)" + run + R"(,"uid":)" + std::to_string(uid) + R"(,"from_host":"evil"})";
}

// One host (the daemon as shipped: root is its admin) on a lone NATS server that asks nobody who
// connects, as a run that reaches NATS finds it; `forged` (run id, envelope) queued straight to
// mh.submit with the attacker's own link, then a spec that may run, for a uid that is no admin
// here. One host, one consumer, the queue in order: once that last one is placed, every spec
// before it was judged. Each forged spec must be refused: no run directory, no record. Returns
// the daemon's log.
std::string queue_forged_specs(const std::filesystem::path& dir,
                               const std::vector<std::pair<std::string, std::string>>& forged) {
  NatsCluster nats(dir / "nats", 1);
  EXPECT_TRUE(nats.ready(1)) << nats.why() << "\n" << nats.log(0);
  std::filesystem::create_directories(dir / "h0");
  DaemonUnderTest d(dir / "h0", vendor_standin() + "[fleet]\nnats_urls = [\"" + nats.url(0) +
                                    "\"]\nhost_id = \"h0\"\nreplicas = 1\ninsecure_no_credentials = true\n");
  EXPECT_TRUE(d.wait_notify("READY=1", 90s)) << d.stderr_text();
  fleet::FleetConfig c;
  c.nats_urls = {nats.url(0)};
  c.host_id = "evil";
  c.replicas = 1;
  auto evil = fleet::FleetLink::connect(c);
  EXPECT_TRUE(evil) << (evil ? "" : evil.error().text);
  if (!evil) return "";
  for (const auto& [id, body] : forged)
    EXPECT_TRUE(fleet::submit_spec(**evil, id, body)) << id;
  const std::string fine = forged_run_id("fine");
  EXPECT_TRUE(fleet::submit_spec(**evil, fine, envelope(standin_run_object(), kNobody)));
  auto placed = fleet::await_run_record(**evil, fine, 60s);
  EXPECT_TRUE(placed && *placed) << d.stderr_text();
  EXPECT_TRUE(std::filesystem::exists(d.run_dir(fine)));
  for (const auto& [id, body] : forged) {
    EXPECT_FALSE(std::filesystem::exists(d.run_dir(id))) << id << " was placed\n" << d.stderr_text();
    auto record = fleet::read_run_record(**evil, id);
    EXPECT_TRUE(record && !*record) << id << " has a record: it was placed";
  }
  // The run that was placed belongs to the uid it was queued for, and is halted (root, admin here).
  SocketClient client(d.socket());
  auto got = client.request(socket_request("get", R"("run_id":")" + fine + "\""));
  EXPECT_TRUE(got && got->object.contains("owner_uid") &&
              got->object.at("owner_uid").to_number<std::int64_t>() == kNobody)
      << (got ? got->raw : "no reply");
  auto halted = client.request(socket_request("halt", R"("run_id":")" + fine + "\""), 60s);
  EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
  return d.stderr_text();
}

// The line of `log` that starts with `start` ("" when none does).
std::string line_from(const std::string& log, const std::string& start) {
  auto at = log.find(start);
  return at == std::string::npos ? std::string() : log.substr(at, log.find('\n', at) - at);
}

TEST_F(FleetTrust, AForgedSpecOnTheQueueIsCheckedAsALocalSubmitAndNeverOwnedByAnAdmin) {
  // A spec for uid 0 (root, the admin here) is refused before any record is made; a spec whose
  // cwd is outside the host's roots is refused as a control peer's local submit would be (a cwd
  // its uid may enter, read and write, /tmp, so what refuses it is the roots, not the uid's reach).
  // A cwd its uid cannot reach (/root, for nobody) is refused FORBIDDEN: the placing host judges
  // it as the submitter's uid with that user's groups here, never as root or gid 0.
  const std::string as_root = forged_run_id("root"), outside = forged_run_id("cwd"),
                    unreachable = forged_run_id("reach");
  const std::string log =
      queue_forged_specs(dir_->path(), {{as_root, envelope(standin_run_object(), 0)},
                                        {outside, envelope(standin_run_object(R"(,"cwd":"/tmp")"), kNobody)},
                                        {unreachable, envelope(standin_run_object(R"(,"cwd":"/root")"), kNobody)}});
  EXPECT_NE(line_from(log, "fleet: refused a queued spec (run " + as_root + ", from host evil): ")
                .find("uid 0 is an admin on this host; a peer host is trusted as a control peer at most"),
            std::string::npos)
      << log;
  EXPECT_NE(line_from(log, "fleet: run " + outside + " (from host evil) refused here: ").find("CWD_OUTSIDE_ROOTS"),
            std::string::npos)
      << log;
  if (::geteuid() == 0) {  // the check is a root daemon's
    EXPECT_NE(line_from(log, "fleet: run " + unreachable + " (from host evil) refused here: ").find("FORBIDDEN"),
              std::string::npos)
        << log;
  }
}

TEST_F(FleetTrust, AQueuedSpecWhoseVendorEnvPreloadsALibraryIsRefusedByThePlacingHost) {
  // The attack of issue 24: a run compiles a library in its cwd and queues a spec naming it in
  // LD_PRELOAD. The placing host checks the spec as a local submit (submit_run → checked_spec),
  // where the variables that load code are refused (item 1's denylist, adapters/plan_common).
  const std::filesystem::path library = dir_->path() / "inject.so";
  std::ofstream(library) << "not even a library: it must never be named to a loader";
  const std::string preload = forged_run_id("preload");
  const std::string spec = R"({"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
                           R"("vendor_env":{"LD_PRELOAD":")" +
                           library.string() + R"("},"decisions":"ask"})";
  const std::string log = queue_forged_specs(dir_->path(), {{preload, envelope(spec, kNobody)}});
  EXPECT_NE(line_from(log, "fleet: run " + preload + " (from host evil) refused here: ").find("LD_PRELOAD"),
            std::string::npos)
      << log;
}

TEST_F(FleetTrust, ACommandRoutedFromAPeerHostForAnAdminsUidIsRefusedAndDecidesNothing) {
  // root's own run on h0, waiting on its decision; what reaches mh.cmd.h0 from NATS claiming
  // uid 0 (an allow, a halt, an attached line) is refused, and the run still waits.
  NatsCluster nats(dir_->path() / "nats", 1);
  ASSERT_TRUE(nats.ready(1)) << nats.why() << "\n" << nats.log(0);
  DaemonUnderTest d(home("h0"), vendor_standin() + fleet_config("h0", "[\"" + nats.url(0) + "\"]",
                                                                "insecure_no_credentials = true\n"));
  ASSERT_TRUE(d.wait_notify("READY=1", 90s)) << d.stderr_text();
  SocketClient c(d.socket());
  auto submitted = c.request(socket_request("submit", R"("run":)" + standin_run_object()), 60s);
  ASSERT_TRUE(submitted && submitted->str("reply") == "submitted") << (submitted ? submitted->raw : "no reply");
  const std::string run = submitted->str("run_id");
  SocketClient watch(d.socket());
  watch.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(watch.wait_event("tool.requested", 120s)) << d.stderr_text();
  auto evil = attacker_link(nats.url(0));
  ASSERT_TRUE(evil);
  const std::string subject = evil->names().command_subject("h0");
  const std::string allow = R"({"format":"metaharness.command/1","id":"forged","command":"tool.decide",)"
                            R"("call_id":"toolu_marker","decision":"allow"})";
  const std::string forged[] = {
      R"({"kind":"command","run_id":")" + run + R"(","request":{"command":)" + allow +
          R"(},"id":"x","uid":0,"pid":1,"from_host":"evil"})",
      R"({"kind":"halt","run_id":")" + run + R"(","request":{},"id":"y","uid":0,"pid":1,"from_host":"evil"})",
      R"({"kind":"line","run_id":")" + run + R"(","line":)" +
          protocol::canonical_json(boost::json::value(boost::json::string(allow))) +
          R"(,"uid":0,"pid":1,"from_host":"evil"})",
  };
  for (const auto& body : forged) {
    auto answer = fleet::relay_request(*evil, subject, body, 30s);
    ASSERT_TRUE(answer) << answer.error().text;
    auto line = to_event_line(*answer);
    EXPECT_EQ(line.str("reply"), "refused") << *answer;
    EXPECT_EQ(line.str("code"), "FORBIDDEN") << *answer;
    EXPECT_NE(line.str("reason").find("uid 0 is an admin on this host"), std::string::npos) << *answer;
  }
  // Nothing was decided or halted: the call still waits, and the run's own peer decides it.
  EXPECT_EQ(read_file(d.run_dir(run) / "events.jsonl").find("\"tool.decided\""), std::string::npos);
  EXPECT_EQ(read_file(d.run_dir(run) / "events.jsonl").find("\"stream.closed\""), std::string::npos);
  c.send(socket_request("command", R"("run_id":")" + run + R"(","command":)" +
                                       tool_decide("real", "toolu_marker", R"({"decision":"allow"})")));
  auto decided = watch.wait_event("tool.decided", 60s);
  ASSERT_TRUE(decided) << d.stderr_text();
  EXPECT_EQ(watch.events_named("tool.decided").size(), 1u);
  auto halted = c.request(socket_request("halt", R"("run_id":")" + run + "\""), 60s);
  EXPECT_TRUE(halted) << "no reply";
}

// The nats-server authorization the project ships, its passwords replaced.
std::string shipped_authorization(const std::map<std::string, std::string>& passwords) {
  std::string text = read_file(source_dir() / "config/nats-server-fleet.conf");
  for (const auto& [host, password] : passwords) {
    const std::string placeholder = "REPLACE-" + host + "-password";
    auto at = text.find(placeholder);
    EXPECT_NE(at, std::string::npos) << placeholder;
    if (at != std::string::npos) text.replace(at, placeholder.size(), password);
  }
  return text;
}

// A raw connection as `user`, recording every asynchronous error the server sends it (a
// permissions violation comes that way).
struct RawClient {
  std::mutex mutex;
  std::vector<std::string> errors;
  natsConnection* nc = nullptr;
  natsStatus status = NATS_OK;

  RawClient(const std::string& url, const std::string& user, const std::string& password) {
    natsOptions* opts = nullptr;
    status = natsOptions_Create(&opts);
    if (status == NATS_OK) status = natsOptions_SetURL(opts, url.c_str());
    if (status == NATS_OK && !user.empty()) status = natsOptions_SetUserInfo(opts, user.c_str(), password.c_str());
    if (status == NATS_OK)
      status = natsOptions_SetErrorHandler(
          opts,
          [](natsConnection* nc, natsSubscription*, natsStatus, void* self) {
            const char* text = nullptr;
            natsConnection_GetLastError(nc, &text);
            auto* me = static_cast<RawClient*>(self);
            std::lock_guard lock(me->mutex);
            me->errors.push_back(text ? text : "");
          },
          this);
    if (status == NATS_OK) status = natsConnection_Connect(&nc, opts);
    natsOptions_Destroy(opts);
  }
  ~RawClient() {
    if (nc) natsConnection_Destroy(nc);
  }
  std::string all() {
    std::lock_guard lock(mutex);
    std::string out;
    for (const auto& e : errors)
      out += e + "\n";
    return out;
  }
  bool told(const std::string& what) {
    std::lock_guard lock(mutex);
    for (const auto& e : errors)
      if (e.find(what) != std::string::npos) return true;
    return false;
  }
};

// What a node's route port answers a connection that claims to be a route with no credentials
// (INFO first, then CONNECT and PING): its error line, or "" when it said none within 10 s.
std::string route_answer(std::uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return "";
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  timeval wait{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return "";
  const std::string hello = "CONNECT {\"verbose\":false,\"pedantic\":false,\"name\":\"rogue\"}\r\nPING\r\n";
  if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) return "";
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) {
    got.append(buf, static_cast<std::size_t>(n));
    if (auto err = got.find("-ERR"); err != std::string::npos && got.find('\n', err) != std::string::npos)
      return got.substr(err, got.find('\n', err) - err);
  }
  return "";
}

TEST_F(FleetTrust, TheShippedNatsServerConfigLetsEachHostDoItsPartAndNobodyElseIn) {
  const std::map<std::string, std::string> passwords = {
      {"h0", random_text(24)}, {"h1", random_text(24)}, {"h2", random_text(24)}};
  NatsUsers users;
  users.authorization = shipped_authorization(passwords);
  users.user = "h2";  // the cluster helper's own probe logs in as a host
  users.password = passwords.at("h2");
  users.route_user = "route";  // the routes ask who connects, as docs/fleet.md's cluster block
  users.route_password = random_text(24);
  NatsCluster nats(dir_->path() / "nats", 3, users);
  ASSERT_TRUE(nats.ready(3)) << nats.why() << "\n" << nats.log(0);
  std::map<int, std::unique_ptr<DaemonUnderTest>> daemons;
  for (int i = 0; i < 2; ++i) {
    // Each on its own node: what one host sends reaches the other across the authorized routes.
    const std::string host = "h" + std::to_string(i);
    const auto creds = dir_->path() / (host + ".creds");
    std::ofstream(creds) << host << ":" << passwords.at(host) << "\n";
    std::filesystem::permissions(creds, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    daemons[i] = std::make_unique<DaemonUnderTest>(
        home(host), vendor_standin() + kRootAsControl +
                        fleet_config(host, "[\"" + nats.url(i) + "\"]",
                                     "prefix = \"mh\"\ncredentials = \"" + creds.string() + "\"\n", 3));
    ASSERT_TRUE(daemons[i]->wait_notify("READY=1", 90s)) << daemons[i]->stderr_text() << nats.log(i);
    EXPECT_EQ(daemons[i]->stderr_text().find("INSECURE"), std::string::npos);
  }
  // Each host does its part with its own user: a spec queued on h0 is placed, read and halted
  // from the host that does not own it (its stream from the fleet to stream.closed).
  SocketClient c0(daemons[0]->socket());
  auto submitted = c0.request(socket_request("submit", R"("run":)" + standin_run_object() + R"(,"fleet":true)"), 60s);
  ASSERT_TRUE(submitted && submitted->str("placement") == "placed")
      << (submitted ? submitted->raw : "no reply") << daemons[0]->stderr_text() << nats.log(0);
  const std::string run = submitted->str("run_id");
  const int owner = submitted->str("host") == "h0" ? 0 : 1, other = 1 - owner;
  SocketClient reader(daemons[other]->socket());
  reader.send(socket_request("tail", R"("run_id":")" + run + R"(","from_seq":1,"follow":true,"fleet":true)"));
  ASSERT_TRUE(reader.wait_event("tool.requested", 120s)) << daemons[other]->stderr_text() << nats.log(0);
  SocketClient c(daemons[other]->socket());
  auto halted = c.request(socket_request("halt", R"("run_id":")" + run + "\""), 60s);
  ASSERT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply") << nats.log(0);
  ASSERT_TRUE(reader.wait_event("stream.closed", 120s)) << daemons[other]->stderr_text() << nats.log(0);
  // None of it was refused by the server (the cluster helper's probe deletes its test stream,
  // which no host may: that refusal is the only one).
  for (int n = 0; n < 3; ++n)
    for (const auto& l : read_lines(dir_->path() / "nats" / ("n" + std::to_string(n)) / "nats.log"))
      EXPECT_TRUE(l.find("Violation") == std::string::npos || l.find("MH_TEST_READY") != std::string::npos) << l;
  // Nobody else gets in: no credentials, a wrong password.
  RawClient nobody(nats.url(0), "", "");
  EXPECT_EQ(nobody.status, NATS_CONNECTION_AUTH_FAILED);
  RawClient wrong(nats.url(0), "h1", passwords.at("h0"));
  EXPECT_EQ(wrong.status, NATS_CONNECTION_AUTH_FAILED);
  // Nor through a route port, with no route credentials.
  EXPECT_NE(route_answer(nats.route_port(0)).find("Authorization Violation"), std::string::npos);
  // And a host only as itself: h1 may not take h0's commands nor renew h0's lease.
  RawClient h1(nats.url(0), "h1", passwords.at("h1"));
  ASSERT_EQ(h1.status, NATS_OK);
  // One at a time: the library keeps only the connection's last error text.
  natsSubscription* sub = nullptr;
  (void)natsConnection_SubscribeSync(&sub, h1.nc, "mh.cmd.h0");
  (void)natsConnection_Flush(h1.nc);
  EXPECT_TRUE(eventually([&] { return h1.told("Subscription to \"mh.cmd.h0\""); }, 10s)) << h1.all();
  (void)natsConnection_PublishString(h1.nc, "$KV.mh_hosts.h0", "{}");
  (void)natsConnection_Flush(h1.nc);
  EXPECT_TRUE(eventually([&] { return h1.told("Publish to \"$KV.mh_hosts.h0\""); }, 10s)) << h1.all();
  if (sub) natsSubscription_Destroy(sub);
}

}  // namespace
}  // namespace mh::test
