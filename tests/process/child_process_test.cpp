// ChildProcess: exact environment, working directory, the three pipes, exit and signal
// reporting, spawn failures as values, process group / signal state / descriptors of the child,
// and RAII (no zombie, no descriptor left behind).
#include "daemon/process/child_process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <boost/asio/write.hpp>
#include <fstream>
#include <set>

#include "daemon/process/exec_handoff.hpp"
#include "process_test_support.hpp"

namespace mh::daemon::test {
namespace {

using protocol::ProcessKind;
using protocol::ProcessTermination;

struct Output {
  std::string out;
  std::string err;
  ProcessTermination termination;
};

// Spawns the plan on a strand, optionally writes `input` then closes stdin, collects stdout and
// stderr to EOF and waits for the exit.
Output run_plan(IoThreads& io, const adapters::LaunchPlan& plan, std::string input = {}) {
  auto strand = io.make_strand();
  return io.run(strand, [&]() -> asio::awaitable<Output> {
    auto spawned = spawn_or_throw(strand, plan);
    auto& child = *spawned;
    if (!input.empty()) co_await asio::async_write(child.stdin_pipe(), asio::buffer(input), asio::use_awaitable);
    child.close_stdin();
    Output result;
    result.out = co_await read_to_eof(child.stdout_pipe());
    result.err = co_await read_to_eof(child.stderr_pipe());
    result.termination = co_await child.async_wait();
    co_return result;
  }());
}

TEST(ChildProcess, EnvironmentIsExactlyTheConstructedOneNothingInherited) {
  ::setenv("MH_SHOULD_NOT_LEAK", "parent-value", 1);
  IoThreads io;
  TempDir dir;
  auto out = run_plan(io, make_plan("/usr/bin/env", {}, {{"A", "1"}, {"B", "two words"}, {"EMPTY", ""}}, dir.path()));
  ::unsetenv("MH_SHOULD_NOT_LEAK");
  EXPECT_EQ(out.out, "A=1\nB=two words\nEMPTY=\n");
  EXPECT_EQ(out.termination.kind, ProcessKind::exited);
  EXPECT_EQ(out.termination.code, 0);
}

TEST(ChildProcess, EmptyEnvironmentStaysEmpty) {
  IoThreads io;
  TempDir dir;
  auto out = run_plan(io, make_plan("/usr/bin/env", {}, {}, dir.path()));
  EXPECT_EQ(out.out, "");
  EXPECT_EQ(out.termination.code, 0);
}

TEST(ChildProcess, ArgumentsArePassedExactly) {
  IoThreads io;
  TempDir dir;
  auto out =
      run_plan(io, make_plan("/bin/sh", {"-c", "printf '[%s]' \"$@\"", "argv0", "a b", "", "*"}, {}, dir.path()));
  EXPECT_EQ(out.out, "[a b][][*]");
}

// The attack (a review's, as an attacker reads the code): a run's submitter writes a path behind
// the opened-path prefix into what becomes a vendor's argument (its model name, its prompt). Only
// a privileged hop's own options are opened (a plan with handed_env, the sandbox's bwrap): a
// vendor's arguments are passed exactly, never opened by root and handed on as a descriptor.
TEST(ChildProcess, AVendorsArgumentIsNeverAPathTheSpawnerOpens) {
  IoThreads io;
  TempDir dir;
  const std::string smuggled = std::string(kOpenedPathArgPrefix) + dir.path().string();
  auto out = run_plan(io, make_plan("/bin/sh", {"-c", "printf '[%s]' \"$1\"; ls /proc/self/fd | wc -l", "sh", smuggled},
                                    {}, dir.path()));
  EXPECT_EQ(out.out.substr(0, smuggled.size() + 2), "[" + smuggled + "]") << out.out;
}

// Under a root daemon the run's user enters the working directory itself, after the drop: a
// directory only root could reach (another user's 0700 home above it, as a submitter's swap after
// the check would make it) is refused, never entered as root and handed to the run as its cwd.
TEST(ChildProcess, TheRunsUserEntersItsWorkingDirectoryAfterTheDrop) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: the spawn takes another uid";
  IoThreads io;
  TempDir dir;
  constexpr uid_t kNobody = 65534;
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const auto private_home = dir.path() / "victim", repo = private_home / "repo";
  std::filesystem::create_directories(repo);
  std::ofstream(repo / ".env") << "DB_PASSWORD=hunter2\n";
  ASSERT_EQ(::chmod(private_home.c_str(), 0700), 0);
  ASSERT_EQ(::chmod(repo.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((repo / ".env").c_str(), 0644), 0);
  SpawnOptions as_nobody;
  as_nobody.identity = SpawnOptions::Identity{kNobody, kNobody};
  auto strand = io.make_strand();
  auto refused = ChildProcess::spawn(strand, make_plan("/bin/cat", {".env"}, {}, repo), as_nobody);
  if (refused) {
    std::string seen = io.run(strand, read_to_eof((*refused)->stdout_pipe()));
    io.run(strand, (*refused)->async_wait());
    FAIL() << "the run's user was handed a directory it cannot reach; it read: " << seen;
  }
  EXPECT_NE(refused.error().find("could not be entered as uid 65534"), std::string::npos) << refused.error();
  // A directory the run's user can reach is its cwd as before.
  auto reached = ChildProcess::spawn(strand, make_plan("/bin/pwd", {"-P"}, {}, dir.path()), as_nobody);
  ASSERT_TRUE(reached) << reached.error();
  EXPECT_EQ(io.run(strand, read_to_eof((*reached)->stdout_pipe())),
            std::filesystem::canonical(dir.path()).string() + "\n");
  io.run(strand, (*reached)->async_wait());
}

TEST(ChildProcess, WorkingDirectoryIsThePlans) {
  IoThreads io;
  TempDir dir;
  auto out = run_plan(io, make_plan("/bin/pwd", {"-P"}, {}, dir.path()));
  EXPECT_EQ(out.out, std::filesystem::canonical(dir.path()).string() + "\n");
}

TEST(ChildProcess, StdinStdoutStderrRoundTrip) {
  IoThreads io;
  TempDir dir;
  auto out =
      run_plan(io,
               make_plan("/bin/sh", {"-c", "while read line; do echo \"out:$line\"; echo \"err:$line\" >&2; done"}, {},
                         dir.path()),
               "hello\nworld\n");
  EXPECT_EQ(out.out, "out:hello\nout:world\n");
  EXPECT_EQ(out.err, "err:hello\nerr:world\n");
  EXPECT_EQ(out.termination.kind, ProcessKind::exited);
}

TEST(ChildProcess, ExitCodeIsReported) {
  IoThreads io;
  TempDir dir;
  auto out = run_plan(io, make_plan("/bin/sh", {"-c", "exit 7"}, {}, dir.path()));
  EXPECT_EQ(out.termination.kind, ProcessKind::exited);
  EXPECT_EQ(out.termination.code, 7);
}

TEST(ChildProcess, DeathBySignalIsReported) {
  IoThreads io;
  TempDir dir;
  auto out = run_plan(io, make_plan("/bin/sh", {"-c", "kill -TERM $$"}, {}, dir.path()));
  EXPECT_EQ(out.termination.kind, ProcessKind::signaled);
  EXPECT_EQ(out.termination.signal, SIGTERM);
}

TEST(ChildProcess, SendSignalReachesTheChildAndIsRefusedAfterReaping) {
  IoThreads io;
  TempDir dir;
  auto strand = io.make_strand();
  auto [termination, after] =
      io.run(strand, [&]() -> asio::awaitable<std::pair<ProcessTermination, boost::system::error_code>> {
        auto spawned = spawn_or_throw(strand, make_plan("/bin/sleep", {"30"}, {}, dir.path()));
        auto& child = *spawned;
        auto sent = child.send_signal(SIGUSR1);
        if (sent) throw std::runtime_error("send_signal: " + sent.message());
        auto t = co_await child.async_wait();
        auto again = co_await child.async_wait();  // cached
        if (again.signal != t.signal) throw std::runtime_error("second wait differs");
        co_return std::pair{t, child.send_signal(SIGUSR1)};
      }());
  EXPECT_EQ(termination.kind, ProcessKind::signaled);
  EXPECT_EQ(termination.signal, SIGUSR1);
  EXPECT_EQ(after, boost::system::errc::no_such_process);
}

TEST(ChildProcess, SpawnFailuresAreValuesNamingTheCause) {
  IoThreads io;
  TempDir dir;
  auto strand = io.make_strand();

  auto missing = ChildProcess::spawn(strand, make_plan(dir.path() / "no-such-binary", {}, {}, dir.path()));
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("missing binary"), std::string::npos) << missing.error();
  EXPECT_NE(missing.error().find("no-such-binary"), std::string::npos) << missing.error();

