// The supervisor's loop: setup (files, socket, spawn, supervisor.json), the daemon's connection,
// the vendor's pipes and exit, and the adopt bound. The hook channel is in supervisor_hooks.cpp.
#include "daemon/supervisor/supervisor.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <system_error>

#include "adapters/adapter.hpp"
#include "daemon/process/run_cgroup.hpp"
#include "daemon/process/run_containment.hpp"
#include "daemon/stream/event_log.hpp"
#include "daemon/supervisor/supervisor_impl.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/json.hpp"
#include "protocol/line_framer.hpp"

namespace mh::supervisor {

namespace {

constexpr std::size_t kChunk = 64 * 1024;
constexpr std::size_t kDrainPerTurn = 1u << 20;  // then let the other pipe and the sockets run

std::string errno_text(int error) {
  return std::system_category().message(error);
}

// A file of the run directory, opened for appending with an explicit mode whatever the umask.
daemon::UniqueFd open_append(const fs::path& path, std::string& error) {
  daemon::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640));
  if (!fd || ::fchmod(fd.get(), 0640) != 0) {
    error = "cannot open " + path.string() + ": " + errno_text(errno);
    return {};
  }
  return fd;
}

std::uint64_t file_size(int fd) {
  struct stat st {};
  return ::fstat(fd, &st) == 0 && st.st_size > 0 ? static_cast<std::uint64_t>(st.st_size) : 0;
}

// Waits (blocking, bounded) for a cgroup's `populated 0`, on inotify of cgroup.events.
bool wait_cgroup_empty(const fs::path& dir, std::chrono::milliseconds timeout) {
  const fs::path events = dir / "cgroup.events";
  daemon::UniqueFd inotify(::inotify_init1(IN_CLOEXEC | IN_NONBLOCK));
  if (inotify) ::inotify_add_watch(inotify.get(), events.c_str(), IN_MODIFY);
  auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    std::ifstream in(events);
    bool populated = true;
    for (std::string key, value; in >> key >> value;)
      if (key == "populated") populated = value != "0";
    if (!in.is_open() || !populated) return true;  // gone or empty
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0 || !inotify) return false;
    struct pollfd wait {
      inotify.get(), POLLIN, 0
    };
    if (::poll(&wait, 1, static_cast<int>(left.count())) > 0) {
      char drain[4096];
      while (::read(inotify.get(), drain, sizeof drain) > 0) {
      }
    }
  }
}

}  // namespace

void supervisor_log(const std::string& run_id, const std::string& message) {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  char when[32];
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  std::string line = std::string(when) + " supervisor[" + std::to_string(::getpid()) + "] " + run_id + ": " + message;
  line.push_back('\n');
  (void)write_all(STDERR_FILENO, line);
}

// ---- setup ------------------------------------------------------------------------------------

Supervisor::Impl::Impl(asio::io_context& context, SupervisorSpec s)
    : io(context), spec(std::move(s)), acceptor(context), adopt_timer(context), ungoverned_timer(context) {
  secrets = record_secrets(spec);
  redactor = daemon::Redactor(secrets);
}

const daemon::Redactor& Supervisor::Impl::record_redactor() {
  if (!gateway) return redactor;
  std::string key = gateway->current_key();
  if (key == redacted_key) return redactor;
  // The key rotated (or is read for the first time; a scenario's is this process's own token).
  redacted_key = std::move(key);
  auto all = secrets;
  if (!redacted_key.empty())
    all.emplace_back(spec.gateway->upstream_name.empty() ? std::string("model_endpoint.token")
                                                         : "upstream." + spec.gateway->upstream_name,
                     redacted_key);
  redactor = daemon::Redactor(all);
  return redactor;
}

std::optional<std::string> Supervisor::Impl::open_files() {
  std::string error;
  transcript = open_append(spec.transcript, error);
  if (transcript) stderr_log = open_append(spec.stderr_log, error);
  if (stderr_log) stdin_log = open_append(spec.stdin_log, error);
  if (!stdin_log) return error;
  stdout_bytes = file_size(transcript.get());
  stdin_bytes = file_size(stdin_log.get());
  return std::nullopt;
}

