#include "daemon/process/child_process.hpp"

#include "daemon/process/all_signals_blocked.hpp"

// Boost 1.81's Process v2 headers also name boost::optional and an unqualified
// is_constructible without including them when BOOST_PROCESS_USE_STD_FS is set; the shared
// wrapper (daemon/asio/process_v2.hpp, not ours) only covers remove_pointer, and asio_impl.cpp
// gets these through Beast. Bring them in first.
#include <fcntl.h>
#include <grp.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/optional.hpp>
#include <boost/type_traits/is_constructible.hpp>
#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>

#include "daemon/asio/process_v2.hpp"
#include "daemon/process/directory_identity_of.hpp"
#include "daemon/process/exec_handoff.hpp"
#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

namespace bp2 = boost::process::v2;
namespace fs = std::filesystem;
using boost::system::error_code;

namespace {

std::string errno_text(int error) {
  return std::system_category().message(error);
}

int pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

int pidfd_send_signal(int pidfd, int signal) {
  return static_cast<int>(::syscall(SYS_pidfd_send_signal, pidfd, signal, nullptr, 0));
}

// A pipe whose both ends are close-on-exec from birth (so no concurrent fork elsewhere in the
// daemon inherits them) and numbered above 2: the child-side end is dup2'ed onto 0/1/2 in the
// child, and dup2 onto itself would keep its close-on-exec flag and lose the stream.
struct PipeEnds {
  UniqueFd read;
  UniqueFd write;
};

boost::system::result<PipeEnds, std::string> make_pipe(const char* which) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) == -1) return std::string("cannot create the ") + which + " pipe: " + errno_text(errno);
  PipeEnds ends{UniqueFd(fds[0]), UniqueFd(fds[1])};
  for (UniqueFd* end : {&ends.read, &ends.write}) {
    if (end->get() > 2) continue;
    int moved = ::fcntl(end->get(), F_DUPFD_CLOEXEC, 3);
    if (moved == -1) return std::string("cannot renumber the ") + which + " pipe: " + errno_text(errno);
    end->reset(moved);
  }
  return ends;
}

// Closes every descriptor from 3 up except those in `keep` (the launcher's own exec-error
// pipe, and what the child inherits: ChildSideSetup::inherited). Runs in the forked child, so it
// uses system calls only: no allocation, no locks. Boost.Process 1.81 has its own close_all, but it skips the gaps
// between whitelisted descriptors (it compares whitelist[idx] with itself), so descriptors below the error pipe would
// survive the exec; this does it right and leaves that one nothing to do.
void close_descriptors_except(const std::vector<int>& keep) {
  unsigned int from = 3;
  for (;;) {
    long next_kept = -1;
    for (int fd : keep)
      if (fd >= static_cast<int>(from) && (next_kept == -1 || fd < next_kept)) next_kept = fd;
    unsigned int to =
        next_kept == -1 ? std::numeric_limits<unsigned int>::max() : static_cast<unsigned int>(next_kept) - 1;
    if (next_kept == -1 || static_cast<unsigned int>(next_kept) > from) {
      if (::syscall(SYS_close_range, from, to, 0) == -1) {
        // Kernels before 5.9: close one by one up to the descriptor limit.
        struct rlimit limit {};
        unsigned long last = 1024;
        if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) last = limit.rlim_cur;
        for (unsigned long fd = from; fd <= to && fd < last; ++fd)
          ::close(static_cast<int>(fd));
      }
    }
    if (next_kept == -1) return;
    from = static_cast<unsigned int>(next_kept) + 1;
  }
}

// Child-side setup, run between fork and execve (after stdio is dup2'ed and the launcher's
// chdir): the run's cgroup, its identity and then its working directory, own process group, default signal
// dispositions, empty mask, nothing else open. On failure errno is left set, which is what the launcher reports to the
// parent.
struct ChildSideSetup {
  SpawnOptions options;
  // Inherited across exec, their close-on-exec flags cleared here: the handed environment's
  // memfd and the paths opened for the hop (exec_handoff.hpp). Made in the parent: read only here.
  std::vector<int> inherited;
  // With an identity to take, the working directory is entered here, after the drop, as the run's
  // user: entered as root (the launcher's own chdir, before this step), a directory the run's user
  // could never reach — one its submitter swapped for a link into another user's 0700 home after
  // the check — would become the run's cwd, and what is under it readable. Else the launcher's.
  const char* cwd_after_drop = nullptr;

