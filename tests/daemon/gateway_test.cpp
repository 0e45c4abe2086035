// Issue 25, the run's only door, through the daemon as a user and an attacker meet it: a root
// daemon, sandboxed runs of the REAL vendor CLIs, each pointed at its run's gateway; the upstream
// is `metaharness model serve` over HTTPS with a throwaway CA, whose --token is the "real key"
// (it answers only requests that carry it, so a served request proves the gateway added it). The
// scripted model asks for shell calls that do what an attacker in the run would, and the attacks
// are made from a run of each vendor (Claude Code, Codex, opencode: GatewayAttack/<vendor>):
//   - search the environment, every process's environ and cmdline, and every readable file
//     outside /usr for the key: nothing; the vendor's placeholder, printed by a tool, is redacted
//     in the stream, and no file the run directory keeps holds the key or the placeholder;
//   - connect to a listener the test opens on the host's loopback, the daemon's HTTP port, a NATS
//     port and another run's gateway: all fail (the run has a network of its own); a destination
//     in the run's egress is reached through the proxy, one outside it refused (EGRESS_DENIED);
//   - send another run's placeholder to its gateway (401), and its own to a path outside the
//     wire's model routes (403, never forwarded: the upstream's log has no such request).
// And with Claude: budgets before the spend, and a daemon killed with SIGKILL while a response
// streams (the run completes through the same gateway under the next daemon).
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <set>
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

// A vendor the attacks are made from: its adapter, the wire its upstream must speak, and how its
// model asks for a shell command and where it keeps the run's placeholder.
struct Vendor {
  std::string adapter;        // the run's adapter, and the test's name suffix
  std::string wire;           // [upstreams.X] wire
  std::string scenario_wire;  // the scenario's "wires" entry for that wire
  std::string model_route;    // the route the vendor's model requests take
  // A shell command printing the run's placeholder as the vendor holds it, where a tool of the
  // run can read it.
  std::string placeholder_source;
};

const Vendor kClaude{"claude", "anthropic", "anthropic", "/v1/messages", "printf '%s' \"$ANTHROPIC_AUTH_TOKEN\""};
// Codex keeps variables named *TOKEN* out of its tools' environment, not out of its own: a tool
// (run as the same user, in the same PID namespace) reads Codex's environ.
const Vendor kCodex{"codex", "openai-responses", "responses", "/v1/responses",
                    "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | sed -n "
                    "'s/^METAHARNESS_MODEL_TOKEN=//p' | head -n 1"};
// opencode holds it in its generated config file (OPENCODE_CONFIG, in the run's scratch).
const Vendor kOpencode{"opencode", "anthropic", "anthropic", "/v1/messages",
                       "sed -n 's/.*\"apiKey\":\"\\([^\"]*\\)\".*/\\1/p' \"$OPENCODE_CONFIG\""};

// The value as gtest prints it: ctest names each test by it (below), and a failure says which.
void PrintTo(const Vendor& vendor, std::ostream* os) {
  *os << vendor.adapter;
}

// The vendor's own shell tool call running `command`. Codex's asks to run outside Codex's own
// sandbox (require_escalated, allowed like every call of an observed run): what an attacker would
// ask, so only the run's containment stands between the command and what it looks for.
json::object shell_call(const Vendor& vendor, int n, const std::string& command) {
  if (vendor.adapter == "codex")
    return json::object{{"type", "tool_call"},
                        {"id", "call_probe_" + std::to_string(n)},
                        {"name", "exec_command"},
                        {"input", json::object{{"cmd", command},
                                               {"sandbox_permissions", "require_escalated"},
                                               {"justification", "probe the run's containment"},
                                               {"yield_time_ms", 30000},
                                               {"max_output_tokens", 20000}}}};
  return json::object{{"type", "tool_call"},
                      {"id", "toolu_probe_" + std::to_string(n)},
                      {"name", vendor.adapter == "opencode" ? "bash" : "Bash"},
                      {"input", json::object{{"command", command}, {"description", "probe"}}}};
}

