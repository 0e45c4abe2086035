#include "tests/support/daemon_harness.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>

#include "daemon/process/run_cgroup.hpp"
#include "daemon/supervisor/supervisor_link.hpp"
#include "protocol/json.hpp"

extern char** environ;

namespace mh::test {

namespace {
sockaddr_un address_of(const std::filesystem::path& p) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, p.c_str(), sizeof a.sun_path - 1);
  return a;
}

// The DaemonUnderTest objects alive per state directory: a test that replaces a daemon makes the
// next before the last goes (adoption), and only the last one cleans.
std::mutex live_mu;
std::map<std::filesystem::path, int>& live_per_state_dir() {
  static std::map<std::filesystem::path, int> live;
  return live;
}

// Where the daemon will make its runs' groups: runs.cgroup_root of its config, else the cgroup it
// is born in (this process's, now), in a group named for its state directory (containment_policy).
std::optional<std::filesystem::path> cgroup_parent_of(const std::string& config,
                                                      const std::filesystem::path& state_dir) {
  std::smatch m;
  static const std::regex configured(R"re(cgroup_root\s*=\s*"([^"]*)")re");
  std::optional<std::filesystem::path> base;
  if (std::regex_search(config, m, configured)) {
    if (m[1].str() == "none") return std::nullopt;
    base = m[1].str();
  } else {
    base = daemon::CgroupParent::own_cgroup_dir();
  }
  if (!base) return std::nullopt;
  return *base / daemon::CgroupParent::group_for_state_dir(state_dir);
}

bool cgroup_populated(const std::filesystem::path& group) {
  std::ifstream events(group / "cgroup.events");
  for (std::string line; std::getline(events, line);)
    if (line == "populated 1") return true;
  return false;
}

// True when every run of the state directory has its stream closed: none was left to a supervisor.
bool every_run_closed(const std::filesystem::path& state_dir) {
  std::error_code ec;
  for (const auto& run : std::filesystem::directory_iterator(state_dir / "runs", ec)) {
    auto lines = read_lines(run.path() / "events.jsonl");
    if (!lines.empty() && lines.back().find(R"("event":"stream.closed")") == std::string::npos) return false;
  }
  return true;
}

}  // namespace

std::string remove_cgroup_parent(const std::filesystem::path& parent) {
  std::error_code ec;
  if (!std::filesystem::exists(parent, ec)) return "";
  std::string left;
  for (const auto& group : std::filesystem::directory_iterator(parent, ec)) {
    if (!group.is_directory()) continue;
    if (cgroup_populated(group.path())) {
      std::ofstream(group.path() / "cgroup.kill") << "1\n";
      if (!eventually([&] { return !cgroup_populated(group.path()); }, 10s))
        left += " " + group.path().string() + " (still holds processes)";
    }
    if (::rmdir(group.path().c_str()) != 0 && errno != ENOENT)
      left += " " + group.path().string() + " (" + std::strerror(errno) + ")";
  }
  if (::rmdir(parent.c_str()) != 0 && errno != ENOENT)
    left += " " + parent.string() + " (" + std::strerror(errno) + ")";
  return left;
}

DaemonUnderTest::DaemonUnderTest(const std::filesystem::path& dir, const std::string& config,
                                 std::vector<std::string> extra_env) {
  socket_ = dir / "mh.sock";
  state_ = dir / "state";
  notify_ = dir / "notify.sock";
  std::filesystem::remove(notify_);
  notify_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un a = address_of(notify_);
  if (::bind(notify_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error("cannot bind the notify socket " + notify_.string());
  auto config_path = dir / "config.toml";
  std::ofstream(config_path) << config;

  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string entry(*e);
    // The daemon must take its paths from the test, not from a systemd or XDG environment.
    if (entry.rfind("NOTIFY_SOCKET=", 0) == 0 || entry.rfind("LISTEN_", 0) == 0) continue;
    env.push_back(entry);
  }
  env.push_back("NOTIFY_SOCKET=" + notify_.string());
  for (auto& e : extra_env)
    env.push_back(std::move(e));
  cgroup_parent_ = cgroup_parent_of(config, state_);
  {
    std::lock_guard lock(live_mu);
    ++live_per_state_dir()[state_];
  }
  process_ = std::make_unique<CliProcess>(
      std::vector<std::string>{metaharness_binary().string(), "daemon", "--config", config_path.string(), "--socket",
                               socket_.string(), "--state-dir", state_.string()},
      env);
}

DaemonUnderTest::~DaemonUnderTest() {
  // A stop as a service manager does it (SIGTERM, then SIGKILL after a bound), so the daemon
  // cleans up after itself (its runs' cgroup parent included) unless the test already killed it.
  bool stopped_cleanly = false;
  if (running()) {
    signal(SIGTERM);
    int code = wait_exit(10s);
    if (code < 0) {
      signal(SIGKILL);
      wait_exit(10s);
    }
    stopped_cleanly = code == 0;
  }
  if (notify_fd_ >= 0) ::close(notify_fd_);
  clean_up_after(stopped_cleanly);
}

void DaemonUnderTest::clean_up_after(bool stopped_cleanly) {
  {
    std::lock_guard lock(live_mu);
    if (--live_per_state_dir()[state_] > 0) return;  // a newer daemon of this state dir goes on
    live_per_state_dir().erase(state_);
  }
  // A daemon that stopped on its own terms with no run left open had nothing to leave behind.
  if (stopped_cleanly && cgroup_parent_ && every_run_closed(state_)) {
    EXPECT_FALSE(std::filesystem::exists(*cgroup_parent_))
        << "the daemon stopped with every run closed and left its cgroup parent " << *cgroup_parent_ << ": "
        << stderr_text();
  }
  // Whatever a killed daemon (or one that left its runs to their supervisors) made goes now.
  std::error_code ec;
  for (const auto& run : std::filesystem::directory_iterator(state_ / "runs", ec))
    daemon::end_stale_supervisor(run.path());
  if (cgroup_parent_) {
    std::string left = remove_cgroup_parent(*cgroup_parent_);
    EXPECT_EQ(left, "") << "the test leaves cgroups behind";
  }
}

void DaemonUnderTest::drain_notify(int timeout_ms) {
  pollfd p{notify_fd_, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) <= 0) return;
  char buf[4096];
  ssize_t n = ::recv(notify_fd_, buf, sizeof buf, MSG_DONTWAIT);
  if (n > 0) notes_.emplace_back(buf, static_cast<std::size_t>(n));
}

bool DaemonUnderTest::wait_notify(const std::string& text, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  std::size_t checked = 0;
  for (;;) {
    for (; checked < notes_.size(); ++checked)
      if (notes_[checked].find(text) != std::string::npos) return true;
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) return false;
    drain_notify(static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count()) + 1);
  }
}