  error_code on_exec_setup(bp2::posix::default_launcher& launcher, const fs::path&, const char* const*) {
    // First of all, move into the run's cgroup (while still privileged to): from here on
    // everything this child starts is born there. Writing "0" moves the writing process.
    if (options.join_cgroup_fd >= 0 && ::write(options.join_cgroup_fd, "0", 1) != 1)
      return error_code(errno, boost::system::system_category());
    if (options.identity) {
      if (::setgroups(0, nullptr) == -1 || ::setgid(options.identity->gid) == -1 ||
          ::setuid(options.identity->uid) == -1)
        return error_code(errno, boost::system::system_category());
      if (cwd_after_drop && ::chdir(cwd_after_drop) == -1) return error_code(errno, boost::system::system_category());
    }
    if (::setpgid(0, 0) == -1) return error_code(errno, boost::system::system_category());
    struct sigaction default_action {};
    default_action.sa_handler = SIG_DFL;
    ::sigemptyset(&default_action.sa_mask);
    for (int signal = 1; signal < NSIG; ++signal) {
      if (signal == SIGKILL || signal == SIGSTOP) continue;
      ::sigaction(signal, &default_action, nullptr);  // EINVAL for libc-reserved ones: fine
    }
    sigset_t none;
    ::sigemptyset(&none);
    if (::sigprocmask(SIG_SETMASK, &none, nullptr) == -1) return error_code(errno, boost::system::system_category());
    ::umask(options.umask);
    for (int fd : inherited) {
      if (::fcntl(fd, F_SETFD, 0) == -1) return error_code(errno, boost::system::system_category());
      // The launcher closes what its whitelist does not name after this step; the parent
      // reserved room, so this appends without allocating in the forked child.
      launcher.fd_whitelist.push_back(fd);
    }
    close_descriptors_except(launcher.fd_whitelist);
    errno = 0;
    return {};
  }

  // After a failed exec (or a failed setup step) the launcher has already sent errno to the
  // parent and would then call exit(), which runs the daemon's atexit handlers and static
  // destructors inside the child. End the child without them. Variadic because Boost 1.81
  // detects this hook with one argument list and calls it with another.
  template <class... Ignored>
  void on_exec_error(Ignored&&...) {
    ::_exit(127);
  }
};

void kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1 && errno == EINTR) {
  }
}

std::optional<std::string> check_plan(const adapters::LaunchPlan& plan) {
  const fs::path& program = plan.program;
  if (program.empty()) return "the launch plan names no program";
  if (!program.is_absolute()) return "program \"" + program.string() + "\" is not an absolute path";
  struct stat info {};
  if (::stat(program.c_str(), &info) == -1) return "missing binary: " + program.string() + ": " + errno_text(errno);
  if (!S_ISREG(info.st_mode)) return "program " + program.string() + " is not a regular file";
  if (::access(program.c_str(), X_OK) == -1)
    return "program " + program.string() + " is not executable: " + errno_text(errno);
  if (plan.cwd.empty()) return "the launch plan names no working directory";
  if (::stat(plan.cwd.c_str(), &info) == -1) return "cwd missing: " + plan.cwd.string() + ": " + errno_text(errno);
  if (!S_ISDIR(info.st_mode)) return "cwd " + plan.cwd.string() + " is not a directory";
  for (const auto& arg : plan.args)
    if (arg.find('\0') != std::string::npos) return "an argument contains a NUL byte";
  auto malformed = [](const std::vector<std::pair<std::string, std::string>>& env) -> std::optional<std::string> {
    for (const auto& [name, value] : env) {
      if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos ||
          value.find('\0') != std::string::npos)
        return "malformed environment entry \"" + name + "\"";
      if (name == kHandedEnvFdVar) return std::string("the environment may not set ") + kHandedEnvFdVar;
    }
    return std::nullopt;
  };
  if (auto problem = malformed(plan.env)) return problem;
  if (plan.handed_env)
    if (auto problem = malformed(*plan.handed_env)) return problem;
  return std::nullopt;
}

