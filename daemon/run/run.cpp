#include "daemon/run/run.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <deque>
#include <fstream>

#include "daemon/log.hpp"
#include "daemon/model/scripted_endpoint.hpp"
#include "daemon/peer.hpp"
#include "daemon/process/child_process.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/stream/event_log.hpp"
#include "protocol/line_framer.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace asio::experimental::awaitable_operators;
using Clock = std::chrono::steady_clock;

namespace {

// Appends bytes to a file with write(2), for the raw transcripts. A failure is reported once
// and then ignored: losing the copy must not stop the run (the event stream is the record).
class AppendFile {
 public:
  bool open(const std::filesystem::path& path, std::string& error) {
    fd_.reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640));
    if (!fd_) error = "cannot open " + path.string() + ": " + std::strerror(errno);
    return bool(fd_);
  }
  void append(std::string_view bytes) {
    while (fd_ && !bytes.empty()) {
      ssize_t n = ::write(fd_.get(), bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fd_.reset();
        return;
      }
      bytes.remove_prefix(static_cast<std::size_t>(n));
    }
  }

 private:
  UniqueFd fd_;
};

constexpr std::size_t kMaxLatencySamples = 100'000;
constexpr std::size_t kMaxHookRequestBytes = 1u << 20;

// Does /proc/<pid>/environ hold `entry` as a whole entry? A hook program inherits the vendor's
// environment, so a connection whose peer does not carry the run's marker is not this run's hook.
bool process_carries(pid_t pid, const std::string& entry) {
  std::string path = "/proc/" + std::to_string(pid) + "/environ";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  std::string env;
  char chunk[16 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n <= 0) break;
    env.append(chunk, static_cast<std::size_t>(n));
    if (env.size() > (1u << 20)) break;  // an environment that large is not worth reading on
  }
  std::size_t start = 0;
  while (start < env.size()) {
    std::size_t end = env.find('\0', start);
    if (end == std::string::npos) end = env.size();
    if (env.compare(start, end - start, entry) == 0) return true;
    start = end + 1;
  }
  return false;
}

using local_socket = asio::local::stream_protocol::socket;

}  // namespace

int exit_status_for(const RunOutcome& outcome) {
  if (outcome.refused_at_start) return 2;
  switch (outcome.reason) {
    case protocol::CloseReason::completed:
      return 0;
    case protocol::CloseReason::error:
      return 3;
    case protocol::CloseReason::steer_halt:
      return 4;
    case protocol::CloseReason::budget:
      return 5;
    case protocol::CloseReason::killed:
      return 6;
  }
  return 3;
}

int exit_status_for(const RunOutcome& outcome, const protocol::AuditReport& audit) {
  if (outcome.refused_at_start) return 2;
  int audited = protocol::audit_exit_status(audit);  // 0 ok, 1 gap, 3 unk or incomplete
  if (audited == 1) return 1;
  if (outcome.reason == protocol::CloseReason::completed) return audited;
  return exit_status_for(outcome);
}

// ---------------------------------------------------------------------------------------------
// Impl: everything below runs on the strand unless it says otherwise
// ---------------------------------------------------------------------------------------------

struct Run::Impl final : RunEffects {
  Impl(asio::io_context& io, const adapters::Adapter& adapter, RunOptions options)
      : io(io),
        strand(asio::make_strand(io)),
        adapter(adapter),
        options(std::move(options)),
        idle_timer(strand),
        grace_timer(strand),
        wall_timer(strand) {}

  asio::io_context& io;
  asio::strand<asio::io_context::executor_type> strand;
  const adapters::Adapter& adapter;
  RunOptions options;
  std::weak_ptr<Run> self;
  std::chrono::system_clock::time_point created_at = std::chrono::system_clock::now();

  std::optional<EventLog> log;
  std::shared_ptr<SharedStreamState> shared;
  std::variant<adapters::LaunchPlan, adapters::LaunchRefusal> planned;
  std::unique_ptr<model::ScriptedEndpoint> endpoint;
  std::unique_ptr<ChildProcess> child;
  std::unique_ptr<RunCore> core;
  std::function<void(const RunOutcome&)> on_closed;
  RunOutcome outcome;
  bool closed = false;
  bool started = false;
  bool log_failed = false;

