// DirectBody (direct_body.hpp): the vendor as the daemon's own child. Its stdin queue and writer,
// the drain of its stdout and stderr pipes into the io thread's buffer, the raw transcripts, its
// exit and the kill of what it leaves; and the hook channel: a unix socket (abstract, or a path in
// the run's gate when it has a network of its own) on which the vendor's hook program asks for a
// decision and waits for its answer, with its own peer check.
#include "daemon/run/direct_body.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "daemon/log.hpp"
#include "daemon/peer.hpp"
#include "daemon/process/process_env.hpp"
#include "daemon/process/run_containment.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/run/hook_log.hpp"
#include "daemon/run/read_buffer.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/seam_probe.hpp"
#include "daemon/supervisor/supervisor_spec.hpp"

namespace mh::daemon {

using namespace asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::size_t kMaxHookRequestBytes = 1u << 20;

// awaitable_operators combine awaitable<T> results; give void coroutines a value.
asio::awaitable<bool> wrap(asio::awaitable<void> a) {
  co_await std::move(a);
  co_return true;
}

}  // namespace

DirectBody::DirectBody(BodyHost& run) : run_(run) {}
DirectBody::~DirectBody() = default;

bool DirectBody::open_transcripts(const adapters::LaunchPlan& plan, const RunDir& dir, std::string& error) {
  return transcript_.open(plan.transcript_path, error) && stdin_log_.open(plan.stdin_log_path, error) &&
         stderr_log_.open(dir.vendor_stderr(), error);
}

boost::system::result<void, std::string> DirectBody::spawn(const adapters::LaunchPlan& to_spawn,
                                                           const SpawnOptions& options) {
  auto spawned = ChildProcess::spawn(run_.executor(), to_spawn, options);
  if (!spawned) return boost::system::result<void, std::string>(boost::system::in_place_error, spawned.error());
  child_ = std::move(*spawned);
  // The body reads the vendor's output itself (readiness, then a drain into the io thread's
  // buffer), so it takes the two read ends over from the pipe objects.
  stdout_.emplace(run_.executor(), child_->stdout_pipe().release());
  stderr_.emplace(run_.executor(), child_->stderr_pipe().release());
  return {};
}

// Parking (issue 27 §5): the vendor's next process, as planned plus the session's resume
// arguments, on the same transcripts (appended: one transcript, its lines numbered on), in the
// same containment (its cgroup kept while parked: wait_exit swept it instead of ending it).
asio::awaitable<std::optional<std::string>> DirectBody::respawn(std::vector<std::string> extra_args) {
  adapters::LaunchPlan again;
  SpawnOptions options;
  if (run_.box()) {
    again = run_.box()->plan_with(extra_args);
    options = run_.box()->spawn_options();
  } else {
    again = run_.plan();
    again.args.insert(again.args.end(), extra_args.begin(), extra_args.end());
  }
  stdout_.reset();
  stderr_.reset();
  to_vendor_.clear();
  writing_ = false;
  stdin_closed_ = false;
  reaped_ = false;
  stdout_redactor_ = StreamRedactor{};
  stderr_redactor_ = StreamRedactor{};
  if (auto spawned = spawn(again, options); !spawned) co_return spawned.error();
  co_return std::nullopt;
}

// --- stdin ------------------------------------------------------------------------------------

void DirectBody::write_line(std::string line) {
  line.push_back('\n');
  to_vendor_.emplace_back(std::move(line));
  pump_stdin();
}

void DirectBody::close_stdin(std::chrono::milliseconds grace) {
  to_vendor_.emplace_back(std::nullopt);
  pump_stdin();
  if (!reaped_) run_.arm_grace_at(Clock::now() + grace);  // nothing is left to kill once reaped
}

void DirectBody::pump_stdin() {
  if (writing_ || !child_) return;
  writing_ = true;
  asio::co_spawn(run_.executor(), write_stdin(run_.keep_alive()), asio::detached);
}