std::optional<std::string> Supervisor::Impl::listen() {
  // A stale socket of an earlier supervisor of this run is nobody's: this one replaces it.
  ::unlink(spec.socket.c_str());
  boost::system::error_code ec;
  acceptor.open(local(), ec);
  if (!ec) {
    // Born 0600: the umask only for the bind (one thread: nothing else creates files meanwhile;
    // the vendor is not spawned yet and gets the supervisor's umask as it was).
    mode_t previous = ::umask(0177);
    int dir_fd = -1;
    std::string path = reachable_socket_path(spec.socket, dir_fd);
    if (path.empty())
      ec = boost::system::errc::make_error_code(boost::system::errc::filename_too_long);
    else
      acceptor.bind(local::endpoint(path), ec);
    if (dir_fd >= 0) ::close(dir_fd);
    ::umask(previous);
  }
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "cannot listen on " + spec.socket.string() + ": " + ec.message();
  return std::nullopt;
}

void Supervisor::Impl::spawn(const std::vector<std::string>& extra_args) {
  adapters::LaunchPlan plan;
  plan.adapter = "supervised";
  plan.program = spec.program;
  plan.args = spec.args;
  plan.args.insert(plan.args.end(), extra_args.begin(), extra_args.end());
  plan.env = spec.env;
  plan.handed_env = spec.vendor_env;  // a sandboxed plan's: applied by mh-exec after the drop
  plan.cwd = spec.cwd;
  plan.transcript_path = spec.transcript;
  plan.stdin_log_path = spec.stdin_log;
  daemon::UniqueFd procs;
  daemon::SpawnOptions options;
  if (spec.cgroup) {
    procs.reset(::open((*spec.cgroup / "cgroup.procs").c_str(), O_WRONLY | O_CLOEXEC));
    if (!procs) {
      spawn_error = "cannot open " + (*spec.cgroup / "cgroup.procs").string() + ": " + errno_text(errno);
      return;
    }
    options.join_cgroup_fd = procs.get();
  }
  if (spec.identity) options.identity = daemon::SpawnOptions::Identity{spec.identity->uid, spec.identity->gid};
  auto spawned = daemon::ChildProcess::spawn(io.get_executor(), plan, options);
  if (!spawned) {
    spawn_error = spawned.error();
    return;
  }
  child = std::move(*spawned);
}

std::optional<std::string> Supervisor::Impl::write_state_file() const {
  std::string text;
  protocol::JsonWriter w(text);
  w.begin_object();
  w.key("protocol");
  w.uinteger(kProtocol);
  w.field_i64("supervisor_pid", ::getpid());
  w.field_i64("vendor_pid", child ? std::optional<std::int64_t>(child->pid()) : std::nullopt);
  w.field("version", std::string(build_info::version));
  w.end_object();
  text.push_back('\n');
  const fs::path target = spec.state_file();
  const fs::path temporary = target.string() + ".tmp";
  daemon::UniqueFd fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640));
  if (!fd || ::fchmod(fd.get(), 0640) != 0 || !write_all(fd.get(), text) || ::fsync(fd.get()) != 0 ||
      ::rename(temporary.c_str(), target.c_str()) != 0)
    return "cannot write " + target.string() + ": " + errno_text(errno);
  return std::nullopt;
}

boost::system::result<std::unique_ptr<Supervisor>, std::string> Supervisor::start(asio::io_context& io,
                                                                                  SupervisorSpec spec) {
  auto impl = std::make_unique<Impl>(io, std::move(spec));
  if (auto problem = impl->open_files()) return *problem;
  if (auto problem = impl->listen()) return *problem;
  if (impl->spec.hook_channel)
    if (auto problem = impl->open_hook_channel()) impl->spawn_error = *problem;
  // The gateway listens before the vendor starts (its first request is queued, never refused); a
  // gateway that cannot be built is the run's spawn error, as any other part of its setup.
  if (!impl->spawn_error && (impl->spec.gateway || impl->spec.egress))
    if (auto problem = impl->open_gateway()) impl->spawn_error = *problem;
  if (!impl->spawn_error) impl->spawn();
  if (impl->spawn_error) impl->log("the vendor did not start: " + *impl->spawn_error);
  if (auto problem = impl->write_state_file()) return *problem;
  impl->start_loops();
  return std::unique_ptr<Supervisor>(new Supervisor(std::move(impl)));
}

Supervisor::Supervisor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Supervisor::~Supervisor() = default;

int Supervisor::run() {
  impl_->io.run();
  return impl_->exit_code.value_or(kExitAbandoned);
}

