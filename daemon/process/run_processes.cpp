#include "daemon/process/run_processes.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <map>
#include <memory>
#include <system_error>
#include <unordered_map>
#include <unordered_set>

#include "daemon/process/freeze_pass.hpp"
#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

struct ProcStat {
  pid_t pid = 0;
  pid_t ppid = 0;
  char state = '?';
  std::uint64_t start_time = 0;  // clock ticks after boot: with the pid, names one process

  bool dead() const { return state == 'Z' || state == 'X' || state == 'x'; }
};

// /proc/<pid>/<leaf> relative to an open /proc directory.
UniqueFd open_proc_file(int proc_dir, pid_t pid, const char* leaf) {
  char path[64];
  auto [end, ec] = std::to_chars(path, path + 20, pid);
  (void)ec;
  *end++ = '/';
  std::strcpy(end, leaf);
  return UniqueFd(::openat(proc_dir, path, O_RDONLY | O_CLOEXEC));
}

std::optional<ProcStat> read_stat(int proc_dir, pid_t pid) {
  UniqueFd fd = open_proc_file(proc_dir, pid, "stat");
  if (!fd) return std::nullopt;
  char buffer[1024];
  ssize_t n;
  do {
    n = ::read(fd.get(), buffer, sizeof buffer - 1);
  } while (n == -1 && errno == EINTR);
  if (n <= 0) return std::nullopt;
  std::string_view text(buffer, static_cast<std::size_t>(n));
  // The command name (field 2) may hold spaces and parentheses; it ends at the last ')'.
  auto close = text.rfind(')');
  if (close == std::string_view::npos || close + 2 >= text.size()) return std::nullopt;
  text.remove_prefix(close + 2);
  ProcStat stat;
  stat.pid = pid;
  // Fields from 3 on: state ppid pgrp session tty_nr tpgid flags minflt cminflt majflt cmajflt
  // utime stime cutime cstime priority nice num_threads itrealvalue starttime(22) ...
  int field = 3;
  while (!text.empty() && field <= 22) {
    auto space = text.find(' ');
    std::string_view value = text.substr(0, space);
    if (field == 3 && !value.empty()) stat.state = value[0];
    if (field == 4) std::from_chars(value.data(), value.data() + value.size(), stat.ppid);
    if (field == 22) {
      if (std::from_chars(value.data(), value.data() + value.size(), stat.start_time).ec != std::errc{})
        return std::nullopt;
      return stat;
    }
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
    ++field;
  }
  return std::nullopt;
}

// Does /proc/<pid>/environ hold `entry` as one whole NUL-terminated entry? Streams the file in
// chunks with a tiny matcher, so an enormous environment never sits in memory.
bool environ_has_entry(int proc_dir, pid_t pid, std::string_view entry) {
  UniqueFd fd = open_proc_file(proc_dir, pid, "environ");
  if (!fd) return false;  // gone, or another user's process (EACCES): not ours to kill anyway
  char chunk[16 * 1024];
  std::size_t matched = 0;  // bytes of `entry` matched by the current environment entry
  bool mismatch = false;
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n == -1 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; ++i) {
      char c = chunk[i];
      if (c == '\0') {
        if (!mismatch && matched == entry.size()) return true;
        matched = 0;
        mismatch = false;
      } else if (!mismatch && matched < entry.size() && entry[matched] == c) {
        ++matched;
      } else {
        mismatch = true;
      }
    }
  }
  return !mismatch && matched == entry.size();  // a last entry without its NUL
}

class ProcDirectory {
 public:
  ProcDirectory() : fd_(::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {}
  int fd() const { return fd_.get(); }

  // Every process's stat line right now (processes that vanish mid-scan are skipped). Each scan
  // opens /proc afresh: a dup of one descriptor would share its directory offset, and a second
  // scan would then start where the first one ended and see nothing.
  std::vector<ProcStat> scan() const {
    std::vector<ProcStat> all;
    int fresh = ::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fresh == -1) return all;
    std::unique_ptr<DIR, int (*)(DIR*)> dir(::fdopendir(fresh), &::closedir);
    if (!dir) {
      ::close(fresh);
      return all;
    }
    all.reserve(512);
    while (dirent* entry = ::readdir(dir.get())) {
      pid_t pid = 0;
      const char* name = entry->d_name;
      auto [end, ec] = std::from_chars(name, name + std::strlen(name), pid);
      if (ec != std::errc{} || *end != '\0' || pid <= 0) continue;
      if (auto stat = read_stat(fd_.get(), pid)) all.push_back(*stat);
    }
    return all;
  }

