// A child process with piped stdin/stdout (posix_spawn), in its own process group, waited for
// with a bound and stopped terminate-then-kill. Or, for a long-lived server such as the daemon a
// bench hosts, stdin from /dev/null and its output appended to a log. Shared by the tests and the benches so that
// every harness spawns, reaps and cleans up one way.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mh::testkit {

struct SpawnOptions {
  std::filesystem::path program;
  std::vector<std::string> args;                // without argv[0] (the program is argv[0])
  std::optional<std::vector<std::string>> env;  // the whole environment; nullopt: inherit ours
  std::filesystem::path cwd;                    // empty: ours
  std::filesystem::path stderr_file;            // empty: stderr is a pipe (stderr_fd())
  bool own_process_group = true;                // so a failed run can be killed whole
  bool stdin_null = false;                      // stdin is /dev/null (no stdin_fd())
  // Non-empty: stdout and stderr both appended to this file (no stdout_fd(), no stderr_fd();
  // stderr_file is then not used).
  std::filesystem::path output_log;
};

class Subprocess {
 public:
  using Clock = std::chrono::steady_clock;

  Subprocess() = default;
  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;
  ~Subprocess();  // kills (the group) and reaps if still running; closes the pipes

  // Returns an error text, or "" when the child runs.
  std::string spawn(const SpawnOptions& options);

  // A pid slot kept up to date while the child runs (0 once reaped), for a signal handler that
  // forwards Ctrl-C to the running child.
  void track_in(std::atomic<pid_t>* slot) { tracker_ = slot; }

  pid_t pid() const { return pid_; }
  int stdin_fd() const { return stdin_fd_; }
  int stdout_fd() const { return stdout_fd_; }
  int stderr_fd() const { return stderr_fd_; }
  bool running() const { return pid_ > 0; }
  // CPU time (user + system) of the child and every descendant it reaped, once it was reaped.
  double cpu_ms() const { return cpu_ms_; }
  // The raw wait status once reaped.
  std::optional<int> exit_status() const { return exit_status_; }

  // One whole line per write(2) when it fits the pipe, as a driver would send it.
  bool write_line(std::string_view line);
  void close_stdin();

  // Waits (bounded) for the exit; returns the wait status. Polls with a 1 ms nap: the exit has
  // no file descriptor to wait on here, and the nap bounds a wait, it orders nothing.
  std::optional<int> wait_exit(Clock::time_point deadline);
  // Asks politely first (SIGTERM: metaharness stops its run and kills the vendor's processes),
  // then kills the whole process group and reaps.
  void terminate(std::chrono::milliseconds grace);
  void kill_and_reap();

 private:
  void reaped(int status);

  pid_t pid_ = -1;
  bool group_ = false;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  int stderr_fd_ = -1;
  std::optional<int> exit_status_;
  double cpu_ms_ = 0;
  std::atomic<pid_t>* tracker_ = nullptr;
};

}  // namespace mh::testkit