void Supervisor::Impl::start_loops() {
  asio::co_spawn(io, accept_daemons(), asio::detached);
  if (hook_acceptor) asio::co_spawn(io, accept_hooks(), asio::detached);
  start_vendor_loops();
  arm_adopt_timer();
}

void Supervisor::Impl::start_vendor_loops() {
  if (!child) return;
  vendor_stdout.emplace(io, child->stdout_pipe().release());
  vendor_stderr.emplace(io, child->stderr_pipe().release());
  asio::co_spawn(io, read_vendor(*vendor_stdout, true), asio::detached);
  asio::co_spawn(io, read_vendor(*vendor_stderr, false), asio::detached);
  asio::co_spawn(io, wait_vendor(), asio::detached);
}

// Parking (issue 27 §5; docs/supervisor.md): the run parked its vendor (it deferred a call and
// exited) and wants it back. The vendor is spawned again as the spec says, with the session's
// resume arguments after the spec's own, on the same transcript, stderr and stdin logs (appended:
// the transcript's offsets go on), the same hook channel, gateway and cgroup. Only once the first
// process is wholly gone — exited, its stdout and stderr ended, nothing left being written to its
// stdin — since two vendors of one run would write one transcript; else refused by name.
void Supervisor::Impl::respawn(const std::vector<std::string>& extra_args) {
  std::optional<std::string> refusal;
  if (!child)
    refusal = "the vendor never started";
  else if (!exited || !stdout_ended || !stderr_ended)
    refusal = "the vendor is still running";
  else if (writing_stdin)
    refusal = "the vendor's stdin is still being written";
  else if (abandoned)
    refusal = "the run is being killed";
  if (refusal) {
    log("a respawn refused: " + *refusal);
    tell(Respawned{std::nullopt, refusal});
    return;
  }
  child.reset();  // reaped (exited): nothing of it to kill, and no loop of it still runs
  vendor_stdout.reset();
  vendor_stderr.reset();
  exited.reset();
  stdout_ended = stderr_ended = stdin_closed = false;
  to_vendor.clear();
  stdout_redactor = daemon::StreamRedactor{};
  stderr_redactor = daemon::StreamRedactor{};
  spawn(extra_args);
  if (spawn_error) {
    // Told, not kept: a failed respawn is the run's to close (RESUME_FAILED), and a later
    // daemon's attach must not take it for a failed first spawn.
    std::string why = std::move(*spawn_error);
    spawn_error.reset();
    log("the vendor could not be spawned again: " + why);
    tell(Respawned{std::nullopt, why});
    return;
  }
  if (auto problem = write_state_file()) log(*problem);
  log("the vendor spawned again (pid " + std::to_string(child->pid()) + "): the parked run resumes");
  tell(Respawned{child->pid(), std::nullopt});  // before anything of the new process
  start_vendor_loops();
}

void Supervisor::Impl::finish(int code) {
  if (exit_code) return;
  exit_code = code;
  io.stop();
}

// ---- the daemon's connection ------------------------------------------------------------------

asio::awaitable<void> Supervisor::Impl::accept_daemons() {
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      log("accepting a daemon failed: " + ec.message());
      continue;
    }
    // The newest daemon is the one in charge: the connection it replaces is closed.
    if (auto replaced = daemon) drop_daemon(replaced);
    daemon = std::make_shared<DaemonConnection>(std::move(socket));
    asio::co_spawn(io, read_daemon(daemon), asio::detached);
  }
}

asio::awaitable<void> Supervisor::Impl::read_daemon(std::shared_ptr<DaemonConnection> connection) {
  protocol::LineFramer framer(kMaxToSupervisorLineBytes, /*digest_oversized=*/false, /*report_early=*/true);
  auto on_line = [&](const protocol::FramedLine& line) {
    if (connection->closed || exit_code) return;
    if (line.too_long) {
      send(connection, Refused{refuse_oversized(line.length, kMaxToSupervisorLineBytes)});
      return;
    }
    on_daemon_line(connection, line.text);
  };
  std::unique_ptr<char[]> buffer(new char[kChunk]);
  while (!connection->closed && !exit_code) {
    auto [ec, n] = co_await connection->socket.async_read_some(asio::buffer(buffer.get(), kChunk),
                                                               asio::as_tuple(asio::use_awaitable));
    if (n > 0) framer.feed(std::string_view(buffer.get(), n), on_line);
    if (ec) break;
  }
  if (!connection->closed && !exit_code) {
    framer.finish(on_line);
    drop_daemon(connection);
  }
}