// The vendor's environment, NUL-separated NAME=VALUE entries, in a memfd sealed against every
// change (mh-exec checks the seals), close-on-exec until the child clears it, and numbered above
// the standard streams.
boost::system::result<UniqueFd, std::string> sealed_environment(
    const std::vector<std::pair<std::string, std::string>>& env) {
  std::string bytes;
  for (const auto& [name, value] : env) {
    bytes += name;
    bytes += '=';
    bytes += value;
    bytes += '\0';
  }
  if (bytes.size() > kMaxHandedEnvBytes)
    return "the vendor's environment is " + std::to_string(bytes.size()) + " bytes, over the " +
           std::to_string(kMaxHandedEnvBytes >> 20) + " MiB a sandboxed run is handed";
  UniqueFd fd(::memfd_create("mh-vendor-env", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!fd) return "cannot create the memfd for the vendor's environment: " + errno_text(errno);
  if (fd.get() <= 2) {
    int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
    if (moved == -1) return "cannot renumber the vendor environment's memfd: " + errno_text(errno);
    fd.reset(moved);
  }
  if (!write_all(fd.get(), bytes) ||
      ::fcntl(fd.get(), F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == -1)
    return "cannot write the vendor's environment to its memfd: " + errno_text(errno);
  return fd;
}

// A path opened for a privileged hop (kOpenedPathArgPrefix): a directory, reached without
// following any symbolic link, close-on-exec until the child clears it, numbered above the
// standard streams. O_PATH: nothing is read through it; bwrap mounts what it names. Where the
// directory was checked as the run's submitter, the one opened must be that one (its device and
// inode): a rename since the check is refused, never bound.
boost::system::result<UniqueFd, std::string> open_without_links(const OpenedPath& opened) {
  const std::string& path = opened.path;
  struct open_how how {};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS;
  UniqueFd fd(static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how)));
  if (!fd)
    return "cannot bind " + path + ": " + errno_text(errno) +
           (errno == ELOOP ? " (a part of it is a symbolic link: it is bound only as it was checked, by its real path)"
                           : "");
  if (opened.identity) {
    auto found = identity_of(fd.get(), "");
    if (!found) return "cannot bind " + path + ": " + errno_text(errno);
    if (!opened.identity->admits(*found))
      return "cannot bind " + path +
             ": it is no longer the directory that was checked when the run was submitted (something was renamed "
             "or replaced there since), so nothing is bound in its place";
  }
  if (fd.get() <= 2) {
    int moved = ::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3);
    if (moved == -1) return "cannot renumber the descriptor of " + path + ": " + errno_text(errno);
    fd.reset(moved);
  }
  return fd;
}

// The plan's arguments with every path a hop is handed by descriptor (before the first "--",
// which ends the hop's own options) opened here and replaced by the descriptor's number.
boost::system::result<std::vector<std::string>, std::string> open_handed_paths(const std::vector<std::string>& args,
                                                                               std::vector<UniqueFd>& opened) {
  std::vector<std::string> out = args;
  for (auto& arg : out) {
    if (arg == "--") break;
    if (!std::string_view(arg).starts_with(kOpenedPathArgPrefix)) continue;
    auto named = parse_opened_path_arg(arg);
    if (!named) return "a hop's argument names a path to open that does not parse: " + arg;
    auto fd = open_without_links(*named);
    if (!fd) return fd.error();
    arg = std::to_string(fd->get());
    opened.push_back(std::move(*fd));
  }
  return out;
}

}  // namespace

