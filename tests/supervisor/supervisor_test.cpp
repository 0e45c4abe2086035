// metaharness-supervisor as a real process with real vendors (/bin/sh scripts, cat), driven by
// the daemon's own SupervisorLink: the transcript and the stdin log, the vendor's exit, a daemon
// that goes away and comes back (nothing lost, the vendor never blocked), the hook channel, the
// adopt bound, and the supervisor outliving the process that started it.
//
// The supervisors are double-forked (spawn_supervisor): this test process makes itself their
// subreaper so that it can wait for their exit codes and reap them (and what they leave).
#include "daemon/supervisor/supervisor.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <sstream>

#include "daemon/process/child_process.hpp"
#include "daemon/process/run_cgroup.hpp"
#include "daemon/process/sandbox.hpp"
#include "daemon/supervisor/supervisor_link.hpp"
#include "daemon/supervisor/transcript_follower.hpp"
#include "tests/process/process_test_support.hpp"

namespace mh::supervisor {
namespace {

namespace asio = boost::asio;
using daemon::SupervisorLink;
using daemon::test::TempDir;
using daemon::test::unique_marker_value;
using mh::test::IoThreads;
using namespace std::chrono_literals;
using Link = std::unique_ptr<SupervisorLink>;
using Messages = std::vector<FromSupervisor>;

class Subreaper : public ::testing::Environment {
 public:
  void SetUp() override { ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }
};
[[maybe_unused]] ::testing::Environment* const kSubreaper = ::testing::AddGlobalTestEnvironment(new Subreaper);

std::string slurp(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream all;
  all << in.rdbuf();
  return all.str();
}

// Waits until `pid` has terminated (a zombie counts), within `timeout`.
bool wait_gone(pid_t pid, std::chrono::milliseconds timeout) {
  daemon::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!pidfd) return errno == ESRCH;
  struct pollfd wait {
    pidfd.get(), POLLIN, 0
  };
  return ::poll(&wait, 1, static_cast<int>(timeout.count())) == 1;
}

// The exit code of `pid`, a child of ours (as subreaper), once it exits within `timeout`.
std::optional<int> wait_exit(pid_t pid, std::chrono::milliseconds timeout) {
  if (!wait_gone(pid, timeout)) return std::nullopt;
  int status = 0;
  if (::waitpid(pid, &status, 0) != pid) return std::nullopt;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits for `dir`/`name` to exist (on inotify; the supervisor writes it by a rename).
bool wait_for_file(const fs::path& dir, const std::string& name, std::chrono::milliseconds timeout) {
  daemon::UniqueFd inotify(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  ::inotify_add_watch(inotify.get(), dir.c_str(), IN_MOVED_TO | IN_CREATE);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!fs::exists(dir / name)) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    struct pollfd wait {
      inotify.get(), POLLIN, 0
    };
    if (::poll(&wait, 1, static_cast<int>(left.count())) > 0) {
      char drain[4096];
      while (::read(inotify.get(), drain, sizeof drain) > 0) {
      }
    }
  }
  return true;
}

// ---- the "daemon": SupervisorLink on the test's strand --------------------------------------

asio::awaitable<Link> attach_link(asio::any_io_executor ex, fs::path socket, std::uint64_t carry_out_bytes) {
  auto attached = co_await SupervisorLink::attach(ex, std::move(socket), 10s, carry_out_bytes);
  if (!attached) throw std::runtime_error(attached.error());
  co_return std::move(*attached);
}

// Reads messages until `done` says so (or the link ends: thrown); returns them all.
asio::awaitable<Messages> read_until(SupervisorLink& link, std::function<bool(const FromSupervisor&)> done) {
  Messages seen;
  for (;;) {
    auto next = co_await link.next();
    if (!next) throw std::runtime_error(next.error());
    seen.push_back(*next);
    if (done(*next)) co_return seen;
  }
}

// The link's end, as next() reports it.
asio::awaitable<std::string> read_to_end(SupervisorLink& link) {
  for (;;) {
    auto next = co_await link.next();
    if (!next) co_return next.error();
  }
}

asio::awaitable<void> send_all(SupervisorLink& link, std::vector<ToSupervisor> messages) {
  for (auto& message : messages)
    link.send(std::move(message));
  co_return;
}

asio::awaitable<void> drop(Link link) {
  link.reset();
  co_return;
}

class SupervisorTest : public ::testing::Test {
 protected:
  void TearDown() override {
    // Nothing of a test is left: its supervisor (a child of this subreaper), and every process
    // carrying its marker.
    for (const auto& entry : fs::directory_iterator("/proc")) {
      std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      pid_t pid = std::stoi(name);
      if (daemon::test::is_dead(pid)) continue;
      if (daemon::test::proc_field_pid(pid, 4) == ::getpid() ||
          slurp(entry.path() / "environ").find(marker_entry()) != std::string::npos)
        ::kill(pid, SIGKILL);
    }
    io_.stop();
    // Reap what this (subreaper) process inherited.
    for (;;) {
      int status = 0;
      pid_t pid = ::waitpid(-1, &status, __WALL);
      if (pid <= 0) break;
    }
    // A cgroup goes once its processes are reaped (the escapees were this process's zombies).
    if (!cgroup_parent_.empty()) {
      ::rmdir((cgroup_parent_ / "run").c_str());
      EXPECT_EQ(::rmdir(cgroup_parent_.c_str()), 0) << cgroup_parent_ << ": " << std::strerror(errno);
    }
  }

  std::string marker_entry() const { return "METAHARNESS_RUN=" + marker_; }

  SupervisorSpec make_spec(fs::path program, std::vector<std::string> args) {
    SupervisorSpec spec;
    spec.run_id = marker_;
    spec.socket = dir_.path() / "supervisor.sock";
    spec.program = std::move(program);
    spec.args = std::move(args);
    spec.env = {{"PATH", "/usr/bin:/bin"}, {"METAHARNESS_RUN", marker_}};
    spec.cwd = dir_.path();
    spec.transcript = dir_.path() / "vendor-stdout.jsonl";
    spec.stderr_log = dir_.path() / "vendor-stderr.log";
    spec.stdin_log = dir_.path() / "vendor-stdin.jsonl";
    spec.adopt_within_ms = 30000;
    return spec;
  }
  SupervisorSpec sh_spec(const std::string& script) { return make_spec("/bin/sh", {"-c", script}); }

  void start(const SupervisorSpec& spec) {
    auto spawned = daemon::spawn_supervisor(MH_TEST_SUPERVISOR, spec, dir_.path() / "supervisor-spec.json");
    ASSERT_TRUE(spawned) << spawned.error();
  }