void Supervisor::Impl::on_daemon_line(const std::shared_ptr<DaemonConnection>& connection, std::string_view line) {
  auto parsed = parse_to_supervisor(line);
  if (!parsed) {
    send(connection, Refused{parsed.error()});
    return;
  }
  if (!*parsed) return;  // a later daemon's message: ignored
  const ToSupervisor& message = **parsed;
  if (const auto* attach = std::get_if<Attach>(&message)) {
    on_attach(connection, *attach);
    return;
  }
  if (!connection->attached) {
    send(connection, Refused{"attach first"});
    return;
  }
  if (const auto* in = std::get_if<In>(&message)) {
    accept_in(in->line);
  } else if (std::holds_alternative<CloseStdin>(message)) {
    close_vendor_stdin();
  } else if (const auto* reply = std::get_if<HookReply>(&message)) {
    reply_hook(reply->connection, reply->line);
  } else if (const auto* reserved = std::get_if<Reserved>(&message)) {
    on_reserved(*reserved);
  } else if (std::holds_alternative<Release>(message)) {
    log("released by the daemon");
    finish(kExitReleased);
  } else if (const auto* again = std::get_if<Respawn>(&message)) {
    respawn(again->extra_args);
  }
}

void Supervisor::Impl::on_attach(const std::shared_ptr<DaemonConnection>& connection, const Attach& attach) {
  if (connection->attached) {
    send(connection, Refused{"already attached"});
    return;
  }
  if (halting_alone) {  // the record is the supervisor's now: two writers would tear it
    send(connection, Refused{"the run is being halted: no daemon governed it for " +
                             std::to_string(*spec.ungoverned_halt_after_ms) + " ms (runs.ungoverned_halt_after_s)"});
    return;
  }
  auto speaks = supervisor_speaks(attach.protocol);
  if (!speaks) {
    send(connection, Refused{speaks.error()});
    return;
  }
  connection->attached = true;
  connection->carry_out_bytes = std::min<std::uint64_t>(attach.carry_out_bytes, kMaxCarriedOutBytes);
  ++adopt_generation;  // a daemon is here: the adopt bound is off until it goes
  adopt_timer.cancel();
  ungoverned_timer.cancel();
  Hello message = hello();
  message.protocol = *speaks;
  message.ungoverned_ms = static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - ungoverned_since)
          .count());
  message.carry_out_bytes = connection->carry_out_bytes;
  // What this daemon missed is in the hello's size (it reads it from the transcript); its first
  // `out` carries from there.
  to_carry.clear();
  to_carry_from = stdout_bytes;
  carry_broken = connection->carry_out_bytes == 0;
  send(connection, message);
  after_hello(connection);
  if (spawn_error) connection->exit_when_written = kExitSpawnFailed;
}

Hello Supervisor::Impl::hello() const {
  Hello h;
  h.version = std::string(build_info::version);
  h.supervisor_pid = ::getpid();
  if (child) h.vendor_pid = child->pid();
  h.spawn_error = spawn_error;
  h.stdout_bytes = stdout_bytes;
  h.stdout_ended = stdout_ended || !child;
  h.stderr_ended = stderr_ended || !child;
  h.stdin_bytes = stdin_bytes;
  h.stdin_closed = stdin_closed || !child;
  h.exited = exited;
  for (const auto& [id, hook] : hooks_open)
    h.hooks_open.push_back(Hook{id, hook->line});
  h.hooks_gone = hooks_gone;
  h.can_respawn = true;
  return h;
}

void Supervisor::Impl::send(const std::shared_ptr<DaemonConnection>& connection, const FromSupervisor& message) {
  if (connection->closed) return;
  connection->queue.emplace_back(serialize(message));
  pump_daemon(connection);
}

void Supervisor::Impl::tell(const FromSupervisor& message) {
  if (daemon && daemon->attached) send(daemon, message);
}

void Supervisor::Impl::tell_out() {
  if (!daemon || !daemon->attached || daemon->closed || daemon->out_queued) return;
  daemon->out_queued = true;
  daemon->queue.emplace_back(DaemonConnection::OutMark{});
  pump_daemon(daemon);
}

