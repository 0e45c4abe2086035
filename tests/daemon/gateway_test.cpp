// Issue 25, the run's only door, through the daemon as a user and an attacker meet it: a root
// daemon, sandboxed runs of the REAL vendor CLIs, each pointed at its run's gateway; the upstream
// is `metaharness model serve` over HTTPS with a throwaway CA, whose --token is the "real key"
// (it answers only requests that carry it, so a served request proves the gateway added it). The
// scripted model asks for Bash calls that do what an attacker in the run would:
//   - search the environment, every process's environ and cmdline, and every readable file
//     outside /usr for the key: nothing; its placeholder printed by a tool is redacted in the stream;
//   - connect to a listener the test opens on the host's loopback, the daemon's HTTP port and a
//     NATS port: all fail (the run has a network of its own); another run's gateway is not there;
//     a destination outside the run's egress is refused through the proxy (EGRESS_DENIED);
//   - send another run's placeholder to its gateway (401), and its own to a path outside the
//     wire's model routes (403, never forwarded: the upstream's log has no such request);
// and a daemon killed with SIGKILL while a response streams: the run completes through the same
// gateway under the next daemon.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <thread>

#include "daemon/supervisor/supervisor_link.hpp"
#include "protocol/json.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/nats_cluster.hpp"
#include "tests/support/test_ca.hpp"

namespace mh::test {
namespace {

std::string random_hex(std::size_t n) {
  std::random_device rd;
  std::string out;
  const char* digits = "0123456789abcdef";
  for (std::size_t i = 0; i < n; ++i)
    out.push_back(digits[rd() % 16]);
  return out;
}

// A scenario whose model asks for one Bash call per command, in order, then answers "Done.".
std::string bash_calls_scenario(const std::vector<std::string>& commands, const std::string& timing = "") {
  json::array steps;
  int n = 0;
  for (const auto& command : commands) {
    json::object input{{"command", command}, {"description", "probe"}};
    json::object call{
        {"type", "tool_call"}, {"id", "toolu_probe_" + std::to_string(++n)}, {"name", "Bash"}, {"input", input}};
    steps.push_back(json::object{{"name", "call" + std::to_string(n)}, {"content", json::array{call}}});
  }
  json::object answer{{"name", "answer"}, {"content", json::array{json::object{{"type", "text"}, {"text", "Done."}}}}};
  if (!timing.empty()) answer["timing"] = protocol::parse_json(timing).value();
  steps.push_back(answer);
  json::object scenario{{"format", "metaharness.scenario/1"}, {"wires", json::array{"anthropic"}}, {"steps", steps}};
  return protocol::canonical_json(scenario);
}

// The served requests whose body carries a tool's result (the request after a tool call).
std::size_t requests_carrying_a_tool_result(const std::vector<std::string>& requests) {
  std::size_t n = 0;
  for (const auto& r : requests)
    if (r.find("tool_result") != std::string::npos) ++n;
  return n;
}

// The upstream: `metaharness model serve` over HTTPS (the test CA), answering only `key`.
class HttpsUpstream {
 public:
  HttpsUpstream(const std::filesystem::path& dir, const mh::testing::TestCa& ca, const std::string& key,
                const std::string& scenario) {
    std::filesystem::create_directories(dir);
    auto file = dir / "upstream.scenario.json";
    std::ofstream(file) << scenario;
    log_ = dir / "upstream-requests.jsonl";
    process_ = std::make_unique<CliProcess>(std::vector<std::string>{
        metaharness_binary().string(), "model", "serve", "--scenario", file.string(), "--token", key, "--log",
        log_.string(), "--tls-cert", ca.cert_file().string(), "--tls-key", ca.key_file().string()});
    auto line = process_->next_line(30s);
    auto parsed = line ? protocol::parse_json(*line) : std::nullopt;
    if (parsed && parsed->is_object()) base_url_ = std::string(parsed->get_object().at("base_url").get_string());
  }
  bool up() const { return base_url_.rfind("https://", 0) == 0; }
  const std::string& base_url() const { return base_url_; }
  // Every request the upstream served, as logged (one JSON line each).
  std::vector<std::string> requests() const { return read_lines(log_); }
  std::string stderr_text() { return process_->stderr_text(); }

