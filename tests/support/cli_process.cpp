#include "tests/support/cli_process.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

extern char** environ;

namespace mh::test {

std::string_view EventLine::event() const {
  auto* v = object.if_contains("event");
  return v && v->is_string() ? std::string_view(v->get_string()) : std::string_view();
}

std::string EventLine::str(std::string_view key) const {
  auto* v = object.if_contains(key);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

CliProcess::CliProcess(std::vector<std::string> argv, std::optional<std::vector<std::string>> env,
                       std::filesystem::path cwd) {
  int in[2], out[2], err[2];
  if (::pipe2(in, O_CLOEXEC) || ::pipe2(out, O_CLOEXEC) || ::pipe2(err, O_CLOEXEC))
    throw std::runtime_error("pipe2 failed");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  posix_spawn_file_actions_adddup2(&actions, err[1], 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<char*> args;
  for (auto& a : argv)
    args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_storage = env.value_or(std::vector<std::string>{});
  std::vector<char*> envp;
  for (auto& e : env_storage)
    envp.push_back(e.data());
  envp.push_back(nullptr);
  int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), env ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  in_ = in[1];
  out_ = out[0];
  out_lines_.emplace(out_);
  err_ = err[0];
  ::fcntl(err_, F_SETFL, ::fcntl(err_, F_GETFL) | O_NONBLOCK);
  if (rc != 0) throw std::runtime_error(std::string("posix_spawn failed: ") + std::strerror(rc));
}

CliProcess::~CliProcess() {
  if (!status_ && pid_ > 0) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  for (int fd : {in_, out_, err_})
    if (fd >= 0) ::close(fd);
}

void CliProcess::send(const std::string& line) {
  std::string data = line + "\n";
  std::string_view rest = data;
  while (!rest.empty() && in_ >= 0) {
    ssize_t n = ::write(in_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
}

void CliProcess::close_stdin() {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
}

std::optional<std::string> CliProcess::next_line(std::chrono::milliseconds timeout) {
  if (!out_lines_) return std::nullopt;
  std::string line;
  testkit::LineReader::Clock::time_point read_at;
  if (out_lines_->next(line, read_at, testkit::LineReader::Clock::now() + timeout) != testkit::LineReader::Status::line)
    return std::nullopt;
  return line;
}

EventLine to_event_line(std::string raw) {
  EventLine e;
  e.raw = std::move(raw);
  auto v = protocol::parse_json(e.raw);
  if (v && v->is_object()) e.object = v->get_object();
  return e;
}

std::optional<EventLine> read_until(
    const std::function<std::optional<std::string>(std::chrono::milliseconds)>& next_line, std::vector<EventLine>& kept,
    const std::function<bool(const EventLine&)>& match, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto remaining = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (remaining.count() <= 0) return std::nullopt;
    auto line = next_line(remaining);
    if (!line) return std::nullopt;
    kept.push_back(to_event_line(std::move(*line)));
    if (match(kept.back())) return kept.back();
  }
}

std::optional<EventLine> CliProcess::wait_for(const std::function<bool(const EventLine&)>& match,
                                              std::chrono::milliseconds timeout) {
  return read_until([this](std::chrono::milliseconds t) { return next_line(t); }, events_, match, timeout);
}

std::optional<EventLine> CliProcess::wait_for_event(std::string_view name, std::chrono::milliseconds timeout) {
  return wait_for([name](const EventLine& e) { return e.event() == name; }, timeout);
}

std::string CliProcess::read_out(std::chrono::milliseconds timeout) {
  std::string out;
  while (auto line = next_line(timeout))
    out += *line + "\n";
  return out;
}

CliOutput run_to_end(std::vector<std::string> argv, std::optional<std::vector<std::string>> env,
                     std::chrono::milliseconds timeout) {
  CliProcess p(std::move(argv), std::move(env));
  p.close_stdin();
  CliOutput o;
  o.out = p.read_out(timeout);
  o.status = p.finish(timeout);
  o.err = p.stderr_text();
  return o;
}

int CliProcess::finish(std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (wait_for([](const EventLine&) { return false; },
                  std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()))) {
  }
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return *status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    pollfd p{err_, POLLIN, 0};
    ::poll(&p, 1, 20);  // bounded wait for the exit, draining stderr meanwhile
    drain_stderr();
  }
}

std::vector<EventLine> CliProcess::events_named(std::string_view name) const {
  std::vector<EventLine> out;
  for (const auto& e : events_)
    if (e.event() == name) out.push_back(e);
  return out;
}

void CliProcess::drain_stderr() {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(err_, buf, sizeof buf);
    if (n <= 0) return;
    err_text_.append(buf, static_cast<std::size_t>(n));
  }
}

const std::string& CliProcess::stderr_text() {
  drain_stderr();
  return err_text_;
}

std::filesystem::path metaharness_binary() {
  return MH_TEST_METAHARNESS;
}
std::filesystem::path source_dir() {
  return MH_TEST_SOURCE_DIR;
}

TempDir::TempDir(const std::string& name) {
  // Short enough that a Unix socket inside it stays under the 107-byte path limit.
  std::string shortened = name.substr(0, 24);
  path_ = std::filesystem::path(MH_TEST_WORK_DIR) / (shortened + "-" + std::to_string(::getpid()));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  // Keep the evidence of a failed test for whoever reads the log.
  if (!::testing::Test::HasFailure()) {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> read_lines(const std::filesystem::path& p) {
  std::vector<std::string> out;
  std::istringstream in(read_file(p));
  std::string line;
  while (std::getline(in, line))
    out.push_back(line);
  return out;
}

std::vector<int> processes_with_env(const std::string& entry) {
  std::vector<int> out;
  DIR* proc = ::opendir("/proc");
  if (!proc) return out;
  while (dirent* d = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(d->d_name, &end, 10);
    if (*end != '\0' || pid <= 0) continue;
    std::string stat = read_file("/proc/" + std::string(d->d_name) + "/stat");
    auto close_paren = stat.rfind(')');
    if (close_paren == std::string::npos || close_paren + 2 >= stat.size() || stat[close_paren + 2] == 'Z') continue;
    std::string env = read_file("/proc/" + std::string(d->d_name) + "/environ");
    std::size_t start = 0;
    while (start < env.size()) {
      auto stop = env.find('\0', start);
      if (stop == std::string::npos) stop = env.size();
      if (env.compare(start, stop - start, entry) == 0) {
        out.push_back(static_cast<int>(pid));
        break;
      }
      start = stop + 1;
    }
  }
  ::closedir(proc);
  return out;
}

bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    // A bounded poll interval while waiting for a fact that has no event of its own.
    std::this_thread::sleep_for(20ms);
  }
  return condition();
}

}  // namespace mh::test