  AppendFile transcript, stdin_log, stderr_log;
  AppendFile hook_log;  // the hook channel's traffic, both directions (vendor-hooks.jsonl)
  std::optional<asio::posix::stream_descriptor> vendor_stdout, vendor_stderr;
  // The hook channel (plan.hook_channel): pending hook connections wait for their answer here.
  std::optional<asio::local::stream_protocol::acceptor> hook_acceptor;
  std::map<std::uint64_t, std::shared_ptr<local_socket>> hook_waiting;
  std::uint64_t hook_connections = 0;
  std::deque<std::optional<std::string>> to_vendor;  // nullopt: close stdin after what precedes
  bool writing = false;
  bool stdin_closed = false;
  bool vendor_exited = false;
  std::map<std::string, std::unique_ptr<asio::steady_timer>> deadlines;
  asio::steady_timer idle_timer;
  asio::steady_timer grace_timer;
  asio::steady_timer wall_timer;
  bool grace_armed = false;

  // Commands that arrived before the core existed (the spawn is still under way).
  struct Early {
    std::variant<protocol::Command, protocol::LineRefusal> what;
    std::optional<protocol::PeerIdentity> peer;
    ResultCallback on_result;
    Clock::time_point received_at;
  };
  // Callbacks waiting for the command.result of a command id, in arrival order.
  std::multimap<std::string, ResultCallback> result_waiters;
  std::vector<Early> early;

  // Events emitted while the log holds a chunk's events (see release_log).
  std::size_t held_requested = 0;
  std::vector<protocol::ev::CommandResult> held_results;

  // Seam instrumentation.
  Clock::time_point line_read_at{};
  std::optional<Clock::time_point> command_received_at;
  SeamLatencies latencies;

  // --- RunEffects --------------------------------------------------------------------------

  std::uint64_t emit(protocol::EventPayload payload, std::optional<std::string> at) override {
    return emit_cut(std::move(payload), std::move(at), {});
  }

  std::uint64_t emit_cut(protocol::EventPayload payload, std::optional<std::string> at,
                         std::vector<protocol::CutField> cut) override {
    bool requested = std::holds_alternative<protocol::ev::ToolRequested>(payload);
    std::optional<protocol::ev::CommandResult> answered;
    if (auto* r = std::get_if<protocol::ev::CommandResult>(&payload); r && !result_waiters.empty()) answered = *r;
    // The observer hears of the event while the payload is still in hand, before readers can
    // see it; only a failed write (which stops the run, logged above all) could make it differ
    // from the record.
    if (options.observer && !log->closed()) options.observer->appended(payload);
    auto seq = log->append(std::move(payload), std::move(at), std::move(cut));
    if (!seq) {
      // The record cannot be kept: say so where the operator looks, and stop the run rather
      // than govern it off the record.
      daemon::log(LogPriority::error, "run " + log->run_id() + ": " + seq.error());
      log_failed = true;  // after_core() stops the run once the core has returned
      return log->last_seq();
    }
    // While the log holds a chunk's events, they are not recorded yet: what waits on "recorded"
    // and the delivery latency wait for release_log().
    if (log->holding()) {
      if (requested) ++held_requested;
      if (answered) held_results.push_back(std::move(*answered));
      return *seq;
    }
    if (requested) sample_line_to_requested();
    if (answered) result_recorded(*answered, true);
    return *seq;
  }

  void sample_line_to_requested() {
    if (line_read_at != Clock::time_point{} && latencies.line_to_requested.size() < kMaxLatencySamples)
      latencies.line_to_requested.push_back(Clock::now() - line_read_at);
  }

  void result_recorded(const protocol::ev::CommandResult& result, bool recorded) {
    if (auto it = result_waiters.find(result.id); it != result_waiters.end()) {
      ResultCallback callback = std::move(it->second);
      result_waiters.erase(it);
      callback(result, recorded);
    }
  }

  // Writes the events held while a chunk of vendor output was handled (one write, one wake-up
  // of the readers), then does what waited on them being recorded.
  void release_log() {
    auto written = log->release();
    if (!written) {
      daemon::log(LogPriority::error, "run " + log->run_id() + ": " + written.error());
      log_failed = true;
    }
    for (; held_requested > 0; --held_requested)
      if (written) sample_line_to_requested();
    auto results = std::move(held_results);
    held_results.clear();
    for (const auto& r : results)
      result_recorded(r, written.has_value());
    if (!written) after_core();  // stops the run: it is not governed off the record
  }

