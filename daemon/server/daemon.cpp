#include "daemon/server/daemon.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <cstdio>
#include <ctime>
#include <deque>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "daemon/process/run_processes.hpp"
#include "daemon/run/run.hpp"
#include "daemon/server/daily_spend.hpp"
#include "daemon/server/socket_api.hpp"
#include "daemon/stream/event_log.hpp"
#include "daemon/stream/stream_reader.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/hermetic_floor.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
using local_socket = asio::local::stream_protocol::socket;
using Clock = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------------------------------------
// Logging: stderr with journald priority prefixes. Never a secret, a prompt or a tool input.
// ---------------------------------------------------------------------------------------------
int g_log_level = 6;
void log(int priority, const std::string& message) {
  if (priority > g_log_level) return;
  std::string line = "<" + std::to_string(priority) + ">metaharness: " + message + "\n";
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

std::string new_run_id() {
  std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &utc);
  static thread_local std::mt19937_64 rng{std::random_device{}()};
  char suffix[20];
  std::snprintf(suffix, sizeof suffix, "%012llx", static_cast<unsigned long long>(rng() & 0xFFFFFFFFFFFFull));
  return std::string(stamp) + "-" + suffix;
}

std::string rfc3339(std::chrono::system_clock::time_point t) {
  std::time_t s = std::chrono::system_clock::to_time_t(t);
  std::tm utc{};
  gmtime_r(&s, &utc);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return buf;
}

// Turns a callback API ("call done(value) exactly once, on any thread") into an awaitable that
// resumes on the awaiting coroutine's executor.
//
// GCC 12 double-destroys a capturing lambda that is a temporary inside a co_await expression,
// and miscompiles capturing lambda coroutines. So these helpers are plain functions (not
// coroutines), and every call site binds its lambda to a name before the co_await.
template <class T, class Initiate>
auto await_callback(Initiate initiate) {
  return asio::async_initiate<decltype(asio::use_awaitable), void(T)>(
      [](auto handler, Initiate initiate) {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        initiate([shared](T value) {
          auto executor = asio::get_associated_executor(*shared);
          asio::post(executor, [shared, value = std::move(value)]() mutable { (*shared)(std::move(value)); });
        });
      },
      asio::use_awaitable, std::move(initiate));
}

// A wake-up for one waiting coroutine on one strand: notify() before wait() is not lost.
class Signal {
 public:
  explicit Signal(asio::any_io_executor ex) : timer_(ex, Clock::time_point::max()) {}
  void notify() {
    set_ = true;
    timer_.cancel();
  }
  asio::awaitable<void> wait() {
    if (!set_) co_await timer_.async_wait(asio::as_tuple(asio::use_awaitable));
    set_ = false;
  }
  void cancel() { timer_.cancel(); }

 private:
  asio::steady_timer timer_;
  bool set_ = false;
};

struct Peer {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::int32_t pid = 0;
};

}  // namespace

// ---------------------------------------------------------------------------------------------
// The daemon's state
// ---------------------------------------------------------------------------------------------

struct RunEntry {
  std::string id;
  std::filesystem::path dir;
  std::shared_ptr<Run> run;                   // while it runs
  std::shared_ptr<SharedStreamState> stream;  // for readers, while known in this process
  bool closed = false;
  std::optional<protocol::CloseReason> close_reason;
  bool meta_loaded = false;
  std::uint32_t owner_uid = 0;
  std::string adapter;
  std::map<std::string, std::string> labels;
  std::chrono::system_clock::time_point created_at{};
  std::uint64_t last_seq = 0;
  // Known for a run that closed in this process; a run found on disk at start has no count
  // (null in a summary, not 0: absence of evidence is not a property).
  std::optional<std::uint32_t> turns;
  // What the run has spent (last reported) and its limits; unknown for a run found on disk.
  std::optional<Spend> spend;
  std::optional<adapters::Budgets> budget;
};

struct Daemon::Impl : std::enable_shared_from_this<Daemon::Impl> {
  explicit Impl(DaemonConfig c)
      : config(std::move(c)),
        io(static_cast<int>(threads())),
        registry_strand(asio::make_strand(io)),
        adapters(config.vendor),
        acceptor(io),
        signals(io, SIGTERM, SIGINT),
        status_timer(registry_strand),
        ledger_timer(registry_strand),
        ledger(config.state_dir / "daily-spend.json", config.daily_budget),
        started_at(Clock::now()) {}

  unsigned threads() const {
    unsigned n = config.threads ? config.threads : std::thread::hardware_concurrency();
    return n ? n : 2;
  }

  DaemonConfig config;
  asio::io_context io;
  asio::strand<asio::io_context::executor_type> registry_strand;
  adapters::AdapterRegistry adapters;
  asio::local::stream_protocol::acceptor acceptor;
  asio::signal_set signals;
  asio::steady_timer status_timer;
  bool status_pending = false;
  asio::steady_timer ledger_timer;
  bool ledger_save_pending = false;
  DailySpendLedger ledger;  // registry strand only
  Clock::time_point started_at;
  std::atomic<std::size_t> connections{0};
  std::atomic<std::uint64_t> command_counter{0};

  // Registry state: registry_strand only.
  std::map<std::string, RunEntry> runs;
  std::size_t active = 0;
  bool accepting = true;
  bool stopping = false;

  // --- registry helpers (run on registry_strand) ---------------------------------------------

  // Runs f() on the registry strand and resumes the awaiting coroutine with its result.
  template <class F>
  auto on_registry(F f) {
    using R = decltype(f());
    auto run_there = [strand = registry_strand, f = std::move(f)](auto done) mutable {
      asio::post(strand, [f = std::move(f), done = std::move(done)]() mutable { done(f()); });
    };
    return await_callback<R>(std::move(run_there));
  }

  void load_meta(RunEntry& e) {
    if (e.meta_loaded) return;
    e.meta_loaded = true;
    std::ifstream in(e.dir / "run.json");
    std::ostringstream ss;
    ss << in.rdbuf();
    auto v = protocol::parse_json(ss.str());
    if (!v || !v->is_object()) return;
    const auto& o = v->get_object();
    if (auto* a = o.if_contains("adapter"); a && a->is_string()) e.adapter = a->get_string();
    if (auto* u = o.if_contains("owner_uid"); u && u->is_int64())
      e.owner_uid = static_cast<std::uint32_t>(u->get_int64());
    if (auto* c = o.if_contains("created_unix"); c && c->is_int64())
      e.created_at = std::chrono::system_clock::time_point(std::chrono::seconds(c->get_int64()));
    if (auto* l = o.if_contains("labels"); l && l->is_object())
      for (const auto& kv : l->get_object())
        if (kv.value().is_string()) e.labels[std::string(kv.key())] = std::string(kv.value().get_string());
  }