void Supervisor::Impl::keep_to_carry(std::string_view chunk, bool in_transcript) {
  if (carry_broken) return;
  const std::uint64_t bound = daemon && daemon->attached ? daemon->carry_out_bytes : 0;
  if (!in_transcript || to_carry.size() + chunk.size() > bound) {
    carry_broken = true;
    to_carry.clear();
    return;
  }
  to_carry.append(chunk);
}

Out Supervisor::Impl::next_out() {
  Out out;
  out.bytes = stdout_bytes;
  // Carried only when what was kept is exactly the transcript's growth since the last `out`.
  if (!carry_broken && to_carry_from + to_carry.size() == stdout_bytes) out.data = to_carry;
  to_carry.clear();
  to_carry_from = stdout_bytes;
  carry_broken = !daemon || !daemon->attached || daemon->carry_out_bytes == 0;
  return out;
}

void Supervisor::Impl::pump_daemon(const std::shared_ptr<DaemonConnection>& connection) {
  if (connection->writing || connection->closed) return;
  connection->writing = true;
  asio::co_spawn(io, write_daemon(connection), asio::detached);
}

asio::awaitable<void> Supervisor::Impl::write_daemon(std::shared_ptr<DaemonConnection> connection) {
  while (!connection->queue.empty() && !connection->closed) {
    std::string bytes;
    if (auto* text = std::get_if<std::string>(&connection->queue.front())) {
      bytes = std::move(*text);
    } else {
      connection->out_queued = false;
      bytes = serialize(FromSupervisor(next_out()));
    }
    connection->queue.pop_front();
    auto [ec, n] =
        co_await asio::async_write(connection->socket, asio::buffer(bytes), asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (ec) {
      if (!connection->closed) drop_daemon(connection);
      break;
    }
  }
  connection->writing = false;
  if (connection->exit_when_written && connection->queue.empty()) {
    log("the failed spawn was reported to the daemon");
    finish(*connection->exit_when_written);
  }
}

void Supervisor::Impl::drop_daemon(std::shared_ptr<DaemonConnection> connection) {
  if (connection->closed) return;
  connection->closed = true;
  connection->queue.clear();
  boost::system::error_code ec;
  connection->socket.shutdown(asio::socket_base::shutdown_both, ec);
  connection->socket.close(ec);
  if (connection == daemon) daemon.reset();
  // The bound counts again from each detach (also when a newer daemon's connection is about to
  // take over: it is not attached until its attach is answered).
  if (connection->attached) {
    ungoverned_since = std::chrono::steady_clock::now();
    log("the daemon detached");
    arm_adopt_timer();
  }
}

// ---- the adopt bound --------------------------------------------------------------------------

void Supervisor::Impl::arm_adopt_timer() {
  std::uint64_t generation = ++adopt_generation;
  adopt_timer.expires_after(std::chrono::milliseconds(spec.adopt_within_ms));
  adopt_timer.async_wait([this, generation](boost::system::error_code ec) {
    if (ec || generation != adopt_generation || exit_code || abandoned) return;
    if (daemon && daemon->attached) return;
    abandon();
  });
  if (!spec.ungoverned_halt_after_ms) return;
  ungoverned_timer.expires_after(std::chrono::milliseconds(*spec.ungoverned_halt_after_ms));
  ungoverned_timer.async_wait([this, generation](boost::system::error_code ec) {
    if (ec || generation != adopt_generation || exit_code || abandoned) return;
    if (daemon && daemon->attached) return;
    halt_ungoverned();
  });
}

void Supervisor::Impl::abandon() {
  log("no daemon attached within " + std::to_string(spec.adopt_within_ms) + " ms: the run is abandoned, killing it");
  abandoned = true;
  kill_run();
  if (!child || exited) finish_killed_run();
  // Otherwise wait_vendor reaps the vendor and finishes.
}

void Supervisor::Impl::halt_ungoverned() {
  log("no daemon governed the run for " + std::to_string(*spec.ungoverned_halt_after_ms) +
      " ms (runs.ungoverned_halt_after_s): halting it and closing its record");
  abandoned = true;
  halting_alone = true;
  // A daemon connected but not attached (its attach not yet sent) is refused from here on.
  kill_run();
  if (!child || exited) finish_killed_run();
}

void Supervisor::Impl::finish_killed_run() {
  if (spec.cgroup && !wait_cgroup_empty(*spec.cgroup, std::chrono::seconds(10)))
    log(spec.cgroup->string() + " is still populated 10 s after the kill");
  if (!halting_alone) {
    finish(kExitAbandoned);
    return;
  }
  close_record_alone();
  finish(kExitUngovernedHalt);
}

// The run's record ends as a daemon would have ended it: what the daemon wrote is kept (a line it
// tore is cut), then a warning saying why, then stream.closed `killed`. A later daemon finds the
// record closed and leaves it so. What the vendor wrote after its daemon left is in the
// transcript, not mapped: no daemon was there to map it, and this process does not map.
void Supervisor::Impl::close_record_alone() {
  auto recovered = daemon::EventLog::recover(spec.run_dir() / "events.jsonl", spec.run_id);
  if (!recovered) {
    log("cannot close the run's record: " + recovered.error());
    return;
  }
  if (recovered->report.already_closed) return;
  std::optional<protocol::ev::RunResources> resources;
  if (spec.cgroup) {
    auto parent = daemon::CgroupParent::open(spec.cgroup->parent_path().parent_path(),
                                             spec.cgroup->parent_path().filename().string());
    auto group = parent ? parent->find(spec.cgroup->filename().string())
                        : boost::system::result<std::unique_ptr<daemon::RunCgroup>, std::string>(
                              boost::system::in_place_error, parent.error());
    if (group) {
      resources = daemon::run_resources((*group)->facts());
      if (auto removed = (*group)->remove(); !removed) log("cannot remove the run's cgroup: " + removed.error());
    } else {
      log("cannot read the run's cgroup: " + group.error());
    }
  }
  const auto gone_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - ungoverned_since)
          .count();
  std::string message = "no daemon governed this run for " + std::to_string(gone_ms) +
                        " ms (runs.ungoverned_halt_after_s = " + std::to_string(*spec.ungoverned_halt_after_ms / 1000) +
                        " s): its supervisor halted it and closed this record (" + recovered->report.describe() +
                        "); the vendor's output is in vendor-stdout.jsonl (" + std::to_string(stdout_bytes) +
                        " bytes), what came after the daemon left is not in this stream";
  if (auto warned = recovered->log.append(protocol::ev::Warning{"RUN_UNGOVERNED", message}); !warned)
    log("cannot write the run's record: " + warned.error());
  auto closed = recovered->log.close(protocol::CloseReason::killed, exited.value_or(protocol::ProcessTermination{}), {},
                                     resources);
  log(closed ? "closed the run's record: killed (seq " + std::to_string(*closed) + ")"
             : "cannot close the run's record: " + closed.error());
}