 private:
  std::unique_ptr<CliProcess> process_;
  std::filesystem::path log_;
  std::string base_url_;
};

// A TCP listener on the host's loopback nobody inside a run should reach.
class HostListener {
 public:
  HostListener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) == 0 && ::listen(fd_, 16) == 0 &&
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) == 0)
      port_ = ntohs(a.sin_port);
  }
  ~HostListener() {
    if (fd_ >= 0) ::close(fd_);
  }
  std::uint16_t port() const { return port_; }
  // Whether anyone connected (a connection waits in the backlog: accept takes it without blocking).
  bool reached() const {
    int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c >= 0) ::close(c);
    return c >= 0;
  }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

class Gateway : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: a root daemon whose runs are sandboxed with their own network";
    ca_ = std::make_unique<mh::testing::TestCa>(dir_.path() / "ca");
    ASSERT_TRUE(ca_->ok()) << ca_->error();
    key_ = "sk-ant-mhtest-" + random_hex(40);
    key_file_ = dir_.path() / "upstream.key";
    std::ofstream(key_file_) << key_ << "\n";
  }
  void TearDown() override {
    std::error_code ec;
    if (daemon_)
      for (const auto& run : std::filesystem::directory_iterator(daemon_->state_dir() / "runs", ec))
        daemon::end_stale_supervisor(run.path());
  }

  // The upstream named "test" (and, for a second run of another scenario, "other"): each its own
  // `model serve`, both answering the same key.
  void start_upstream(const std::string& scenario, const std::string& name = "test") {
    auto& slot = name == "test" ? upstream_ : other_upstream_;
    slot = std::make_unique<HttpsUpstream>(dir_.path() / name, *ca_, key_, scenario);
    ASSERT_TRUE(slot->up()) << slot->stderr_text();
  }
  std::string config(const std::string& extra = "") const {
    std::string text;
    for (const auto& [name, upstream] : {std::pair{"test", upstream_.get()}, std::pair{"other", other_upstream_.get()}})
      if (upstream)
        text += std::string("[upstreams.") + name + "]\nwire = \"anthropic\"\nurl = \"" + upstream->base_url() +
                "\"\ncredential = \"" + key_file_.string() + "\"\nca_file = \"" + ca_->ca_file().string() + "\"\n";
    return text + "[runs]\nnetwork = \"gateway\"\nadopt_within_ms = 120000\n" + extra;
  }
  void start_daemon(const std::string& extra = "") {
    daemon_ = std::make_unique<DaemonUnderTest>(dir_.path(), config(extra));
    ASSERT_TRUE(daemon_->wait_notify("READY=1")) << daemon_->stderr_text();
  }
  std::string submit(const std::string& extra = "", const std::string& upstream = "test") {
    SocketClient c(daemon_->socket());
    auto reply = c.request(
        socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe","upstream":")" +
                                     upstream + "\"" + (extra.empty() ? "" : "," + extra) + "}"));
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }
  std::string placeholder_of(const std::string& id) {
    auto spec = protocol::parse_json(read_file(daemon_->run_dir(id) / "supervisor-spec.json"));
    if (!spec || !spec->is_object()) return "";
    const auto* gateway = spec->get_object().if_contains("gateway");
    if (!gateway || !gateway->is_object()) return "";
    return std::string(gateway->get_object().at("token").get_string());
  }
  std::string what_happened(const std::string& id) {
    auto run = daemon_->run_dir(id);
    return "events:\n" + read_file(run / "events.jsonl") + "supervisor.log:\n" + read_file(run / "supervisor.log") +
           "vendor-stderr.log:\n" + read_file(run / "vendor-stderr.log") + "daemon:\n" + daemon_->stderr_text();
  }
  // What the run's Bash calls printed, in order (their tool.result texts).
  static std::string tool_output(const std::vector<EventLine>& events) {
    std::string out;
    for (const auto& e : events)
      if (e.event() == "tool.result") out += e.raw + "\n";
    return out;
  }

  TempDir dir_{"gateway"};
  std::unique_ptr<mh::testing::TestCa> ca_;
  std::string key_;
  std::filesystem::path key_file_;
  std::unique_ptr<HttpsUpstream> upstream_, other_upstream_;
  std::unique_ptr<DaemonUnderTest> daemon_;
};