// A scenario whose model asks for one shell call per command, in order, then answers "Done.";
// requests that are not the main loop (opencode's session title) get an aux answer.
std::string shell_calls_scenario(const Vendor& vendor, const std::vector<std::string>& commands,
                                 const std::string& timing = "") {
  json::array steps;
  int n = 0;
  for (const auto& command : commands) {
    ++n;
    steps.push_back(
        json::object{{"name", "call" + std::to_string(n)}, {"content", json::array{shell_call(vendor, n, command)}}});
  }
  json::object answer{{"name", "answer"}, {"content", json::array{json::object{{"type", "text"}, {"text", "Done."}}}}};
  if (!timing.empty()) answer["timing"] = protocol::parse_json(timing).value();
  steps.push_back(answer);
  json::object scenario{
      {"format", "metaharness.scenario/1"},
      {"wires", json::array{json::value(vendor.scenario_wire)}},
      {"aux", json::object{{"content", json::array{json::object{{"type", "text"}, {"text", "Scripted title"}}}}}},
      {"steps", steps}};
  return protocol::canonical_json(scenario);
}
std::string bash_calls_scenario(const std::vector<std::string>& commands, const std::string& timing = "") {
  return shell_calls_scenario(kClaude, commands, timing);
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

// A TCP listener nobody inside a run should reach (by default on the host's loopback).
class HostListener {
 public:
  explicit HostListener(in_addr_t address = htonl(INADDR_LOOPBACK)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = address;
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

 protected:
  int fd_ = -1;
  std::uint16_t port_ = 0;
};

// A listener the run may reach through its egress proxy: it answers every connection with one
// small HTTP response ("reached"), on a thread of its own, and counts them.
class EgressDestination : public HostListener {
 public:
  explicit EgressDestination(in_addr_t address) : HostListener(address), wake_(::eventfd(0, EFD_CLOEXEC)) {
    if (port_ != 0 && wake_ >= 0) thread_ = std::thread([this] { serve(); });
  }
  ~EgressDestination() {
    std::uint64_t one = 1;
    if (wake_ >= 0 && ::write(wake_, &one, sizeof one) < 0) ADD_FAILURE() << "cannot wake the destination's thread";
    if (thread_.joinable()) thread_.join();
    if (wake_ >= 0) ::close(wake_);
  }
  int served() const { return served_.load(); }

 private:
  void serve() {
    for (;;) {
      pollfd fds[2] = {{fd_, POLLIN, 0}, {wake_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0 || (fds[1].revents & POLLIN)) return;
      int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      // The request's head, then the answer; the connection is closed after it.
      std::string head;
      char buffer[1024];
      while (head.find("\r\n\r\n") == std::string::npos) {
        pollfd in{c, POLLIN, 0};
        if (::poll(&in, 1, 30000) <= 0) break;
        auto got = ::read(c, buffer, sizeof buffer);
        if (got <= 0) break;
        head.append(buffer, static_cast<std::size_t>(got));
      }
      const std::string answer = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nConnection: close\r\n\r\nreached\n";
      if (::write(c, answer.data(), answer.size()) == static_cast<ssize_t>(answer.size())) ++served_;
      ::close(c);
    }
  }
  int wake_ = -1;
  std::atomic<int> served_{0};
  std::thread thread_;
};

// The test's own network namespace (it is root): loopback up, and `local` made an address of this
// namespace by a route of type local, not by an interface. The egress proxy refuses loopback and
// the host's interface addresses; a destination at `local` is neither, and nothing leaves the
// machine. The test's thread goes back to the namespace it came from when this goes.
class OwnNetwork {
 public:
  explicit OwnNetwork(in_addr_t local) {
    original_ = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (original_ < 0 || ::unshare(CLONE_NEWNET) != 0) {
      error_ = std::string("unshare(CLONE_NEWNET): ") + std::strerror(errno);
      return;
    }
    entered_ = true;
    int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ifreq ifr{};
    std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    const bool up = s >= 0 && ::ioctl(s, SIOCGIFFLAGS, &ifr) == 0 && (ifr.ifr_flags |= IFF_UP, true) &&
                    ::ioctl(s, SIOCSIFFLAGS, &ifr) == 0;
    if (s >= 0) ::close(s);
    if (!up) {
      error_ = std::string("bringing lo up: ") + std::strerror(errno);
      return;
    }
    error_ = add_local_route(local);
  }
  ~OwnNetwork() {
    if (entered_ && ::setns(original_, CLONE_NEWNET) != 0)
      ADD_FAILURE() << "cannot go back to the test's network namespace: " << std::strerror(errno);
    if (original_ >= 0) ::close(original_);
  }
  const std::string& error() const { return error_; }

 private:
  // RTM_NEWROUTE: local `address`/32 dev lo, table local, scope host (what `ip route add local`
  // does), and its acknowledgement.
  static std::string add_local_route(in_addr_t address) {
    int nl = ::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (nl < 0) return std::string("netlink: ") + std::strerror(errno);
    struct {
      nlmsghdr header;
      rtmsg route;
      char attributes[64];
    } request{};
    request.header.nlmsg_len = NLMSG_LENGTH(sizeof(rtmsg));
    request.header.nlmsg_type = RTM_NEWROUTE;
    request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL | NLM_F_ACK;
    request.header.nlmsg_seq = 1;
    request.route.rtm_family = AF_INET;
    request.route.rtm_dst_len = 32;
    request.route.rtm_table = RT_TABLE_LOCAL;
    request.route.rtm_protocol = RTPROT_BOOT;
    request.route.rtm_scope = RT_SCOPE_HOST;
    request.route.rtm_type = RTN_LOCAL;
    auto add = [&request](unsigned short type, const void* data, std::size_t size) {
      auto* attribute =
          reinterpret_cast<rtattr*>(reinterpret_cast<char*>(&request) + NLMSG_ALIGN(request.header.nlmsg_len));
      attribute->rta_type = type;
      attribute->rta_len = static_cast<unsigned short>(RTA_LENGTH(size));
      std::memcpy(RTA_DATA(attribute), data, size);
      request.header.nlmsg_len = NLMSG_ALIGN(request.header.nlmsg_len) + RTA_ALIGN(attribute->rta_len);
    };
    const int lo = static_cast<int>(::if_nametoindex("lo"));
    add(RTA_DST, &address, sizeof address);
    add(RTA_OIF, &lo, sizeof lo);
    std::string error;
    char answer[4096];
    if (::send(nl, &request, request.header.nlmsg_len, 0) < 0) {
      error = std::string("netlink send: ") + std::strerror(errno);
    } else if (auto got = ::recv(nl, answer, sizeof answer, 0);
               got < static_cast<ssize_t>(NLMSG_LENGTH(sizeof(nlmsgerr)))) {
      error = "netlink: no acknowledgement";
    } else {
      const auto* header = reinterpret_cast<const nlmsghdr*>(answer);
      const auto* result = reinterpret_cast<const nlmsgerr*>(NLMSG_DATA(header));
      if (header->nlmsg_type != NLMSG_ERROR || result->error != 0)
        error = std::string("RTM_NEWROUTE: ") + std::strerror(-result->error);
    }
    ::close(nl);
    return error;
  }

  int original_ = -1;
  bool entered_ = false;
  std::string error_;
};

// A daemon (root, runs sandboxed with a network of their own) with the upstreams its test starts.
class GatewayDaemon : public ::testing::Test {
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
  // `model serve`, both answering the same key, each speaking `wire`.
  void start_upstream(const std::string& scenario, const std::string& name = "test",
                      const std::string& wire = "anthropic") {
    auto& slot = name == "test" ? upstream_ : other_upstream_;
    slot = std::make_unique<HttpsUpstream>(dir_.path() / name, *ca_, key_, scenario);
    ASSERT_TRUE(slot->up()) << slot->stderr_text();
    wires_[name] = wire;
  }
  std::string config(const std::string& extra = "") const {
    std::string text;
    for (const auto& [name, upstream] : {std::pair{"test", upstream_.get()}, std::pair{"other", other_upstream_.get()}})
      if (upstream)
        text += std::string("[upstreams.") + name + "]\nwire = \"" + wires_.at(name) + "\"\nurl = \"" +
                upstream->base_url() + "\"\ncredential = \"" + key_file_.string() + "\"\nca_file = \"" +
                ca_->ca_file().string() + "\"\n";
    return text + "[runs]\nnetwork = \"gateway\"\nadopt_within_ms = 120000\n" + extra;
  }
  void start_daemon(const std::string& extra = "") {
    daemon_ = std::make_unique<DaemonUnderTest>(dir_.path(), config(extra));
    ASSERT_TRUE(daemon_->wait_notify("READY=1")) << daemon_->stderr_text();
  }
  std::string submit(const std::string& extra = "", const std::string& upstream = "test",
                     const std::string& adapter = "claude") {
    SocketClient c(daemon_->socket());
    auto reply = c.request(socket_request("submit", R"("run":{"adapter":")" + adapter +
                                                        R"(","prompt":"go","decisions":"observe","upstream":")" +
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
  // What the run's shell calls printed, in order (their tool.result lines).
  static std::string tool_output(const std::vector<EventLine>& events) {
    std::string out;
    for (const auto& e : events)
      if (e.event() == "tool.result") out += e.raw + "\n";
    return out;
  }
  // Another run (Claude, on the upstream "other" with no calls) open and idle between turns, for
  // the run under test to try to reach.
  std::string open_other_run() {
    const std::string b = submit(R"("keep_open":true)", "other");
    if (b.empty()) return "";
    SocketClient watch(daemon_->socket());
    watch.send(socket_request("tail", R"("run_id":")" + b + R"(","from_seq":1,"follow":true)"));
    EXPECT_TRUE(watch.wait_for([](const EventLine& e) { return e.event() == "turn.ended"; }, 180s)) << what_happened(b);
    return b;
  }
  // No file the run directory keeps holds any of `secrets` (what, value). Its scratch is the
  // run's own (where the vendor's config may hold the placeholder); supervisor-spec.json is the
  // supervisor's, hidden from the run, and carries the token its gateway checks. The record's
  // files (and `also`) must be there, so that finding nothing means something.
  void expect_no_secret_kept(const std::string& id, const std::vector<std::pair<std::string, std::string>>& secrets,
                             const std::vector<std::string>& also = {}) {
    const auto run = daemon_->run_dir(id);
    std::set<std::string> kept;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(run)) {
      const auto relative = std::filesystem::relative(entry.path(), run);
      if (*relative.begin() == "scratch" || !entry.is_regular_file()) continue;
      if (relative == "supervisor-spec.json") continue;
      kept.insert(relative.string());
      const std::string text = read_file(entry.path());
      for (const auto& [what, value] : secrets)
        EXPECT_EQ(text.find(value), std::string::npos) << relative << " holds " << what;
    }
    std::vector<std::string> expected{"events.jsonl",      "vendor-stdout.jsonl", "vendor-stdin.jsonl",
                                      "vendor-stderr.log", "spec.json",           "plan.json"};
    if (daemon_adapter_of(id) != "claude") expected.push_back("vendor-hooks.jsonl");  // Claude's are in-band
    expected.insert(expected.end(), also.begin(), also.end());
    for (const auto& file : expected)
      EXPECT_TRUE(kept.count(file)) << file << " is not kept; kept: " << ::testing::PrintToString(kept);
  }
  std::string daemon_adapter_of(const std::string& id) {
    auto spec = protocol::parse_json(read_file(daemon_->run_dir(id) / "spec.json"));
    if (!spec || !spec->is_object()) return "";
    const auto* adapter = spec->get_object().if_contains("adapter");
    return adapter && adapter->is_string() ? std::string(adapter->get_string()) : "";
  }
  void halt(const std::string& id) {
    SocketClient c(daemon_->socket());
    auto halted = c.request(socket_request("halt", R"("run_id":")" + id + R"(")"));
    EXPECT_TRUE(halted && halted->str("reply") == "result") << (halted ? halted->raw : "no reply");
  }

  std::unique_ptr<OwnNetwork> network_;  // first: the namespace outlives everything started in it
  TempDir dir_{"gateway"};
  std::unique_ptr<mh::testing::TestCa> ca_;
  std::string key_;
  std::filesystem::path key_file_;
  std::unique_ptr<HttpsUpstream> upstream_, other_upstream_;
  std::map<std::string, std::string> wires_;
  std::unique_ptr<DaemonUnderTest> daemon_;
};

// The attacks, from a run of each vendor.
class GatewayAttack : public GatewayDaemon, public ::testing::WithParamInterface<Vendor> {
 protected:
  const Vendor& vendor() const { return GetParam(); }
  void start_vendor_upstream(const std::vector<std::string>& commands) {
    start_upstream(shell_calls_scenario(vendor(), commands), "test", vendor().wire);
  }
  std::string submit_vendor_run(const std::string& extra = "") { return submit(extra, "test", vendor().adapter); }
};

// The key: nowhere a run can look, and never in its record.
TEST_P(GatewayAttack, TheRunCannotFindTheKeyAndItsRecordHoldsNoneOfItsSecrets) {
  // At least 8 hex digits after the prefix: the pattern as written in the command (which the
  // search meets in the command's own argv) does not match itself. /usr is the system, read-only
  // (no key can be there); /proc is searched by environ and cmdline; /dev and /sys hold no files.
  // key.txt and found.txt, in the work directory, are left out of the search they are written by.
  const std::string pattern = "sk-ant-mhtest-[0-9a-f]\\{8,\\}";
  ASSERT_NO_FATAL_FAILURE(start_vendor_upstream(
      {"{ env; cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline; } 2>/dev/null | tr '\\0' '\\n' | grep -a -o '" + pattern +
       "' > found.txt; for d in $(ls -d /* | grep -v -e '^/proc$' -e '^/sys$' -e '^/usr$' -e '^/dev$'); do grep -r -a "
       "-o -h -s -D skip --exclude=found.txt '" +
       pattern + "' \"$d\" >> found.txt; done; echo searched; printf 'token=%s\\n' \"$(" + vendor().placeholder_source +
       ")\""}));
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  const std::string id = submit_vendor_run();
  ASSERT_FALSE(id.empty());
  auto events = follow_to_end(daemon_->socket(), id, 300s);
  ASSERT_FALSE(events.empty()) << what_happened(id);
  EXPECT_EQ(events.back().str("reason"), "completed") << what_happened(id);
  const auto run = daemon_->run_dir(id);
  const auto work = run / "scratch/work";
  ASSERT_TRUE(std::filesystem::exists(work / "found.txt")) << what_happened(id);
  EXPECT_EQ(read_file(work / "found.txt"), "") << "the run found the key";
  const std::string out = tool_output(events);
  EXPECT_NE(out.find("searched"), std::string::npos) << out;
  // The upstream answered: the gateway added the key it holds.
  EXPECT_GE(upstream_->requests().size(), 1u) << upstream_->stderr_text();
  // The placeholder the tool printed is redacted before it was written; the key never appears.
  const std::string placeholder = placeholder_of(id);
  ASSERT_FALSE(placeholder.empty());
  EXPECT_NE(out.find("token=[redacted:gateway.token]"), std::string::npos) << out;
  expect_no_secret_kept(id, {{"the key", key_}, {"the run's placeholder", placeholder}});
}

// A run whose model is scripted (the supervisor hosts the endpoint, behind the gateway) keeps
// the model's requests too (model-requests.jsonl): the placeholder a tool printed, which the
// next request carries back to the model, is in none of the run directory's files either.
TEST_P(GatewayAttack, ARunWithAScriptedModelKeepsNotThePlaceholderItsToolPrinted) {
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  SocketClient c(daemon_->socket());
  auto reply = c.request(socket_request(
      "submit",
      R"("run":{"adapter":")" + vendor().adapter + R"(","prompt":"go","decisions":"observe","model_scenario":)" +
          shell_calls_scenario(vendor(), {"printf 'token=%s\\n' \"$(" + vendor().placeholder_source + ")\""}) + "}"));
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
  const std::string id = reply->str("run_id");
  auto events = follow_to_end(daemon_->socket(), id, 300s);
  ASSERT_FALSE(events.empty()) << what_happened(id);
  EXPECT_EQ(events.back().str("reason"), "completed") << what_happened(id);
  const std::string out = tool_output(events);
  EXPECT_NE(out.find("token=[redacted:gateway.token]"), std::string::npos) << out;
  const std::string placeholder = placeholder_of(id);
  ASSERT_FALSE(placeholder.empty());
  expect_no_secret_kept(id, {{"the run's placeholder", placeholder}}, {"model-requests.jsonl"});
}

// The network: nothing on the host's loopback, no other run's gateway; egress only as listed.
TEST_P(GatewayAttack, FromAnAllowedCallNothingButTheGatewayAndTheListedEgressIsReachable) {
  // The test's own network namespace, where an address that is neither loopback nor an interface
  // address can be reached: the listed egress destination.
  in_addr_t destination_address{};
  ASSERT_EQ(::inet_pton(AF_INET, "198.51.100.7", &destination_address), 1);  // TEST-NET-2
  network_ = std::make_unique<OwnNetwork>(destination_address);
  ASSERT_EQ(network_->error(), "");
  HostListener listener;
  ASSERT_NE(listener.port(), 0);
  EgressDestination destination(destination_address);
  ASSERT_NE(destination.port(), 0);
  const std::string listed = "198.51.100.7:" + std::to_string(destination.port());
  NatsCluster nats(dir_.path() / "nats", 1);
  ASSERT_TRUE(nats.ready(1)) << nats.why();
  const std::string nats_port = nats.url(0).substr(nats.url(0).rfind(':') + 1);
  // The daemon's [http] port is picked by the daemon: the scenario (written before the daemon
  // starts) reads it from the run's environment, as it reads the other run's gateway socket.
  auto probe = [](const std::string& name, const std::string& port) {
    return "bash -c '(exec 3<>/dev/tcp/127.0.0.1/" + port + ")' 2>/dev/null && echo 'OPEN " + name +
           "' || echo 'CLOSED " + name + "'";
  };
  ASSERT_NO_FATAL_FAILURE(start_upstream(bash_calls_scenario({}), "other"));
  ASSERT_NO_FATAL_FAILURE(start_vendor_upstream(
      {probe("listener", std::to_string(listener.port())) + "; " + probe("nats", nats_port) + "; " +
       probe("http", "$MH_DAEMON_HTTP_PORT") + "; echo \"http-port=$MH_DAEMON_HTTP_PORT\"; " +
       "echo \"other-gateway=$MH_OTHER_GATEWAY\"; [ -e \"$MH_OTHER_GATEWAY\" ] && echo 'OPEN other-gateway' || echo "
       "'CLOSED other-gateway'; curl -s --max-time 20 --unix-socket \"$MH_OTHER_GATEWAY\" -o /dev/null -w "
       "'other-gateway-http=%{http_code}\\n' http://127.0.0.1/v1/messages; ls /run/metaharness; curl -s -p "
       "--max-time 20 -w '\\negress-listed=%{http_connect}\\n' http://" +
       listed +
       "/ ; curl -s -p -o /dev/null --max-time 20 -w 'egress-unlisted=%{http_connect}\\n' "
       "https://unlisted.example.com/ ; true"}));
  ASSERT_NO_FATAL_FAILURE(start_daemon("[http]\nlisten = \"127.0.0.1:0\"\n"));
  // The daemon's own HTTP listener, as its viewer address names it.
  SocketClient ask(daemon_->socket());
  auto viewer = ask.request(socket_request("viewer"));
  ASSERT_TRUE(viewer && viewer->str("reply") == "viewer") << (viewer ? viewer->raw : "no reply");
  const std::string url = viewer->str("url");  // http://127.0.0.1:PORT/viewer#token=…
  const auto colon = url.find(':', std::string("http://").size());
  ASSERT_NE(colon, std::string::npos) << url;
  const std::string http_port = url.substr(colon + 1, url.find('/', colon) - colon - 1);
  ASSERT_FALSE(http_port.empty()) << url;
  // Another run, open: its gateway's socket exists on the host.
  const std::string b = open_other_run();
  ASSERT_FALSE(b.empty());
  const auto other_gateway = daemon_->run_dir(b) / "gate/model.sock";
  ASSERT_TRUE(std::filesystem::exists(other_gateway)) << what_happened(b);
  const std::string id = submit_vendor_run(R"("egress":["listed.example.com:443",")" + listed +
                                           R"("],"vendor_env":{"MH_DAEMON_HTTP_PORT":")" + http_port +
                                           R"(","MH_OTHER_GATEWAY":")" + other_gateway.string() + R"("})");
  ASSERT_FALSE(id.empty());
  auto events = follow_to_end(daemon_->socket(), id, 300s);
  ASSERT_FALSE(events.empty()) << what_happened(id);
  EXPECT_EQ(events.back().str("reason"), "completed") << what_happened(id);
  const std::string out = tool_output(events);
  // The probes had what they needed (an empty variable would make a probe fail for nothing).
  EXPECT_NE(out.find("http-port=" + http_port), std::string::npos) << out;
  EXPECT_NE(out.find("other-gateway=" + other_gateway.string()), std::string::npos) << out;
  for (const char* name : {"listener", "nats", "http", "other-gateway"}) {
    EXPECT_NE(out.find(std::string("CLOSED ") + name), std::string::npos) << name << "\n" << out;
    EXPECT_EQ(out.find(std::string("OPEN ") + name), std::string::npos) << name << "\n" << out;
  }
  EXPECT_NE(out.find("other-gateway-http=000"), std::string::npos) << out;
  EXPECT_FALSE(listener.reached());
  // The listed destination answered through the proxy; the unlisted one was refused there.
  EXPECT_NE(out.find("egress-listed=200"), std::string::npos) << out;
  EXPECT_NE(out.find("reached"), std::string::npos) << out;
  EXPECT_EQ(destination.served(), 1);
  EXPECT_NE(out.find("egress-unlisted=403"), std::string::npos) << out;
  bool denied = false;
  for (const auto& e : events)
    if (e.event() == "warning" && e.str("code") == "EGRESS_DENIED" &&
        e.raw.find("unlisted.example.com:443") != std::string::npos)
      denied = true;
  EXPECT_TRUE(denied) << what_happened(id);
  // The record counts both attempts.
  const auto* resources = events.back().object.if_contains("resources");
  ASSERT_TRUE(resources && resources->is_object()) << events.back().raw;
  const auto* egress = resources->as_object().if_contains("egress");
  ASSERT_TRUE(egress && egress->is_object()) << events.back().raw;
  const auto& allowed = egress->as_object().at("allowed").as_object();
  const auto& refused = egress->as_object().at("denied").as_object();
  ASSERT_TRUE(allowed.contains(listed)) << events.back().raw;
  EXPECT_EQ(allowed.at(listed).to_number<int>(), 1) << events.back().raw;
  ASSERT_TRUE(refused.contains("unlisted.example.com:443")) << events.back().raw;
  EXPECT_EQ(refused.at("unlisted.example.com:443").to_number<int>(), 1) << events.back().raw;
  halt(b);
}

// Tokens and routes: another run's placeholder is refused; the run's own, on a path outside the
// wire's model routes, is refused and never forwarded.
TEST_P(GatewayAttack, AnotherRunsTokenIsRefusedAndARouteOutsideTheWireNeverReachesTheUpstream) {
  // Run B (Claude, upstream "other") stays open, idle between turns, while run A tries B's
  // placeholder at its own gateway; A learns it the way a leak would hand it over (here: its
  // declared environment, under a name Codex passes to its tools).
  ASSERT_NO_FATAL_FAILURE(start_upstream(bash_calls_scenario({}), "other"));
  const std::string route = vendor().model_route;
  ASSERT_NO_FATAL_FAILURE(start_vendor_upstream(
      {"curl -s -o /dev/null -w 'other=%{http_code}\\n' -H \"x-api-key: $MH_OTHER_PLACEHOLDER\" -H 'content-type: "
       "application/json' -d '{}' http://127.0.0.1:41000" +
       route + "; OWN=\"$(" + vendor().placeholder_source +
       ")\"; echo \"own-length=${#OWN}\"; curl -s -o /dev/null -w 'files=%{http_code}\\n' -H \"x-api-key: $OWN\" -H "
       "'content-type: application/json' -d '{}' http://127.0.0.1:41000/v1/files"}));
  ASSERT_NO_FATAL_FAILURE(start_daemon());
  const std::string b = open_other_run();
  ASSERT_FALSE(b.empty());
  const std::string other = placeholder_of(b);
  ASSERT_FALSE(other.empty());
  const std::string a = submit_vendor_run(R"("vendor_env":{"MH_OTHER_PLACEHOLDER":")" + other + R"("})");
  ASSERT_FALSE(a.empty());
  auto events = follow_to_end(daemon_->socket(), a, 300s);
  ASSERT_FALSE(events.empty()) << what_happened(a);
  EXPECT_EQ(events.back().str("reason"), "completed") << what_happened(a);
  const std::string out = tool_output(events);
  EXPECT_NE(out.find("other=401"), std::string::npos) << out;
  // The tool held the run's own placeholder (so the 403 is the route's, not the token's).
  EXPECT_EQ(out.find("own-length=0"), std::string::npos) << out;
  EXPECT_NE(out.find("files=403"), std::string::npos) << out;
  // Every request the upstream served was the wire's model route (the refused path's name may well
  // be in a model request's body: the conversation carries the command).
  std::size_t served = 0;
  for (const auto& request : upstream_->requests()) {
    auto record = protocol::parse_json(request);
    ASSERT_TRUE(record && record->is_object()) << request;
    const auto* target = record->get_object().if_contains("target");
    if (!target || !target->is_string()) continue;  // not a request record
    ++served;
    EXPECT_EQ(std::string(target->get_string()).rfind(route, 0), 0u) << request;
  }
  EXPECT_GE(served, 2u) << "the call's request and the one carrying its result";
  bool reported = false;
  for (const auto& e : events)
    if (e.event() == "warning" && e.raw.find("/v1/files") != std::string::npos) reported = true;
  EXPECT_TRUE(reported) << what_happened(a);
  halt(b);
}

// ctest names each test by its vendor (Vendors/GatewayAttack.<test>/claude, from PrintTo); gtest
// by its index (/0 claude, /1 codex, /2 opencode).
INSTANTIATE_TEST_SUITE_P(Vendors, GatewayAttack, ::testing::Values(kClaude, kCodex, kOpencode));

// Claude only, from here: what the gateway does with a run's spend and a daemon's death.
class Gateway : public GatewayDaemon {};

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

// An upstream the gateway cannot reach (here: its certificate is signed by a CA the host does not
// trust, and no ca_file names it) is said in the run's stream, with why, once per reason: the
// vendor only sees 502s and retries, and the why would otherwise be in supervisor.log alone.
TEST_F(Gateway, AnUpstreamTheGatewayCannotReachIsWarnedOfInTheStreamWithWhy) {
  start_upstream(bash_calls_scenario({"echo never"}));
  std::string text = config();
  const std::string ca_line = "ca_file = \"" + ca_->ca_file().string() + "\"\n";
  for (std::size_t at; (at = text.find(ca_line)) != std::string::npos;)
    text.erase(at, ca_line.size());
  daemon_ = std::make_unique<DaemonUnderTest>(dir_.path(), text);
  ASSERT_TRUE(daemon_->wait_notify("READY=1")) << daemon_->stderr_text();
  const std::string id = submit(R"("vendor_env":{"CLAUDE_CODE_MAX_RETRIES":"1"})");
  auto events = follow_to_end(daemon_->socket(), id, 180s);
  ASSERT_FALSE(events.empty()) << what_happened(id);
  std::size_t warned = 0;
  for (const auto& e : events)
    if (e.event() == "warning" && e.str("code") == "GATEWAY_UPSTREAM_UNREACHABLE") {
      ++warned;
      EXPECT_NE(e.str("message").find("certificate verify failed"), std::string::npos) << e.raw;
    }
  EXPECT_EQ(warned, 1u) << "once per reason, however often the vendor retried\n" << what_happened(id);
  EXPECT_TRUE(upstream_->requests().empty()) << "nothing reached the upstream";
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
