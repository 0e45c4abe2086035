// SupervisorLink and spawn_supervisor: the daemon's side of a run's supervisor.
#include "daemon/supervisor/supervisor_link.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <deque>
#include <fstream>
#include <system_error>
#include <vector>

#include "daemon/log.hpp"
#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

namespace fs = std::filesystem;
namespace sv = mh::supervisor;
using local = asio::local::stream_protocol;

namespace {

constexpr std::size_t kChunk = 64 * 1024;
#ifndef CLOSE_RANGE_CLOEXEC
constexpr unsigned kCloseRangeCloexec = 1u << 2;
#else
constexpr unsigned kCloseRangeCloexec = CLOSE_RANGE_CLOEXEC;
#endif

std::string errno_text(int error) {
  return std::system_category().message(error);
}

// In the grandchild, between fork and exec: system calls only.
[[noreturn]] void exec_supervisor(int null_fd, int log_fd, int error_fd, const char* binary, char* const* argv) {
  if (::dup2(null_fd, STDIN_FILENO) == -1 || ::dup2(log_fd, STDOUT_FILENO) == -1 ||
      ::dup2(log_fd, STDERR_FILENO) == -1) {
    int error = errno;
    (void)!::write(error_fd, &error, sizeof error);
    ::_exit(127);
  }
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  ::sigemptyset(&default_action.sa_mask);
  for (int signal = 1; signal < NSIG; ++signal)
    if (signal != SIGKILL && signal != SIGSTOP) ::sigaction(signal, &default_action, nullptr);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Nothing of the daemon's survives the exec (the error pipe is close-on-exec already).
  if (::syscall(SYS_close_range, 3u, ~0u, kCloseRangeCloexec) == -1) {
    struct rlimit limit {};
    long last = 1024;
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) last = limit.rlim_cur;
    for (long fd = 3; fd < last; ++fd)
      ::fcntl(static_cast<int>(fd), F_SETFD, FD_CLOEXEC);
  }
  char* const empty_env[] = {nullptr};
  ::execve(binary, argv, empty_env);
  int error = errno;
  (void)!::write(error_fd, &error, sizeof error);
  ::_exit(127);
}

}  // namespace

boost::system::result<void, std::string> spawn_supervisor(const fs::path& supervisor_binary,
                                                          const sv::SupervisorSpec& spec, const fs::path& spec_file) {
  {
    std::string text = boost::json::serialize(sv::spec_to_json(spec));
    UniqueFd fd(::open(spec_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    bool ok = fd && ::fchmod(fd.get(), 0600) == 0 && write_all(fd.get(), text);
    if (!ok) return "cannot write " + spec_file.string() + ": " + errno_text(errno);
  }
  UniqueFd null_fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!null_fd) return "cannot open /dev/null: " + errno_text(errno);
  UniqueFd log_fd(::open(spec.log_file().c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640));
  if (!log_fd || ::fchmod(log_fd.get(), 0640) != 0)
    return "cannot open " + spec.log_file().string() + ": " + errno_text(errno);
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) == -1) return "cannot create a pipe: " + errno_text(errno);
  UniqueFd error_read(pipe_fds[0]), error_write(pipe_fds[1]);

  // Everything the children use is made before the fork: after it, system calls only.
  std::string binary = supervisor_binary.string();
  std::string spec_arg = spec_file.string();
  std::string flag = "--spec";
  char* argv[] = {binary.data(), flag.data(), spec_arg.data(), nullptr};

  // No handler of the daemon may run in a child before it resets them.
  sigset_t all, previous;
  ::sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &previous);
  pid_t intermediate = ::fork();
  if (intermediate == 0) {
    ::setsid();
    pid_t supervisor = ::fork();
    if (supervisor == 0) exec_supervisor(null_fd.get(), log_fd.get(), error_write.get(), binary.c_str(), argv);
    if (supervisor == -1) {
      int error = errno;
      (void)!::write(error_write.get(), &error, sizeof error);
    }
    ::_exit(0);
  }
  int fork_error = errno;
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  if (intermediate == -1) return "cannot fork: " + errno_text(fork_error);
  error_write.reset();
  // The intermediate exits right after its fork: a short, targeted wait.
  int status = 0;
  while (::waitpid(intermediate, &status, 0) == -1 && errno == EINTR) {
  }
  int exec_error = 0;
  ssize_t n;
  while ((n = ::read(error_read.get(), &exec_error, sizeof exec_error)) == -1 && errno == EINTR) {
  }
  if (n > 0) return "exec of " + binary + " failed: " + errno_text(exec_error);
  return {};
}

// ---- SupervisorLink ---------------------------------------------------------------------------