 private:
  UniqueFd fd_;
};

// pid 1, ourselves and our ancestors: never signalled, never walked.
class ProtectedPids {
 public:
  explicit ProtectedPids(const ProcDirectory& proc) {
    pids_.insert(1);
    pid_t pid = ::getpid();
    while (pid > 1 && pids_.insert(pid).second) {
      auto stat = read_stat(proc.fd(), pid);
      if (!stat) break;
      pid = stat->ppid;
    }
  }
  bool contains(pid_t pid) const { return pid <= 1 || pids_.count(pid) > 0; }

 private:
  std::unordered_set<pid_t> pids_;
};

struct Identity {
  pid_t pid;
  std::uint64_t start_time;
  auto operator<=>(const Identity&) const = default;
};

// The run's live processes in one scan. `known` processes (already frozen) skip the environ read.
template <class IsKnown>
std::vector<ProcStat> scan_run(const ProcDirectory& proc, const ProtectedPids& protect, std::optional<pid_t> root,
                               std::string_view entry, IsKnown&& is_known) {
  std::vector<ProcStat> all = proc.scan();
  std::unordered_set<pid_t> in_tree;
  if (root && !protect.contains(*root)) {
    std::unordered_multimap<pid_t, pid_t> children;
    children.reserve(all.size());
    bool root_seen = false;
    for (const auto& p : all) {
      children.emplace(p.ppid, p.pid);
      if (p.pid == *root) root_seen = true;
    }
    if (root_seen) {
      std::vector<pid_t> pending{*root};
      while (!pending.empty()) {
        pid_t pid = pending.back();
        pending.pop_back();
        if (!in_tree.insert(pid).second) continue;
        auto [first, last] = children.equal_range(pid);
        for (auto it = first; it != last; ++it)
          if (!protect.contains(it->second)) pending.push_back(it->second);
      }
    }
  }
  std::vector<ProcStat> run;
  for (const auto& p : all) {
    if (p.dead() || protect.contains(p.pid)) continue;
    if (in_tree.count(p.pid) || is_known(p) || environ_has_entry(proc.fd(), p.pid, entry)) run.push_back(p);
  }
  return run;
}

int pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}
int pidfd_send_signal(int pidfd, int signal) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
}

// The state of one kill: the processes frozen so far, each pinned by a pidfd.
class RunKiller final : public FreezeTarget {
 public:
  RunKiller(std::optional<pid_t> root, const RunMarker& marker)
      : protect_(proc_), root_(root), entry_(marker.first + "=" + marker.second) {}

  // Whatever happens to the caller (an exception, a cancelled coroutine), nothing is ever left
  // frozen: a stopped process of the run is killed, not forgotten.
  ~RunKiller() { kill_all(); }
  RunKiller(const RunKiller&) = delete;
  RunKiller& operator=(const RunKiller&) = delete;

  // One scan; freezes whatever it finds that is not frozen yet. Returns how many it froze.
  std::size_t freeze_round() override {
    ++rounds_;
    auto found = scan_run(proc_, protect_, root_, entry_, [this](const ProcStat& p) {
      return tracked_.count(Identity{p.pid, p.start_time}) > 0;
    });
    std::size_t frozen = 0;
    for (const auto& p : found) {
      Identity id{p.pid, p.start_time};
      if (tracked_.count(id)) continue;
      Tracked t;
      t.pidfd.reset(pidfd_open(p.pid));
      if (!t.pidfd) {
        if (errno == ESRCH) continue;  // gone already
        problem("pidfd_open(" + std::to_string(p.pid) + "): " + std::system_category().message(errno) +
                "; signalled by pid instead");
      }
      // The pidfd (if any) was opened after the scan: make sure it names the process that
      // qualified, not a newcomer that inherited a recycled pid.
      auto now = read_stat(proc_.fd(), p.pid);
      if (!now || now->start_time != p.start_time || now->dead()) continue;
      if (!signal(id, t, SIGSTOP)) continue;
      tracked_.emplace(id, std::move(t));
      ++frozen;
    }
    return frozen;
  }

