// directory_as_uid (directory_as_uid.hpp).
#include "daemon/process/directory_as_uid.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/thread_pool.hpp>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "daemon/process/all_signals_blocked.hpp"
#include "daemon/process/directory_identity_of.hpp"
#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

namespace {

// What the child says: 0 and, on its pipe, the directory's device, inode and birth (three 64-bit
// words) then its real path; or one of these.
enum ChildExit : int { kReached = 0, kNotReached = 1, kNoDrop = 2 };
constexpr std::size_t kIdentityBytes = 3 * sizeof(std::uint64_t);

// The child's part: only system calls, on memory made before the fork (the daemon has threads).
// Every signal stays blocked (the daemon's handlers write to its own signal pipe, and the peer,
// whose uid the child takes, may signal it), and no descriptor of the daemon's but the pipe is
// kept.
[[noreturn]] void judge_as(const char* given, uid_t uid, gid_t gid, const std::vector<gid_t>& groups, int out) {
  constexpr int kOut = 3;
  if (out != kOut && ::dup2(out, kOut) != kOut) ::_exit(kNotReached);
  if (::syscall(SYS_close_range, kOut + 1, ~0U, 0) != 0) ::_exit(kNotReached);
  if (::syscall(SYS_setgroups, groups.size(), groups.data()) != 0 || ::syscall(SYS_setresgid, gid, gid, gid) != 0 ||
      ::syscall(SYS_setresuid, uid, uid, uid) != 0)
    ::_exit(kNoDrop);
  // As the peer: links followed as it may follow them, and the directory entered (which takes the
  // search permission it must have anyway). The kernel then says where it is (its real path) and
  // which directory it is, and judges that directory (".", never the path again, which the peer
  // may have renamed something onto meanwhile).
  if (::chdir(given) != 0) ::_exit(kNotReached);
  const auto entered = identity_of(AT_FDCWD, ".");
  if (!entered) ::_exit(kNotReached);
  if (::faccessat(AT_FDCWD, ".", R_OK | W_OK | X_OK, AT_EACCESS) != 0) ::_exit(kNotReached);
  char said[kIdentityBytes + PATH_MAX + 1];
  const std::uint64_t identity[3] = {entered->device, entered->inode, entered->birth_ns};
  std::memcpy(said, identity, kIdentityBytes);
  char* real = said + kIdentityBytes;
  const long length = ::syscall(SYS_getcwd, real, PATH_MAX + 1);  // with its NUL
  if (length <= 1 || real[0] != '/') ::_exit(kNotReached);
  const ssize_t n = static_cast<ssize_t>(kIdentityBytes) + length - 1;
  for (ssize_t at = 0; at < n;) {
    ssize_t w = ::write(kOut, said + at, static_cast<std::size_t>(n - at));
    if (w <= 0) ::_exit(kNotReached);
    at += w;
  }
  ::_exit(kReached);
}

}  // namespace

boost::system::result<JudgedDirectory, std::string> directory_as_uid(const std::string& given, uid_t uid, gid_t gid,
                                                                     const std::set<std::uint32_t>& groups,
                                                                     std::chrono::milliseconds bound) {
  using Result = boost::system::result<JudgedDirectory, std::string>;
  const std::vector<gid_t> group_list(groups.begin(), groups.end());
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return Result(boost::system::in_place_error, std::string(std::strerror(errno)));
  UniqueFd read_end(pipe_fds[0]);
  UniqueFd write_end(pipe_fds[1]);
  pid_t child;
  {
    AllSignalsBlocked blocked;  // the child is born with every signal blocked, and keeps it so
    child = ::fork();
    if (child == 0) judge_as(given.c_str(), uid, gid, group_list, write_end.get());
  }
  if (child < 0) return Result(boost::system::in_place_error, "fork: " + std::string(std::strerror(errno)));
  write_end.reset();
  // Bounded: the child runs as the peer, who may stop it or name a path on a file system of its
  // own that never answers. Past the bound it is killed, and the cwd refused.
  std::string said;
  bool timed_out = false;
  const auto give_up = std::chrono::steady_clock::now() + bound;
  char chunk[1024];
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(give_up - std::chrono::steady_clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{read_end.get(), POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(left));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) {
      timed_out = ready == 0;
      break;
    }
    ssize_t n = ::read(read_end.get(), chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the child is done
    said.append(chunk, static_cast<std::size_t>(n));
  }
  if (timed_out) ::kill(child, SIGKILL);
  int status = 0;
  pid_t reaped;
  while ((reaped = ::waitpid(child, &status, 0)) == -1 && errno == EINTR) {
  }
  const int code = reaped == child && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (!timed_out && code == kReached && said.size() > kIdentityBytes) {
    std::uint64_t identity[3];
    std::memcpy(identity, said.data(), kIdentityBytes);
    return JudgedDirectory{said.substr(kIdentityBytes), DirectoryIdentity{identity[0], identity[1], identity[2]}};
  }
  if (timed_out)
    return Result(boost::system::in_place_error,
                  "uid " + std::to_string(uid) + " did not resolve it within " + std::to_string(bound.count()) + " ms");
  if (code == kNoDrop)
    return Result(boost::system::in_place_error,
                  "the daemon could not take uid " + std::to_string(uid) + " and its groups to check it");
  return Result(boost::system::in_place_error, "uid " + std::to_string(uid) +
                                                   " cannot reach it, or it is not a directory that uid may enter, "
                                                   "read and write");
}

boost::asio::any_io_executor cwd_check_executor() {
  static boost::asio::thread_pool pool(2);
  return pool.get_executor();
}

}  // namespace mh::daemon
