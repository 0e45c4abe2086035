// directory_as_uid (directory_as_uid.hpp).
#include "daemon/process/directory_as_uid.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

namespace {

// What the child says: 0 and the real path on its pipe, or one of these.
enum ChildExit : int { kReached = 0, kNotReached = 1, kNoDrop = 2 };

// The child's part: only system calls on memory made before the fork (the daemon has threads).
[[noreturn]] void judge_as(const char* given, uid_t uid, gid_t gid, const std::vector<gid_t>& groups, int out) {
  if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0 || ::syscall(SYS_setresgid, gid, gid, gid) != 0 ||
      ::syscall(SYS_setresuid, uid, uid, uid) != 0)
    ::_exit(kNoDrop);
  int dir = ::open(given, O_PATH | O_DIRECTORY | O_CLOEXEC);  // as the peer: links followed as it may follow them
  if (dir < 0) ::_exit(kNotReached);
  char self[64];
  char real[PATH_MAX + 1];
  std::snprintf(self, sizeof self, "/proc/self/fd/%d", dir);
  ssize_t n = ::readlink(self, real, PATH_MAX);
  if (n <= 0 || real[0] != '/') ::_exit(kNotReached);
  real[n] = '\0';
  if (::faccessat(AT_FDCWD, real, R_OK | W_OK | X_OK, AT_EACCESS) != 0) ::_exit(kNotReached);
  for (ssize_t at = 0; at < n;) {
    ssize_t w = ::write(out, real + at, static_cast<std::size_t>(n - at));
    if (w <= 0) ::_exit(kNotReached);
    at += w;
  }
  ::_exit(kReached);
}

}  // namespace

boost::system::result<std::string, std::string> directory_as_uid(const std::string& given, uid_t uid, gid_t gid,
                                                                 const std::set<std::uint32_t>& groups) {
  using Result = boost::system::result<std::string, std::string>;
  const std::vector<gid_t> group_list(groups.begin(), groups.end());
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return Result(boost::system::in_place_error, std::string(std::strerror(errno)));
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  const pid_t child = ::fork();
  if (child < 0) return Result(boost::system::in_place_error, "fork: " + std::string(std::strerror(errno)));
  if (child == 0) judge_as(given.c_str(), uid, gid, group_list, write_end.get());
  write_end.reset();
  std::string real;
  char chunk[1024];
  for (ssize_t n; (n = ::read(read_end.get(), chunk, sizeof chunk)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    real.append(chunk, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(child, &status, 0) == -1 && errno == EINTR) {
  }
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == kReached && !real.empty()) return Result(boost::system::in_place_value, std::move(real));
  if (code == kNoDrop)
    return Result(boost::system::in_place_error,
                  "the daemon could not take uid " + std::to_string(uid) + " to check it (it is not root)");
  return Result(boost::system::in_place_error, "uid " + std::to_string(uid) +
                                                   " cannot reach it, or it is not a directory that uid may enter, "
                                                   "read and write");
}

}  // namespace mh::daemon