  // `carry_out_bytes` 0: as a daemon that asks for no carried bytes (one before them).
  Link attach(std::uint64_t carry_out_bytes = kMaxCarriedOutBytes) {
    Link link = io_.run(strand_, attach_link(strand_, dir_.path() / "supervisor.sock", carry_out_bytes), 20s);
    supervisor_pid_ = link->hello().supervisor_pid;
    return link;
  }
  Messages until(SupervisorLink& link, std::function<bool(const FromSupervisor&)> done) {
    return io_.run(strand_, read_until(link, std::move(done)), 30s);
  }
  // Until the transcript has grown to `bytes`: it has already (the file is written before any
  // `out`, and what grew before the attach is in the file), or an out or out_end says so.
  Messages until_out(SupervisorLink& link, std::uint64_t bytes) {
    if (fs::file_size(dir_.path() / "vendor-stdout.jsonl") >= bytes) return {};
    auto grown = [bytes](const FromSupervisor& m) {
      if (auto* out = std::get_if<Out>(&m)) return out->bytes >= bytes;
      if (auto* end = std::get_if<OutEnd>(&m)) return end->bytes >= bytes;
      return false;
    };
    return until(link, grown);
  }
  void send(SupervisorLink& link, std::vector<ToSupervisor> messages) {
    io_.run(strand_, send_all(link, std::move(messages)), 10s);
  }
  void drop_link(Link link) { io_.run(strand_, drop(std::move(link)), 10s); }

  boost::json::value state_file() { return boost::json::parse(slurp(dir_.path() / "supervisor.json")); }