void DaemonUnderTest::signal(int sig) {
  ::kill(process_->pid(), sig);
}

bool DaemonUnderTest::running() {
  if (status_) return false;
  int st = 0;
  pid_t r = ::waitpid(process_->pid(), &st, WNOHANG);
  if (r == process_->pid()) {
    status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    return false;
  }
  return true;
}

int DaemonUnderTest::wait_exit(std::chrono::milliseconds timeout) {
  if (status_) return *status_;
  int code = process_->finish(timeout);
  if (code >= 0) status_ = code;
  return code;
}

// ---------------------------------------------------------------------------------------------

SocketClient::SocketClient(const std::filesystem::path& socket) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a = address_of(socket);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd_);
    fd_ = -1;
    return;
  }
  lines_from_.emplace(fd_);
}

SocketClient::~SocketClient() {
  if (fd_ >= 0) ::close(fd_);
}

void SocketClient::send_raw(const std::string& bytes) {
  std::string_view rest = bytes;
  while (!rest.empty() && fd_ >= 0) {
    ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

void SocketClient::send(const std::string& line) {
  send_raw(line + "\n");
}

void SocketClient::close_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

std::optional<std::string> SocketClient::next_line(std::chrono::milliseconds timeout) {
  if (!lines_from_ || eof_) return std::nullopt;
  std::string line;
  testkit::LineReader::Clock::time_point read_at;
  auto status = lines_from_->next(line, read_at, testkit::LineReader::Clock::now() + timeout);
  if (status == testkit::LineReader::Status::line) return line;
  // A reset connection ends the lines as its end does.
  if (status != testkit::LineReader::Status::timeout) eof_ = true;
  return std::nullopt;
}

std::optional<EventLine> SocketClient::wait_for(const std::function<bool(const EventLine&)>& match,
                                                std::chrono::milliseconds timeout) {
  return read_until([this](std::chrono::milliseconds t) { return next_line(t); }, lines_, match, timeout);
}

std::optional<EventLine> SocketClient::wait_reply(std::string_view reply, std::chrono::milliseconds timeout) {
  return wait_for([reply](const EventLine& e) { return e.str("reply") == reply; }, timeout);
}

std::optional<EventLine> SocketClient::wait_event(std::string_view event, std::chrono::milliseconds timeout) {
  return wait_for([event](const EventLine& e) { return e.event() == event; }, timeout);
}

std::vector<EventLine> SocketClient::events_named(std::string_view name) const {
  std::vector<EventLine> out;
  for (const auto& e : lines_)
    if (e.event() == name) out.push_back(e);
  return out;
}

std::optional<EventLine> SocketClient::request(const std::string& line, std::chrono::milliseconds timeout) {
  send(line);
  return wait_for([](const EventLine& e) { return !e.str("reply").empty(); }, timeout);
}

std::string socket_request(const std::string& request, const std::string& fields_json, const std::string& id) {
  return R"({"format":"metaharness.socket/1","request":")" + request + R"(","id":")" + id + "\"" +
         (fields_json.empty() ? "" : "," + fields_json) + "}";
}

std::string tool_decide(const std::string& id, const std::string& call, const std::string& decision_json) {
  return R"({"format":"metaharness.command/1","id":")" + id + R"(","command":"tool.decide","call_id":")" + call +
         R"(","decision":)" + decision_json + "}";
}