struct SupervisorLink::State {
  State(asio::any_io_executor ex, std::uint64_t carry_out_bytes)
      : socket(ex), carry_out_bytes(carry_out_bytes), reader(static_cast<std::size_t>(carry_out_bytes)) {}
  local::socket socket;
  fs::path path;
  std::uint64_t carry_out_bytes;  // asked for in the attach
  sv::FromSupervisorReader reader;
  std::deque<sv::FromSupervisor> ready;
  std::optional<std::string> ended;  // why the connection is over
  std::deque<std::string> out;
  bool writing = false;
  // The link was let go with writes still queued: they go out first, then the connection closes
  // (a Release queued behind a write in flight was dropped, and the supervisor read a detach and
  // waited its adopt bound for a daemon: issue 29's soak, finding 1).
  bool close_when_drained = false;

  void end(std::string why) {
    if (!ended) ended = "supervisor gone: " + why;
    boost::system::error_code ec;
    socket.close(ec);
    out.clear();
  }
};

namespace {

void take_bytes(SupervisorLink::State& s, std::string_view chunk, bool at_end) {
  auto on_message = [&s](sv::ParsedFromSupervisor parsed) {
    if (!parsed) {
      log(LogPriority::warning,
          "supervisor at " + s.path.string() + " sent what this daemon cannot use: " + parsed.error());
      return;
    }
    if (*parsed) s.ready.push_back(std::move(**parsed));
  };
  s.reader.feed(chunk, on_message);
  if (at_end) s.reader.finish(on_message);
}

asio::awaitable<boost::system::result<sv::FromSupervisor, std::string>> next_message(
    std::shared_ptr<SupervisorLink::State> s) {
  std::unique_ptr<char[]> buffer;
  for (;;) {
    if (!s->ready.empty()) {
      sv::FromSupervisor message = std::move(s->ready.front());
      s->ready.pop_front();
      co_return message;
    }
    if (s->ended) co_return *s->ended;
    if (!buffer) buffer.reset(new char[kChunk]);
    auto [ec, n] =
        co_await s->socket.async_read_some(asio::buffer(buffer.get(), kChunk), asio::as_tuple(asio::use_awaitable));
    take_bytes(*s, std::string_view(buffer.get(), n), static_cast<bool>(ec));
    if (s->reader.lost())
      s->end(*s->reader.lost());
    else if (ec)
      s->end(ec == asio::error::eof ? "it closed the connection" : ec.message());
  }
}

asio::awaitable<void> write_out(std::shared_ptr<SupervisorLink::State> s) {
  while (!s->out.empty() && !s->ended) {
    std::string bytes = std::move(s->out.front());
    s->out.pop_front();
    auto [ec, n] = co_await asio::async_write(s->socket, asio::buffer(bytes), asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (ec) s->end("writing to it failed: " + ec.message());
  }
  s->writing = false;
  if (s->close_when_drained && !s->ended) s->end("this daemon closed the link");
}

void queue(const std::shared_ptr<SupervisorLink::State>& s, std::string bytes) {
  if (s->ended) return;
  s->out.push_back(std::move(bytes));
  if (s->writing) return;
  s->writing = true;
  asio::co_spawn(s->socket.get_executor(), write_out(s), asio::detached);
}

bool worth_retrying(const boost::system::error_code& ec) {
  return ec == boost::system::errc::no_such_file_or_directory || ec == boost::system::errc::connection_refused ||
         ec == boost::system::errc::resource_unavailable_try_again;
}

}  // namespace

asio::awaitable<boost::system::result<std::unique_ptr<SupervisorLink>, std::string>> SupervisorLink::attach(
    asio::any_io_executor ex, fs::path socket, std::chrono::milliseconds within, std::uint64_t carry_out_bytes) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  auto state = std::make_shared<State>(ex, std::min<std::uint64_t>(carry_out_bytes, sv::kMaxCarriedOutBytes));
  state->path = socket;
  asio::steady_timer timer(ex);
  std::chrono::milliseconds pause(2);
  for (;;) {
    state->socket = local::socket(ex);
    int dir_fd = -1;
    std::string path = supervisor::reachable_socket_path(socket, dir_fd);
    if (path.empty()) co_return "no supervisor at " + socket.string() + ": its directory cannot be opened";
    auto [ec] = co_await state->socket.async_connect(local::endpoint(path), asio::as_tuple(asio::use_awaitable));
    if (dir_fd >= 0) ::close(dir_fd);
    if (!ec) break;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (!worth_retrying(ec) || left.count() <= 0) co_return "no supervisor at " + socket.string() + ": " + ec.message();
    // A supervisor that has ended never answers: said at once, not after the bound (issue 24: a
    // refused connect to the socket of a supervisor that had given up was retried for 10 s).
    if (auto recorded = recorded_supervisor(socket.parent_path()); recorded && !recorded->running)
      co_return "no supervisor at " + socket.string() + ": " + ec.message() + ", and its supervisor (pid " +
          std::to_string(recorded->pid) + ") has ended";
    // The supervisor binds before it spawns, so this waits only for its start.
    timer.expires_after(std::min(pause, left));
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
    pause = std::min(pause * 2, std::chrono::milliseconds(100));
  }
  queue(state, sv::serialize(sv::ToSupervisor(sv::Attach{sv::kProtocol, state->carry_out_bytes})));
  // The hello within what is left of the bound: past it, the connection is closed.
  timer.expires_at(deadline);
  std::weak_ptr<State> weak = state;
  auto answered = std::make_shared<bool>(false);
  auto on_expiry = [weak, answered](boost::system::error_code ec) {
    if (auto s = weak.lock(); s && !ec && !*answered) s->end("no hello in time");
  };
  timer.async_wait(on_expiry);
  auto first = co_await next_message(state);
  *answered = true;
  timer.cancel();
  if (!first) co_return "supervisor at " + socket.string() + " went away before its hello (" + first.error() + ")";
  if (auto* refused = std::get_if<sv::Refused>(&*first))
    co_return "supervisor at " + socket.string() + " refused the attach: " + refused->why;
  auto* hello = std::get_if<sv::Hello>(&*first);
  if (!hello) co_return "supervisor at " + socket.string() + " did not answer the attach with a hello";
  if (auto accepted = sv::daemon_accepts(hello->protocol); !accepted) co_return accepted.error();
  std::unique_ptr<SupervisorLink> link(new SupervisorLink(state));
  link->hello_ = std::move(*hello);
  co_return link;
}

