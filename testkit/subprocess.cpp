#include "testkit/subprocess.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "testkit/proc.hpp"

extern char** environ;

namespace mh::testkit {

namespace {

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

Subprocess::~Subprocess() {
  if (pid_ > 0) kill_and_reap();
  close_fd(stdin_fd_);
  close_fd(stdout_fd_);
  close_fd(stderr_fd_);
}

std::string Subprocess::spawn(const SpawnOptions& o) {
  const bool stdout_piped = o.output_log.empty();
  const bool stderr_piped = stdout_piped && o.stderr_file.empty();
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if ((!o.stdin_null && ::pipe2(in, O_CLOEXEC) != 0) || (stdout_piped && ::pipe2(out, O_CLOEXEC) != 0) ||
      (stderr_piped && ::pipe2(err, O_CLOEXEC) != 0)) {
    std::string error = std::string("pipe: ") + std::strerror(errno);
    for (int* fd : {&in[0], &in[1], &out[0], &out[1], &err[0], &err[1]})
      close_fd(*fd);
    return error;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 onto 0/1/2 clears close-on-exec on the copies; the originals close at exec.
  if (o.stdin_null)
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  else
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
  if (!stdout_piped) {
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, o.output_log.c_str(), O_WRONLY | O_CREAT | O_APPEND,
                                     0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  } else {
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    if (stderr_piped)
      posix_spawn_file_actions_adddup2(&actions, err[1], STDERR_FILENO);
    else
      posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, o.stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                       0644);
  }
  if (!o.cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, o.cwd.c_str());
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Default signal handling, since a harness may ignore SIGPIPE and a child must not inherit it.
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  short flags = POSIX_SPAWN_SETSIGDEF;
  if (o.own_process_group) {
    posix_spawnattr_setpgroup(&attr, 0);
    flags |= POSIX_SPAWN_SETPGROUP;
  }
  posix_spawnattr_setflags(&attr, flags);

  std::string program = o.program.string();
  std::vector<std::string> args_copy = o.args;
  std::vector<char*> argv{program.data()};
  for (auto& a : args_copy)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_copy = o.env.value_or(std::vector<std::string>{});
  std::vector<char*> envp;
  for (auto& e : env_copy)
    envp.push_back(e.data());
  envp.push_back(nullptr);

  int rc = ::posix_spawn(&pid_, program.c_str(), &actions, &attr, argv.data(), o.env ? envp.data() : environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  for (int* child_end : {&in[0], &out[1], &err[1]})
    close_fd(*child_end);
  if (rc != 0) {
    pid_ = -1;
    for (int* our_end : {&in[1], &out[0], &err[0]})
      close_fd(*our_end);
    return "posix_spawn " + program + ": " + std::strerror(rc);
  }
  group_ = o.own_process_group;
  stdin_fd_ = in[1];
  stdout_fd_ = out[0];
  stderr_fd_ = err[0];
  if (tracker_) *tracker_ = pid_;
  return "";
}

bool Subprocess::write_line(std::string_view line) {
  std::string bytes(line);
  bytes.push_back('\n');
  std::string_view rest(bytes);
  while (!rest.empty() && stdin_fd_ >= 0) {
    ssize_t n = ::write(stdin_fd_, rest.data(), rest.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  return rest.empty();
}

void Subprocess::close_stdin() {
  close_fd(stdin_fd_);
}

void Subprocess::reaped(int status) {
  pid_ = -1;
  if (tracker_) *tracker_ = 0;
  exit_status_ = status;
}

std::optional<int> Subprocess::wait_exit(Clock::time_point deadline) {
  using namespace std::chrono_literals;
  if (pid_ <= 0) return exit_status_;
  for (;;) {
    int status = 0;
    rusage usage{};
    pid_t r = ::wait4(pid_, &status, WNOHANG, &usage);
    if (r == pid_) {
      reaped(status);
      cpu_ms_ = cpu_ms_of(usage);
      return status;
    }
    if (r < 0 && errno != EINTR) return std::nullopt;
    if (Clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(1ms);
  }
}

void Subprocess::terminate(std::chrono::milliseconds grace) {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  if (wait_exit(Clock::now() + grace)) return;
  kill_and_reap();
}

void Subprocess::kill_and_reap() {
  if (pid_ <= 0) return;
  if (group_) ::kill(-pid_, SIGKILL);
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  reaped(status);
}

}  // namespace mh::testkit