protocol::ProcessTermination termination_from_wait_status(int status) {
  protocol::ProcessTermination t;
  if (WIFEXITED(status)) {
    t.kind = protocol::ProcessKind::exited;
    t.code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    t.kind = protocol::ProcessKind::signaled;
    t.signal = WTERMSIG(status);
  }
  return t;
}

struct ChildProcess::Parts {
  pid_t pid = -1;
  UniqueFd pidfd;
  UniqueFd stdin_write;
  UniqueFd stdout_read;
  UniqueFd stderr_read;
};

boost::system::result<std::unique_ptr<ChildProcess>, std::string> ChildProcess::spawn(executor_type executor,
                                                                                      const adapters::LaunchPlan& plan,
                                                                                      const SpawnOptions& options) {
  if (auto problem = check_plan(plan)) return *problem;

  auto in = make_pipe("stdin");
  if (!in) return in.error();
  auto out = make_pipe("stdout");
  if (!out) return out.error();
  auto err = make_pipe("stderr");
  if (!err) return err.error();

  std::vector<std::string> environment;
  environment.reserve(plan.env.size() + 1);
  for (const auto& [name, value] : plan.env)
    environment.push_back(name + "=" + value);
  UniqueFd handed;  // closes here once the child holds its copy
  if (plan.handed_env) {
    auto sealed = sealed_environment(*plan.handed_env);
    if (!sealed) return sealed.error();
    handed = std::move(*sealed);
    environment.push_back(std::string(kHandedEnvFdVar) + "=" + std::to_string(handed.get()));
  }
  std::vector<UniqueFd> opened;  // likewise
  // Only a privileged hop's own options name paths to open (a plan with handed_env: the
  // sandbox's bwrap). Any other plan's arguments are the vendor's, which carry what a run's
  // submitter wrote (a model name, a prompt): never a path root opens and hands on.
  auto args = plan.handed_env ? open_handed_paths(plan.args, opened)
                              : boost::system::result<std::vector<std::string>, std::string>(plan.args);
  if (!args) return args.error();
  std::vector<int> inherited;
  if (handed) inherited.push_back(handed.get());
  for (const UniqueFd& fd : opened)
    inherited.push_back(fd.get());

  // The launcher brackets fork() with notify_fork() on the execution context of the executor it
  // is given, and in the child re-creates that context's reactor under its mutexes. On the
  // daemon's shared io_context, with other threads running it, that is both forbidden by Asio
  // and a deadlock waiting to happen in the child. So the launch runs against a private,
  // never-run context; the child is then re-adopted through a fresh pidfd on the run's executor.
  asio::io_context launch_context;
  bp2::posix::default_launcher launcher;
  launcher.fd_whitelist.reserve(16 + inherited.size());  // the child appends what it inherits
  error_code ec;
  pid_t pid = -1;
  try {
    AllSignalsBlocked blocked;
    // As the run's user when there is one to take (ChildSideSetup::cwd_after_drop); the launcher
    // enters "/" first, so nothing of the daemon's own cwd is kept.
    const std::string cwd = plan.cwd.string();
    auto process = launcher(launch_context.get_executor(), ec, plan.program, *args,
                            bp2::process_stdio{in->read.get(), out->write.get(), err->write.get()},
                            bp2::process_environment{environment},
                            bp2::process_start_dir{options.identity ? fs::path("/") : plan.cwd},
                            ChildSideSetup{options, inherited, options.identity ? cwd.c_str() : nullptr});
    if (!ec) {
      pid = process.id();
      process.detach();  // ours now; the basic_process must not kill it on destruction
    }
  } catch (const std::exception& e) {
    if (launcher.pid > 0) kill_and_reap(launcher.pid);
    return "spawn of " + plan.program.string() + " failed: " + e.what();
  }
  if (ec) {
    // The launcher leaves a child whose exec failed unreaped; it has exited already (or is
    // about to, right after reporting), so this wait is short.
    if (launcher.pid > 0) {
      int status = 0;
      while (::waitpid(launcher.pid, &status, 0) == -1 && errno == EINTR) {
      }
    }
    return "exec of " + plan.program.string() + " failed: " + ec.message() +
           (options.identity ? " (or its working directory " + plan.cwd.string() + " could not be entered as uid " +
                                   std::to_string(options.identity->uid) + ", which enters it after the drop)"
                             : std::string());
  }

  // The child is unreaped, so its pid cannot be recycled before we hold its pidfd.
  Parts parts;
  parts.pid = pid;
  parts.pidfd.reset(pidfd_open(pid));
  if (!parts.pidfd) {
    int error = errno;
    kill_and_reap(pid);
    return "pidfd_open of the spawned child failed: " + errno_text(error);
  }
  parts.stdin_write = std::move(in->write);
  parts.stdout_read = std::move(out->read);
  parts.stderr_read = std::move(err->read);
  // The child-side ends close here (their PipeEnds go out of scope), so EOF reaches us when the
  // child (and whatever inherited its stdout/stderr) is gone.
  try {
    return std::unique_ptr<ChildProcess>(new ChildProcess(std::move(executor), std::move(parts)));
  } catch (const std::exception& e) {
    // Registering a descriptor with the reactor failed; `parts` was consumed only partially, the
    // child must not outlive this.
    kill_and_reap(pid);
    return std::string("cannot register the child's descriptors: ") + e.what();
  }
}