SupervisorLink::~SupervisorLink() {
  if (state_->ended) return;
  if (state_->writing) {
    // write_out holds the state and closes the connection once what was sent has gone out; a
    // next() awaited meanwhile completes then, with the same error as before.
    state_->close_when_drained = true;
    return;
  }
  state_->end("this daemon closed the link");
}

asio::awaitable<boost::system::result<sv::FromSupervisor, std::string>> SupervisorLink::next() {
  return next_message(state_);
}

void SupervisorLink::send(sv::ToSupervisor message) {
  queue(state_, sv::serialize(message));
}

std::optional<RecordedSupervisor> recorded_supervisor(const std::filesystem::path& run_dir) {
  std::ifstream state(run_dir / "supervisor.json");
  if (!state) return std::nullopt;
  std::string text((std::istreambuf_iterator<char>(state)), std::istreambuf_iterator<char>());
  boost::system::error_code ec;
  auto value = boost::json::parse(text, ec);
  const boost::json::value* pid = !ec && value.is_object() ? value.get_object().if_contains("supervisor_pid") : nullptr;
  if (!pid || !pid->is_int64() || pid->get_int64() <= 1) return std::nullopt;
  RecordedSupervisor recorded{static_cast<pid_t>(pid->get_int64()), false};
  // A zombie's command line reads empty; a pid reused by another process names another spec.
  std::ifstream cmdline("/proc/" + std::to_string(recorded.pid) + "/cmdline");
  std::string argv((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
  recorded.running = argv.find((run_dir / "supervisor-spec.json").string()) != std::string::npos;
  return recorded;
}

namespace {

// The supervisors of `run_dir` found by their command line (`… --spec <run dir>/supervisor-spec.json`)
// among this daemon's uid's processes: for a run whose supervisor was spawned but had not yet
// written supervisor.json when its daemon died (issue 29's soak, finding 2). A process of another
// uid that names the spec is not ours to end.
std::vector<pid_t> supervisors_by_command_line(const std::filesystem::path& run_dir) {
  const std::string spec = (run_dir / "supervisor-spec.json").string();
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    struct stat info {};
    if (::stat(entry.path().c_str(), &info) != 0 || info.st_uid != ::geteuid()) continue;
    std::ifstream cmdline(entry.path() / "cmdline");
    std::string argv((std::istreambuf_iterator<char>(cmdline)), std::istreambuf_iterator<char>());
    // argv[1] == "--spec", argv[2] == the spec file, exactly.
    const std::string tail = std::string("\0--spec\0", 8) + spec + std::string(1, '\0');
    if (argv.size() > tail.size() && argv.compare(argv.size() - tail.size(), tail.size(), tail) == 0 &&
        argv.find('\0') == argv.size() - tail.size())
      found.push_back(static_cast<pid_t>(std::stol(name)));
  }
  return found;
}

}  // namespace

bool end_stale_supervisor(const std::filesystem::path& run_dir) {
  auto recorded = recorded_supervisor(run_dir);
  if (recorded) return recorded->running && ::kill(recorded->pid, SIGKILL) == 0;
  // None recorded: spawned, perhaps, in the moment before supervisor.json was written.
  bool ended = false;
  for (pid_t pid : supervisors_by_command_line(run_dir))
    ended = ::kill(pid, SIGKILL) == 0 || ended;
  return ended;
}

}  // namespace mh::daemon