asio::awaitable<void> DirectBody::write_stdin(std::shared_ptr<Run> keep) {
  (void)keep;
  while (!to_vendor_.empty()) {
    auto next = std::move(to_vendor_.front());
    to_vendor_.pop_front();
    if (!next) {
      if (!stdin_closed_) child_->close_stdin();
      stdin_closed_ = true;
      continue;
    }
    if (stdin_closed_) continue;  // the vendor will never read it; it was not delivered
    stdin_log_.append(*next);
    if (!co_await child_->write_stdin(*next)) stdin_closed_ = true;
  }
  writing_ = false;
}

// --- stdout and stderr ------------------------------------------------------------------------

// Drains a non-blocking descriptor, handing each chunk to `consume` (synchronously: the chunk
// lives in the thread's buffer). Returns false at end of file or on an error.
template <class Consume>
asio::awaitable<bool> DirectBody::drain(asio::posix::stream_descriptor& from, Consume&& consume) {
  std::size_t this_turn = 0;
  for (;;) {
    ssize_t n = ::read(from.native_handle(), io_thread_read_buffer(), kReadChunk);
    if (n > 0) {
      consume(std::string_view(io_thread_read_buffer(), static_cast<std::size_t>(n)));
      this_turn += static_cast<std::size_t>(n);
      if (this_turn >= kDrainPerTurn) {
        // Fairness: a chatty vendor must not hold the io thread; come back right after others.
        co_await asio::post(run_.executor(), asio::use_awaitable);
        this_turn = 0;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) co_return true;
    co_return false;  // end of file, or an error: nothing more will come
  }
}

template <class Consume>
asio::awaitable<void> DirectBody::read_until_end(asio::posix::stream_descriptor& from, Consume& consume) {
  boost::system::error_code ec;
  from.non_blocking(true, ec);
  for (;;) {
    // The reactor is edge-triggered: only wait once the descriptor has been drained.
    if (!co_await drain(from, consume)) co_return;
    auto [wait_ec] =
        co_await from.async_wait(asio::posix::descriptor_base::wait_read, asio::as_tuple(asio::use_awaitable));
    if (wait_ec) co_return;
  }
}

asio::awaitable<void> DirectBody::read_stdout() {
  SeamProbe* probe = run_.run_options().seam_probe.get();
  auto take = [&](std::string_view chunk) {
    Instant now = Clock::now();
    if (probe) probe->input_read(now);
    run_.vendor_out(chunk, now);
    if (probe) probe->input_done();
    // Byte for byte, as read. Written after the chunk's lines are handled so that answering
    // the vendor never waits on the copy; it is on disk before the next read.
    transcript_.append(chunk);
  };
  // Redacted as read (a secret split across reads is held until whole): the adapter, the
  // transcript and the journal's offsets all see the same, redacted, bytes.
  auto consume = [&](std::string_view raw) {
    if (const std::string_view chunk = stdout_redactor_.feed(raw, run_.secrets()); !chunk.empty()) take(chunk);
  };
  co_await read_until_end(*stdout_, consume);
  if (const std::string_view rest = stdout_redactor_.finish(run_.secrets()); !rest.empty()) take(rest);
  // Nothing more will come: the adapter flushes what it held for a later line (wind_up would
  // too, but only once the vendor's processes are gone; the record is due now).
  run_.vendor_end();
}

asio::awaitable<void> DirectBody::read_stderr() {
  auto consume = [this](std::string_view raw) { stderr_log_.append(stderr_redactor_.feed(raw, run_.secrets())); };
  co_await read_until_end(*stderr_, consume);
  stderr_log_.append(stderr_redactor_.finish(run_.secrets()));
}

// --- the end ----------------------------------------------------------------------------------

asio::awaitable<protocol::ProcessTermination> DirectBody::run_until_gone() {
  auto [stdout_done, termination, stderr_done] = co_await (wrap(read_stdout()) && wait_exit() && wrap(read_stderr()));
  (void)stdout_done;
  (void)stderr_done;
  co_return termination;
}

// Waits for the vendor to exit, then kills whatever of the run is left (background jobs,
// setsid'd tool processes), so nothing of the run survives it and its stdout can end.
asio::awaitable<protocol::ProcessTermination> DirectBody::wait_exit() {
  protocol::ProcessTermination termination = co_await child_->async_wait();
  reaped_ = true;
  run_.cancel_grace();
  const auto& plan = run_.plan();
  if (run_.box() && run_.parked()) {
    // Parked (issue 27 §5): what the vendor left is killed, and the cgroup kept for its next process.
    std::string problems = co_await run_.box()->sweep(run_.executor(), std::chrono::seconds(10));
    if (!problems.empty()) daemon::log(LogPriority::warning, "run " + run_.run_id() + ": parked: " + problems);
    co_return run_.box()->vendor_termination(termination);
  }
  if (run_.box()) {
    std::string problems = co_await run_.box()->end(run_.executor(), std::nullopt, std::chrono::seconds(10));
    if (!problems.empty()) daemon::log(LogPriority::warning, "run " + run_.run_id() + ": at its end: " + problems);
    co_return run_.box()->vendor_termination(termination);
  }
  KillReport report =
      co_await kill_run_processes(run_.executor(), std::nullopt, plan.run_marker, std::chrono::seconds(10));
  if (!report.clean())
    daemon::log(LogPriority::warning, "run " + run_.run_id() + ": leftover processes: " + report.summary());
  co_return termination;
}

asio::awaitable<void> DirectBody::terminate() {
  if (reaped_ || !child_) co_return;
  if (run_.box()) {
    co_await run_.box()->end(run_.executor(), child_->pid(), std::chrono::seconds(10));
    co_return;
  }
  const auto& plan = run_.plan();
  co_await kill_run_processes(run_.executor(), child_->pid(), plan.run_marker, std::chrono::seconds(10));
}

void DirectBody::release() {
  if (hook_acceptor_) {
    boost::system::error_code ec;
    hook_acceptor_->close(ec);
  }
  for (auto& [id, socket] : hook_waiting_) {
    boost::system::error_code ec;
    socket->close(ec);
  }
  hook_waiting_.clear();
}

// --- the hook channel -------------------------------------------------------------------------

void DirectBody::reply_hook(std::uint64_t connection, std::string line) {
  auto it = hook_waiting_.find(connection);
  if (it == hook_waiting_.end()) return;  // the hook already went away
  if (run_.run_options().seam_probe) run_.run_options().seam_probe->answer_written();
  auto socket = std::move(it->second);
  hook_waiting_.erase(it);
  run_.hook_traffic().append(connection, "out", json::value(line));
  auto bytes = std::make_shared<std::string>(std::move(line));
  bytes->push_back('\n');
  asio::async_write(*socket, asio::buffer(*bytes), [socket, bytes](boost::system::error_code, std::size_t) {
    boost::system::error_code ec;
    socket->shutdown(asio::socket_base::shutdown_both, ec);
    socket->close(ec);
  });
}

bool DirectBody::open_hook_channel(const adapters::HookChannel& channel, std::string& error) {
  boost::system::error_code ec;
  hook_acceptor_.emplace(run_.executor());
  hook_acceptor_->open(asio::local::stream_protocol(), ec);
  const auto accepting = [&] {
    if (!ec) asio::co_spawn(run_.executor(), accept_hooks(run_.keep_alive()), asio::detached);
    return !ec;
  };
  if (!channel.bound_at.empty() || (!channel.address.empty() && channel.address.front() == '/')) {
    // A path socket (a run with a network namespace of its own, where the host's abstract sockets
    // are out of reach): bound in the run's gate (`bound_at`), reached inside its view at
    // `address`. Given to the run's user, 0600: the daemon is multi-threaded, so no umask dance;
    // the gate is the daemon's and 0755, so nobody else can reach the socket meanwhile (the
    // mode it is born with gives others no write, which connecting needs).
    const std::filesystem::path path =
        channel.bound_at.empty() ? std::filesystem::path(channel.address) : channel.bound_at;
    ::unlink(path.c_str());
    int dir_fd = -1;
    std::string reachable = supervisor::reachable_socket_path(path, dir_fd);
    if (reachable.empty()) ec = boost::system::errc::make_error_code(boost::system::errc::filename_too_long);
    if (!ec) hook_acceptor_->bind(asio::local::stream_protocol::endpoint(reachable), ec);
    if (!ec && ::chmod(reachable.c_str(), 0600) != 0)
      ec = boost::system::error_code(errno, boost::system::system_category());
    const uid_t run_uid = run_.box() && run_.box()->uid() ? *run_.box()->uid() : ::geteuid();
    if (!ec && run_uid != ::geteuid() && ::chown(reachable.c_str(), run_uid, static_cast<gid_t>(-1)) != 0)
      ec = boost::system::error_code(errno, boost::system::system_category());
    if (dir_fd >= 0) ::close(dir_fd);
    if (!ec) hook_acceptor_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) error = "cannot open the hook channel " + path.string() + ": " + ec.message();
    return accepting();
  }
  // An abstract socket: no path, so no path-length limit and nothing left on disk.
  std::string name = channel.address;
  if (!name.empty() && name.front() == '@') name.front() = '\0';
  if (!ec) hook_acceptor_->bind(asio::local::stream_protocol::endpoint(name), ec);
  if (!ec) hook_acceptor_->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) error = "cannot open the hook channel " + channel.address + ": " + ec.message();
  return accepting();
}

