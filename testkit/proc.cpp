#include "testkit/proc.hpp"

#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>
#include <sstream>

namespace mh::testkit {

double ms_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

double cpu_ms_of(const rusage& u) {
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

double own_cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return cpu_ms_of(u);
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

std::int64_t monotonic_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

double ms_since(std::int64_t start_ns) {
  return static_cast<double>(monotonic_ns() - start_ns) / 1e6;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool write_file(const std::filesystem::path& p, std::string_view text) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  return bool(out);
}

int open_pidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

void kill_by_pidfd(int pidfd) {
  ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
}

bool wait_pidfd(int pidfd, std::int64_t deadline_ns) {
  for (;;) {
    std::int64_t left_ms = (deadline_ns - monotonic_ns()) / 1'000'000;
    pollfd p{pidfd, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(left_ms, 0)));
    if (ready > 0) return true;
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0 || left_ms <= 0) return false;
  }
}

std::vector<pid_t> processes_with_environment(const std::string& prefix) {
  namespace fs = std::filesystem;
  std::vector<pid_t> found;
  std::error_code ec;
  for (auto it = fs::directory_iterator("/proc", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    pid_t pid = static_cast<pid_t>(std::stol(name));
    if (pid == ::getpid()) continue;
    std::string env = read_file(it->path() / "environ");
    for (std::size_t at = 0; at < env.size();) {
      std::size_t end = env.find('\0', at);
      if (end == std::string::npos) end = env.size();
      if (std::string_view(env).substr(at, end - at).starts_with(prefix)) {
        found.push_back(pid);
        break;
      }
      at = end + 1;
    }
  }
  return found;
}

}  // namespace mh::testkit