  void schedule_status() {
    if (status_pending) return;
    status_pending = true;
    status_timer.expires_after(std::chrono::milliseconds(200));
    status_timer.async_wait([self = shared_from_this()](boost::system::error_code) {
      self->status_pending = false;
      std::string status = "STATUS=" + std::to_string(self->active) + " active run(s), " +
                           std::to_string(self->runs.size() - self->active) + " closed" +
                           (self->accepting ? "" : "; stopping");
      sd_notify(0, status.c_str());
    });
  }

  // A run's spend moved (on the registry strand): the owner's day is metered, and when that
  // crossed a daily budget every active run of the owner is stopped, saying which budget.
  void spent(const std::string& id, std::uint32_t uid, const Spend& now) {
    auto it = runs.find(id);
    if (it == runs.end()) return;
    Spend before = it->second.spend.value_or(Spend{});
    it->second.spend = now;
    if (!ledger.metered()) return;
    auto crossing = ledger.add(uid, utc_day(std::chrono::system_clock::now()), before, now);
    if (!crossing) {
      save_ledger_soon();
      return;
    }
    // The crossing itself is kept at once: a daemon killed right after must still refuse.
    if (auto problem = ledger.save()) log(3, "daily budgets: " + *problem);
    std::string message = crossing->message() + "; the daemon stops every run of uid " + std::to_string(uid) +
                          " and refuses new ones until the UTC day ends";
    log(4, message);
    for (auto& [other_id, e] : runs)
      if (e.run && !e.closed && e.owner_uid == uid) e.run->budget_exhausted(message);
  }

  // The ledger is written at most once a second, and at shutdown.
  void save_ledger_soon() {
    if (ledger_save_pending) return;
    ledger_save_pending = true;
    ledger_timer.expires_after(std::chrono::seconds(1));
    ledger_timer.async_wait([self = shared_from_this()](boost::system::error_code) {
      self->ledger_save_pending = false;
      if (auto problem = self->ledger.save()) log(3, "daily budgets: " + *problem);
    });
  }

  void run_closed(const std::string& id, const RunOutcome& outcome) {
    auto it = runs.find(id);
    if (it == runs.end()) return;
    it->second.closed = true;
    it->second.close_reason = outcome.reason;
    it->second.last_seq = outcome.events;
    it->second.turns = outcome.turns;
    it->second.run.reset();  // its child, timers and buffers go; the stream stays readable
    --active;
    log(6, "run " + id + " closed: " + std::string(protocol::to_string(outcome.reason)));
    schedule_status();
    if (stopping && active == 0) finish_shutdown();
  }

  // --- start-up ------------------------------------------------------------------------------

  // Every run whose stream lacks stream.closed was cut off by a crash of a previous daemon: cut
  // a torn last line, kill what is left of its processes, and close it with a warning naming the
  // recovery. A closed run costs one read of its file's tail.
  void recover_state() {
    std::error_code ec;
    std::filesystem::create_directories(config.state_dir / "runs", ec);
    for (const auto& dirent : std::filesystem::directory_iterator(config.state_dir / "runs", ec)) {
      if (!dirent.is_directory()) continue;
      std::string id = dirent.path().filename().string();
      auto events = dirent.path() / "events.jsonl";
      if (!std::filesystem::exists(events)) continue;
      RunEntry entry;
      entry.id = id;
      entry.dir = dirent.path();
      entry.closed = true;
      if (auto closed = closed_marker(events)) {
        entry.close_reason = closed->first;
        entry.last_seq = closed->second;
      } else {
        recover_run(entry, events);
      }
      runs.emplace(id, std::move(entry));
    }
  }

  // Reads only the last line: the cheap check for "this stream is closed".
  static std::optional<std::pair<protocol::CloseReason, std::uint64_t>> closed_marker(const std::filesystem::path& p) {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    struct stat st {};
    ::fstat(fd, &st);
    std::size_t want = static_cast<std::size_t>(std::min<off_t>(st.st_size, 64 * 1024));
    std::string tail(want, '\0');
    ssize_t n = ::pread(fd, tail.data(), want, st.st_size - static_cast<off_t>(want));
    ::close(fd);
    if (n <= 0) return std::nullopt;
    tail.resize(static_cast<std::size_t>(n));
    if (tail.empty() || tail.back() != '\n') return std::nullopt;
    tail.pop_back();
    auto start = tail.rfind('\n');
    std::string_view last =
        start == std::string::npos ? std::string_view(tail) : std::string_view(tail).substr(start + 1);
    auto event = protocol::read_event_line(last);
    if (!event) return std::nullopt;
    auto* closed = std::get_if<protocol::ev::StreamClosed>(&event->payload);
    if (!closed) return std::nullopt;
    return std::make_pair(closed->reason, event->seq);
  }

  void recover_run(RunEntry& entry, const std::filesystem::path& events) {
    auto recovered = EventLog::recover(events, entry.id);
    if (!recovered) {
      log(3, "run " + entry.id + ": cannot recover its stream: " + recovered.error());
      return;
    }
    if (recovered->report.already_closed) return;
    KillReport killed =
        kill_run_processes_sync(std::nullopt, RunMarker{"METAHARNESS_RUN", entry.id}, std::chrono::seconds(10));
    std::string message =
        "metaharness restarted after it was stopped without closing this run: " + recovered->report.describe() + "; " +
        std::to_string(killed.killed.size()) + " leftover process(es) of the run killed";
    if (!killed.survivors.empty()) message += ", " + std::to_string(killed.survivors.size()) + " survived";
    (void)recovered->log.append(protocol::ev::Warning{"RECOVERED_AFTER_RESTART", message});
    auto closed = recovered->log.close(protocol::CloseReason::error, protocol::ProcessTermination{});
    entry.close_reason = protocol::CloseReason::error;
    entry.last_seq = closed ? *closed : recovered->log.last_seq();
    log(4, "run " + entry.id + ": " + message);
  }