std::string one_bash_call_scenario(const std::string& command) {
  json::object input{{"command", command}, {"description", "probe"}};
  json::object call{{"type", "tool_call"}, {"id", "toolu_probe"}, {"name", "Bash"}, {"input", input}};
  json::object ask{{"name", "ask"}, {"content", json::array{call}}};
  json::object answer{{"name", "answer"}, {"content", json::array{json::object{{"type", "text"}, {"text", "Done."}}}}};
  json::object scenario{
      {"format", "metaharness.scenario/1"}, {"wires", json::array{"anthropic"}}, {"steps", json::array{ask, answer}}};
  return protocol::canonical_json(scenario);
}

std::size_t count_events(const std::vector<EventLine>& events, std::string_view event, std::string_view code) {
  std::size_t n = 0;
  for (const auto& e : events)
    n += e.event() == event && (code.empty() || e.str("code") == code);
  return n;
}

std::vector<EventLine> follow_to_end(const std::filesystem::path& socket, const std::string& run_id,
                                     std::chrono::milliseconds timeout, std::uint64_t from_seq) {
  SocketClient c(socket);
  c.send(socket_request(
      "tail", R"("run_id":")" + run_id + R"(","from_seq":)" + std::to_string(from_seq) + R"(,"follow":true)"));
  c.wait_reply("end", timeout);
  std::vector<EventLine> events;
  for (const auto& l : c.lines())
    if (!l.event().empty()) events.push_back(l);
  return events;
}

}  // namespace mh::test