ChildProcess::ChildProcess(executor_type executor, Parts&& parts)
    : executor_(executor), pid_(parts.pid), pidfd_(executor), stdin_(executor), stdout_(executor), stderr_(executor) {
  // Each assign takes ownership only on success; release() happens after, so a throw leaves the
  // descriptor with its UniqueFd to be closed.
  pidfd_.assign(parts.pidfd.get());
  parts.pidfd.release();
  stdin_.assign(parts.stdin_write.get());
  parts.stdin_write.release();
  stdout_.assign(parts.stdout_read.get());
  parts.stdout_read.release();
  stderr_.assign(parts.stderr_read.get());
  parts.stderr_read.release();
}

ChildProcess::~ChildProcess() {
  if (!termination_ && pid_ > 0) {
    if (pidfd_.is_open()) pidfd_send_signal(pidfd_.native_handle(), SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) == -1 && errno == EINTR) {
    }
  }
  // The pipes and the pidfd close with their members.
}

void ChildProcess::close_stdin() {
  error_code ignored;
  if (stdin_.is_open()) stdin_.close(ignored);
}

asio::awaitable<bool> ChildProcess::write_stdin(std::string_view bytes) {
  auto [ec, n] = co_await asio::async_write(stdin_, asio::buffer(bytes), asio::as_tuple(asio::use_awaitable));
  (void)n;
  if (ec) close_stdin();
  co_return !ec;
}

std::optional<protocol::ProcessTermination> ChildProcess::try_reap() {
  if (termination_) return termination_;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, WNOHANG);
  } while (r == -1 && errno == EINTR);
  if (r == pid_)
    termination_ = termination_from_wait_status(status);
  else if (r == -1 && errno == ECHILD)
    // Someone else reaped it (a waitpid(-1) elsewhere in the daemon would be a bug): the pid is
    // gone and must never be signalled again.
    termination_ = protocol::ProcessTermination{};
  return termination_;
}

asio::awaitable<protocol::ProcessTermination> ChildProcess::async_wait() {
  for (;;) {
    if (auto reaped = try_reap()) co_return *reaped;
    // A pidfd polls readable once its process has terminated.
    auto [ec] =
        co_await pidfd_.async_wait(asio::posix::descriptor_base::wait_read, asio::as_tuple(asio::use_awaitable));
    if (ec) co_return protocol::ProcessTermination{};  // cancelled or destroyed: touch nothing
  }
}

error_code ChildProcess::send_signal(int signal) {
  if (termination_ || !pidfd_.is_open()) return make_error_code(boost::system::errc::no_such_process);
  if (pidfd_send_signal(pidfd_.native_handle(), signal) == -1)
    return error_code(errno, boost::system::system_category());
  return {};
}

}  // namespace mh::daemon
