// A run's own cgroup (v2): the vendor joins it before exec, so it and everything it ever starts
// live there from birth. Nothing leaves a cgroup by dropping its environment, by setsid, by a
// double fork or by daemonizing, so ending the run is one write (`cgroup.kill`), one wait (for
// `populated 0` in `cgroup.events`) and one rmdir — no scan of the host's processes.
//
// Layout: every run of one daemon lives under one parent, `<base>/<group>/<run id>`, where
//   - <base> is the configured `runs.cgroup_root`, or by default the daemon's own cgroup inside
//     the host's cgroup2 mount (under systemd with `Delegate=yes` that is the service's delegated
//     subtree; as root on a host whose cgroup2 root is writable, that root), and
//   - <group> names the daemon's state directory (mh-<12 hex of its path's SHA-256>), so two
//     daemons on one host never share a parent, and a restarted daemon finds its runs again.
// Directories are created 0750 whatever the umask.
//
// Limits (memory.max, pids.max, cpu.max) need their controllers enabled down to the run's group;
// a limit whose controller is not available there is refused by name, never ignored.
//
// Facts read at the end (cpu.stat, memory.peak, pids.peak, memory.events) are nullopt where the
// file is absent (its controller is not enabled): unknown, never 0.
//
// Threading: a RunCgroup is used from its run's strand; the free functions are thread-safe.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

namespace fs = std::filesystem;

// The limits a run asks for; nullopt leaves the parent's (normally: none).
struct CgroupLimits {
  std::optional<std::uint64_t> memory_max_bytes;  // memory.max
  std::optional<std::uint64_t> pids_max;          // pids.max
  // cpu.max as a share of one CPU, in percent (150 = one and a half CPUs): quota over a 100 ms
  // period.
  std::optional<std::uint32_t> cpu_max_percent;

  bool any() const { return memory_max_bytes || pids_max || cpu_max_percent; }
};

// What a run's cgroup counted. nullopt: unknown here (the controller is not enabled).
struct CgroupFacts {
  std::optional<std::uint64_t> cpu_usec;           // cpu.stat usage_usec (always in v2)
  std::optional<std::uint64_t> memory_peak_bytes;  // memory.peak
  std::optional<std::uint64_t> tasks_peak;         // pids.peak
  std::optional<std::uint64_t> oom_kills;          // memory.events oom_kill
  std::optional<std::uint64_t> processes_killed;   // alive in the group when the end killed it
};

class RunCgroup;

// The directory runs' cgroups are made in. Opening it checks that it is a cgroup2 directory the
// daemon can write, creates <group> and enables there every controller its parent offers.
class CgroupParent {
 public:
  // `base`: a directory on a cgroup2 mount. Errors name what is wrong ("… is not on a cgroup2
  // mount", "cannot create …: Permission denied").
  static boost::system::result<CgroupParent, std::string> open(const fs::path& base, const std::string& group);

  // The default base: the calling process's own cgroup (from /proc/self/cgroup, the `0::` line)
  // inside the first cgroup2 mount in /proc/self/mounts; nullopt when there is no cgroup2 mount.
  static std::optional<fs::path> own_cgroup_dir();

  // The group name for a daemon state directory: mh-<12 hex digits of SHA-256 of its path>.
  static std::string group_for_state_dir(const fs::path& state_dir);

  const fs::path& dir() const { return dir_; }
  // Controllers enabled for the runs' groups (cgroup.subtree_control of dir()).
  const std::vector<std::string>& controllers() const { return controllers_; }
  bool has_controller(std::string_view name) const;

  // The refusal for a limit whose controller is not here, or nullopt when all can be honoured.
  // Names the limit and the controller: "memory.max needs the memory controller, which is not
  // available in /sys/fs/cgroup/…".
  std::optional<std::string> refuse_limits(const CgroupLimits& limits) const;

  // Makes the run's group (0750) and writes its limits. A group of that name left by an earlier
  // daemon is reused only if empty (its processes would otherwise be adopted unseen): a populated
  // one is refused. Errors name the path and the file.
  boost::system::result<std::unique_ptr<RunCgroup>, std::string> create(const std::string& run_id,
                                                                        const CgroupLimits& limits) const;

  // The group of an existing run (after a restart: to kill what is left of it), or an error.
  boost::system::result<std::unique_ptr<RunCgroup>, std::string> find(const std::string& run_id) const;

  // Removes <group> itself (the daemon's stop). rmdir removes only a group with no child group
  // left, and that is the check: while a run's group is still there (a run that did not end in
  // the shutdown grace) it stays, for the next start to find, and the error says so. A group
  // already gone is fine.
  boost::system::result<void, std::string> remove() const;

 private:
  fs::path dir_;
  std::vector<std::string> controllers_;
};

class RunCgroup {
 public:
  ~RunCgroup();  // kills and removes the group if that was not done (bounded, blocking)
  RunCgroup(const RunCgroup&) = delete;
  RunCgroup& operator=(const RunCgroup&) = delete;

  const fs::path& dir() const { return dir_; }

  // Written "0" by the forked child before exec: the child moves itself in (ChildProcess).
  int procs_fd() const { return procs_.get(); }

  // The processes in the group now (cgroup.procs).
  std::vector<pid_t> processes() const;
  bool populated() const;
  // Whether `pid` is in this group (its /proc/<pid>/cgroup names it).
  bool holds(pid_t pid) const;

  // Kills every process in the group (cgroup.kill), counting them first for the facts. Does not
  // wait. Errors name the file.
  boost::system::result<void, std::string> kill();

  // Completes when the group is empty (`populated 0`), or with false when `timeout` ran out.
  // Waits on cgroup.events itself (kernfs wakes epoll on its every change), never a poll loop;
  // holds no inotify instance (closing one blocks for a kernel grace period).
  boost::asio::awaitable<bool> wait_empty(boost::asio::any_io_executor executor, std::chrono::milliseconds timeout);
  // The same, blocking the calling thread (shutdown and recovery paths only).
  bool wait_empty_sync(std::chrono::milliseconds timeout);

  // Removes the (empty) group. Errors name the path.
  boost::system::result<void, std::string> remove();

  // Reads the counters. Call before remove().
  CgroupFacts facts() const;

 private:
  friend class CgroupParent;
  RunCgroup(fs::path dir, UniqueFd dir_fd, UniqueFd procs);

  fs::path dir_;
  UniqueFd dir_fd_;
  UniqueFd procs_;
  std::optional<std::uint64_t> killed_;
  bool removed_ = false;
};

}  // namespace mh::daemon