  IoThreads io_{1};
  IoThreads::Strand strand_ = io_.make_strand();
  TempDir dir_;
  std::string marker_ = unique_marker_value("supervisor");
  pid_t supervisor_pid_ = -1;
  fs::path cgroup_parent_;  // made by the test, removed at its end
};

template <class T>
const T* first_of(const Messages& messages) {
  for (const auto& m : messages)
    if (auto* found = std::get_if<T>(&m)) return found;
  return nullptr;
}

bool ended_stdout(const FromSupervisor& m) {
  return std::holds_alternative<OutEnd>(m);
}

// `cat` as the vendor: each `in` line reaches it and the stdin log; what it writes reaches the
// transcript byte for byte, told as `out` sizes; close_stdin ends it; release ends the supervisor.
TEST_F(SupervisorTest, InLinesReachTheVendorAndItsOutputTheTranscript) {
  start(make_spec("/bin/cat", {}));
  Link link = attach();
  const Hello& hello = link->hello();
  EXPECT_EQ(hello.protocol, kProtocol);
  EXPECT_FALSE(hello.version.empty());
  ASSERT_TRUE(hello.vendor_pid);
  EXPECT_FALSE(hello.spawn_error);
  EXPECT_EQ(hello.stdout_bytes, 0u);
  EXPECT_FALSE(hello.exited);
  EXPECT_FALSE(hello.stdin_closed);

  // supervisor.json names whom to adopt; the socket is the daemon's alone.
  auto state = state_file();
  EXPECT_EQ(state.at("supervisor_pid").to_number<pid_t>(), hello.supervisor_pid);
  EXPECT_EQ(state.at("vendor_pid").to_number<pid_t>(), *hello.vendor_pid);
  EXPECT_EQ(state.at("protocol").to_number<int>(), 1);
  struct stat st {};
  ASSERT_EQ(::stat((dir_.path() / "supervisor.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(::stat((dir_.path() / "vendor-stdout.jsonl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);

  const std::string expected = "{\"a\":1}\nsecond line\n";
  send(*link, {In{"{\"a\":1}"}, In{"second line"}});
  until_out(*link, expected.size());
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdout.jsonl"), expected);
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdin.jsonl"), expected);

  send(*link, {CloseStdin{}});
  bool out_end = false, err_end = false;
  std::optional<protocol::ProcessTermination> exited;
  auto all_ended = [&](const FromSupervisor& m) {
    if (auto* end = std::get_if<OutEnd>(&m)) {
      out_end = true;
      EXPECT_EQ(end->bytes, expected.size());
    }
    if (std::holds_alternative<ErrEnd>(m)) err_end = true;
    if (auto* e = std::get_if<Exited>(&m)) exited = e->termination;
    return out_end && err_end && exited;
  };
  until(*link, all_ended);
  EXPECT_EQ(exited->kind, protocol::ProcessKind::exited);
  EXPECT_EQ(exited->code, 0);

  // An `in` after close_stdin is not accepted: nothing more is recorded.
  send(*link, {In{"too late"}, Release{}});
  EXPECT_EQ(wait_exit(hello.supervisor_pid, 20s), kExitReleased);
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdin.jsonl"), expected);
  EXPECT_NE(slurp(dir_.path() / "supervisor.log").find("released"), std::string::npos);
}

// Parking (issue 27 §5): a vendor that has exited is spawned again on `respawn`, with the
// session's resume arguments after the spec's own, on the same transcript and stdin log
// (appended: the offsets go on), and supervisor.json names the new pid. A respawn while the
// vendor runs is refused by name, and the supervisor stays up.
TEST_F(SupervisorTest, AVendorThatExitedIsSpawnedAgainWithTheResumeArgumentsOnTheSameFiles) {
  start(make_spec("/bin/sh", {"-c", "cat; echo \"args:$#:$*\"", "sh"}));
  Link link = attach();
  EXPECT_TRUE(link->hello().can_respawn);
  ASSERT_TRUE(link->hello().vendor_pid);
  const pid_t first = *link->hello().vendor_pid;
  auto answered = [](const FromSupervisor& m) { return std::holds_alternative<Respawned>(m); };
  send(*link, {Respawn{{"--resume"}}});
  const Messages refusal = until(*link, answered);
  const Respawned* refused = first_of<Respawned>(refusal);
  ASSERT_TRUE(refused);
  EXPECT_FALSE(refused->vendor_pid);
  EXPECT_EQ(refused->spawn_error, "the vendor is still running");

  // Each process's whole end: its exit, its stdout's and stderr's end.
  auto run_to_its_end = [&](const std::string& line, std::uint64_t transcript_bytes) {
    bool out_end = false, err_end = false, exited = false;
    send(*link, {In{line}, CloseStdin{}});
    until(*link, [&](const FromSupervisor& m) {
      if (auto* end = std::get_if<OutEnd>(&m)) {
        out_end = true;
        EXPECT_EQ(end->bytes, transcript_bytes);
      }
      err_end = err_end || std::holds_alternative<ErrEnd>(m);
      exited = exited || std::holds_alternative<Exited>(m);
      return out_end && err_end && exited;
    });
  };
  const std::string first_out = "first\nargs:0:\n";
  run_to_its_end("first", first_out.size());
  send(*link, {Respawn{{"--resume", "session 1"}}});
  const Messages answer = until(*link, answered);
  const Respawned* again = first_of<Respawned>(answer);
  ASSERT_TRUE(again);
  ASSERT_TRUE(again->vendor_pid) << again->spawn_error.value_or("");
  EXPECT_NE(*again->vendor_pid, first);
  EXPECT_EQ(state_file().at("vendor_pid").to_number<pid_t>(), *again->vendor_pid);
  const std::string both_out = first_out + "second\nargs:2:--resume session 1\n";
  run_to_its_end("second", both_out.size());
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdout.jsonl"), both_out);
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdin.jsonl"), "first\nsecond\n");
  // A daemon that attaches now hears of the second process, ended.
  drop_link(std::move(link));
  Link next = attach();
  EXPECT_EQ(next->hello().vendor_pid, again->vendor_pid);
  EXPECT_TRUE(next->hello().exited);
  EXPECT_EQ(next->hello().stdout_bytes, both_out.size());
  send(*next, {Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// A sandboxed plan's spec (issue 24, items 1 and 5): what the supervisor spawns (the first hop)
// gets the spec's fixed `env` and the handed descriptor alone; the vendor's `vendor_env` is in the
// sealed memfd, for mh-exec after the drop. And the child has the run's umask (022), not the
// umask of whoever started the supervisor (000 here).
TEST_F(SupervisorTest, TheFirstHopGetsTheFixedEnvironmentTheVendorsIsHandedOverAndTheUmaskIsTheRuns) {
  SupervisorSpec spec =
      sh_spec("tr '\\0' '\\n' < /proc/self/fd/$METAHARNESS_EXEC_ENV_FD; echo --; umask; echo --; exec /usr/bin/env");
  spec.env = {{"METAHARNESS_RUN", marker_}};
  spec.vendor_env = std::vector<std::pair<std::string, std::string>>{{"LD_PRELOAD", "/x.so"}, {"MH_DECLARED", "v"}};
  mode_t previous = ::umask(0);
  start(spec);
  ::umask(previous);
  Link link = attach();
  ASSERT_FALSE(link->hello().spawn_error) << *link->hello().spawn_error;
  if (!link->hello().stdout_ended) until(*link, ended_stdout);
  const std::string out = slurp(dir_.path() / "vendor-stdout.jsonl");
  const std::string handed = "LD_PRELOAD=/x.so\nMH_DECLARED=v\n--\n0022\n--\n";
  ASSERT_EQ(out.substr(0, handed.size()), handed) << out;
  const std::string env = out.substr(handed.size());
  EXPECT_NE(env.find(marker_entry() + "\n"), std::string::npos) << env;
  EXPECT_NE(env.find("METAHARNESS_EXEC_ENV_FD="), std::string::npos) << env;
  EXPECT_EQ(env.find("LD_PRELOAD"), std::string::npos) << env;
  EXPECT_EQ(env.find("MH_DECLARED"), std::string::npos) << env;
  send(*link, {Release{}});
}

// The vendor's stderr reaches its log, and a vendor killed by a signal is told as signaled.
TEST_F(SupervisorTest, ExitedCarriesTheSignalAndStderrReachesItsLog) {
  start(sh_spec("echo oops >&2; kill -TERM $$"));
  Link link = attach();
  std::optional<protocol::ProcessTermination> exited = link->hello().exited;
  bool err_ended = link->hello().stderr_ended;
  auto done = [&](const FromSupervisor& m) {
    if (auto* e = std::get_if<Exited>(&m)) exited = e->termination;
    if (std::holds_alternative<ErrEnd>(m)) err_ended = true;
    return exited && err_ended;
  };
  if (!exited || !err_ended) until(*link, done);
  EXPECT_EQ(exited->kind, protocol::ProcessKind::signaled);
  EXPECT_EQ(exited->signal, SIGTERM);
  EXPECT_EQ(slurp(dir_.path() / "vendor-stderr.log"), "oops\n");
  send(*link, {Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// The daemon goes away mid-run: the vendor keeps writing (far more than a pipe holds, so it would
// block if anything waited for the daemon) and exits; the next attach's hello covers everything,
// the transcript has every byte, the stdin log what was accepted, the exit is known.
TEST_F(SupervisorTest, ADaemonThatGoesAwayLosesNothing) {
  const fs::path fifo = dir_.path() / "go";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  constexpr std::size_t kBulk = 300000;
  start(sh_spec("echo ready; read x; echo \"got $x\"; read y < go; head -c " + std::to_string(kBulk) +
                " /dev/zero | tr '\\0' a; echo; echo \"end $y\"; exit 3"));
  Link link = attach();
  const pid_t vendor = link->hello().vendor_pid.value_or(-1);
  until_out(*link, 6);
  send(*link, {In{"one"}});
  until_out(*link, std::string("ready\ngot one\n").size());
  drop_link(std::move(link));  // the daemon dies

  {  // the vendor goes on: it is let through the fifo, writes 300 kB and exits
    std::ofstream go(fifo);
    go << "two\n";
  }
  ASSERT_TRUE(wait_gone(vendor, 30s)) << "the vendor blocked with no daemon attached";

  link = attach();
  Hello hello = link->hello();
  if (!hello.stdout_ended) {
    auto messages = until(*link, ended_stdout);
    hello.stdout_bytes = first_of<OutEnd>(messages)->bytes;
    if (auto* e = first_of<Exited>(messages)) hello.exited = e->termination;
  }
  const std::string head = "ready\ngot one\n";
  const std::string tail = "\nend two\n";
  EXPECT_EQ(hello.stdout_bytes, head.size() + kBulk + tail.size());
  std::string transcript = slurp(dir_.path() / "vendor-stdout.jsonl");
  EXPECT_EQ(transcript.size(), hello.stdout_bytes);
  EXPECT_EQ(transcript, head + std::string(kBulk, 'a') + tail);
  EXPECT_EQ(hello.stdin_bytes, 4u);
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdin.jsonl"), "one\n");
  if (!hello.exited) {
    auto exited = [](const FromSupervisor& m) { return std::holds_alternative<Exited>(m); };
    hello.exited = std::get<Exited>(until(*link, exited).back()).termination;
  }
  EXPECT_EQ(hello.exited->kind, protocol::ProcessKind::exited);
  EXPECT_EQ(hello.exited->code, 3);
  send(*link, {Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// A daemon's read side of the transcript, as a supervised run has it (TranscriptFollower): the
// `out`s it is handed, the bytes they bring, in order.
class Follower {
 public:
  explicit Follower(const fs::path& transcript) { EXPECT_TRUE(follower_.open(transcript)) << transcript; }
  // Follows the `out`s among `messages`; the largest carried.
  void follow(const Messages& messages) {
    for (const auto& m : messages)
      if (auto* out = std::get_if<Out>(&m)) {
        largest_carried_ = std::max(largest_carried_, out->data.size());
        while (fed_ < out->bytes) {
          auto chunk = follower_.next(fed_, out->bytes, out, buffer_.data(), buffer_.size());
          ASSERT_TRUE(chunk) << "the transcript ends before " << out->bytes;
          bytes_.append(*chunk);
          fed_ += chunk->size();
        }
      }
  }
  std::uint64_t fed() const { return fed_; }
  const std::string& bytes() const { return bytes_; }
  std::uint64_t read_backs() const { return follower_.read_backs(); }
  std::size_t largest_carried() const { return largest_carried_; }

 private:
  daemon::TranscriptFollower follower_;
  std::vector<char> buffer_ = std::vector<char>(64 * 1024);
  std::uint64_t fed_ = 0;
  std::string bytes_;
  std::size_t largest_carried_ = 0;
};

// Each `out` carries what the vendor wrote since the one before: a daemon that follows them reads
// nothing back from the transcript while a burst fits the bound; no `out` carries more than the
// bound (a burst over it, read at once, comes without bytes and is read back); small ones after a
// burst are carried again. The daemon gets the transcript's bytes, in order, either way.
// A cat vendor and a daemon's side that follows the outs.
class SupervisorCarryTest : public SupervisorTest {
 protected:
  // Sends `line` to the vendor (cat echoes it), appends it to `expected`, and follows the outs
  // until `daemon` has fed all of `expected`.
  void echo_and_follow(SupervisorLink& link, Follower& daemon, std::string& expected, const std::string& line) {
    send(link, {In{line}});
    expected += line + "\n";
    auto reached = [&](const FromSupervisor& m) {
      daemon.follow({m});
      return daemon.fed() >= expected.size();
    };
    until(link, reached);
  }
};

TEST_F(SupervisorCarryTest, OutsCarryTheVendorsBytesSoTheDaemonReadsNoneBack) {
  start(make_spec("/bin/cat", {}));
  Link link = attach();
  EXPECT_EQ(link->hello().carry_out_bytes, kMaxCarriedOutBytes);
  const fs::path transcript = dir_.path() / "vendor-stdout.jsonl";
  Follower daemon(transcript);
  std::string expected;
  auto say = [&](const std::string& line) { echo_and_follow(*link, daemon, expected, line); };
  for (int n = 0; n < 20; ++n)
    say("{\"type\":\"assistant\",\"n\":" + std::to_string(n) + "}");
  EXPECT_EQ(daemon.read_backs(), 0u) << "small chunks come in the outs";
  EXPECT_EQ(daemon.bytes(), expected);

  say(std::string(3 * kMaxCarriedOutBytes, 'a'));
  EXPECT_LE(daemon.largest_carried(), kMaxCarriedOutBytes) << "the burst is carried in outs within the bound, or read";
  const std::uint64_t after_burst = daemon.read_backs();
  say("{\"type\":\"result\"}");
  EXPECT_EQ(daemon.read_backs(), after_burst) << "carried again after the burst";
  EXPECT_EQ(daemon.bytes(), expected);
  EXPECT_EQ(slurp(transcript), expected);
  send(*link, {Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// A daemon that asks for no carried bytes (one from before them) is sent none: every `out` is a
// size, and the chunks are read back from the transcript, as they always were.
TEST_F(SupervisorCarryTest, ADaemonThatAsksForNoBytesReadsThemFromTheTranscript) {
  start(make_spec("/bin/cat", {}));
  Link link = attach(0);
  EXPECT_EQ(link->hello().carry_out_bytes, 0u);
  const fs::path transcript = dir_.path() / "vendor-stdout.jsonl";
  Follower daemon(transcript);
  std::string expected;
  for (int n = 0; n < 5; ++n)
    echo_and_follow(*link, daemon, expected, "{\"n\":" + std::to_string(n) + "}");
  EXPECT_EQ(daemon.largest_carried(), 0u);
  EXPECT_GE(daemon.read_backs(), 5u) << "each line's out read back";
  EXPECT_EQ(daemon.bytes(), expected);
  send(*link, {Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// The hook channel: a hook program started by the vendor (its marker, its uid) is relayed and
// held until the daemon answers, across a re-attach (hello.hooks_open); a foreign peer is
// refused; a peer that hangs up unanswered is told as hook_gone and remembered.
TEST_F(SupervisorTest, HookRequestsAreRelayedHeldAndAnswered) {
  const std::string address = "@mh-test-hook-" + marker_;
  const std::string peer = MH_TEST_HOOK_PEER;
  SupervisorSpec spec = sh_spec(peer + " " + address + " '{\"n\":1}'; echo; " + peer + " " + address +
                                " '{\"n\":2}' hangup; echo done; read z");
  spec.hook_channel = SpecHookChannel{address, static_cast<std::uint32_t>(::geteuid()), marker_entry()};
  start(spec);
  Link link = attach();
  auto is_hook = [](const FromSupervisor& m) { return std::holds_alternative<Hook>(m); };
  const Hook first = link->hello().hooks_open.empty() ? std::get<Hook>(until(*link, is_hook).back())
                                                      : link->hello().hooks_open.front();
  EXPECT_EQ(first.connection, 1u);
  EXPECT_EQ(first.line, "{\"n\":1}");

  {  // this test process is not a process of the run
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    timeval bound{20, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::string name = address;
    name[0] = '\0';
    std::memcpy(sa.sun_path, name.data(), name.size());
    ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa),
                        static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())),
              0);
    std::string answer;
    char c;
    while (::read(fd, &c, 1) == 1 && c != '\n')
      answer.push_back(c);
    ::close(fd);
    EXPECT_EQ(answer, "refused: the peer is not a process of this run");
  }

  // The daemon goes away and comes back: the request is still held, and answered now.
  drop_link(std::move(link));
  link = attach();
  ASSERT_EQ(link->hello().hooks_open.size(), 1u);
  EXPECT_EQ(link->hello().hooks_open[0].connection, 1u);
  EXPECT_EQ(link->hello().hooks_open[0].line, "{\"n\":1}");
  EXPECT_TRUE(link->hello().hooks_gone.empty());
  send(*link, {HookReply{1, "{\"ok\":true}"}});

  auto second = std::get<Hook>(until(*link, is_hook).back());
  EXPECT_EQ(second.connection, 2u);
  EXPECT_EQ(second.line, "{\"n\":2}");
  auto is_gone = [](const FromSupervisor& m) { return std::holds_alternative<HookGone>(m); };
  EXPECT_EQ(std::get<HookGone>(until(*link, is_gone).back()).connection, 2u);
  const std::string expected = "{\"ok\":true}\n\ndone\n";
  until_out(*link, expected.size());
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdout.jsonl"), expected);
  send(*link, {HookReply{2, "{\"late\":true}"}});  // gone: ignored

  drop_link(std::move(link));
  link = attach();
  EXPECT_TRUE(link->hello().hooks_open.empty());
  EXPECT_EQ(link->hello().hooks_gone, std::vector<std::uint64_t>{2});
  send(*link, {CloseStdin{}, Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// No daemon within adopt_within_ms, counted from the start: the run is killed, the supervisor
// exits 3 and says why in its log.
TEST_F(SupervisorTest, ARunNoDaemonAdoptsIsKilled) {
  SupervisorSpec spec = sh_spec("echo ready; exec /bin/sleep 1000");
  spec.adopt_within_ms = 500;
  start(spec);
  ASSERT_TRUE(wait_for_file(dir_.path(), "supervisor.json", 20s));
  auto state = state_file();
  supervisor_pid_ = state.at("supervisor_pid").to_number<pid_t>();
  pid_t vendor = state.at("vendor_pid").to_number<pid_t>();
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitAbandoned);
  EXPECT_TRUE(wait_gone(vendor, 10s));
  EXPECT_NE(slurp(dir_.path() / "supervisor.log").find("abandoned"), std::string::npos);
}

// The bound counts again from a detach.
TEST_F(SupervisorTest, ARunWhoseDaemonLeftIsKilledAfterTheBound) {
  SupervisorSpec spec = sh_spec("exec /bin/sleep 1000");
  spec.adopt_within_ms = 500;
  start(spec);
  Link link = attach();
  pid_t vendor = link->hello().vendor_pid.value_or(-1);
  // Attached, the bound does not run: the vendor is still there well past it... which a test
  // cannot show without waiting; what it shows is that the detach starts it.
  drop_link(std::move(link));
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitAbandoned);
  EXPECT_TRUE(wait_gone(vendor, 10s));
}

// With a cgroup, the abandoned run is killed whole: a setsid'd escapee of the vendor too.
TEST_F(SupervisorTest, AnAbandonedRunInACgroupDiesWhole) {
  auto base = daemon::CgroupParent::own_cgroup_dir();
  if (!base) GTEST_SKIP() << "no cgroup2 mount on this host";
  auto parent = daemon::CgroupParent::open(*base, unique_marker_value("supervisor-cgroup"));
  if (!parent) GTEST_SKIP() << "no writable cgroup2 here: " << parent.error();
  cgroup_parent_ = parent->dir();
  {
    auto group = parent->create("run", {});
    ASSERT_TRUE(group) << group.error();
    SupervisorSpec spec = sh_spec(
        "/usr/bin/setsid /bin/sh -c 'echo escapee $$; exec /bin/sleep 1001' </dev/null & "
        "echo ready; exec /bin/sleep 1000");
    spec.cgroup = (*group)->dir();
    spec.adopt_within_ms = 500;
    start(spec);
    Link link = attach();
    pid_t vendor = link->hello().vendor_pid.value_or(-1);
    // Both lines, in either order: "ready" is 6 bytes, "escapee <pid>" at least 10.
    until_out(*link, 16);
    std::string transcript = slurp(dir_.path() / "vendor-stdout.jsonl");
    auto at = transcript.find("escapee ");
    ASSERT_NE(at, std::string::npos) << transcript;
    pid_t escapee = std::stoi(transcript.substr(at + 8));
    EXPECT_TRUE((*group)->holds(escapee));
    EXPECT_NE(::getsid(escapee), ::getsid(vendor)) << "the escapee left the vendor's session";
    drop_link(std::move(link));
    EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitAbandoned);
    EXPECT_TRUE(wait_gone(vendor, 10s));
    EXPECT_TRUE(wait_gone(escapee, 10s));
    EXPECT_FALSE((*group)->populated());
  }
}

// The supervisor is in a session of its own, not a child of whoever started it (that
// intermediate is gone), and serves on; the newest daemon connection is the one in charge.
TEST_F(SupervisorTest, TheSupervisorOutlivesItsStarterAndTheNewestDaemonIsInCharge) {
  start(make_spec("/bin/cat", {}));
  Link first = attach();
  const pid_t pid = first->hello().supervisor_pid;
  EXPECT_EQ(::getsid(pid), pid) << "its own session";
  EXPECT_NE(::getpgid(pid), ::getpgrp()) << "not in the starter's process group";
  EXPECT_EQ(daemon::test::proc_field_pid(pid, 4), ::getpid()) << "reparented to the subreaper: its starter is gone";

  Link second = attach();
  EXPECT_NE(io_.run(strand_, read_to_end(*first), 10s).find("supervisor gone"), std::string::npos);
  send(*second, {In{"still here"}});
  until_out(*second, 11);
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdout.jsonl"), "still here\n");
  drop_link(std::move(first));
  send(*second, {Release{}});
  EXPECT_EQ(wait_exit(pid, 20s), kExitReleased);
}

// A vendor that cannot start is reported in the hello, and the supervisor exits once told.
TEST_F(SupervisorTest, AFailedSpawnIsReportedThenTheSupervisorExits) {
  start(make_spec(dir_.path() / "no-such-vendor", {}));
  Link link = attach();
  ASSERT_TRUE(link->hello().spawn_error);
  EXPECT_NE(link->hello().spawn_error->find("missing binary"), std::string::npos) << *link->hello().spawn_error;
  EXPECT_FALSE(link->hello().vendor_pid);
  EXPECT_FALSE(link->hello().exited);
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitSpawnFailed);
}

// A spec that cannot be used is refused by name on stderr, exit 2.
TEST_F(SupervisorTest, ABadSpecIsRefusedByName) {
  const fs::path spec_file = dir_.path() / "bad-spec.json";
  std::ofstream(spec_file) << "{\"protocol\":1,\"run_id\":\"r\"}";
  auto plan = daemon::test::make_plan(MH_TEST_SUPERVISOR, {"--spec", spec_file.string()}, {}, dir_.path());
  auto child = daemon::test::spawn_or_throw(strand_, plan);
  std::string err = io_.run(strand_, daemon::test::read_to_eof(child->stderr_pipe()), 20s);
  auto termination = io_.run(strand_, child->async_wait(), 20s);
  EXPECT_EQ(termination.code, kExitBadSpec);
  EXPECT_NE(err.find("missing required field \"socket\""), std::string::npos) << err;
}

// The wire refuses by name and stays up: a message before attach, a line that is not JSON, a
// line over the bound; then it serves.
TEST_F(SupervisorTest, BadDaemonLinesAreRefusedAndTheConnectionStaysUp) {
  start(make_spec("/bin/cat", {}));
  Link link = attach();  // waits for the socket; then a raw connection replaces it
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval bound{20, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string path = (dir_.path() / "supervisor.sock").string();
  std::memcpy(sa.sun_path, path.data(), path.size());
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  auto write_all = [fd](const std::string& bytes) {
    for (std::size_t at = 0; at < bytes.size();) {
      ssize_t n = ::write(fd, bytes.data() + at, bytes.size() - at);
      ASSERT_GT(n, 0);
      at += static_cast<std::size_t>(n);
    }
  };
  std::string pending;
  auto read_line = [fd, &pending]() {
    char buffer[4096];
    while (pending.find('\n') == std::string::npos) {
      ssize_t n = ::read(fd, buffer, sizeof buffer);
      if (n <= 0) return std::string("<end>");
      pending.append(buffer, static_cast<std::size_t>(n));
    }
    std::string line = pending.substr(0, pending.find('\n'));
    pending.erase(0, line.size() + 1);
    return line;
  };
  write_all("{\"t\":\"in\",\"line\":\"early\"}\n");
  EXPECT_EQ(read_line(), "{\"t\":\"refused\",\"why\":\"attach first\"}");
  write_all("this is not json\n");
  EXPECT_NE(read_line().find("not JSON"), std::string::npos);
  write_all("{\"t\":\"attach\",\"protocol\":1}\n");
  EXPECT_NE(read_line().find("\"t\":\"hello\""), std::string::npos);
  write_all(std::string(kMaxToSupervisorLineBytes + 10, 'x') + "\n");
  EXPECT_NE(read_line().find("over the 8 MiB bound"), std::string::npos);
  write_all("{\"t\":\"future\",\"x\":1}\n{\"t\":\"in\",\"line\":\"works\",\"extra\":2}\n");
  auto out = read_line();
  EXPECT_NE(out.find("\"t\":\"out\""), std::string::npos) << out;
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdout.jsonl"), "works\n");
  write_all("{\"t\":\"release\"}\n");
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
  ::close(fd);
  drop_link(std::move(link));
}

// ---- the run's gateway (issue 25) ---------------------------------------------------------------

// A connection to a Unix socket, with a receive timeout (the bound on every read of a test).
daemon::UniqueFd connect_unix(const fs::path& socket_path) {
  daemon::UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval bound{30, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, socket_path.c_str(), sizeof sa.sun_path - 1);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return {};
  return fd;
}

// The same to 127.0.0.1:port.
daemon::UniqueFd connect_loopback(std::uint16_t port) {
  daemon::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  timeval bound{30, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) return {};
  return fd;
}

// A port of the host's loopback free now (the daemon picks one the same way for network = "host").
std::uint16_t free_loopback_port() {
  daemon::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof sa;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&sa), &length) != 0)
    return 0;
  return ntohs(sa.sin_port);
}

// Writes `request` and reads the whole answer, up to the end of the connection.
std::string send_and_read(const daemon::UniqueFd& fd, const std::string& request) {
  if (!fd) return "<no connection>";
  if (!daemon::write_all(fd.get(), request)) return "<write failed>";
  std::string answer;
  char buffer[4096];
  for (ssize_t n; (n = ::read(fd.get(), buffer, sizeof buffer)) > 0;)
    answer.append(buffer, static_cast<std::size_t>(n));
  return answer;
}

// One HTTP/1.1 model request with the token, as a vendor sends it (`connection: close`).
std::string messages_request(const std::string& token, const std::string& body,
                             const std::string& target = "/v1/messages") {
  return "POST " + target +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n"
         "anthropic-version: 2023-06-01\r\nx-api-key: " +
         token + "\r\ncontent-length: " + std::to_string(body.size()) + "\r\nconnection: close\r\n\r\n" + body;
}

// One HTTP/1.1 exchange over a Unix socket (the gateway's): the whole answer, up to the end of
// the connection (bounded by a receive timeout).
std::string http_over_unix(const fs::path& socket_path, const std::string& token, const std::string& body,
                           const std::string& target = "/v1/messages") {
  daemon::UniqueFd fd = connect_unix(socket_path);
  if (!fd) return std::string("<connect: ") + std::strerror(errno) + ">";
  return send_and_read(fd, messages_request(token, body, target));
}

// A main-loop request (it offers tools), so the scenario's step answers it, not its aux reply.
const std::string kMessagesBody =
    R"({"model":"claude-test","max_tokens":64,"tools":[{"name":"Bash","input_schema":{"type":"object"}}],)"
    R"("messages":[{"role":"user","content":"hi"}]})";

// The requests the scripted endpoint served, as its log (the run's model-requests.jsonl) says.
std::size_t requests_in(const fs::path& file) {
  std::string all = slurp(file);
  std::size_t count = 0;
  for (std::size_t at = 0; (at = all.find("\"kind\":\"request\"", at)) != std::string::npos; ++at)
    ++count;
  return count;
}

class SupervisorGatewayTest : public SupervisorTest {
 protected:
  // A gateway whose upstream is the supervisor's own scripted endpoint (a run's model_scenario),
  // on a socket in the run's gate.
  SupervisorSpec gateway_spec(const std::string& script, bool reserve) {
    SupervisorSpec spec = sh_spec(script);
    std::filesystem::create_directories(gate());
    ::chmod(gate().c_str(), 0755);
    SpecGateway g;
    g.upstream_name = "scripted";
    g.wire = "anthropic";
    g.scenario = fs::path(MH_TEST_SCENARIOS) / "model" / "claude_text.json";
    g.scenario_log = dir_.path() / "model-requests.jsonl";
    g.token = token_;
    g.reserve = reserve;
    g.listen.path = gate() / "model.sock";
    spec.gateway = g;
    return spec;
  }
  fs::path gate() const { return dir_.path() / "gate"; }
  fs::path model_socket() const { return gate() / "model.sock"; }
  std::string token_ = "mh-run-" + marker_ + "-0123456789abcdef0123456789abcdef";
};

template <class T>
const T* last_of(const Messages& messages) {
  const T* found = nullptr;
  for (const auto& m : messages)
    if (auto* f = std::get_if<T>(&m)) found = f;
  return found;
}

// The supervisor hosts the run's gateway in front of its own scripted endpoint: the placeholder
// token is served, a wrong one is refused 401 and never forwarded, a route outside the wire's is
// refused 403 (told once), and what the answer spent reaches the attached daemon.
TEST_F(SupervisorGatewayTest, TheGatewayServesThePlaceholderRefusesOthersAndReportsUsage) {
  start(gateway_spec("read z", /*reserve=*/false));
  Link link = attach();
  ASSERT_FALSE(link->hello().spawn_error) << *link->hello().spawn_error;
  struct stat st {};
  ASSERT_EQ(::stat(model_socket().c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  EXPECT_EQ(http_over_unix(model_socket(), "mh-run-other-0123456789abcdef0123456789abcdef", kMessagesBody)
                .rfind("HTTP/1.1 401", 0),
            0u);
  EXPECT_EQ(http_over_unix(model_socket(), token_, kMessagesBody, "/v1/files").rfind("HTTP/1.1 403", 0), 0u);
  const std::string answer = http_over_unix(model_socket(), token_, kMessagesBody);
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  EXPECT_NE(answer.find("Hello from the scripted model."), std::string::npos) << answer;
  EXPECT_EQ(answer.find(token_), std::string::npos);

  bool refused_told = false;
  std::optional<GatewayUsage> usage;
  until(*link, [&](const FromSupervisor& m) {
    if (auto* r = std::get_if<GatewayRefused>(&m)) refused_told = r->method == "POST" && r->path == "/v1/files";
    if (auto* u = std::get_if<GatewayUsage>(&m)) usage = *u;
    return refused_told && usage;
  });
  EXPECT_EQ(usage->status, 200);
  EXPECT_EQ(usage->input_tokens, 12u);
  EXPECT_EQ(usage->output_tokens, 6u);
  EXPECT_TRUE(usage->complete);
  EXPECT_EQ(requests_in(dir_.path() / "model-requests.jsonl"), 1u)
      << "the 401 and the 403 never reached the upstream: " << slurp(dir_.path() / "model-requests.jsonl");
  send(*link, {CloseStdin{}, Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// No secret in the record (issue 25 section 4): what the vendor writes (its stdout, a secret split
// across two writes included, its stderr, a last line with no newline) and what it sends the model
// reach the run directory with the placeholder and the secret vendor_env values redacted, and the
// transcript's size told to the daemon is the redacted file's.
TEST_F(SupervisorGatewayTest, WhatTheVendorWritesAndSendsTheModelReachesTheRecordRedacted) {
  const std::string secret = "s3cret-" + marker_;
  const std::size_t half = secret.size() / 2;
  SupervisorSpec spec = gateway_spec(
      "printf '{\"a\":\"%s' \"$PART1\"; printf '%s\"}\\n' \"$PART2\"; "
      "echo \"token $TOKEN secret $MH_SECRET\" >&2; read go; printf 'tail %s' \"$TOKEN\"",
      /*reserve=*/false);
  spec.env.emplace_back("MH_SECRET", secret);
  spec.env.emplace_back("PART1", secret.substr(0, half));
  spec.env.emplace_back("PART2", secret.substr(half));
  spec.env.emplace_back("TOKEN", token_);
  spec.secret_env = {"MH_SECRET"};
  start(spec);
  Link link = attach();
  ASSERT_FALSE(link->hello().spawn_error) << *link->hello().spawn_error;
  // The vendor sends the model what it found (a tool's output would): the token and the secret.
  const std::string body = R"({"model":"claude-test","max_tokens":64,"messages":[{"role":"user","content":"found )" +
                           token_ + " and " + secret + R"("}]})";
  EXPECT_EQ(http_over_unix(model_socket(), token_, body).rfind("HTTP/1.1 200", 0), 0u);
  send(*link, {In{"go"}});
  std::uint64_t told = 0;
  until(*link, [&](const FromSupervisor& m) {
    if (auto* end = std::get_if<OutEnd>(&m)) told = end->bytes;
    return told > 0;
  });
  const std::string out = slurp(dir_.path() / "vendor-stdout.jsonl");
  EXPECT_EQ(out, "{\"a\":\"[redacted:MH_SECRET]\"}\ntail [redacted:gateway.token]");
  EXPECT_EQ(told, out.size());
  const std::string err = slurp(dir_.path() / "vendor-stderr.log");
  EXPECT_EQ(err, "token [redacted:gateway.token] secret [redacted:MH_SECRET]\n");
  const std::string requests = slurp(dir_.path() / "model-requests.jsonl");
  EXPECT_EQ(requests.find(token_), std::string::npos) << requests;
  EXPECT_EQ(requests.find(secret), std::string::npos) << requests;
  EXPECT_NE(requests.find("found [redacted:gateway.token] and [redacted:MH_SECRET]"), std::string::npos) << requests;
  send(*link, {Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// A model request asks the daemon first (`reserve`) and waits for its `reserved`: across the
// daemon's going away (asked again after the next hello), forwarded once allowed; a refused one
// is answered by the gateway itself and never reaches the upstream. Usage produced while no
// daemon is attached is kept and told after the next hello.
TEST_F(SupervisorGatewayTest, ARequestWaitsForItsReservationAcrossADaemonsAbsence) {
  start(gateway_spec("read z", /*reserve=*/true));
  Link link = attach();
  ASSERT_FALSE(link->hello().spawn_error) << *link->hello().spawn_error;
  auto first = std::async(std::launch::async, [&] { return http_over_unix(model_socket(), token_, kMessagesBody); });
  auto is_reserve = [](const FromSupervisor& m) { return std::holds_alternative<Reserve>(m); };
  const Reserve asked = std::get<Reserve>(until(*link, is_reserve).back());
  EXPECT_EQ(asked.model, "claude-test");
  EXPECT_EQ(asked.max_tokens, 64u);
  EXPECT_EQ(asked.input_bytes, kMessagesBody.size());
  EXPECT_EQ(first.wait_for(0s), std::future_status::timeout) << "answered before its reservation";
  EXPECT_EQ(requests_in(dir_.path() / "model-requests.jsonl"), 0u);

  // The daemon goes away holding the question; the next one is asked again.
  drop_link(std::move(link));
  link = attach();
  const Reserve again = std::get<Reserve>(until(*link, is_reserve).back());
  EXPECT_EQ(again.request, asked.request);
  send(*link, {Reserved{asked.request, true, {}}});
  const std::string answer = first.get();
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;
  until(*link, [](const FromSupervisor& m) { return std::holds_alternative<GatewayUsage>(m); });

  // Refused: answered by the gateway, in the wire's own error shape, never forwarded.
  auto second = std::async(std::launch::async, [&] { return http_over_unix(model_socket(), token_, kMessagesBody); });
  const Reserve next = std::get<Reserve>(until(*link, is_reserve).back());
  EXPECT_NE(next.request, asked.request);
  send(*link, {Reserved{next.request, false, "the run's budget is spent"}});
  const std::string refused = second.get();
  EXPECT_EQ(refused.rfind("HTTP/1.1 200", 0), std::string::npos) << refused;
  EXPECT_NE(refused.find("the run's budget is spent"), std::string::npos) << refused;
  EXPECT_EQ(requests_in(dir_.path() / "model-requests.jsonl"), 1u);

  // No daemon: a route refusal is kept, and told after the next hello.
  drop_link(std::move(link));
  EXPECT_EQ(http_over_unix(model_socket(), token_, kMessagesBody, "/v1/batches").rfind("HTTP/1.1 403", 0), 0u);
  link = attach();
  auto kept = until(*link, [](const FromSupervisor& m) { return std::holds_alternative<GatewayRefused>(m); });
  EXPECT_EQ(last_of<GatewayRefused>(kept)->path, "/v1/batches");
  send(*link, {CloseStdin{}, Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// network = "host": the gateway on a port of the host's loopback the daemon picked; and the egress
// proxy on its socket, refusing a destination outside the run's list (told once, as `egress`).
TEST_F(SupervisorGatewayTest, TheGatewayOnAHostPortAndTheEgressProxyRefusingAnUnlistedDestination) {
  SupervisorSpec spec = gateway_spec("read z", false);
  const std::uint16_t port = free_loopback_port();
  ASSERT_NE(port, 0);
  spec.gateway->listen = SpecListen{{}, port};
  spec.egress = SpecEgress{{"example.com:443"}, SpecListen{gate() / "egress.sock", {}}};
  start(spec);
  Link link = attach();
  ASSERT_FALSE(link->hello().spawn_error) << *link->hello().spawn_error;
  const std::string answer = send_and_read(connect_loopback(port), messages_request(token_, kMessagesBody));
  EXPECT_EQ(answer.rfind("HTTP/1.1 200", 0), 0u) << answer;

  struct stat st {};
  ASSERT_EQ(::stat((gate() / "egress.sock").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  const std::string connect = "CONNECT 127.0.0.1:9 HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\r\n";
  EXPECT_EQ(send_and_read(connect_unix(gate() / "egress.sock"), connect).rfind("HTTP/1.1 403", 0), 0u);
  EXPECT_EQ(send_and_read(connect_unix(gate() / "egress.sock"), connect).rfind("HTTP/1.1 403", 0), 0u);
  auto told = until(*link, [](const FromSupervisor& m) { return std::holds_alternative<Egress>(m); });
  const Egress& denied = *last_of<Egress>(told);
  EXPECT_EQ(denied.destination, "127.0.0.1:9");
  EXPECT_FALSE(denied.allowed);
  EXPECT_NE(denied.why.find("not in the run's egress list"), std::string::npos) << denied.why;
  send(*link, {CloseStdin{}, Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

// A gateway that cannot be built (its scenario unreadable) is the run's spawn error, by name.
TEST_F(SupervisorGatewayTest, AGatewayThatCannotBeBuiltIsTheSpawnError) {
  SupervisorSpec spec = gateway_spec("read z", false);
  spec.gateway->scenario = dir_.path() / "no-such-scenario.json";
  start(spec);
  Link link = attach();
  ASSERT_TRUE(link->hello().spawn_error);
  EXPECT_NE(link->hello().spawn_error->find("no-such-scenario.json"), std::string::npos) << *link->hello().spawn_error;
  EXPECT_FALSE(link->hello().vendor_pid);
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitSpawnFailed);
}

// The whole door at this level, through real bubblewrap (network = "gateway"): the vendor, in a
// network namespace of its own, reaches its gateway at 127.0.0.1:41000 (mh-exec's relay to the
// gate's socket) with its placeholder, and its hook channel at the path the sandbox moved it to
// ($METAHARNESS_HOOK_SOCKET rewritten), with the peer checks kept.
TEST_F(SupervisorGatewayTest, ASandboxedRunReachesItsGatewayAndHookChannelThroughTheGate) {
  daemon::SandboxSpec sandbox;
  if (::access(sandbox.bwrap.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << sandbox.bwrap;
  sandbox.exec_helper = MH_TEST_EXEC_HELPER;
  sandbox.read_only = {MH_TEST_HOOK_PEER};
  sandbox.own_network = daemon::SandboxSpec::OwnNetwork{
      gate(), {daemon::SandboxSpec::Relay{daemon::kGatewayRelayPort, fs::path(daemon::kGateInView) / "model.sock"}}};
  const fs::path work = dir_.path() / "work";
  std::filesystem::create_directories(work);
  // As a root daemon runs it: the sandbox drops to an unprivileged uid of the run's own, which the
  // gate's sockets are given to (run_user; `identity` is null, bwrap starts as root).
  constexpr std::uint32_t kUid = 61243;
  const bool root = ::geteuid() == 0;
  if (root) {
    sandbox.run_as = daemon::SandboxSpec::RunAs{kUid, kUid};
    ::chmod(dir_.path().c_str(), 0755);
    ASSERT_EQ(::chown(work.c_str(), kUid, kUid), 0);
  }
  const std::string body = kMessagesBody;
  const std::string script =
      std::string(MH_TEST_HOOK_PEER) + " \"$METAHARNESS_HOOK_SOCKET\" '{\"n\":1}'; echo; " +
      "exec 3<>/dev/tcp/127.0.0.1/41000 || exit 3; "
      "printf 'POST /v1/messages HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nx-api-key: %s\\r\\ncontent-type: "
      "application/json\\r\\ncontent-length: %s\\r\\nconnection: close\\r\\n\\r\\n%s' \"$MH_TOKEN\" " +
      std::to_string(body.size()) + " '" + body + "' >&3; head -n 1 <&3 | tr -d '\\r'; read z";
  auto plan = daemon::test::make_plan("/usr/bin/bash", {"-c", script},
                                      {{"PATH", "/usr/bin:/bin"},
                                       {"METAHARNESS_RUN", marker_},
                                       {"MH_TOKEN", token_},
                                       {"METAHARNESS_HOOK_SOCKET", "@mh-test-hook-" + marker_}},
                                      work);
  plan.directories = {work};
  plan.run_marker = {"METAHARNESS_RUN", marker_};
  plan.hook_channel = adapters::HookChannel{"METAHARNESS_HOOK_SOCKET", "@mh-test-hook-" + marker_, {}};
  SupervisorSpec spec = gateway_spec("unused", false);
  const adapters::LaunchPlan contained = daemon::sandboxed(plan, sandbox);
  ASSERT_TRUE(contained.hook_channel);
  spec.program = contained.program;
  spec.args = contained.args;
  spec.env = contained.env;
  spec.vendor_env = contained.handed_env;
  spec.cwd = contained.cwd;
  spec.hook_channel = SpecHookChannel{contained.hook_channel->bound_at.string(),
                                      root ? kUid : static_cast<std::uint32_t>(::geteuid()), marker_entry()};
  if (root) spec.run_user = SpecIdentity{kUid, kUid};
  start(spec);
  Link link = attach();
  ASSERT_FALSE(link->hello().spawn_error) << *link->hello().spawn_error;
  struct stat st {};
  for (const char* name : {"hook.sock", "model.sock"}) {
    ASSERT_EQ(::stat((gate() / name).c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << name;
    EXPECT_EQ(st.st_uid, root ? kUid : ::geteuid()) << name;
  }

  auto is_hook = [](const FromSupervisor& m) { return std::holds_alternative<Hook>(m); };
  const Hook hook = link->hello().hooks_open.empty() ? std::get<Hook>(until(*link, is_hook).back())
                                                     : link->hello().hooks_open.front();
  EXPECT_EQ(hook.line, "{\"n\":1}");
  send(*link, {HookReply{hook.connection, "{\"ok\":true}"}});
  const std::string expected = "{\"ok\":true}\n\nHTTP/1.1 200 OK\n";
  until_out(*link, expected.size());
  EXPECT_EQ(slurp(dir_.path() / "vendor-stdout.jsonl"), expected) << slurp(dir_.path() / "vendor-stderr.log");
  EXPECT_EQ(requests_in(dir_.path() / "model-requests.jsonl"), 1u);
  send(*link, {CloseStdin{}, Release{}});
  EXPECT_EQ(wait_exit(supervisor_pid_, 20s), kExitReleased);
}

TEST_F(SupervisorTest, AttachingWhereNoSupervisorIsSaysSo) {
  auto attached = io_.run(strand_, SupervisorLink::attach(strand_, dir_.path() / "nobody.sock", 200ms), 20s);
  ASSERT_FALSE(attached);
  EXPECT_EQ(attached.error().rfind("no supervisor at " + (dir_.path() / "nobody.sock").string(), 0), 0u)
      << attached.error();
}

// Issue 24: a refused connect to the socket of a supervisor that has ended (its supervisor.json
// names a process that is gone, its socket file left) was retried for the whole bound (10 s). It
// is concluded at once, naming the supervisor.
TEST_F(SupervisorTest, AttachingToTheSocketOfASupervisorThatHasEndedSaysSoAtOnce) {
  const auto run = dir_.path() / "ended";
  std::filesystem::create_directories(run);
  // A process that has ended: a child of this test, reaped.
  pid_t gone = ::fork();
  if (gone == 0) ::_exit(0);
  ASSERT_GT(gone, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(gone, &status, 0), gone);
  std::ofstream(run / "supervisor.json") << R"({"protocol":1,"supervisor_pid":)" << gone
                                         << R"(,"vendor_pid":null,"version":"dev"})";
  // Its socket file is left behind, bound by nobody: a connect is refused.
  {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, (run / "supervisor.sock").c_str(), sizeof a.sun_path - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    ::close(fd);
  }
  const auto began = std::chrono::steady_clock::now();
  auto attached = io_.run(strand_, SupervisorLink::attach(strand_, run / "supervisor.sock", 10s), 30s);
  const auto took = std::chrono::steady_clock::now() - began;
  ASSERT_FALSE(attached);
  EXPECT_NE(attached.error().find("its supervisor (pid " + std::to_string(gone) + ") has ended"), std::string::npos)
      << attached.error();
  EXPECT_LT(took, 5s) << "concluded, not retried for the 10 s bound";
}

}  // namespace
}  // namespace mh::supervisor