void Supervisor::Impl::kill_run() {
  if (spec.cgroup) {
    std::string kill_file = (*spec.cgroup / "cgroup.kill").string();
    daemon::UniqueFd fd(::open(kill_file.c_str(), O_WRONLY | O_CLOEXEC));
    if (fd && ::write(fd.get(), "1", 1) == 1) return;
    log("cannot write " + kill_file + ": " + errno_text(errno) + "; killing its processes one by one");
    std::ifstream procs(*spec.cgroup / "cgroup.procs");
    for (pid_t pid; procs >> pid;)
      ::kill(pid, SIGKILL);
  }
  if (child && !exited) {
    ::kill(-child->pid(), SIGKILL);  // its process group (the vendor leads one)
    child->send_signal(SIGKILL);
  }
}

// ---- the vendor -------------------------------------------------------------------------------

void Supervisor::Impl::accept_in(std::string line) {
  if (stdin_closed || !child) return;  // can never reach the vendor: not accepted
  line.push_back('\n');
  // Accepted is recorded: on disk before it is queued for the vendor.
  if (!write_all(stdin_log.get(), line)) log("cannot append to " + spec.stdin_log.string() + ": " + errno_text(errno));
  stdin_bytes = file_size(stdin_log.get());
  to_vendor.emplace_back(std::move(line));
  pump_stdin();
}

void Supervisor::Impl::close_vendor_stdin() {
  if (stdin_closed || !child) return;
  stdin_closed = true;
  to_vendor.emplace_back(std::nullopt);
  pump_stdin();
}

void Supervisor::Impl::pump_stdin() {
  if (writing_stdin || !child) return;
  writing_stdin = true;
  asio::co_spawn(io, write_stdin(), asio::detached);
}