asio::awaitable<void> DirectBody::accept_hooks(std::shared_ptr<Run> keep) {
  for (;;) {
    auto [ec, socket] = co_await hook_acceptor_->async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    auto shared = std::make_shared<local_socket>(std::move(socket));
    asio::co_spawn(run_.executor(), serve_hook(keep, shared), asio::detached);
  }
}

asio::awaitable<void> DirectBody::serve_hook(std::shared_ptr<Run> keep, std::shared_ptr<local_socket> socket) {
  (void)keep;
  const auto& plan = run_.plan();
  auto refuse = [&](const std::string& why) {
    // The hook program prints a deny on any answer it cannot use; say why for its stderr.
    auto bytes = std::make_shared<std::string>(why + "\n");
    asio::async_write(*socket, asio::buffer(*bytes), [socket, bytes](boost::system::error_code, std::size_t) {});
  };
  auto peer = peer_credentials(socket->native_handle());
  // The peer must be a process of this run: its user (the run's own under a root daemon), its
  // marker, and, when the run has a cgroup, inside it (a marker can be copied; a cgroup cannot
  // be joined from outside without privilege).
  const uid_t run_uid = run_.box() && run_.box()->uid() ? *run_.box()->uid() : ::geteuid();
  if (!peer || peer->uid != run_uid ||
      !process_carries(peer->pid, plan.run_marker.first + "=" + plan.run_marker.second) ||
      (run_.box() && !run_.box()->holds(peer->pid))) {
    refuse("refused: the peer is not a process of this run");
    co_return;
  }
  std::string request;
  auto [ec, n] = co_await asio::async_read_until(*socket, asio::dynamic_buffer(request, kMaxHookRequestBytes), '\n',
                                                 asio::as_tuple(asio::use_awaitable));
  if (ec || run_.closed()) {
    refuse("refused: no request line");
    co_return;
  }
  Clock::time_point read_at = Clock::now();
  auto parsed = protocol::parse_json(std::string_view(request).substr(0, n));
  if (!parsed) {
    refuse("refused: the request is not JSON");
    co_return;
  }
  std::uint64_t id = ++hook_connections_;
  hook_waiting_.emplace(id, socket);
  // The request is vendor input like a line of its stdout (Codex's calls arrive here), timed so.
  SeamProbe* timing = run_.run_options().seam_probe.get();
  if (timing) timing->input_read(read_at);
  // A direct run keeps no journal: the request's line is not kept for one.
  run_.hook_request(id, std::string(), std::move(*parsed), Clock::now());
  if (timing) timing->input_done();
  // Watch for the hook going away before its answer (the vendor's own timeout kills it).
  if (!hook_waiting_.count(id)) co_return;
  char probe;
  co_await socket->async_read_some(asio::buffer(&probe, 1), asio::as_tuple(asio::use_awaitable));
  if (hook_waiting_.erase(id)) {
    run_.hook_gone(id);
  }
}

}  // namespace mh::daemon