  // Socket activation first (LISTEN_FDS); otherwise bind the configured path.
  bool listen(std::string& error) {
    int n = sd_listen_fds(0);
    if (n > 1) {
      error = "systemd passed " + std::to_string(n) + " sockets; metaharness listens on exactly one";
      return false;
    }
    if (n == 1) {
      int fd = SD_LISTEN_FDS_START;
      if (sd_is_socket_unix(fd, SOCK_STREAM, 1, nullptr, 0) <= 0) {
        error = "the socket systemd passed is not a listening Unix stream socket";
        return false;
      }
      boost::system::error_code ec;
      acceptor.assign(asio::local::stream_protocol(), fd, ec);
      if (ec) {
        error = "cannot use the socket systemd passed: " + ec.message();
        return false;
      }
      log(6, "listening on the socket systemd passed");
      return true;
    }
    // sockaddr_un holds 107 bytes of path: a longer one cannot be bound, so say so plainly.
    if (config.socket.string().size() >= sizeof(sockaddr_un::sun_path)) {
      error = "the socket path " + config.socket.string() + " is " + std::to_string(config.socket.string().size()) +
              " bytes; Unix socket paths are limited to " + std::to_string(sizeof(sockaddr_un::sun_path) - 1);
      return false;
    }
    std::error_code fsec;
    std::filesystem::create_directories(config.socket.parent_path(), fsec);
    // A socket file left by a daemon that died: remove it only if nobody answers on it.
    if (std::filesystem::exists(config.socket)) {
      boost::system::error_code ec;
      local_socket probe(io);
      probe.connect(asio::local::stream_protocol::endpoint(config.socket.string()), ec);
      if (!ec) {
        error = "another daemon is already listening on " + config.socket.string();
        return false;
      }
      std::filesystem::remove(config.socket, fsec);
    }
    boost::system::error_code ec;
    acceptor.open(asio::local::stream_protocol(), ec);
    if (!ec) acceptor.bind(asio::local::stream_protocol::endpoint(config.socket.string()), ec);
    if (!ec) ::chmod(config.socket.c_str(), config.socket_mode);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      error = "cannot listen on " + config.socket.string() + ": " + ec.message();
      return false;
    }
    log(6, "listening on " + config.socket.string());
    return true;
  }

  // --- shutdown ------------------------------------------------------------------------------

  void begin_shutdown(const std::string& why) {
    asio::post(registry_strand, [self = shared_from_this(), why] {
      if (self->stopping) return;
      self->stopping = true;
      self->accepting = false;
      sd_notify(0, "STOPPING=1");
      log(6, "stopping (" + why + "): halting " + std::to_string(self->active) + " run(s)");
      boost::system::error_code ec;
      self->acceptor.close(ec);
      for (auto& [id, e] : self->runs)
        if (e.run && !e.closed) e.run->shutdown();
      if (self->active == 0) {
        self->finish_shutdown();
        return;
      }
      // Runs stop within their halt grace; this bounds the whole stop even for a stuck one.
      auto deadline = std::make_shared<asio::steady_timer>(self->registry_strand, self->config.shutdown_grace);
      deadline->async_wait([self, deadline](boost::system::error_code ec) {
        if (ec) return;
        log(4, std::to_string(self->active) +
                   " run(s) did not close within the shutdown grace; "
                   "the next start recovers them");
        self->finish_shutdown();
      });
    });
  }

  void finish_shutdown() {
    signals.cancel();
    status_timer.cancel();
    ledger_timer.cancel();
    if (ledger.metered())
      if (auto problem = ledger.save()) log(3, "daily budgets: " + *problem);
    io.stop();
  }

  // --- serving -------------------------------------------------------------------------------

  asio::awaitable<void> accept_loop();
  void serve(local_socket socket);
};