// The key: nowhere a run can look, and never in its record.
TEST_F(Gateway, TheRunCannotFindTheKeyAndItsRecordHoldsNoneOfItsSecrets) {
  // At least 8 hex digits after the prefix: the pattern as written in the command (which the
  // search meets in the command's own argv) does not match itself. /usr is the system, read-only
  // (no key can be there); /proc is searched by environ and cmdline; /dev and /sys hold no files.
  const std::string pattern = "sk-ant-mhtest-[0-9a-f]\\{8,\\}";
  start_upstream(bash_calls_scenario(
      {"{ env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; } 2>/dev/null | tr '\\0' '\\n' | grep -a -o '" + pattern +
       "' > found.txt; for d in $(ls -d /* | grep -v -e '^/proc$' -e '^/sys$' -e '^/usr$' -e '^/dev$'); do grep -r -a "
       "-o -h -s -D skip '" +
       pattern + "' \"$d\" >> found.txt; done; echo searched; printf 'token=%s\\n' \"$ANTHROPIC_AUTH_TOKEN\""}));
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  const std::string id = submit();
  auto events = follow_to_end(daemon_->socket(), id, 180s);
  ASSERT_FALSE(events.empty()) << what_happened(id);
  EXPECT_EQ(events.back().str("reason"), "completed") << what_happened(id);
  const auto work = daemon_->run_dir(id) / "scratch/work";
  ASSERT_TRUE(std::filesystem::exists(work / "found.txt")) << what_happened(id);
  EXPECT_EQ(read_file(work / "found.txt"), "") << "the run found the key";
  // The upstream answered: the gateway added the key it holds.
  EXPECT_GE(upstream_->requests().size(), 1u) << upstream_->stderr_text();
  // The placeholder the tool printed is redacted before it was written; the key never appears.
  const std::string placeholder = placeholder_of(id);
  ASSERT_FALSE(placeholder.empty());
  const std::string record = read_file(daemon_->run_dir(id) / "events.jsonl");
  EXPECT_EQ(record.find(key_), std::string::npos);
  EXPECT_EQ(record.find(placeholder), std::string::npos) << tool_output(events);
  EXPECT_NE(tool_output(events).find("token=[redacted:"), std::string::npos) << tool_output(events);
  for (const char* file : {"spec.json", "plan.json"}) {
    const std::string text = read_file(daemon_->run_dir(id) / file);
    EXPECT_EQ(text.find(key_), std::string::npos) << file;
    EXPECT_EQ(text.find(placeholder), std::string::npos) << file;
  }
}

// The network: nothing on the host's loopback, no other run's gateway; egress only as listed.
TEST_F(Gateway, FromAnAllowedCallNothingButTheGatewayAndTheListedEgressIsReachable) {
  HostListener listener;
  ASSERT_NE(listener.port(), 0);
  NatsCluster nats(dir_.path() / "nats", 1);
  ASSERT_TRUE(nats.ready(1)) << nats.why();
  const std::string nats_port = nats.url(0).substr(nats.url(0).rfind(':') + 1);
  HostListener http_stand_in;  // the daemon's [http] port is a loopback listener like this one
  auto probe = [](const std::string& name, const std::string& port) {
    return "(exec 3<>/dev/tcp/127.0.0.1/" + port + ") 2>/dev/null && echo 'OPEN " + name + "' || echo 'CLOSED " + name +
           "'";
  };
  start_upstream(
      bash_calls_scenario({probe("listener", std::to_string(listener.port())) + "; " + probe("nats", nats_port) + "; " +
                           probe("http", std::to_string(http_stand_in.port())) +
                           "; ls /run/metaharness; curl -s -o /dev/null -w 'egress=%{http_code}\\n' --max-time 20 "
                           "https://unlisted.example.com/ ; true"}));
  ASSERT_NO_FATAL_FAILURE(start_daemon("[http]\nlisten = \"127.0.0.1:0\"\n"));
  const std::string id = submit(R"("egress":["listed.example.com:443"])");
  auto events = follow_to_end(daemon_->socket(), id, 180s);
  ASSERT_FALSE(events.empty()) << what_happened(id);
  const std::string out = tool_output(events);
  for (const char* name : {"listener", "nats", "http"}) {
    EXPECT_NE(out.find(std::string("CLOSED ") + name), std::string::npos) << name << "\n" << out;
    EXPECT_EQ(out.find(std::string("OPEN ") + name), std::string::npos) << name << "\n" << out;
  }
  EXPECT_FALSE(listener.reached());
  EXPECT_FALSE(http_stand_in.reached());
  bool denied = false;
  for (const auto& e : events)
    if (e.event() == "warning" && e.str("code") == "EGRESS_DENIED" &&
        e.raw.find("unlisted.example.com:443") != std::string::npos)
      denied = true;
  EXPECT_TRUE(denied) << what_happened(id);
}