  void kill_all() {
    for (auto& [id, t] : tracked_)
      if (!t.dead && !signal(id, t, SIGKILL)) t.dead = true;
  }

  // Marks the ones that have terminated (a zombie counts as terminated); returns how many live.
  std::size_t count_alive() {
    std::size_t alive = 0;
    for (auto& [id, t] : tracked_) {
      if (t.dead) continue;
      if (t.pidfd) {
        pollfd p{t.pidfd.get(), POLLIN, 0};
        if (::poll(&p, 1, 0) == 1) t.dead = true;
      } else {
        auto now = read_stat(proc_.fd(), id.pid);
        if (!now || now->start_time != id.start_time || now->dead()) t.dead = true;
      }
      if (!t.dead) ++alive;
    }
    return alive;
  }

  // How the frozen processes stand (FreezeTarget::settling): those not yet actually stopped (nor
  // dead), and whether each is in an uninterruptible wait. A SIGSTOP is acted on when the process
  // next returns to user space; a fork that was in progress at that moment still completes (since
  // Linux 5.0 a signal to one process no longer restarts its fork). One not stopped is sent
  // SIGSTOP again: a process of the run may have sent it SIGCONT since.
  Settling settling() override {
    Settling s;
    for (auto& [id, t] : tracked_) {
      if (t.dead) continue;
      auto now = read_stat(proc_.fd(), id.pid);
      if (!now || now->start_time != id.start_time || now->dead()) continue;
      if (now->state == 'T' || now->state == 't') continue;
      (now->state == 'D' ? s.uninterruptible : s.runnable) += 1;
      signal(id, t, SIGSTOP);
    }
    return s;
  }

  // Blocks in poll(2) until every frozen process is gone or the deadline passes.
  void wait_until_dead(Clock::time_point deadline) {
    std::vector<pollfd> fds;
    while (count_alive() > 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return;
      fds.clear();
      bool without_pidfd = false;
      for (auto& [id, t] : tracked_) {
        if (t.dead) continue;
        if (t.pidfd)
          fds.push_back(pollfd{t.pidfd.get(), POLLIN, 0});
        else
          without_pidfd = true;
      }
      // Processes tracked by pid only cannot be polled: look again at least every 10 ms.
      int wait_ms = static_cast<int>(std::min<long long>(left.count(), without_pidfd ? 10 : 1000));
      ::poll(fds.data(), fds.size(), wait_ms);
    }
  }

  int rounds() const override { return rounds_; }
  std::size_t tracked() const { return tracked_.size(); }

  KillReport report(bool fixed_point) const {
    KillReport r;
    r.freeze_rounds = rounds_;
    r.fixed_point = fixed_point;
    r.problems = problems_;
    for (const auto& [id, t] : tracked_)
      (t.dead ? r.killed : r.survivors).push_back(id.pid);
    return r;
  }

 private:
  struct Tracked {
    UniqueFd pidfd;
    bool dead = false;
  };

  // False when the process is gone.
  bool signal(const Identity& id, const Tracked& t, int sig) {
    if (t.pidfd) return pidfd_send_signal(t.pidfd.get(), sig) == 0 || errno != ESRCH;
    auto now = read_stat(proc_.fd(), id.pid);
    if (!now || now->start_time != id.start_time || now->dead()) return false;
    return ::kill(id.pid, sig) == 0 || errno != ESRCH;
  }

  void problem(std::string text) {
    if (problems_.size() < 8) problems_.push_back(std::move(text));
  }

  ProcDirectory proc_;
  ProtectedPids protect_;
  std::optional<pid_t> root_;
  std::string entry_;
  std::map<Identity, Tracked> tracked_;
  std::vector<std::string> problems_;
  int rounds_ = 0;
};

}  // namespace