  auto no_cwd = ChildProcess::spawn(strand, make_plan("/bin/true", {}, {}, dir.path() / "gone"));
  ASSERT_FALSE(no_cwd);
  EXPECT_NE(no_cwd.error().find("cwd missing"), std::string::npos) << no_cwd.error();

  auto relative = ChildProcess::spawn(strand, make_plan("bin/true", {}, {}, dir.path()));
  ASSERT_FALSE(relative);
  EXPECT_NE(relative.error().find("not an absolute path"), std::string::npos) << relative.error();

  auto not_exec_path = dir.path() / "plain.txt";
  std::ofstream(not_exec_path) << "hello\n";
  auto not_exec = ChildProcess::spawn(strand, make_plan(not_exec_path, {}, {}, dir.path()));
  ASSERT_FALSE(not_exec);
  EXPECT_NE(not_exec.error().find("not executable"), std::string::npos) << not_exec.error();

  // Executable but not a format the kernel can run (no #! line): execve itself fails, and the
  // errno text comes back from the child.
  auto garbage_path = dir.path() / "garbage";
  std::ofstream(garbage_path) << "this is not a program\n";
  ::chmod(garbage_path.c_str(), 0755);
  auto exec_failed = ChildProcess::spawn(strand, make_plan(garbage_path, {}, {}, dir.path()));
  ASSERT_FALSE(exec_failed);
  EXPECT_NE(exec_failed.error().find("exec of"), std::string::npos) << exec_failed.error();
  EXPECT_NE(exec_failed.error().find("Exec format error"), std::string::npos) << exec_failed.error();

