// The body of one run, contained: its own cgroup (what it starts cannot escape it), its own view
// of the filesystem (bubblewrap), and under a root daemon its own unprivileged identity. The
// daemon decides the policy once (ContainmentPolicy, from the config); each run prepares its
// containment from its launch plan before it spawns, spawns what launch_plan() says with
// spawn_options(), and ends it with end().
//
// Where a part is not available it is never silently dropped: the run starts with a warning
// naming what is missing (CGROUP_UNAVAILABLE: the end falls back to the environment-marker sweep,
// which a process that drops its environment escapes; SANDBOX_UNAVAILABLE: the run sees the host's
// filesystem as the identity it runs as), and a limit that cannot be enforced refuses the run.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "adapters/adapter.hpp"
#include "daemon/process/child_process.hpp"
#include "daemon/process/run_cgroup.hpp"
#include "daemon/process/sandbox.hpp"
#include "protocol/events.hpp"

namespace mh::daemon {

// Unprivileged uids handed to runs one each, from the range systemd uses for DynamicUser=
// (61184–65519), never two live runs on one. Shared by the runs of one daemon.
class RunUidPool {
 public:
  static constexpr uid_t kFirst = 61184, kLast = 65519;
  // A uid free now, preferring one derived from the run id; nullopt when all are taken.
  std::optional<uid_t> acquire(const std::string& run_id);
  void release(uid_t uid);
  // A uid a run adopted from a previous daemon already runs as: taken from now on (false when it
  // was taken already).
  bool claim(uid_t uid);

 private:
  std::mutex mutex_;  // runs start on their own strands; held only to pick a number
  std::set<uid_t> taken_;
};

// The limits a run spec asks for (run.limits), as its cgroup takes them; unset ones leave the
// policy's defaults.
inline CgroupLimits limits_of(const adapters::RunSpec& spec) {
  return CgroupLimits{spec.limits.memory_max_bytes, spec.limits.pids_max, spec.limits.cpu_max_percent};
}

struct ContainmentPolicy {
  // The runs' cgroups' parent; nullopt with the reason when there is none.
  std::optional<CgroupParent> cgroups;
  std::string no_cgroups_why;
  CgroupLimits default_limits;  // runs.memory_max etc.; a run spec's own limits win

  bool sandbox = false;  // false with the reason: SANDBOX_UNAVAILABLE
  std::string no_sandbox_why;
  SandboxSpec sandbox_spec;  // read_only, hidden, bwrap, setpriv; per run the rest is filled in

  // Under a root daemon: a fixed user (runs.user), else one uid per run from `uids`. Not root:
  // the daemon's own identity, always.
  bool daemon_is_root = false;
  std::optional<SandboxSpec::RunAs> fixed_user;
  std::shared_ptr<RunUidPool> uids;
};

// A group's counters as the wire carries them (stream.closed.resources).
protocol::ev::RunResources run_resources(const CgroupFacts& facts);

class RunContainment {
 public:
  // Makes the run's cgroup (with its limits), its identity (its own directories chowned to it,
  // its passwd and group files in `run_dir`) and its sandboxed plan. Errors are the refusal's
  // text, naming the limit, path or file.
  // `own_network` (network = "gateway"): the run gets a network namespace of its own; its gate
  // directory (own_network->gate_dir, in `run_dir`) is made here, 0755 and the daemon's, and
  // the plan's hook channel moves into it (SandboxSpec::own_network). Refused by name when the
  // policy has no sandbox: only a sandbox can give the run a network of its own.
  // `cwd_identity`: the plan's cwd as a root daemon checked it as the run's submitter; the sandbox
  // binds it only while it is still that directory (SandboxSpec::cwd_identity).
  static boost::system::result<std::unique_ptr<RunContainment>, std::string> prepare(
      const ContainmentPolicy& policy, const std::string& run_id, const std::filesystem::path& run_dir,
      const adapters::LaunchPlan& plan, const CgroupLimits& limits,
      const std::optional<SandboxSpec::OwnNetwork>& own_network = std::nullopt,
      const std::optional<DirectoryIdentity>& cwd_identity = std::nullopt);
  // What a run's containment was, so a daemon that adopts the run can end it: its cgroup, its
  // identity, whether it was sandboxed. Kept in the run directory (body.json) from the spawn on.
  struct Record {
    std::optional<std::filesystem::path> cgroup;
    std::optional<SpawnOptions::Identity> identity;
    bool sandboxed = false;
  };
  Record record() const;
  static std::optional<std::string> write_record(const std::filesystem::path& file, const Record& record);
  static boost::system::result<Record, std::string> read_record(const std::filesystem::path& file);
  // The containment of a run a previous daemon started, taken over: its cgroup found again (it
  // must still be there when the record names one), its uid claimed in the pool.
  static boost::system::result<std::unique_ptr<RunContainment>, std::string> adopt(const ContainmentPolicy& policy,
                                                                                   const std::string& run_id,
                                                                                   const adapters::LaunchPlan& plan,
                                                                                   const Record& record);
  std::optional<std::filesystem::path> cgroup_dir() const;
  ~RunContainment();
  RunContainment(const RunContainment&) = delete;
  RunContainment& operator=(const RunContainment&) = delete;

