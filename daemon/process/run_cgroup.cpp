#include "daemon/process/run_cgroup.hpp"

#include <fcntl.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <sstream>

#include "daemon/process/process_env.hpp"
#include "protocol/digest.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

namespace {

std::string errno_text(int e) {
  return std::strerror(e);
}

// Reads a whole small control file relative to a directory descriptor. nullopt when absent.
std::optional<std::string> read_file_at(int dir_fd, const char* name) {
  UniqueFd fd(::openat(dir_fd, name, O_RDONLY | O_CLOEXEC));
  if (!fd) return std::nullopt;
  std::string text;
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > (1u << 20)) break;  // control files are small; bound it anyway
  }
  return text;
}

boost::system::result<void, std::string> write_file_at(int dir_fd, const fs::path& dir, const char* name,
                                                       std::string_view value) {
  UniqueFd fd(::openat(dir_fd, name, O_WRONLY | O_CLOEXEC));
  if (!fd) return "cannot open " + (dir / name).string() + ": " + errno_text(errno);
  for (;;) {
    ssize_t n = ::write(fd.get(), value.data(), value.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      return "cannot write \"" + std::string(value) + "\" to " + (dir / name).string() + ": " + errno_text(errno);
    return {};
  }
}

std::optional<std::uint64_t> parse_u64(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.remove_suffix(1);
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// The value of `key` in a flat-keyed file ("key value" lines: cpu.stat, memory.events).
std::optional<std::uint64_t> keyed_value(const std::optional<std::string>& text, std::string_view key) {
  if (!text) return std::nullopt;
  std::istringstream lines(*text);
  std::string line;
  while (std::getline(lines, line)) {
    std::string_view view(line);
    if (view.size() > key.size() && view.substr(0, key.size()) == key && view[key.size()] == ' ')
      return parse_u64(view.substr(key.size() + 1));
  }
  return std::nullopt;
}

std::vector<std::string> words(const std::optional<std::string>& text) {
  std::vector<std::string> out;
  if (!text) return out;
  std::istringstream in(*text);
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

bool is_cgroup2(const fs::path& dir) {
  struct statfs info {};
  return ::statfs(dir.c_str(), &info) == 0 && info.f_type == CGROUP2_SUPER_MAGIC;
}

// mkdir with an explicit mode, whatever the umask; an existing directory is fine.
boost::system::result<void, std::string> make_dir(const fs::path& dir) {
  if (::mkdir(dir.c_str(), 0750) == -1) {
    if (errno != EEXIST) return "cannot create " + dir.string() + ": " + errno_text(errno);
    return {};
  }
  if (::chmod(dir.c_str(), 0750) == -1) return "cannot set the mode of " + dir.string() + ": " + errno_text(errno);
  return {};
}

// Which controller a limit needs, by file.
struct LimitNeed {
  const char* file;
  const char* controller;
};

std::vector<LimitNeed> needs(const CgroupLimits& limits) {
  std::vector<LimitNeed> out;
  if (limits.memory_max_bytes) out.push_back({"memory.max", "memory"});
  if (limits.pids_max) out.push_back({"pids.max", "pids"});
  if (limits.cpu_max_percent) out.push_back({"cpu.max", "cpu"});
  return out;
}

}  // namespace

// ---- CgroupParent ----------------------------------------------------------------------------

std::optional<fs::path> CgroupParent::own_cgroup_dir() {
  std::optional<fs::path> mount;
  std::ifstream mounts("/proc/self/mounts");
  for (std::string line; std::getline(mounts, line);) {
    std::istringstream fields(line);
    std::string source, target, type;
    fields >> source >> target >> type;
    if (type == "cgroup2") {
      mount = target;
      break;
    }
  }
  if (!mount) return std::nullopt;
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string path = line.substr(3);
    while (!path.empty() && path.front() == '/')
      path.erase(0, 1);
    return path.empty() ? *mount : *mount / path;
  }
  return *mount;
}

std::string CgroupParent::group_for_state_dir(const fs::path& state_dir) {
  std::error_code ec;
  fs::path absolute = fs::weakly_canonical(state_dir, ec);
  if (ec) absolute = state_dir;
  return "mh-" + protocol::sha256_hex(absolute.string()).substr(0, 12);
}

boost::system::result<CgroupParent, std::string> CgroupParent::open(const fs::path& base, const std::string& group) {
  if (!is_cgroup2(base)) return base.string() + " is not on a cgroup2 mount";
  if (::access(base.c_str(), W_OK | X_OK) == -1) return "cannot write " + base.string() + ": " + errno_text(errno);
  CgroupParent parent;
  parent.dir_ = base / group;
  if (auto made = make_dir(parent.dir_); !made) return made.error();
  // Enable, in our own group, every controller the base offers it, so the runs' groups may set
  // limits. A controller the kernel will not enable here (e.g. it is bound to a v1 hierarchy, or
  // the base has processes of its own) simply stays unavailable: limits that need it are then
  // refused by name at run start.
  UniqueFd dir_fd(::open(parent.dir_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) return "cannot open " + parent.dir_.string() + ": " + errno_text(errno);
  for (const std::string& controller : words(read_file_at(dir_fd.get(), "cgroup.controllers")))
    (void)write_file_at(dir_fd.get(), parent.dir_, "cgroup.subtree_control", "+" + controller);
  parent.controllers_ = words(read_file_at(dir_fd.get(), "cgroup.subtree_control"));
  return parent;
}

bool CgroupParent::has_controller(std::string_view name) const {
  for (const auto& c : controllers_)
    if (c == name) return true;
  return false;
}

std::optional<std::string> CgroupParent::refuse_limits(const CgroupLimits& limits) const {
  for (const LimitNeed& need : needs(limits))
    if (!has_controller(need.controller))
      return std::string(need.file) + " needs the " + need.controller + " controller, which is not available in " +
             dir_.string();
  return std::nullopt;
}

boost::system::result<std::unique_ptr<RunCgroup>, std::string> CgroupParent::create(const std::string& run_id,
                                                                                    const CgroupLimits& limits) const {
  if (run_id.empty() || run_id.find('/') != std::string::npos || run_id == "." || run_id == "..")
    return "a run id that is not a directory name: \"" + run_id + "\"";
  if (auto refusal = refuse_limits(limits)) return *refusal;
  fs::path dir = dir_ / run_id;
  if (auto made = make_dir(dir); !made) return made.error();
  auto group = find(run_id);
  if (!group) return group.error();
  if ((*group)->populated()) {
    (*group)->removed_ = true;  // not ours to kill: refuse, and leave it be
    return dir.string() + " already holds processes";
  }
  int fd = (*group)->dir_fd_.get();
  if (limits.memory_max_bytes)
    if (auto w = write_file_at(fd, dir, "memory.max", std::to_string(*limits.memory_max_bytes)); !w) return w.error();
  if (limits.pids_max)
    if (auto w = write_file_at(fd, dir, "pids.max", std::to_string(*limits.pids_max)); !w) return w.error();
  if (limits.cpu_max_percent) {
    constexpr std::uint64_t period_us = 100'000;
    std::uint64_t quota_us = std::max<std::uint64_t>(1000, period_us * *limits.cpu_max_percent / 100);
    if (auto w = write_file_at(fd, dir, "cpu.max", std::to_string(quota_us) + " " + std::to_string(period_us)); !w)
      return w.error();
  }
  return std::move(*group);
}

boost::system::result<std::unique_ptr<RunCgroup>, std::string> CgroupParent::find(const std::string& run_id) const {
  fs::path dir = dir_ / run_id;
  UniqueFd dir_fd(::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir_fd) return "cannot open " + dir.string() + ": " + errno_text(errno);
  UniqueFd procs(::openat(dir_fd.get(), "cgroup.procs", O_WRONLY | O_CLOEXEC));
  if (!procs) return "cannot open " + (dir / "cgroup.procs").string() + ": " + errno_text(errno);
  return std::unique_ptr<RunCgroup>(new RunCgroup(std::move(dir), std::move(dir_fd), std::move(procs)));
}

boost::system::result<void, std::string> CgroupParent::remove() const {
  if (::rmdir(dir_.c_str()) == -1 && errno != ENOENT) {
    if (errno == EBUSY) return dir_.string() + " still holds a run's group; it is left for the next start";
    return "cannot remove " + dir_.string() + ": " + errno_text(errno);
  }
  return {};
}

// ---- RunCgroup -------------------------------------------------------------------------------

RunCgroup::RunCgroup(fs::path dir, UniqueFd dir_fd, UniqueFd procs)
    : dir_(std::move(dir)), dir_fd_(std::move(dir_fd)), procs_(std::move(procs)) {}

RunCgroup::~RunCgroup() {
  if (removed_) return;
  if (populated()) {
    (void)kill();
    (void)wait_empty_sync(std::chrono::seconds(2));
  }
  (void)remove();
}

std::vector<pid_t> RunCgroup::processes() const {
  std::vector<pid_t> out;
  auto text = read_file_at(dir_fd_.get(), "cgroup.procs");
  if (!text) return out;
  std::istringstream in(*text);
  for (long pid; in >> pid;)
    out.push_back(static_cast<pid_t>(pid));
  return out;
}

bool RunCgroup::populated() const {
  // An unreadable cgroup.events (the group is gone) counts as empty.
  return keyed_value(read_file_at(dir_fd_.get(), "cgroup.events"), "populated").value_or(0) != 0;
}

bool RunCgroup::holds(pid_t pid) const {
  return process_in_cgroup(pid, dir_);
}

boost::system::result<void, std::string> RunCgroup::kill() {
  std::uint64_t alive = processes().size();
  if (!killed_)
    killed_ = alive;
  else
    *killed_ += alive;
  if (alive == 0 && !populated()) return {};
  if (auto w = write_file_at(dir_fd_.get(), dir_, "cgroup.kill", "1"); w) return {};
  // Kernels before 5.14 have no cgroup.kill: freeze the group so nothing forks, SIGKILL each
  // member, thaw (a frozen process dies only once thawed).
  auto frozen = write_file_at(dir_fd_.get(), dir_, "cgroup.freeze", "1");
  for (pid_t pid : processes())
    ::kill(pid, SIGKILL);
  if (frozen) (void)write_file_at(dir_fd_.get(), dir_, "cgroup.freeze", "0");
  if (!frozen) return "cannot kill the processes of " + dir_.string() + ": " + frozen.error();
  return {};
}

namespace {

// cgroup.events, opened to be waited on. kernfs flags the open file (POLLPRI | POLLERR, for
// poll(2) and epoll alike) once the file changed after the last read through it, so read, then
// wait: a change in between is not missed. Not inotify: closing an inotify instance waits for
// the kernel to reap its marks (an SRCU grace period, ~10 ms, one reaper for the whole host), and
// that close at every run's end held the run's io thread, so that N runs ending together closed
// one after the other (issue 26 §5).
UniqueFd open_events(int dir_fd) {
  return UniqueFd(::openat(dir_fd, "cgroup.events", O_RDONLY | O_CLOEXEC));
}

// `populated` as read through `fd` from its start (which also clears its change flag). An
// unreadable file (the group is gone) counts as empty, as in populated().
bool populated_at(int fd) {
  std::string text;
  char buffer[256];
  for (off_t at = 0;;) {
    ssize_t n = ::pread(fd, buffer, sizeof buffer, at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buffer, static_cast<std::size_t>(n));
    at += n;
  }
  return keyed_value(text, "populated").value_or(0) != 0;
}

}  // namespace

asio::awaitable<bool> RunCgroup::wait_empty(asio::any_io_executor executor, std::chrono::milliseconds timeout) {
  using namespace asio::experimental::awaitable_operators;
  UniqueFd fd = open_events(dir_fd_.get());
  if (!fd || !populated_at(fd.get())) co_return true;  // gone or empty
  asio::posix::stream_descriptor events(executor, fd.release());
  asio::steady_timer deadline(executor);
  deadline.expires_after(timeout);
  while (populated_at(events.native_handle())) {
    auto woke = co_await (events.async_wait(asio::posix::stream_descriptor::wait_error, asio::use_awaitable) ||
                          deadline.async_wait(asio::use_awaitable));
    if (woke.index() == 1) break;  // the deadline
  }
  co_return !populated_at(events.native_handle());
}

bool RunCgroup::wait_empty_sync(std::chrono::milliseconds timeout) {
  UniqueFd fd = open_events(dir_fd_.get());
  if (!fd) return true;  // gone
  auto until = std::chrono::steady_clock::now() + timeout;
  while (populated_at(fd.get())) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd.get(), POLLPRI, 0};
    ::poll(&p, 1, static_cast<int>(left.count()));
  }
  return true;
}

boost::system::result<void, std::string> RunCgroup::remove() {
  if (removed_) return {};
  if (::rmdir(dir_.c_str()) == -1 && errno != ENOENT)
    return "cannot remove " + dir_.string() + ": " + errno_text(errno);
  removed_ = true;
  return {};
}

CgroupFacts RunCgroup::facts() const {
  CgroupFacts facts;
  facts.cpu_usec = keyed_value(read_file_at(dir_fd_.get(), "cpu.stat"), "usage_usec");
  if (auto peak = read_file_at(dir_fd_.get(), "memory.peak")) facts.memory_peak_bytes = parse_u64(*peak);
  if (auto peak = read_file_at(dir_fd_.get(), "pids.peak")) facts.tasks_peak = parse_u64(*peak);
  facts.oom_kills = keyed_value(read_file_at(dir_fd_.get(), "memory.events"), "oom_kill");
  facts.processes_killed = killed_;
  return facts;
}

}  // namespace mh::daemon