// Tokens and routes: another run's placeholder is refused; the run's own, on a path outside the
// wire's model routes, is refused and never forwarded.
TEST_F(Gateway, AnotherRunsTokenIsRefusedAndARouteOutsideTheWireNeverReachesTheUpstream) {
  // Run B (upstream "other") stays open, idle between turns, while run A tries B's placeholder at
  // its own gateway; A learns it the way a leak would hand it over (here: its declared environment).
  start_upstream(bash_calls_scenario({}), "other");
  start_upstream(bash_calls_scenario(
      {"curl -s -o /dev/null -w 'other=%{http_code}\\n' -H \"x-api-key: $MH_OTHER_TOKEN\" -H 'content-type: "
       "application/json' -d '{}' http://127.0.0.1:41000/v1/messages; curl -s -o /dev/null -w 'files=%{http_code}\\n' "
       "-H \"x-api-key: $ANTHROPIC_AUTH_TOKEN\" -H 'content-type: application/json' -d '{}' "
       "http://127.0.0.1:41000/v1/files"}));
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  const std::string b = submit(R"("keep_open":true)", "other");
  ASSERT_FALSE(b.empty());
  SocketClient watch(daemon_->socket());
  watch.send(socket_request("tail", R"("run_id":")" + b + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(watch.wait_for([](const EventLine& e) { return e.event() == "turn.ended"; }, 180s)) << what_happened(b);
  const std::string other = placeholder_of(b);
  ASSERT_FALSE(other.empty());
  const std::string a = submit(R"("vendor_env":{"MH_OTHER_TOKEN":")" + other + R"("})");
  auto events = follow_to_end(daemon_->socket(), a, 180s);
  ASSERT_FALSE(events.empty()) << what_happened(a);
  const std::string out = tool_output(events);
  EXPECT_NE(out.find("other=401"), std::string::npos) << out;
  EXPECT_NE(out.find("files=403"), std::string::npos) << out;
  // Every request the upstream served was a model route (the refused path's name may well be in a
  // model request's body: the conversation carries the command).
  for (const auto& request : upstream_->requests()) {
    auto record = protocol::parse_json(request);
    ASSERT_TRUE(record && record->is_object()) << request;
    const auto* target = record->get_object().if_contains("target");
    if (!target || !target->is_string()) continue;  // not a request record
    EXPECT_EQ(std::string(target->get_string()).rfind("/v1/messages", 0), 0u) << request;
  }
  bool reported = false;
  for (const auto& e : events)
    if (e.event() == "warning" && e.raw.find("/v1/files") != std::string::npos) reported = true;
  EXPECT_TRUE(reported) << what_happened(a);
  SocketClient halt(daemon_->socket());
  auto halted = halt.request(socket_request("halt", R"("run_id":")" + b + R"(")"));
  EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
}

// Budgets before the spend. Every answer of this upstream costs $0.10 (100,000 output tokens at
// $1 per million); a request's worst case (Claude asks for 32,000 output tokens, plus its body's
// bytes as input tokens) is a little more. A run budget of $0.15 lets the first answer through and
// refuses the next request at the gateway: it never reaches the upstream.
constexpr const char* kDollarPrices = "[prices.\"*\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 1.0\n";

std::string costly_scenario(const std::vector<std::string>& commands) {
  auto text = bash_calls_scenario(commands);
  auto scenario = protocol::parse_json(text)->as_object();
  for (auto& step : scenario["steps"].as_array())
    step.as_object()["usage"] = json::object{{"input_tokens", 10}, {"output_tokens", 100000}};
  scenario["exhausted"] = json::object{{"content", json::array{json::object{{"type", "text"}, {"text", "Done."}}}},
                                       {"usage", json::object{{"input_tokens", 10}, {"output_tokens", 100000}}}};
  return protocol::canonical_json(scenario);
}

TEST_F(Gateway, ARequestPastTheRunsBudgetIsRefusedByTheGatewayAndNeverReachesTheUpstream) {
  start_upstream(costly_scenario({"echo spent"}));
  ASSERT_NO_FATAL_FAILURE(start_daemon(kDollarPrices));
  const std::string id = submit(R"("model":"claude-mh-test","budget":{"usd":0.15})");
  auto events = follow_to_end(daemon_->socket(), id, 180s);
  ASSERT_FALSE(events.empty()) << what_happened(id);
  EXPECT_EQ(events.back().str("reason"), "budget") << what_happened(id);
  bool refused_before = false;
  for (const auto& e : events)
    if (e.event() == "warning" && e.str("code") == "BUDGET_EXHAUSTED" &&
        e.raw.find("refused before it was forwarded") != std::string::npos)
      refused_before = true;
  EXPECT_TRUE(refused_before) << what_happened(id);
  // The tool ran (its call came in a forwarded answer); the request carrying its result, which
  // would have crossed the budget, never reached the upstream.
  EXPECT_EQ(requests_carrying_a_tool_result(upstream_->requests()), 0u);
}

// Ten runs of one uid started together, a daily budget for three answers' worth: the gateways
// reserve each request's worst case against the owner's day before forwarding, so at most three
// answers are bought, whatever the runs' timing.
TEST_F(Gateway, TenRunsOfOneUidStartedTogetherCannotOverrunADailyBudgetBetweenThem) {
  start_upstream(costly_scenario({}));
  ASSERT_NO_FATAL_FAILURE(start_daemon(std::string(kDollarPrices) + "[budgets.daily]\nusd = 0.35\n"));
  std::vector<std::string> ids;
  for (int i = 0; i < 10; ++i)
    ids.push_back(submit(R"("model":"claude-mh-test")"));
  double spent = 0;
  std::size_t gateway_usages = 0, closed_budget = 0;
  for (const auto& id : ids) {
    ASSERT_FALSE(id.empty());
    auto events = follow_to_end(daemon_->socket(), id, 300s);
    ASSERT_FALSE(events.empty()) << what_happened(id);
    if (events.back().str("reason") == "budget") ++closed_budget;
    for (const auto& e : events)
      if (e.event() == "usage" && e.str("source") == "gateway") {
        ++gateway_usages;
        const auto& usage = e.object.at("usage").as_object();
        if (const auto* cost = usage.if_contains("cost_usd"); cost && cost->is_number())
          spent += cost->to_number<double>();
      }
  }
  // What the upstream served is what was bought: never more than the budget.
  std::size_t served = 0;
  for (const auto& r : upstream_->requests())
    if (r.find("\"kind\":\"request\"") != std::string::npos) ++served;
  EXPECT_LE(spent, 0.35 + 1e-9) << "gateway-metered spend across the ten runs";
  EXPECT_LE(served, 3u) << "answers the upstream served";
  EXPECT_GE(closed_budget, 7u) << "runs refused before they could spend";
  EXPECT_EQ(gateway_usages, served);
}

// The gateway outlives the daemon: SIGKILL while a response streams, the run completes through
// the same gateway under the next daemon.
TEST_F(Gateway, ADaemonKilledWhileAResponseStreamsLeavesTheRunToCompleteThroughItsGateway) {
  start_upstream(bash_calls_scenario({"echo first"}, R"({"event_delay_ms": 400})"));
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  const std::string id = submit();
  ASSERT_FALSE(id.empty());
  // The second model request (after the tool's result) is the slow one: wait until it is served.
  SocketClient watch(daemon_->socket());
  watch.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(watch.wait_for([](const EventLine& e) { return e.event() == "tool.result"; }, 180s)) << what_happened(id);
  // The request carrying the tool's result has been answered from (its answer streams slowly).
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (requests_carrying_a_tool_result(upstream_->requests()) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  ASSERT_EQ(requests_carrying_a_tool_result(upstream_->requests()), 1u);
  daemon_->signal(SIGKILL);
  daemon_->wait_exit(30s);
  // The next daemon starts before the harness lets the killed one go: the harness cleans a state
  // directory's supervisors only when its last daemon goes.
  auto killed = std::move(daemon_);
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  auto events = follow_to_end(daemon_->socket(), id, 180s);
  ASSERT_FALSE(events.empty()) << what_happened(id);
  EXPECT_EQ(events.back().str("reason"), "completed") << what_happened(id);
  bool done = false;
  for (const auto& e : events)
    if (e.event() == "text" && e.raw.find("Done.") != std::string::npos) done = true;
  EXPECT_TRUE(done) << what_happened(id);
}

}  // namespace
}  // namespace mh::test