asio::awaitable<void> Supervisor::Impl::write_stdin() {
  while (!to_vendor.empty()) {
    auto next = std::move(to_vendor.front());
    to_vendor.pop_front();
    if (!next) {
      child->close_stdin();
      continue;
    }
    if (!co_await child->write_stdin(*next)) {  // the vendor stopped reading: nothing more can reach it
      stdin_closed = true;
      to_vendor.clear();
    }
  }
  writing_stdin = false;
}

asio::awaitable<void> Supervisor::Impl::read_vendor(asio::posix::stream_descriptor& pipe, bool is_stdout) {
  const int fd = is_stdout ? transcript.get() : stderr_log.get();
  const fs::path& path = is_stdout ? spec.transcript : spec.stderr_log;
  boost::system::error_code ec;
  pipe.non_blocking(true, ec);
  std::unique_ptr<char[]> buffer(new char[kChunk]);
  bool open = true;
  while (open) {
    // Drain (the reactor is edge-triggered), one file write per chunk, then one `out`.
    std::size_t this_turn = 0;
    for (;;) {
      ssize_t n = ::read(pipe.native_handle(), buffer.get(), kChunk);
      if (n > 0) {
        // Redacted before it is written (a secret split across reads is held until whole): the
        // transcript's offsets, which the daemon reads and journals, are the redacted file's.
        const std::string_view chunk =
            (is_stdout ? stdout_redactor : stderr_redactor)
                .feed(std::string_view(buffer.get(), static_cast<std::size_t>(n)), record_redactor());
        // Written whole before anything more is read (a full disk holds the vendor, not its bytes).
        co_await append_whole(fd, path, chunk);
        if (is_stdout) {
          stdout_bytes = file_size(fd);
          keep_to_carry(chunk, true);
        }
        this_turn += static_cast<std::size_t>(n);
        if (this_turn < kDrainPerTurn) continue;
        if (is_stdout) tell_out();
        co_await asio::post(io, asio::use_awaitable);
        this_turn = 0;
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      open = false;  // end of file, or an error: nothing more will come
      break;
    }
    if (is_stdout && this_turn > 0) tell_out();
    if (!open) break;
    auto [wait_ec] =
        co_await pipe.async_wait(asio::posix::descriptor_base::wait_read, asio::as_tuple(asio::use_awaitable));
    if (wait_ec) break;
  }
  // What was held for a secret that might still be completing goes out now: nothing more comes.
  if (const std::string_view rest = (is_stdout ? stdout_redactor : stderr_redactor).finish(record_redactor());
      !rest.empty()) {
    co_await append_whole(fd, path, rest);
    if (is_stdout) {
      stdout_bytes = file_size(fd);
      keep_to_carry(rest, true);
      tell_out();
    }
  }
  if (is_stdout) {
    stdout_ended = true;
    tell(OutEnd{stdout_bytes});
  } else {
    stderr_ended = true;
    tell(ErrEnd{});
  }
}

// A vendor's output goes to its file whole or not yet: a write the disk refuses (ENOSPC, EDQUOT,
// any error) keeps the unwritten rest and tries it again every 200 ms, and read_vendor reads
// nothing more meanwhile, so the vendor's pipe fills and the vendor waits for the disk. Dropping
// the rest instead (as this did) tore the transcript's line and lost what the vendor said next
// to the run, which then waited on a request nobody saw (docs/soak.md, finding 4). Logged once
// per outage, and once more when the bytes are written.
asio::awaitable<void> Supervisor::Impl::append_whole(int fd, const fs::path& path, std::string_view bytes) {
  bool held = false;
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (!held) {
      held = true;
      log("cannot append to " + path.string() + ": " + errno_text(n == 0 ? EIO : errno) +
          "; the vendor's output is held (the vendor waits) until it can be written");
    }
    asio::steady_timer retry(io, std::chrono::milliseconds(200));
    co_await retry.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  if (held) log("appended to " + path.string() + " again: nothing the vendor wrote was lost");
}

asio::awaitable<void> Supervisor::Impl::wait_vendor() {
  protocol::ProcessTermination termination = co_await child->async_wait();
  exited = termination;
  tell(Exited{termination});
  if (abandoned) finish_killed_run();
}

}  // namespace mh::supervisor
