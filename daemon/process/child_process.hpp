// One vendor CLI as a child process of the daemon: spawned from a LaunchPlan with exactly the
// plan's program, args, constructed environment and working directory, and its three standard
// streams as Asio pipes bound to the run's executor (its strand), so the run loop reads and
// writes them from C++20 coroutines.
//
// The child starts in its own process group (a terminal signal to the daemon's group does not
// reach it), with every signal disposition at default and an empty signal mask (a daemon that
// ignores SIGPIPE must not hand that to the vendor), with the run's own umask (022), and with no
// descriptor of the daemon's open except its three pipes (and a sandboxed plan's handed
// environment, see spawn).
//
// Lifetime: the object owns the child until it has been reaped. Destroying a ChildProcess whose
// child has not been reaped yet sends it SIGKILL and reaps it right there (a blocking waitpid;
// a SIGKILLed process normally goes within microseconds, unless it is stuck in an
// uninterruptible kernel wait). So no zombie and no descriptor ever outlives the object. Only
// the direct child is killed that way; the rest of the run's processes (tool shells, their
// background jobs, anything that escaped with setsid) are the job of kill_run_processes
// (run_processes.hpp), which the run loop calls before letting the ChildProcess go.
//
// Threading: like every I/O object of a run, a ChildProcess is used from the run's strand only.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/writable_pipe.hpp>
#include <boost/system/error_code.hpp>
#include <boost/system/result.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "adapters/adapter.hpp"
#include "protocol/types.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

// How the child is placed, beyond the plan. Both steps run in the forked child before exec, in
// this order; a failure fails the spawn ("exec of … failed: <errno text>").
struct SpawnOptions {
  // A run's cgroup.procs (RunCgroup::procs_fd): the child moves itself in first, so it and all
  // it starts are born there.
  int join_cgroup_fd = -1;
  // The identity the child runs as (the daemon must be root to give it): supplementary groups
  // cleared, then gid, then uid. Unset: the daemon's own.
  struct Identity {
    uid_t uid = 0;
    gid_t gid = 0;
  };
  std::optional<Identity> identity;
  // The run's own file-creation mask, set in the child before exec, so a run never inherits the
  // daemon's (or its supervisor's): under a daemon with umask 000 a vendor made 0777 directories.
  mode_t umask = 022;
};

class ChildProcess {
 public:
  using executor_type = asio::any_io_executor;

  // Spawns the plan's program with exactly the plan's environment. A plan with `handed_env` (the
  // sandbox's) also gets that environment in a sealed memfd, inherited by the child and named by
  // METAHARNESS_EXEC_ENV_FD in its environment (exec_handoff.hpp), for mh-exec to apply after the
  // drop; the memfd is not passed to anything else. Errors are values naming what failed: a program path that is not
  // absolute, a missing or non-executable binary, a missing working directory, a malformed
  // environment entry, or the exec itself ("exec of /x/y failed: Exec format error"). The plan's
  // `directories` and `files` are not created here (that is the run loop's step before this one).
  // Blocks the calling thread for the fork+exec handshake only (until the child has exec'd).
  static boost::system::result<std::unique_ptr<ChildProcess>, std::string> spawn(executor_type executor,
                                                                                 const adapters::LaunchPlan& plan,
                                                                                 const SpawnOptions& options = {});

  ~ChildProcess();  // SIGKILL + reap if the child was not reaped yet; closes every descriptor
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  executor_type get_executor() const { return executor_; }

  asio::writable_pipe& stdin_pipe() { return stdin_; }
  asio::readable_pipe& stdout_pipe() { return stdout_; }
  asio::readable_pipe& stderr_pipe() { return stderr_; }
  // The vendor sees end of input. Idempotent.
  void close_stdin();
  // Writes all of `bytes` to the child's stdin. False when the child stopped reading (it
  // exited): stdin is closed then, for nothing more can reach it. `bytes` must outlive the wait.
  asio::awaitable<bool> write_stdin(std::string_view bytes);

  // Completes when the child terminates, and reaps it: exited + code, or signaled + signal.
  // Once reaped, returns the same value at once. One wait at a time. If the wait is cancelled
  // or the ChildProcess is destroyed while waiting, completes with kind `unknown`; the awaiting
  // coroutine must then not touch the destroyed object.
  asio::awaitable<protocol::ProcessTermination> async_wait();

  // Non-blocking check: reaps the child if it has terminated. Returns the termination once
  // reaped, nullopt while it is still running.
  std::optional<protocol::ProcessTermination> try_reap();

  // Sends a signal to the child (through its pidfd, so never to a recycled pid). After the child
  // has been reaped this refuses with no_such_process.
  boost::system::error_code send_signal(int signal);

  // The termination, once reaped.
  const std::optional<protocol::ProcessTermination>& termination() const { return termination_; }

 private:
  struct Parts;
  ChildProcess(executor_type executor, Parts&& parts);

  executor_type executor_;
  pid_t pid_ = -1;
  asio::posix::stream_descriptor pidfd_;  // readable once the child has terminated
  asio::writable_pipe stdin_;
  asio::readable_pipe stdout_;
  asio::readable_pipe stderr_;
  std::optional<protocol::ProcessTermination> termination_;
};

// Decodes a waitpid status.
protocol::ProcessTermination termination_from_wait_status(int status);

}  // namespace mh::daemon