  auto bad_env = ChildProcess::spawn(strand, make_plan("/bin/true", {}, {{"A=B", "x"}}, dir.path()));
  ASSERT_FALSE(bad_env);
  EXPECT_NE(bad_env.error().find("malformed environment entry"), std::string::npos) << bad_env.error();

  // A failed exec leaves no zombie behind.
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

// Reads "SigBlk:" / "SigIgn:" style lines of /proc/<pid>/status.
std::string status_field(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(name + ":", 0) == 0) {
      auto value = line.substr(name.size() + 1);
      value.erase(0, value.find_first_not_of(" \t"));
      return value;
    }
  return "";
}

TEST(ChildProcess, ChildHasItsOwnProcessGroupDefaultSignalsAndOnlyItsPipes) {
  // A daemon typically ignores SIGPIPE and blocks signals on some threads; none of that may
  // reach the vendor. Also leave a descriptor without close-on-exec lying around.
  struct sigaction ignore {
  }, previous_pipe{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous_pipe);
  sigset_t usr1, previous_mask;
  ::sigemptyset(&usr1);
  ::sigaddset(&usr1, SIGUSR2);
  ::pthread_sigmask(SIG_BLOCK, &usr1, &previous_mask);  // the io threads inherit it
  int leaky = ::open("/dev/null", O_RDONLY);            // deliberately without O_CLOEXEC
  ASSERT_GE(leaky, 0);

  IoThreads io;
  TempDir dir;
  auto strand = io.make_strand();
  struct Seen {
    pid_t pid, pgid, own_pgid;
    std::string sig_ignored, sig_blocked, fds;
  };
  auto seen = io.run(strand, [&]() -> asio::awaitable<Seen> {
    // ls lists its own descriptors: 0, 1, 2 and the one it opened to read the directory.
    auto spawned =
        spawn_or_throw(strand, make_plan("/bin/sh", {"-c", "read x; exec /bin/ls /proc/self/fd"}, {}, dir.path()));
    auto& child = *spawned;
    Seen s;
    s.pid = child.pid();
    s.pgid = ::getpgid(child.pid());
    s.own_pgid = ::getpgrp();
    s.sig_ignored = status_field(child.pid(), "SigIgn");
    s.sig_blocked = status_field(child.pid(), "SigBlk");
    co_await asio::async_write(child.stdin_pipe(), asio::buffer(std::string("go\n")), asio::use_awaitable);
    s.fds = co_await read_to_eof(child.stdout_pipe());
    co_await child.async_wait();
    co_return s;
  }());
  ::close(leaky);
  ::pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  ::sigaction(SIGPIPE, &previous_pipe, nullptr);

  EXPECT_EQ(seen.pgid, seen.pid) << "the child leads its own process group";
  EXPECT_NE(seen.pgid, seen.own_pgid);
  EXPECT_EQ(seen.sig_ignored, "0000000000000000");
  EXPECT_EQ(seen.sig_blocked, "0000000000000000");
  EXPECT_EQ(seen.fds, "0\n1\n2\n3\n");
}

// The io_context creates its reactor descriptors (epoll, eventfd, timerfd) on first use: the
// count of open descriptors once it has.
std::size_t descriptors_after_warm_up(IoThreads& io, const TempDir& dir) {
  auto strand = io.make_strand();
  io.run(strand, [&]() -> asio::awaitable<void> {
    auto spawned = spawn_or_throw(strand, make_plan("/bin/true", {}, {}, dir.path()));
    co_await spawned->async_wait();
  }());
  return open_descriptor_count();
}

// What a test of leaks compares against: the descriptors open once the reactor is warm, with the
// threads, the dir and the strand the test then spawns on.
struct LeakCheck {
  IoThreads io;
  TempDir dir;
  IoThreads::Strand strand = io.make_strand();
  const std::size_t descriptors_before = descriptors_after_warm_up(io, dir);
};

TEST(ChildProcess, DestroyingARunningChildKillsAndReapsItAndLeavesNoDescriptor) {
  LeakCheck t;
  pid_t pid = t.io.run(t.strand, [&]() -> asio::awaitable<pid_t> {
    auto spawned = spawn_or_throw(t.strand, make_plan("/bin/sleep", {"30"}, {}, t.dir.path()));
    pid_t p = spawned->pid();
    if (proc_state(p) == std::nullopt) throw std::runtime_error("child not running");
    co_return p;  // the unique_ptr goes here
  }());
  EXPECT_FALSE(proc_state(pid).has_value()) << "no zombie: the pid is gone from /proc";
  EXPECT_EQ(open_descriptor_count(), t.descriptors_before);
}

TEST(ChildProcess, ManySpawnsLeaveNoDescriptorsOrZombies) {
  LeakCheck t;
  int exits = t.io.run(t.strand, [&]() -> asio::awaitable<int> {
    int ok = 0;
    for (int i = 0; i < 20; ++i) {
      auto spawned = spawn_or_throw(t.strand, make_plan("/bin/true", {}, {}, t.dir.path()));
      auto terminated = co_await spawned->async_wait();
      if (terminated.kind == ProcessKind::exited && terminated.code == 0) ++ok;
    }
    co_return ok;
  }());
  EXPECT_EQ(exits, 20);
  EXPECT_EQ(open_descriptor_count(), t.descriptors_before);
  int status = 0;
  EXPECT_EQ(::waitpid(-1, &status, WNOHANG), -1);
}

}  // namespace
}  // namespace mh::daemon::test