  void write_vendor(std::string line) override {
    if (command_received_at) {
      if (latencies.decide_to_answer.size() < kMaxLatencySamples)
        latencies.decide_to_answer.push_back(Clock::now() - *command_received_at);
      command_received_at.reset();
    } else if (line_read_at != Clock::time_point{} && latencies.line_to_answer.size() < kMaxLatencySamples) {
      latencies.line_to_answer.push_back(Clock::now() - line_read_at);
    }
    line.push_back('\n');
    to_vendor.emplace_back(std::move(line));
    pump_stdin();
  }

  void reply_hook(std::uint64_t connection, std::string line) override {
    auto it = hook_waiting.find(connection);
    if (it == hook_waiting.end()) return;  // the hook already went away
    auto socket = std::move(it->second);
    hook_waiting.erase(it);
    log_hook(connection, "out", json::value(line));
    auto bytes = std::make_shared<std::string>(std::move(line));
    bytes->push_back('\n');
    asio::async_write(*socket, asio::buffer(*bytes), [socket, bytes](boost::system::error_code, std::size_t) {
      boost::system::error_code ec;
      socket->shutdown(asio::socket_base::shutdown_both, ec);
      socket->close(ec);
    });
  }

  // --- The hook channel ----------------------------------------------------------------------

  // One line per message on the hook channel, so the vendor traffic is retained whole.
  void log_hook(std::uint64_t connection, std::string_view direction, const json::value& message) {
    hook_log.append(protocol::canonical_json(
                        json::object{{"connection", connection}, {"direction", direction}, {"message", message}}) +
                    "\n");
  }