std::vector<pid_t> find_run_processes(std::optional<pid_t> root, const RunMarker& marker) {
  ProcDirectory proc;
  ProtectedPids protect(proc);
  std::string entry = marker.first + "=" + marker.second;
  std::vector<pid_t> pids;
  for (const auto& p : scan_run(proc, protect, root, entry, [](const ProcStat&) { return false; }))
    pids.push_back(p.pid);
  return pids;
}

std::string KillReport::summary() const {
  std::string s = "killed " + std::to_string(killed.size()) + " process(es) after " + std::to_string(freeze_rounds) +
                  " freeze round(s)";
  if (!fixed_point) s += " (no fixed point: processes kept appearing or time ran out)";
  if (!survivors.empty()) {
    s += "; survivors:";
    for (pid_t pid : survivors)
      s += " " + std::to_string(pid);
  }
  for (const auto& p : problems)
    s += "; " + p;
  return s;
}

// The driver, in two flavours that differ only in how they pause: the sync one blocks, the
// async one awaits a timer or a post. Each pass:
//   freeze: FreezePass (freeze_pass.hpp): scan and SIGSTOP the newcomers, wait until the frozen
//           ones are stopped, scan again, until the fixed point, the budget or the patience ends it.
//   kill:   SIGKILL everything frozen; wait until none is alive.
//   check:  scan once more; anything found starts another pass.

// The pause while frozen processes settle: short at first (a SIGSTOP normally lands within
// microseconds), longer while it takes (looking costs a stat read per frozen process).
std::chrono::milliseconds next_pause(std::chrono::milliseconds pause) {
  return std::min(pause * 2, std::chrono::milliseconds(16));
}

// After a pass's kill: whether another pass is due (the check after the kill found more).
bool another_pass(RunKiller& killer, Clock::time_point deadline) {
  if (killer.tracked() == 0 || killer.rounds() >= kMaxFreezeRounds || Clock::now() >= deadline) return false;
  return killer.freeze_round() > 0;  // the check after the kill
}

KillReport kill_run_processes_sync(std::optional<pid_t> root, const RunMarker& marker,
                                   std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  RunKiller killer(root, marker);
  bool fixed_point = false;
  do {
    FreezePass pass;
    auto pause = std::chrono::milliseconds(1);
    for (auto next = pass.step(killer, Clock::now(), deadline); next != FreezePass::Next::over;
         next = pass.step(killer, Clock::now(), deadline)) {
      if (next != FreezePass::Next::pause) {
        pause = std::chrono::milliseconds(1);  // newcomers frozen: they too normally stop at once
        continue;
      }
      ::usleep(static_cast<useconds_t>(pause.count() * 1000));  // blocking is this variant's contract
      pause = next_pause(pause);
    }
    fixed_point = pass.fixed_point();
    killer.kill_all();
    killer.wait_until_dead(deadline);
  } while (another_pass(killer, deadline));
  return killer.report(fixed_point);
}

asio::awaitable<KillReport> kill_run_processes(asio::any_io_executor executor, std::optional<pid_t> root,
                                               RunMarker marker, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  RunKiller killer(root, marker);
  asio::steady_timer timer(executor);
  bool fixed_point = false;
  do {
    FreezePass pass;
    auto pause = std::chrono::milliseconds(1);
    for (auto next = pass.step(killer, Clock::now(), deadline); next != FreezePass::Next::over;
         next = pass.step(killer, Clock::now(), deadline)) {
      if (next == FreezePass::Next::pause) {
        timer.expires_after(pause);
        co_await timer.async_wait(asio::use_awaitable);
        pause = next_pause(pause);
      } else {
        // Let the other work on these io threads run between two scans.
        pause = std::chrono::milliseconds(1);  // newcomers frozen: they too normally stop at once
        co_await asio::post(executor, asio::use_awaitable);
      }
    }
    fixed_point = pass.fixed_point();
    killer.kill_all();
    auto wait = std::chrono::milliseconds(1);
    while (killer.count_alive() > 0 && Clock::now() < deadline) {
      timer.expires_at(std::min(deadline, Clock::now() + wait));
      co_await timer.async_wait(asio::use_awaitable);
      wait = std::min(wait * 2, std::chrono::milliseconds(25));
    }
  } while (another_pass(killer, deadline));
  co_return killer.report(fixed_point);
}

}  // namespace mh::daemon