// ---------------------------------------------------------------------------------------------
// One connection: its own strand, a reader of request/command lines, one writer
// ---------------------------------------------------------------------------------------------

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Daemon::Impl> daemon, local_socket socket, Peer peer, Role role)
      : d_(std::move(daemon)),
        socket_(std::move(socket)),
        peer_(peer),
        role_(role),
        wake_writer_(socket_.get_executor()),
        drained_(socket_.get_executor()) {}

  ~Connection() { --d_->connections; }

  void start(std::optional<std::string> refusal) {
    auto self = shared_from_this();
    asio::co_spawn(socket_.get_executor(), self->write_loop(self), asio::detached);
    if (refusal) {
      send(*refusal);
      close_after_flush_ = true;
      return;
    }
    asio::co_spawn(socket_.get_executor(), self->read_loop(self), asio::detached);
  }

 private:
  static constexpr std::size_t kOutboxHighWater = 256 * 1024;

  void send(std::string line) {
    line.push_back('\n');
    outbox_bytes_ += line.size();
    outbox_.push_back(std::move(line));
    wake_writer_.notify();
  }

  asio::awaitable<void> write_loop(std::shared_ptr<Connection>) {
    for (;;) {
      while (!outbox_.empty()) {
        std::string next = std::move(outbox_.front());
        outbox_.pop_front();
        auto [ec, n] = co_await asio::async_write(socket_, asio::buffer(next), asio::as_tuple(asio::use_awaitable));
        (void)n;
        outbox_bytes_ -= next.size();
        if (outbox_bytes_ < kOutboxHighWater) drained_.notify();
        if (ec) {
          close();
          co_return;
        }
      }
      drained_.notify();
      if (close_after_flush_ || closed_) {
        close();
        co_return;
      }
      co_await wake_writer_.wait();
    }
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    closing_ = true;  // nobody reads any more: a stream pump stops
    boost::system::error_code ec;
    socket_.shutdown(asio::socket_base::shutdown_both, ec);
    socket_.close(ec);
    wake_writer_.notify();
    drained_.notify();
  }

  asio::awaitable<void> read_loop(std::shared_ptr<Connection>) {
    // A line over the bound is refused as soon as it crosses it (a runaway peer hears at once,
    // not when its newline arrives, if ever), then discarded up to its newline.
    protocol::LineFramer framer(d_->config.max_line_bytes, /*digest_oversized=*/false, /*report_early=*/true);
    // What one read produced, in order: a line, the refusal of a line over the bound, or a last
    // line the peer never terminated.
    struct Item {
      enum Kind { line, oversized, unterminated } kind = line;
      std::string text;
    };
    std::vector<Item> items;
    auto collect = [&](const protocol::FramedLine& line) {
      if (line.too_long)
        items.push_back({Item::oversized, oversized_message(line, framer.max_line_bytes())});
      else if (line.unterminated)
        items.push_back({Item::unterminated, std::string(line.text)});
      else
        items.push_back({Item::line, std::string(line.text)});
    };
    std::string buffer(16 * 1024, '\0');
    bool end_of_input = false;
    while (!closed_) {
      auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buffer), asio::as_tuple(asio::use_awaitable));
      if (n > 0) framer.feed(std::string_view(buffer.data(), n), collect);
      if (ec == asio::error::eof) {
        end_of_input = true;
        framer.finish(collect);
      }
      for (auto& item : items) {
        if (closed_ || close_after_flush_) break;
        if (item.kind == Item::oversized) {
          on_oversized(item.text);
          continue;
        }
        if (item.text.find_first_not_of(" \t\r") == std::string::npos) continue;
        if (item.kind == Item::unterminated) {
          send(refusal_line("UNTERMINATED_LINE",
                            "the connection's last line (" + std::to_string(item.text.size()) +
                                " bytes) ended without a newline; a line counts only with its '\\n', so it was not "
                                "acted on (it began \"" +
                                protocol::excerpt(item.text, 60) + "\")",
                            std::nullopt));
          continue;
        }
        co_await on_line(std::move(item.text));
      }
      items.clear();
      if (ec || close_after_flush_) break;
    }
    if (end_of_input && !closed_ && !close_after_flush_ && !peer_hung_up()) {
      // Half-closed (shutdown(SHUT_WR)): the peer has nothing more to say but still reads.
      // Everything it asked is answered, a stream it asked for runs to its `end`, then the
      // connection closes.
      peer_done_ = true;
      if (!streaming_) {
        close_after_flush_ = true;
        wake_writer_.notify();
      }
      co_return;
    }
    // The peer went away: a controller's departure changes nothing for the run (its deadlines
    // keep running); a stream pump notices and stops.
    closing_ = true;
    if (!close_after_flush_) close();
  }

  // Whether the peer has closed its end entirely (not just its writing half).
  bool peer_hung_up() {
    if (closed_) return true;
    pollfd p{socket_.native_handle(), POLLOUT, 0};
    return ::poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLERR)) != 0;
  }

  static std::string oversized_message(const protocol::FramedLine& line, std::size_t bound) {
    return "line " + std::to_string(line.number) + " is over the " + std::to_string(bound) + "-byte bound (" +
           std::to_string(line.length) + " bytes had arrived; it began \"" + protocol::excerpt(line.head, 60) +
           "\"); it is refused unread and the rest of it, up to its newline, is discarded";
  }

  void on_oversized(const std::string& message) {
    if (attached_) {
      attached_->unreadable_command(protocol::LineRefusal{protocol::LineRefusalKind::TooLong, message, std::nullopt},
                                    unrecorded_result_sender());
    } else {
      send(refusal_line("LINE_TOO_LONG", message, std::nullopt));
    }
  }

  asio::awaitable<void> on_line(std::string line) {
    LineKind kind = classify_line(line);
    if (kind == LineKind::request) {
      auto request = read_request(line);
      if (!request) {
        send(refusal_line(request.error()));
        co_return;
      }
      co_await handle(std::move(*request));
      co_return;
    }
    if (!attached_) {
      if (kind == LineKind::command) {
        auto cmd = protocol::read_command_line(line);
        send(refusal_line("NOT_ATTACHED", "a command needs a run: attach to one first (or send a command request)",
                          cmd ? std::optional<std::string>(cmd->id) : std::nullopt));
      } else {
        auto refused = read_request(line);  // names what was wrong with the line
        send(
            refusal_line(refused ? SocketRefusal{"UNKNOWN_FORMAT", "unreadable line", std::nullopt} : refused.error()));
      }
      co_return;
    }
    // Attached: every other line is a command for the run, recorded in its stream either way.
    auto cmd = protocol::read_command_line(line);
    if (cmd)
      attached_->command(std::move(*cmd), identity(), unrecorded_result_sender(), Clock::now());
    else
      attached_->unreadable_command(cmd.error(), unrecorded_result_sender());
  }

  protocol::PeerIdentity identity() const { return protocol::PeerIdentity{peer_.uid, peer_.pid}; }

  // A result that could not be recorded (the stream had closed) goes back to this client.
  Run::ResultCallback unrecorded_result_sender() {
    auto self = shared_from_this();
    return [self](const protocol::ev::CommandResult& r, bool recorded) {
      if (recorded) return;
      asio::post(self->socket_.get_executor(), [self, r] { self->send(result_line(std::nullopt, r, false)); });
    };
  }

  static std::string result_line(const std::optional<std::string>& id, const protocol::ev::CommandResult& r,
                                 bool recorded) {
    std::string outcome;
    protocol::JsonWriter w(outcome);
    protocol::write_outcome(w, r.outcome);
    json::object fields;
    fields["command_id"] = r.id;
    fields["outcome"] = protocol::parse_json(outcome).value_or(nullptr);
    fields["recorded"] = recorded;
    return reply_line("result", id, fields);
  }

  // --- requests ------------------------------------------------------------------------------

  bool allow(Role needed, const SocketRequest& r) {
    if (role_ >= needed) return true;
    send(refusal_line("FORBIDDEN",
                      "request " + r.name + " needs the " + std::string(to_string(needed)) + " role; uid " +
                          std::to_string(peer_.uid) + " has " + std::string(to_string(role_)),
                      r.id));
    close_after_flush_ = true;
    wake_writer_.notify();
    return false;
  }

  asio::awaitable<void> handle(SocketRequest r) {
    static const std::map<std::string, Role> kNeeds = {
        {"list", Role::observe},    {"get", Role::observe},    {"tail", Role::observe},
        {"status", Role::observe},  {"submit", Role::control}, {"attach", Role::control},
        {"command", Role::control}, {"halt", Role::control},   {"shutdown", Role::admin}};
    if (!allow(kNeeds.at(r.name), r)) co_return;
    if (r.name == "submit")
      co_await submit(r);
    else if (r.name == "list")
      co_await list(r);
    else if (r.name == "get")
      co_await get(r);
    else if (r.name == "attach" || r.name == "tail")
      co_await stream(r);
    else if (r.name == "command" || r.name == "halt")
      co_await command(r);
    else if (r.name == "status")
      co_await status(r);
    else if (r.name == "shutdown") {
      send(reply_line("shutting_down", r.id));
      d_->begin_shutdown("a shutdown request from uid " + std::to_string(peer_.uid));
    }
  }

  asio::awaitable<void> submit(const SocketRequest& r) {
    const json::value* run = r.body.if_contains("run");
    if (!run || !run->is_object()) {
      send(refusal_line("MALFORMED", "submit needs a \"run\" object (docs/socket-api.md)", r.id));
      co_return;
    }
    auto spec = adapters::spec_from_json(run->get_object());
    if (!spec) {
      send(refusal_line("MALFORMED", spec.error(), r.id));
      co_return;
    }
    const adapters::Adapter* adapter = d_->adapters.find(spec->adapter);
    if (!adapter) {
      send(refusal_line("MALFORMED", "unknown adapter \"" + protocol::excerpt(spec->adapter, 40) + "\"", r.id));
      co_return;
    }
    // The same refusals as `metaharness run`, before anything is created.
    if (const json::value* scenario = run->get_object().if_contains("model_scenario");
        scenario && !scenario->is_null() && spec->model_endpoint) {
      send(refusal_line("MALFORMED",
                        "a run takes \"model_scenario\" (a scripted endpoint the daemon hosts) or \"model_endpoint\" "
                        "(an endpoint to use), not both",
                        r.id));
      co_return;
    }
    if (spec->decision_deadline_ms == 0) spec->decision_deadline_ms = d_->config.decision_deadline_ms;
    if (auto too_long = adapters::refuse_deadline(*adapter, spec->decision_deadline_ms)) {
      send(refusal_line("MALFORMED", *too_long, r.id));
      co_return;
    }
    adapters::fill_unset_budgets(spec->budget, d_->config.default_budget);
    if (auto unpriced = refuse_unpriced_budget(*spec, *adapter, d_->config.prices)) {
      send(refusal_line("BUDGET_UNPRICED", *unpriced, r.id));
      co_return;
    }
    std::string id = new_run_id();
    spec->run_id = id;
    // Admission, on the registry strand.
    // (code, reason): empty when admitted.
    auto admit = [d = d_, id, uid = peer_.uid]() -> std::pair<std::string, std::string> {
      if (!d->accepting) return {"SHUTTING_DOWN", "the daemon is stopping and accepts no new run"};
      if (d->active >= d->config.max_active_runs)
        return {"BUSY",
                "the daemon is at runs.max_active (" + std::to_string(d->config.max_active_runs) + ") active runs"};
      if (auto over = d->ledger.refusal(uid, utc_day(std::chrono::system_clock::now())))
        return {"BUDGET_EXHAUSTED", *over};
      ++d->active;  // reserved; released below if the run cannot be created
      RunEntry placeholder;
      placeholder.id = id;
      d->runs.emplace(id, std::move(placeholder));
      return {};
    };
    auto [refusal, why] = co_await d_->on_registry(std::move(admit));
    if (!refusal.empty()) {
      send(refusal_line(refusal, why, r.id));
      co_return;
    }

    RunOptions options;
    options.run_dir = d_->config.state_dir / "runs" / id;
    options.halt_grace = d_->config.halt_grace;
    options.exit_grace = d_->config.exit_grace;
    options.idle_timeout = d_->config.idle_timeout;
    options.fsync_each_event = d_->config.fsync_each_event;
    options.max_vendor_line_bytes = d_->config.max_vendor_line_bytes;
    options.max_event_line_bytes = d_->config.max_event_line_bytes;
    options.prices = d_->config.prices;
    options.on_spend = [d = d_, id, uid = peer_.uid](const Spend& spend) {
      asio::post(d->registry_strand, [d, id, uid, spend] { d->spent(id, uid, spend); });
    };
    std::error_code ec;
    std::filesystem::create_directories(options.run_dir, ec);
    if (const json::value* scenario = run->get_object().if_contains("model_scenario");
        scenario && !scenario->is_null()) {
      options.model_scenario = options.run_dir / "scenario.json";
      std::ofstream(*options.model_scenario) << protocol::pretty_json(*scenario);
    }
    {
      json::object meta;
      meta["owner_uid"] = peer_.uid;
      meta["owner_pid"] = peer_.pid;
      meta["adapter"] = spec->adapter;
      json::object labels;
      for (const auto& [k, v] : spec->labels)
        labels[k] = v;
      meta["labels"] = std::move(labels);
      meta["created_unix"] =
          std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
      std::ofstream(options.run_dir / "run.json") << protocol::pretty_json(meta, false);
    }
    auto labels = spec->labels;
    auto adapter_name = spec->adapter;
    auto budget = spec->budget;
    options.spec = std::move(*spec);
    auto run_dir = options.run_dir;
    auto created = Run::create(d_->io, *adapter, std::move(options));
    if (!created) {
      // A refused submit leaves nothing behind: not its directory, not its reservation.
      std::error_code rm;
      std::filesystem::remove_all(run_dir, rm);
      auto release = [d = d_, id] {
        d->runs.erase(id);
        --d->active;
        return true;
      };
      co_await d_->on_registry(std::move(release));
      send(refusal_line("REFUSED", created.error(), r.id));
      co_return;
    }
    std::shared_ptr<Run> handle = *created;
    auto record = [d = d_, id, handle, uid = peer_.uid, adapter_name, labels, budget] {
      RunEntry& e = d->runs[id];
      e.budget = budget;
      e.dir = handle->run_dir();
      e.run = handle;
      e.stream = handle->stream();
      e.meta_loaded = true;
      e.owner_uid = uid;
      e.adapter = adapter_name;
      e.labels = labels;
      e.created_at = std::chrono::system_clock::now();
      d->schedule_status();
      return true;
    };
    co_await d_->on_registry(std::move(record));
    handle->start([d = d_, id](const RunOutcome& outcome) {
      asio::post(d->registry_strand, [d, id, outcome] { d->run_closed(id, outcome); });
    });
    log(6, "run " + id + " submitted by uid " + std::to_string(peer_.uid) + " (" + adapter_name + ")");
    json::object fields;
    fields["run_id"] = id;
    fields["run_dir"] = handle->run_dir().string();
    send(reply_line("submitted", r.id, fields));
  }

  // A snapshot of one entry, with the live status of a running run.
  struct Snapshot {
    RunEntry entry;
    std::optional<RunStatus> status;
  };

  asio::awaitable<std::optional<RunEntry>> lookup(const std::string& id) {
    auto find = [d = d_, id]() -> std::optional<RunEntry> {
      auto it = d->runs.find(id);
      if (it == d->runs.end() || !it->second.meta_loaded) {
        if (it == d->runs.end()) return std::nullopt;
        d->load_meta(it->second);
      }
      return it->second;
    };
    co_return co_await d_->on_registry(std::move(find));
  }

  asio::awaitable<json::object> summary(const RunEntry& e) {
    json::object o;
    o["run_id"] = e.id;
    o["adapter"] = e.adapter;
    std::optional<RunStatus> status;
    if (e.run) {
      auto run = e.run;
      auto ask = [run](auto done) { run->status(done); };
      status = co_await await_callback<RunStatus>(std::move(ask));
    }
    o["state"] = status ? status->phase : std::string("closed");
    o["created_at"] = rfc3339(e.created_at);
    o["age_ms"] =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now() - e.created_at).count();
    o["pending_decisions"] = status ? status->pending_decisions : 0;
    if (status)
      o["turns"] = status->turns;
    else if (e.turns)
      o["turns"] = *e.turns;
    else
      o["turns"] = nullptr;
    o["last_seq"] = status ? status->last_seq : e.last_seq;
    if (status && status->close_reason)
      o["close_reason"] = protocol::to_string(*status->close_reason);
    else if (e.close_reason)
      o["close_reason"] = protocol::to_string(*e.close_reason);
    else
      o["close_reason"] = nullptr;
    json::object labels;
    for (const auto& [k, v] : e.labels)
      labels[k] = v;
    o["labels"] = std::move(labels);
    o["owner_uid"] = e.owner_uid;
    // The vendor process while it runs; none after.
    if (status && status->pid > 0)
      o["pid"] = status->pid;
    else
      o["pid"] = nullptr;
    // Spend so far and the run's budgets; null for a run found on disk (not kept there).
    std::optional<Spend> spend = status ? std::optional<Spend>(status->spend) : e.spend;
    o["spend"] = spend ? json::value(spend->to_json()) : json::value(nullptr);
    std::optional<adapters::Budgets> budget = status ? std::optional<adapters::Budgets>(status->budget) : e.budget;
    o["budget"] = budget ? json::value(adapters::budgets_to_json(*budget)) : json::value(nullptr);
    co_return o;
  }

  asio::awaitable<void> list(const SocketRequest& r) {
    auto snapshot = [d = d_] {
      std::vector<RunEntry> out;
      for (auto& [id, e] : d->runs) {
        if (!e.dir.empty()) d->load_meta(e);
        if (!e.dir.empty()) out.push_back(e);
      }
      return out;
    };
    auto entries = co_await d_->on_registry(std::move(snapshot));
    json::array runs;
    for (auto& e : entries) {
      json::object one = co_await summary(e);
      runs.push_back(std::move(one));
    }
    json::object fields;
    fields["runs"] = std::move(runs);
    send(reply_line("runs", r.id, fields));
  }

  std::optional<std::string> run_id_of(const SocketRequest& r) {
    const json::value* v = r.body.if_contains("run_id");
    if (!v || !v->is_string()) {
      send(refusal_line("MALFORMED", "request " + r.name + " needs a \"run_id\" string", r.id));
      return std::nullopt;
    }
    return std::string(v->get_string());
  }

  asio::awaitable<std::optional<RunEntry>> find_run(const SocketRequest& r, bool to_control) {
    auto id = run_id_of(r);
    if (!id) co_return std::nullopt;
    auto e = co_await lookup(*id);
    if (!e || e->dir.empty()) {
      send(refusal_line("UNKNOWN_RUN", "no run \"" + protocol::excerpt(*id, 80) + "\" on this daemon", r.id));
      co_return std::nullopt;
    }
    if (to_control && role_ != Role::admin && e->owner_uid != peer_.uid) {
      send(refusal_line("FORBIDDEN",
                        "run " + *id + " belongs to uid " + std::to_string(e->owner_uid) +
                            "; controlling another user's run needs the admin role",
                        r.id));
      close_after_flush_ = true;
      wake_writer_.notify();
      co_return std::nullopt;
    }
    co_return e;
  }

  asio::awaitable<void> get(const SocketRequest& r) {
    auto e = co_await find_run(r, false);
    if (!e) co_return;
    json::object fields = co_await summary(*e);
    fields["run_dir"] = e->dir.string();
    std::ifstream in(e->dir / "spec.json");
    std::ostringstream ss;
    ss << in.rdbuf();
    fields["spec"] = protocol::parse_json(ss.str()).value_or(nullptr);
    fields["hermetic"] = hermetic_view(*e, fields["spec"], fields["state"] == "closed");
    send(reply_line("run", r.id, fields));
  }

  // The hermetic floor's verdicts, judged as `metaharness audit` judges the run directory. They
  // are decided by session.started (and the launch facts), so the reader stops there.
  json::object hermetic_view(const RunEntry& e, const json::value& spec, bool closed) {
    std::ifstream plan_in(e.dir / "plan.json");
    std::ostringstream plan_text;
    plan_text << plan_in.rdbuf();
    protocol::LaunchFacts facts =
        protocol::launch_facts_from_run_files(spec, protocol::parse_json(plan_text.str()).value_or(nullptr));
    if (facts.cwd) {
      std::error_code ec;
      auto resolved = std::filesystem::weakly_canonical(facts.cwd->planned, ec);
      if (!ec) facts.cwd->resolved = resolved.string();  // Claude reports getcwd()
    }
    std::optional<protocol::ev::SessionStarted> started;
    std::ifstream events(e.dir / "events.jsonl");
    for (std::string line; !started && std::getline(events, line);)
      started = protocol::session_started_in(line);
    std::string adapter = facts.adapter.value_or(started ? started->adapter : e.adapter);
    if (const adapters::Adapter* a = d_->adapters.find(adapter)) facts.pins = a->capabilities().versions_pinned;
    return protocol::hermetic_view_json(protocol::spec_mode(spec), started ? &*started : nullptr, facts, closed);
  }

  asio::awaitable<void> status(const SocketRequest& r) {
    // One view with the streams: a run whose stream holds stream.closed is closed here too, even
    // in the moment before the registry hears of it (a client that has just read `end` must not
    // see it counted active).
    auto count = [d = d_] {
      std::vector<std::shared_ptr<Run>> open;
      std::size_t starting = 0;
      for (auto& [id, e] : d->runs) {
        if (e.closed || (e.stream && e.stream->final_seq())) continue;
        if (e.run)
          open.push_back(e.run);
        else
          ++starting;  // admitted, being created
      }
      return std::make_tuple(open, starting, d->runs.size(), d->accepting);
    };
    auto counts = co_await d_->on_registry(std::move(count));
    auto& [open, starting, total, accepting] = counts;
    std::size_t active = starting, idle = 0, pending = 0;
    for (auto& run : open) {
      auto ask = [run](auto done) { run->status(done); };
      auto s = co_await await_callback<RunStatus>(std::move(ask));
      if (s.phase == "closed") continue;  // closed since the registry looked
      ++active;
      if (s.phase == "idle") ++idle;
      pending += s.pending_decisions;
    }
    json::object runs;
    runs["active"] = active;
    runs["idle"] = idle;
    runs["closed"] = total - active;
    runs["pending_decisions"] = pending;
    json::object fields;
    fields["version"] = std::string(build_info::version);
    fields["pid"] = ::getpid();
    fields["uptime_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - d_->started_at).count();
    fields["socket"] = d_->config.socket.string();
    fields["state_dir"] = d_->config.state_dir.string();
    fields["runs"] = std::move(runs);
    fields["accepting"] = accepting;
    fields["connections"] = d_->connections.load();
    send(reply_line("status", r.id, fields));
  }

  asio::awaitable<void> command(const SocketRequest& r) {
    auto e = co_await find_run(r, true);
    if (!e) co_return;
    protocol::Command cmd;
    if (r.name == "halt") {
      std::optional<std::string> reason;
      if (const json::value* v = r.body.if_contains("reason"); v && v->is_string())
        reason = std::string(v->get_string());
      cmd = protocol::Command{
          "socket-halt-" + std::to_string(++d_->command_counter),
          protocol::cmd::Halt{reason.value_or("halted over the socket by uid " + std::to_string(peer_.uid))}};
    } else {
      const json::value* c = r.body.if_contains("command");
      if (!c || !c->is_object()) {
        send(refusal_line("MALFORMED", "a command request needs a \"command\" object (metaharness.command/1)", r.id));
        co_return;
      }
      auto read = protocol::read_command_line(protocol::canonical_json(*c));
      if (!read) {
        send(refusal_line("MALFORMED",
                          "the command is refused (" + std::string(protocol::to_string(read.error().kind)) +
                              "): " + read.error().message,
                          r.id));
        co_return;
      }
      cmd = std::move(*read);
    }
    std::pair<protocol::ev::CommandResult, bool> answer;
    if (!e->run) {
      answer = {protocol::ev::CommandResult{
                    cmd.id, protocol::CommandOutcome::refused(protocol::RefusalCode::TOO_LATE, "the run has closed")},
                false};
    } else {
      auto run = e->run;
      auto peer = identity();
      auto send_command = [run, cmd, peer](auto done) mutable {
        run->command(std::move(cmd), peer, [done](const protocol::ev::CommandResult& result, bool recorded) {
          done(std::make_pair(result, recorded));
        });
      };
      answer = co_await await_callback<std::pair<protocol::ev::CommandResult, bool>>(std::move(send_command));
    }
    send(result_line(r.id, answer.first, answer.second));
  }

  // tail and attach: replay from a seq, then (follow / attach) live, from the file.
  asio::awaitable<void> stream(const SocketRequest& r) {
    bool attach = r.name == "attach";
    if (streaming_) {
      send(refusal_line("ALREADY_ATTACHED",
                        "this connection is already " + std::string(attached_ ? "attached to" : "streaming") + " run " +
                            streaming_run_ + "; open another connection",
                        r.id));
      co_return;
    }
    auto e = co_await find_run(r, attach);
    if (!e) co_return;
    std::uint64_t from = 1;
    if (const json::value* v = r.body.if_contains("from_seq")) {
      // Any non-negative integer JSON can carry (one past the end is refused by the reader, by name).
      if (v->is_uint64()) {
        from = v->get_uint64();
      } else if (v->is_int64() && v->get_int64() >= 0) {
        from = static_cast<std::uint64_t>(v->get_int64());
      } else {
        send(refusal_line("MALFORMED", "\"from_seq\" must be a non-negative integer", r.id));
        co_return;
      }
    }
    bool follow = attach;
    if (const json::value* v = r.body.if_contains("follow"); v && v->is_bool()) follow = follow || v->get_bool();

    std::shared_ptr<SharedStreamState> shared = e->stream;
    std::optional<EventLog> closed_log;  // keeps a recovered log's state while we read it
    if (!shared) {
      auto recovered = EventLog::recover(e->dir / "events.jsonl", e->id);
      if (!recovered) {
        send(refusal_line("REFUSED", "cannot read run " + e->id + ": " + recovered.error(), r.id));
        co_return;
      }
      shared = recovered->log.shared();
      closed_log.emplace(std::move(recovered->log));
    }
    auto reader = StreamReader::open(shared, socket_.get_executor(),
                                     from == 0 ? ReaderStart::at_end() : ReaderStart::at_seq(from));
    if (!reader) {
      send(refusal_line("MALFORMED", "cannot start at seq " + std::to_string(from) + ": " + reader.error(), r.id));
      co_return;
    }
    json::object fields;
    fields["run_id"] = e->id;
    fields["from_seq"] = reader->next_seq();
    send(reply_line(attach ? "attached" : "tailing", r.id, fields));
    if (attach) {
      attached_ = e->run;
      if (attached_) {
        auto run = attached_;
        auto ask = [run](auto done) { run->pending_calls(done); };
        auto pending = co_await await_callback<std::vector<PendingCallView>>(std::move(ask));
        for (const auto& p : pending) {
          json::object f;
          f["run_id"] = e->id;
          f["call_id"] = p.call_id;
          f["requested_seq"] = p.requested_seq;
          f["remaining_ms"] = p.remaining_ms;
          send(reply_line("pending", r.id, f));
        }
      }
    }
    streaming_ = true;
    streaming_run_ = e->id;
    asio::co_spawn(socket_.get_executor(),
                   pump(shared_from_this(), std::move(*reader), std::move(closed_log), follow, r.id, e->id),
                   asio::detached);
  }

  // Copies the run's stream to the socket: one batch at a time, and only when the previous one
  // has left, so a client that stops reading holds the daemon to one batch and slows nobody.
  asio::awaitable<void> pump(std::shared_ptr<Connection>, StreamReader reader, std::optional<EventLog> keep,
                             bool follow, std::optional<std::string> request_id, std::string run_id) {
    (void)keep;
    for (;;) {
      while (outbox_bytes_ >= kOutboxHighWater && !closing_)
        co_await drained_.wait();
      if (closing_) break;
      auto batch = reader.read_some();
      if (!batch) {
        send(refusal_line("REFUSED", "reading run " + run_id + " failed: " + batch.error(), request_id));
        break;
      }
      if (batch->count > 0) {
        std::string bytes(batch->bytes);
        bytes.pop_back();  // send() adds the newline back
        send(std::move(bytes));
      }
      if (batch->reached_end) break;
      if (batch->count == 0) {
        if (!follow) break;
        auto outcome = co_await wait_more(reader);
        if (outcome == WaitOutcome::writer_gone || closing_) break;
      }
    }
    if (!closing_) {
      json::object fields;
      fields["run_id"] = run_id;
      fields["next_seq"] = reader.next_seq();
      send(reply_line("end", request_id, fields));
    }
    streaming_ = false;
    attached_.reset();
    if (peer_done_) {  // half-closed: this was the last thing it asked for
      close_after_flush_ = true;
      wake_writer_.notify();
    }
  }

  // Waits for more of the stream, or for this connection to close.
  asio::awaitable<WaitOutcome> wait_more(StreamReader& reader) {
    // Bounded waits keep a closed connection's pump from sleeping forever on a quiet run.
    for (;;) {
      auto outcome = co_await reader.wait_for_more(Clock::now() + std::chrono::seconds(1));
      if (outcome != WaitOutcome::timed_out || closing_) co_return outcome;
      if (peer_done_ && peer_hung_up()) {  // a half-closed peer that has since gone entirely
        closing_ = true;
        co_return outcome;
      }
    }
  }

  std::shared_ptr<Daemon::Impl> d_;
  local_socket socket_;
  Peer peer_;
  Role role_;
  std::deque<std::string> outbox_;
  std::size_t outbox_bytes_ = 0;
  Signal wake_writer_;
  Signal drained_;
  bool close_after_flush_ = false;
  bool closed_ = false;
  bool closing_ = false;
  bool streaming_ = false;
  bool peer_done_ = false;  // the peer half-closed: close once what it asked is answered
  std::string streaming_run_;
  std::shared_ptr<Run> attached_;
};

}  // namespace