  // What to spawn, and how.
  const adapters::LaunchPlan& launch_plan() const { return plan_; }
  SpawnOptions spawn_options() const;
  // The warnings the run states at its start (code, message).
  const std::vector<std::pair<std::string, std::string>>& warnings() const { return warnings_; }
  bool has_cgroup() const { return bool(cgroup_); }
  bool sandboxed() const { return sandboxed_; }
  std::optional<uid_t> uid() const;
  // Whether `pid` is a process of this run: in its cgroup (true for any pid when it has none).
  bool holds(pid_t pid) const { return !cgroup_ || cgroup_->holds(pid); }

  // Kills every process of the run and waits (bounded) until none is left: through the cgroup,
  // else the marker sweep with `root` walked too. Returns what went wrong ("" when clean).
  // Idempotent: a second call finds nothing to do.
  boost::asio::awaitable<std::string> end(boost::asio::any_io_executor executor, std::optional<pid_t> root,
                                          std::chrono::milliseconds timeout);

  // Parking (issue 27 §5): the run's vendor is started again in the same containment. The plan as
  // prepared with `extra_args` after the vendor's own (sandboxed alike), and the sweep of what the
  // last process left: killed through the cgroup (kept: the run goes on), else the marker sweep.
  adapters::LaunchPlan plan_with(const std::vector<std::string>& extra_args) const;
  boost::asio::awaitable<std::string> sweep(boost::asio::any_io_executor executor, std::chrono::milliseconds timeout);

  // The cgroup's counters (read at end(), kept); nullopt without a cgroup.
  const std::optional<CgroupFacts>& facts() const { return facts_; }
  // The same for stream.closed: nullopt without a cgroup; read now when end() has not run (a
  // run that never spawned), whose processes_killed is then unknown.
  std::optional<protocol::ev::RunResources> resources() const;

  // A sandboxed plan's bwrap exits 128+N when the vendor died of signal N: read it as that signal.
  protocol::ProcessTermination vendor_termination(const protocol::ProcessTermination& spawned) const;

 private:
  RunContainment() = default;

  adapters::LaunchPlan plan_;
  adapters::LaunchPlan unsandboxed_;         // the plan as given (plan_with)
  std::optional<SandboxSpec> sandbox_spec_;  // what plan_ was sandboxed with
  std::unique_ptr<RunCgroup> cgroup_;
  bool sandboxed_ = false;
  std::optional<SpawnOptions::Identity> identity_;
  std::shared_ptr<RunUidPool> uid_pool_;  // set when identity_ came from it
  std::vector<std::pair<std::string, std::string>> warnings_;
  std::optional<CgroupFacts> facts_;
  bool ended_ = false;
};

}  // namespace mh::daemon