  bool open_hook_channel(const adapters::HookChannel& channel, std::string& error) {
    // An abstract socket: no path, so no path-length limit and nothing left on disk.
    std::string name = channel.address;
    if (!name.empty() && name.front() == '@') name.front() = '\0';
    boost::system::error_code ec;
    hook_acceptor.emplace(strand);
    hook_acceptor->open(asio::local::stream_protocol(), ec);
    if (!ec) hook_acceptor->bind(asio::local::stream_protocol::endpoint(name), ec);
    if (!ec) hook_acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) error = "cannot open the hook channel " + channel.address + ": " + ec.message();
    return !ec;
  }

  asio::awaitable<void> accept_hooks(std::shared_ptr<Run> keep) {
    for (;;) {
      auto [ec, socket] = co_await hook_acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
      if (ec) co_return;
      auto shared = std::make_shared<local_socket>(std::move(socket));
      asio::co_spawn(strand, serve_hook(keep, shared), asio::detached);
    }
  }

  asio::awaitable<void> serve_hook(std::shared_ptr<Run> keep, std::shared_ptr<local_socket> socket) {
    (void)keep;
    const auto& plan = std::get<adapters::LaunchPlan>(planned);
    auto refuse = [&](const std::string& why) {
      // The hook program prints a deny on any answer it cannot use; say why for its stderr.
      auto bytes = std::make_shared<std::string>(why + "\n");
      asio::async_write(*socket, asio::buffer(*bytes), [socket, bytes](boost::system::error_code, std::size_t) {});
    };
    auto peer = peer_credentials(socket->native_handle());
    if (!peer || peer->uid != ::geteuid() ||
        !process_carries(peer->pid, plan.run_marker.first + "=" + plan.run_marker.second)) {
      refuse("refused: the peer is not a process of this run");
      co_return;
    }
    std::string request;
    auto [ec, n] = co_await asio::async_read_until(*socket, asio::dynamic_buffer(request, kMaxHookRequestBytes), '\n',
                                                   asio::as_tuple(asio::use_awaitable));
    if (ec || closed || !core) {
      refuse("refused: no request line");
      co_return;
    }
    auto input = protocol::parse_json(std::string_view(request).substr(0, n));
    if (!input) {
      refuse("refused: the request is not JSON");
      co_return;
    }
    std::uint64_t id = ++hook_connections;
    log_hook(id, "in", *input);
    hook_waiting.emplace(id, socket);
    core->on_hook_request(id, *input, Clock::now());
    after_core();
    // Watch for the hook going away before its answer (the vendor's own timeout kills it).
    if (!hook_waiting.count(id)) co_return;
    char probe;
    co_await socket->async_read_some(asio::buffer(&probe, 1), asio::as_tuple(asio::use_awaitable));
    if (hook_waiting.erase(id) && core && !closed) {
      core->on_hook_gone(id, Clock::now());
      after_core();
    }
  }

  void arm_deadline(const std::string& call_id, Instant when) override {
    auto timer = std::make_unique<asio::steady_timer>(strand, when);
    timer->async_wait([weak = self, call_id](boost::system::error_code ec) {
      if (ec) return;  // disarmed
      if (auto run = weak.lock()) {
        Impl& impl = *run->impl_;
        impl.deadlines.erase(call_id);
        if (impl.core && !impl.closed) {
          impl.core->on_deadline(call_id, Clock::now());
          impl.after_core();
        }
      }
    });
    deadlines[call_id] = std::move(timer);
  }

  void cancel_deadline(const std::string& call_id) override { deadlines.erase(call_id); }

  void arm_wall_budget(Instant when) override {
    wall_timer.expires_at(when);
    wall_timer.async_wait([weak = self](boost::system::error_code ec) {
      if (ec) return;
      if (auto run = weak.lock()) {
        Impl& impl = *run->impl_;
        if (impl.core && !impl.closed) {
          impl.core->on_wall_budget(Clock::now());
          impl.after_core();
        }
      }
    });
  }

  void spend_changed(const Spend& spend) override {
    if (options.on_spend) options.on_spend(spend);
  }

  // The last bytes the vendor wrote to stderr, from its start of line: what a warning quotes
  // when the vendor stopped on its own.
  std::string stderr_tail() const {
    constexpr std::size_t kTail = 480;
    UniqueFd fd(::open(RunDir(options.run_dir).vendor_stderr().c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return {};
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || st.st_size <= 0) return {};
    std::size_t want = std::min<std::size_t>(kTail, static_cast<std::size_t>(st.st_size));
    std::string tail(want, '\0');
    ssize_t n = ::pread(fd.get(), tail.data(), want, st.st_size - static_cast<off_t>(want));
    if (n <= 0) return {};
    tail.resize(static_cast<std::size_t>(n));
    if (want < static_cast<std::size_t>(st.st_size))
      if (auto nl = tail.find('\n'); nl != std::string::npos) tail.erase(0, nl + 1);
    while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r' || tail.back() == ' '))
      tail.pop_back();
    for (char& c : tail)
      if (c == '\n') c = ' ';
    return protocol::excerpt(tail, kTail);
  }

  void close_vendor_stdin() override {
    to_vendor.emplace_back(std::nullopt);
    pump_stdin();
    arm_grace(options.exit_grace);
  }

  void terminate_vendor(std::chrono::milliseconds grace) override {
    to_vendor.emplace_back(std::nullopt);
    pump_stdin();
    arm_grace(grace);
  }

  // --- Vendor I/O ----------------------------------------------------------------------------

  void pump_stdin() {
    if (writing || !child) return;
    writing = true;
    asio::co_spawn(strand, write_stdin(self.lock()), asio::detached);
  }

  asio::awaitable<void> write_stdin(std::shared_ptr<Run> keep) {
    (void)keep;
    while (!to_vendor.empty()) {
      auto next = std::move(to_vendor.front());
      to_vendor.pop_front();
      if (!next) {
        if (!stdin_closed) child->close_stdin();
        stdin_closed = true;
        continue;
      }
      if (stdin_closed) continue;  // the vendor will never read it; it was not delivered
      stdin_log.append(*next);
      auto [ec, n] =
          co_await asio::async_write(child->stdin_pipe(), asio::buffer(*next), asio::as_tuple(asio::use_awaitable));
      (void)n;
      if (ec) {  // the vendor stopped reading (it exited): nothing more can reach it
        child->close_stdin();
        stdin_closed = true;
      }
    }
    writing = false;
  }

  // Reading the vendor's output: wait until the pipe is readable, then drain it into a buffer
  // that belongs to the io thread, not to the run. An idle run therefore holds no read buffer at
  // all (1,000 idle runs cost no 80 MiB of buffers); the framer keeps only a partial line.
  static constexpr std::size_t kChunk = 64 * 1024;
  static constexpr std::size_t kDrainPerTurn = 256 * 1024;  // then yield to other runs

  static char* thread_buffer() {
    thread_local std::unique_ptr<char[]> buffer(new char[kChunk]);
    return buffer.get();
  }

  // Drains a non-blocking descriptor, handing each chunk to `consume` (synchronously: the chunk
  // lives in the thread's buffer). Returns false at end of file or on an error.
  template <class Consume>
  asio::awaitable<bool> drain(asio::posix::stream_descriptor& from, Consume&& consume) {
    std::size_t this_turn = 0;
    for (;;) {
      ssize_t n = ::read(from.native_handle(), thread_buffer(), kChunk);
      if (n > 0) {
        consume(std::string_view(thread_buffer(), static_cast<std::size_t>(n)));
        this_turn += static_cast<std::size_t>(n);
        if (this_turn >= kDrainPerTurn) {
          // Fairness: a chatty vendor must not hold the io thread; come back right after others.
          co_await asio::post(strand, asio::use_awaitable);
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
  asio::awaitable<void> read_until_end(asio::posix::stream_descriptor& from, Consume& consume) {
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

  asio::awaitable<void> read_stdout() {
    protocol::LineFramer framer(options.max_vendor_line_bytes, /*digest_oversized=*/true);
    auto on_line = [this](const protocol::FramedLine& line) {
      if (closed) return;
      core->on_vendor_line(line, Clock::now());
      after_core();
    };
    auto consume = [&](std::string_view chunk) {
      line_read_at = Clock::now();
      // One chunk's events go to the log in one write: a chatty vendor costs a write and a
      // readers' wake-up per chunk, not per line. Answers to the vendor are written as the lines
      // are handled, before the records (the effect goes out before its record).
      log->hold();
      framer.set_received_at(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count());
      framer.feed(chunk, on_line);
      release_log();
      line_read_at = {};
      // Byte for byte, as read. Written after the chunk's lines are handled so that answering
      // the vendor never waits on the copy; it is on disk before the next read.
      transcript.append(chunk);
    };
    co_await read_until_end(*vendor_stdout, consume);
    framer.finish(on_line);
  }

  asio::awaitable<void> read_stderr() {
    auto consume = [this](std::string_view chunk) { stderr_log.append(chunk); };
    co_await read_until_end(*vendor_stderr, consume);
  }

  // Waits for the vendor to exit, then kills whatever of the run is left (background jobs,
  // setsid'd tool processes), so nothing of the run survives it and its stdout can end.
  asio::awaitable<protocol::ProcessTermination> supervise_exit() {
    protocol::ProcessTermination termination = co_await child->async_wait();
    vendor_exited = true;
    grace_timer.cancel();
    const auto& plan = std::get<adapters::LaunchPlan>(planned);
    KillReport report = co_await kill_run_processes(strand, std::nullopt, plan.run_marker, std::chrono::seconds(10));
    if (!report.clean())
      daemon::log(LogPriority::warning, "run " + log->run_id() + ": leftover processes: " + report.summary());
    co_return termination;
  }

  void arm_grace(std::chrono::milliseconds grace) {
    if (grace_armed || vendor_exited) return;
    grace_armed = true;
    grace_timer.expires_after(grace);
    grace_timer.async_wait([weak = self](boost::system::error_code ec) {
      if (ec) return;
      if (auto run = weak.lock()) asio::co_spawn(run->impl_->strand, run->impl_->kill_everything(run), asio::detached);
    });
  }

  asio::awaitable<void> kill_everything(std::shared_ptr<Run> keep) {
    (void)keep;
    if (vendor_exited || !child) co_return;
    const auto& plan = std::get<adapters::LaunchPlan>(planned);
    co_await kill_run_processes(strand, child->pid(), plan.run_marker, std::chrono::seconds(10));
  }

  // --- Core plumbing -------------------------------------------------------------------------

  void after_core() {
    if (!core || closed) return;
    if (log_failed && core->phase() != RunCore::Phase::ending) core->on_shutdown(Clock::now());
    if (core->phase() == RunCore::Phase::idle && options.idle_timeout.count() > 0) {
      idle_timer.expires_after(options.idle_timeout);
      idle_timer.async_wait([weak = self](boost::system::error_code ec) {
        if (ec) return;
        if (auto run = weak.lock()) {
          Impl& impl = *run->impl_;
          if (impl.core && !impl.closed) {
            impl.core->on_idle_timeout(Clock::now());
            impl.after_core();
          }
        }
      });
    } else {
      idle_timer.cancel();
    }
  }

  void deliver(Early e) {
    std::string id = "-";
    if (auto* c = std::get_if<protocol::Command>(&e.what))
      id = c->id;
    else if (auto* r = std::get_if<protocol::LineRefusal>(&e.what))
      id = r->id.value_or("-");
    if (closed || !core) {
      if (e.on_result)
        e.on_result(protocol::ev::CommandResult{id, protocol::CommandOutcome::refused(
                                                        protocol::RefusalCode::TOO_LATE,
                                                        "the run's stream is closed; nothing more can be recorded")},
                    false);
      return;
    }
    if (e.on_result) result_waiters.emplace(id, std::move(e.on_result));
    if (auto* c = std::get_if<protocol::Command>(&e.what)) {
      command_received_at = e.received_at;
      core->on_command(std::move(*c), e.peer, Clock::now());
      command_received_at.reset();
    } else {
      core->on_unreadable_command(std::get<protocol::LineRefusal>(e.what), Clock::now());
    }
    after_core();
  }

  void finish(protocol::CloseReason reason, protocol::ProcessTermination process) {
    if (closed) return;
    closed = true;
    outcome.reason = reason;
    outcome.process = process;
    outcome.turns = core ? core->turns() : 0;
    // The daemon hears of the close before any reader can see stream.closed (and before the
    // teardown below): a client that has just read it and submits again finds the slot free.
    bool reported = false;
    auto report = [this, &reported](std::uint64_t events) {
      outcome.events = events;
      reported = true;
      if (on_closed) on_closed(outcome);
    };
    // stream.closed is durable and not yet readable: the observer hears of it, then the daemon.
    auto written = [this, &report, reason, process](std::uint64_t seq) {
      if (options.observer)
        options.observer->appended(protocol::ev::StreamClosed{seq - 1, reason, log->run_id(), process});
      report(seq);
    };
    auto closed_seq = log->close(reason, process, written);
    if (!reported) report(closed_seq ? *closed_seq : log->last_seq());
    deadlines.clear();
    idle_timer.cancel();
    grace_timer.cancel();
    wall_timer.cancel();
    if (hook_acceptor) {
      boost::system::error_code ec;
      hook_acceptor->close(ec);
    }
    for (auto& [id, socket] : hook_waiting) {
      boost::system::error_code ec;
      socket->close(ec);
    }
    hook_waiting.clear();
    if (endpoint) endpoint->stop();
    for (auto& e : early)
      deliver(std::move(e));
    early.clear();
    // Results that will never come now (e.g. the stream failed): every caller still hears once.
    for (auto& [id, callback] : result_waiters)
      callback(protocol::ev::CommandResult{id, protocol::CommandOutcome::refused(protocol::RefusalCode::TOO_LATE,
                                                                                 "the run ended before answering")},
               false);
    result_waiters.clear();
  }

  // Refused before anything spawned: the command results (one per needed command the adapter
  // cannot honour) or a warning naming the launch refusal, then the marker.
  void refuse(const std::string& code, const std::string& message,
              const std::vector<protocol::ev::CommandResult>& results) {
    for (const auto& r : results)
      emit(r, std::nullopt);
    if (results.empty()) emit(protocol::ev::Warning{code, message}, std::nullopt);
    outcome.refused_at_start = true;
    finish(protocol::CloseReason::error, protocol::ProcessTermination{});
  }

  asio::awaitable<void> main(std::shared_ptr<Run> keep) {
    (void)keep;
    if (auto* refusal = std::get_if<adapters::LaunchRefusal>(&planned)) {
      refuse("LAUNCH_REFUSED", refusal->message, refusal->command_results);
      co_return;
    }
    if (auto unpriced = refuse_unpriced_budget(options.spec, adapter, options.prices)) {
      refuse("LAUNCH_REFUSED", *unpriced, {});
      co_return;
    }
    auto& plan = std::get<adapters::LaunchPlan>(planned);
    std::string error;
    std::error_code ec;
    for (const auto& d : plan.directories) {
      std::filesystem::create_directories(d, ec);
      if (ec) {
        refuse("LAUNCH_FAILED", "cannot create " + d.string() + ": " + ec.message(), {});
        co_return;
      }
    }
    const RunDir dir(options.run_dir);
    for (const auto& f : plan.files) {
      if (auto problem = write_file(f.path, f.contents, f.mode)) {
        refuse("LAUNCH_FAILED", *problem, {});
        co_return;
      }
    }
    if (auto problem = dir.write_plan(plan)) {
      refuse("LAUNCH_FAILED", *problem, {});
      co_return;
    }
    if (!transcript.open(plan.transcript_path, error) || !stdin_log.open(plan.stdin_log_path, error) ||
        !stderr_log.open(dir.vendor_stderr(), error)) {
      refuse("LAUNCH_FAILED", error, {});
      co_return;
    }
    if (plan.hook_channel) {
      if (!hook_log.open(dir.vendor_hooks(), error) || !open_hook_channel(*plan.hook_channel, error)) {
        refuse("LAUNCH_FAILED", error, {});
        co_return;
      }
      asio::co_spawn(strand, accept_hooks(self.lock()), asio::detached);
    }
    auto spawned = ChildProcess::spawn(strand, plan);
    if (!spawned) {
      refuse("LAUNCH_FAILED", spawned.error(), {});
      co_return;
    }
    child = std::move(*spawned);
    // The run reads the vendor's output itself (readiness, then a drain into the io thread's
    // buffer), so it takes the two read ends over from the pipe objects.
    vendor_stdout.emplace(strand, child->stdout_pipe().release());
    vendor_stderr.emplace(strand, child->stderr_pipe().release());
    core = std::make_unique<RunCore>(options.spec, adapter, adapter.open_session(options.spec, plan), *this,
                                     RunCoreOptions{options.halt_grace, &options.prices});
    core->start(Clock::now());
    after_core();
    for (auto& e : early)
      deliver(std::move(e));
    early.clear();

    auto [stdout_done, termination, stderr_done] =
        co_await (wrap(read_stdout()) && supervise_exit() && wrap(read_stderr()));
    (void)stdout_done;
    (void)stderr_done;
    // The vendor's stdout has ended and no process of the run is left: wind up.
    protocol::CloseReason reason = core->wind_up(termination, Clock::now(), stderr_tail());
    finish(reason, termination);
  }

  // awaitable_operators combine awaitable<T> results; give void coroutines a value.
  static asio::awaitable<bool> wrap(asio::awaitable<void> a) {
    co_await std::move(a);
    co_return true;
  }
};

// ---------------------------------------------------------------------------------------------
// Run
// ---------------------------------------------------------------------------------------------

Run::Run(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Run::~Run() = default;

boost::system::result<std::shared_ptr<Run>, std::string> Run::create(asio::io_context& io,
                                                                     const adapters::Adapter& adapter,
                                                                     RunOptions options) {
  using Result = boost::system::result<std::shared_ptr<Run>, std::string>;
  auto fail = [](std::string m) { return Result(boost::system::in_place_error, std::move(m)); };
  std::error_code ec;
  options.run_dir = std::filesystem::absolute(options.run_dir, ec);
  std::filesystem::create_directories(options.run_dir, ec);
  if (ec) return fail("cannot create the run directory " + options.run_dir.string() + ": " + ec.message());
  const RunDir dir(options.run_dir);
  if (std::filesystem::exists(dir.events()))
    return fail("the run directory " + options.run_dir.string() + " already holds a run");
  auto impl = std::make_unique<Impl>(io, adapter, std::move(options));
  Impl& i = *impl;

  // An in-process scripted endpoint gets a fresh token; the spec then names it.
  if (i.options.model_scenario) {
    auto scenario = model::load_scenario_file(*i.options.model_scenario);
    if (!scenario)
      return fail("the model scenario " + i.options.model_scenario->string() +
                  " is refused: " + scenario.error().message());
    model::EndpointOptions endpoint_options;
    endpoint_options.log_path = dir.model_requests();
    i.endpoint = std::make_unique<model::ScriptedEndpoint>(io, std::move(*scenario), endpoint_options);
    auto port = i.endpoint->start();
    if (!port) return fail("the scripted model endpoint could not start: " + port.error().message());
    i.options.spec.model_endpoint = adapters::ModelEndpoint{i.endpoint->base_url(), i.endpoint->token()};
  }

  if (auto problem = dir.write_spec(i.options.spec)) return fail(*problem);
  EventLogOptions log_options;
  log_options.durability = i.options.fsync_each_event ? Durability::fsync_each : Durability::write;
  log_options.max_line_bytes = i.options.max_event_line_bytes;
  auto log = EventLog::create(dir.events(), i.options.spec.run_id, log_options);
  if (!log) return fail(log.error());
  i.log.emplace(std::move(*log));
  i.shared = i.log->shared();
  i.planned = adapter.plan(i.options.spec, dir.paths());
  auto run = std::shared_ptr<Run>(new Run(std::move(impl)));
  run->impl_->self = run;
  return run;
}

void Run::start(std::function<void(const RunOutcome&)> on_closed) {
  asio::post(impl_->strand, [run = shared_from_this(), on_closed = std::move(on_closed)]() mutable {
    Impl& i = *run->impl_;
    if (i.started) return;
    i.started = true;
    i.on_closed = std::move(on_closed);
    asio::co_spawn(i.strand, i.main(run), asio::detached);
  });
}

void Run::command(protocol::Command command, std::optional<protocol::PeerIdentity> peer, ResultCallback on_result,
                  Clock::time_point received_at) {
  asio::post(impl_->strand, [run = shared_from_this(), command = std::move(command), peer,
                             on_result = std::move(on_result), received_at]() mutable {
    Impl& i = *run->impl_;
    Impl::Early e{std::move(command), peer, std::move(on_result), received_at};
    if (!i.core && !i.closed)
      i.early.push_back(std::move(e));
    else
      i.deliver(std::move(e));
  });
}

void Run::unreadable_command(protocol::LineRefusal refusal, ResultCallback on_result) {
  asio::post(impl_->strand,
             [run = shared_from_this(), refusal = std::move(refusal), on_result = std::move(on_result)]() mutable {
               Impl& i = *run->impl_;
               Impl::Early e{std::move(refusal), std::nullopt, std::move(on_result), Clock::now()};
               if (!i.core && !i.closed)
                 i.early.push_back(std::move(e));
               else
                 i.deliver(std::move(e));
             });
}

void Run::command_source_closed() {
  asio::post(impl_->strand, [run = shared_from_this()] {
    Impl& i = *run->impl_;
    if (i.core && !i.closed) {
      i.core->on_command_source_closed(Clock::now());
      i.after_core();
    }
  });
}

void Run::budget_exhausted(std::string message) {
  asio::post(impl_->strand, [run = shared_from_this(), message = std::move(message)] {
    Impl& i = *run->impl_;
    if (i.core && !i.closed) {
      i.core->on_budget_exhausted(message, Clock::now());
      i.after_core();
    }
  });
}

void Run::shutdown() {
  asio::post(impl_->strand, [run = shared_from_this()] {
    Impl& i = *run->impl_;
    if (i.core && !i.closed) {
      i.core->on_shutdown(Clock::now());
      i.after_core();
    }
  });
}

std::shared_ptr<SharedStreamState> Run::stream() const {
  return impl_->shared;
}
const std::string& Run::id() const {
  return impl_->options.spec.run_id;
}
const std::filesystem::path& Run::run_dir() const {
  return impl_->options.run_dir;
}

void Run::status(std::function<void(RunStatus)> callback) const {
  asio::post(impl_->strand, [run = std::const_pointer_cast<Run>(shared_from_this()), callback = std::move(callback)] {
    const Impl& i = *run->impl_;
    RunStatus s;
    s.run_id = i.options.spec.run_id;
    s.adapter = i.options.spec.adapter;
    s.phase = i.closed ? "closed" : i.core ? std::string(to_string(i.core->phase())) : "starting";
    s.pending_decisions = i.core ? i.core->pending_count() : 0;
    s.turns = i.core ? i.core->turns() : 0;
    s.last_seq = i.log->last_seq();
    if (i.closed) s.close_reason = i.outcome.reason;
    s.pid = i.child && !i.closed ? i.child->pid() : 0;  // a closed run's child is reaped
    s.created_at = i.created_at;
    s.labels = i.options.spec.labels;
    if (i.core) s.spend = i.core->spend();
    s.budget = i.options.spec.budget;
    callback(std::move(s));
  });
}

void Run::pending_calls(std::function<void(std::vector<PendingCallView>)> callback) const {
  asio::post(impl_->strand, [run = std::const_pointer_cast<Run>(shared_from_this()), callback = std::move(callback)] {
    const Impl& i = *run->impl_;
    callback(i.core && !i.closed ? i.core->pending_calls(Clock::now()) : std::vector<PendingCallView>{});
  });
}

void Run::latencies(std::function<void(SeamLatencies)> callback) const {
  asio::post(impl_->strand, [run = std::const_pointer_cast<Run>(shared_from_this()), callback = std::move(callback)] {
    callback(run->impl_->latencies);
  });
}

}  // namespace mh::daemon