asio::awaitable<void> Daemon::Impl::accept_loop() {
  auto self = shared_from_this();
  for (;;) {
    auto connection_strand = asio::make_strand(io);
    auto [ec, socket] = co_await acceptor.async_accept(connection_strand, asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (!acceptor.is_open()) co_return;
      log(4, "accept failed: " + ec.message());
      continue;
    }
    serve(std::move(socket));
  }
}

void Daemon::Impl::serve(local_socket socket) {
  ucred cred{};
  socklen_t len = sizeof cred;
  Peer peer;
  std::optional<std::string> refusal;
  if (::getsockopt(socket.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    refusal = refusal_line("FORBIDDEN", "the peer's credentials could not be read", std::nullopt);
  } else {
    peer = Peer{cred.uid, cred.gid, cred.pid};
  }
  Role role = refusal ? Role::none : config.role_of(peer.uid, peer.gid);
  if (!refusal && role == Role::none)
    refusal = refusal_line("FORBIDDEN",
                           "uid " + std::to_string(peer.uid) + " (gid " + std::to_string(peer.gid) +
                               ") has no role on this daemon; [access] in the config grants observe, control or admin",
                           std::nullopt);
  if (!refusal && connections.load() >= config.max_connections)
    refusal = refusal_line("BUSY", "the daemon is at server.max_connections", std::nullopt);
  if (refusal) log(5, "refused a connection from uid " + std::to_string(peer.uid) + " pid " + std::to_string(peer.pid));
  ++connections;
  auto connection = std::make_shared<Connection>(shared_from_this(), std::move(socket), peer, role);
  connection->start(refusal);
}

// ---------------------------------------------------------------------------------------------

Daemon::Daemon(DaemonConfig config) : impl_(std::make_shared<Impl>(std::move(config))) {}
Daemon::~Daemon() = default;

int Daemon::run() {
  Impl& d = *impl_;
  g_log_level = d.config.log_level;
  log(6, "starting: state in " + d.config.state_dir.string() + ", defaults from " + d.config.defaults_from);
  std::error_code ec;
  std::filesystem::create_directories(d.config.state_dir, ec);
  if (ec) {
    log(3, "cannot create the state directory " + d.config.state_dir.string() + ": " + ec.message());
    return 2;
  }
  d.recover_state();
  if (auto problem = d.ledger.load(utc_day(std::chrono::system_clock::now()))) log(4, "daily budgets: " + *problem);
  std::string error;
  if (!d.listen(error)) {
    log(3, error);
    return 2;
  }
  d.signals.async_wait([self = impl_](boost::system::error_code e, int signal) {
    if (!e) self->begin_shutdown(signal == SIGTERM ? "SIGTERM" : "SIGINT");
  });
  asio::co_spawn(d.io, d.accept_loop(), asio::detached);
  sd_notify(0, "READY=1");
  asio::post(d.registry_strand, [self = impl_] { self->schedule_status(); });
  log(6, "ready: " + std::to_string(d.runs.size()) + " run(s) on disk");

  std::vector<std::thread> threads;
  for (unsigned i = 1; i < d.threads(); ++i)
    threads.emplace_back([&d] { d.io.run(); });
  d.io.run();
  for (auto& t : threads)
    t.join();
  boost::system::error_code close_ec;
  d.acceptor.close(close_ec);
  if (!sd_listen_fds(0)) std::filesystem::remove(d.config.socket, ec);
  log(6, "stopped");
  return 0;
}

}  // namespace mh::daemon