namespace mh::daemon::test {
namespace {

// A plan with a handed environment: the program gets the plan's `env` plus the descriptor's name,
// and mh-exec, exec'd as that program, gives the vendor exactly the handed environment: the
// memfd closed, nothing of the hops' environment left.
TEST(ChildProcess, AHandedEnvironmentReachesOnlyWhatMhExecStarts) {
  IoThreads io;
  TempDir dir;
  auto plan =
      make_plan(MH_TEST_EXEC_HELPER, {"--", "/bin/sh", "-c", "/usr/bin/env; echo fds; exec /bin/ls /proc/self/fd"},
                {{"MH_HOP_ONLY", "hop"}}, dir.path());
  plan.handed_env = std::vector<std::pair<std::string, std::string>>{{"PATH", "/usr/bin:/bin"},
                                                                     {"MH_VENDOR_VALUE", "two words=and more"}};
  auto out = run_plan(io, plan);
  EXPECT_EQ(out.termination.code, 0) << out.err;
  // sh adds PWD (and may add SHLVL, _): what matters is what came from where.
  EXPECT_NE(out.out.find("MH_VENDOR_VALUE=two words=and more\n"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("PATH=/usr/bin:/bin\n"), std::string::npos) << out.out;
  EXPECT_EQ(out.out.find("MH_HOP_ONLY"), std::string::npos) << "the hops' environment stays with them: " << out.out;
  EXPECT_EQ(out.out.find("METAHARNESS_EXEC_ENV_FD"), std::string::npos) << out.out;
  EXPECT_NE(out.out.find("fds\n0\n1\n2\n3\n"), std::string::npos)
      << "the memfd is closed before the vendor: " << out.out;
}

// The program itself (a privileged hop) sees the plan's env and the descriptor's name, nothing of
// the handed environment; the descriptor is a sealed memfd holding it, which takes no write.
TEST(ChildProcess, TheHopSeesItsFixedEnvironmentAndASealedMemfd) {
  IoThreads io;
  TempDir dir;
  auto plan = make_plan("/bin/sh",
                        {"-c",
                         "tr '\\0' '\\n' < /proc/self/fd/$METAHARNESS_EXEC_ENV_FD; echo end-of-memfd; "
                         "echo x >> /proc/self/fd/$METAHARNESS_EXEC_ENV_FD 2>/dev/null && echo writable; "
                         "exec /usr/bin/env"},
                        {{"MH_RUN", "r1"}}, dir.path());
  plan.handed_env = std::vector<std::pair<std::string, std::string>>{{"LD_PRELOAD", "/nowhere.so"}};
  auto out = run_plan(io, plan);
  EXPECT_EQ(out.termination.code, 0) << out.err;
  const std::string memfd = "LD_PRELOAD=/nowhere.so\nend-of-memfd\n";
  ASSERT_EQ(out.out.substr(0, memfd.size()), memfd) << out.out;
  const std::string env = out.out.substr(memfd.size());
  EXPECT_NE(env.find("MH_RUN=r1\n"), std::string::npos) << env;
  EXPECT_NE(env.find("METAHARNESS_EXEC_ENV_FD="), std::string::npos) << env;
  EXPECT_EQ(env.find("LD_PRELOAD"), std::string::npos) << "the handed environment is not the hop's: " << env;
  EXPECT_EQ(env.find("writable"), std::string::npos) << "the memfd is sealed: " << env;
}

// The child's umask is the run's (022), not the daemon's.
TEST(ChildProcess, TheChildHasTheRunsUmaskWhateverTheDaemons) {
  IoThreads io;
  TempDir dir;
  mode_t previous = ::umask(0);
  auto out = run_plan(io, make_plan("/bin/sh", {"-c", "umask; mkdir d; touch f"}, {}, dir.path()));
  ::umask(previous);
  EXPECT_EQ(out.out, "0022\n");
  struct stat info {};
  ASSERT_EQ(::stat((dir.path() / "d").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat((dir.path() / "f").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

}  // namespace
}  // namespace mh::daemon::test
