// The supervisor's state and coroutines, shared by supervisor.cpp (setup, the daemon's
// connection, the vendor's pipes, the adopt bound) and supervisor_hooks.cpp (the hook channel).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "daemon/gateway/egress_proxy.hpp"
#include "daemon/gateway/gateway.hpp"
#include "daemon/model/scripted_endpoint.hpp"
#include "daemon/process/child_process.hpp"
#include "daemon/process/unique_fd.hpp"
#include "daemon/stream/redactor.hpp"
#include "daemon/stream/stream_redactor.hpp"
#include "daemon/supervisor/supervisor.hpp"
#include "daemon/supervisor/supervisor_protocol.hpp"

namespace mh::supervisor {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;

// One daemon connection. The newest one is the one in charge; it is `attached` once its attach
// was answered, and only then does it hear what happens.
struct DaemonConnection {
  explicit DaemonConnection(local::socket s) : socket(std::move(s)) {}
  local::socket socket;
  bool attached = false;
  bool closed = false;
  std::uint64_t carry_out_bytes = 0;  // the most vendor bytes an `out` carries (its attach's, bounded)
  // What is to be written, in order. An OutMark is written as an `out` with the transcript's
  // size at the time of writing: at most one is queued, so a slow daemon never makes the
  // supervisor hold more than the latest size (and, carried, at most carry_out_bytes).
  struct OutMark {};
  std::deque<std::variant<std::string, OutMark>> queue;
  bool out_queued = false;
  bool writing = false;
  std::optional<int> exit_when_written;  // the failed spawn was reported: exit once written
};

// A hook program waiting for its answer.
struct HookConnection {
  explicit HookConnection(local::socket s) : socket(std::move(s)) {}
  local::socket socket;
  std::uint64_t id = 0;
  std::string line;
};

// A model request of the gateway waiting for the daemon's `reserved`.
struct PendingReserve {
  explicit PendingReserve(asio::io_context& io) : wake(io, asio::steady_timer::time_point::max()) {}
  Reserve message;
  std::optional<Reserved> answer;
  asio::steady_timer wake;  // cancelled when the answer comes
};

// The most gateway messages kept, in order, while no daemon is attached; beyond it the oldest
// are dropped (and the log says how many).
inline constexpr std::size_t kMaxKeptForDaemon = 10'000;

struct Supervisor::Impl {
  Impl(asio::io_context& io, SupervisorSpec spec);

  asio::io_context& io;
  SupervisorSpec spec;
  std::optional<int> exit_code;

  // Files of the run directory, appended to.
  daemon::UniqueFd transcript, stderr_log, stdin_log;
  std::uint64_t stdout_bytes = 0, stdin_bytes = 0;
  // The vendor's stdout since the last `out` told to the attached daemon, [to_carry_from,
  // stdout_bytes), kept while it fits what that daemon takes per `out`: the next `out` carries it
  // (docs/supervisor.md). carry_broken: it did not fit, or a write to the transcript failed, or no
  // daemon was there; the next `out` carries nothing and keeping starts again after it.
  std::string to_carry;
  std::uint64_t to_carry_from = 0;
  bool carry_broken = true;

  // No secret in the record (docs/gateway.md): what the vendor writes is redacted before it is
  // appended (its transcript and stderr, the scenario's request log), with the run's secrets at
  // start and its gateway's key as it rotates (record_redactor).
  std::vector<std::pair<std::string, std::string>> secrets;
  std::string redacted_key;  // the gateway's key `redactor` holds
  daemon::Redactor redactor;
  daemon::StreamRedactor stdout_redactor, stderr_redactor;
  const daemon::Redactor& record_redactor();

  // The vendor.
  std::unique_ptr<daemon::ChildProcess> child;
  std::optional<std::string> spawn_error;
  bool stdout_ended = false, stderr_ended = false, stdin_closed = false;
  std::optional<protocol::ProcessTermination> exited;
  std::deque<std::optional<std::string>> to_vendor;  // nullopt: close stdin here
  bool writing_stdin = false;
  // The child's stdout and stderr, taken from it to be read edge-triggered with plain read(2).
  std::optional<asio::posix::stream_descriptor> vendor_stdout, vendor_stderr;

  // The daemon.
  local::acceptor acceptor;
  std::shared_ptr<DaemonConnection> daemon;
  asio::steady_timer adopt_timer;
  // runs.ungoverned_halt_after_s (spec.ungoverned_halt_after_ms): armed with the adopt bound, off
  // while a daemon is attached.
  asio::steady_timer ungoverned_timer;
  std::uint64_t adopt_generation = 0;
  // Since when no daemon has been attached: this process's start, then each detach. A hello says
  // how long that is (ungoverned_ms), so an adopting daemon states the real gap (issue 24).
  std::chrono::steady_clock::time_point ungoverned_since = std::chrono::steady_clock::now();
  bool abandoned = false;
  // Halting on its own (the ungoverned bound ran out): no daemon may attach any more, and the
  // supervisor closes the run's record itself once the run is gone.
  bool halting_alone = false;

  // The hook channel.
  std::optional<local::acceptor> hook_acceptor;
  std::map<std::uint64_t, std::shared_ptr<HookConnection>> hooks_open;
  std::vector<std::uint64_t> hooks_gone;
  std::uint64_t hook_connections = 0;

  // The run's gateway and egress proxy (spec.gateway, spec.egress): they serve on this io_context
  // until the supervisor exits, whether a daemon is attached or not.
  std::unique_ptr<model::ScriptedEndpoint> scripted;  // spec.gateway.scenario: the gateway's upstream
  std::unique_ptr<gateway::Gateway> gateway;
  std::unique_ptr<gateway::EgressProxy> egress;
  std::map<std::uint64_t, std::shared_ptr<PendingReserve>> reserves_pending;
  std::deque<std::string> kept_for_daemon;  // serialized, told after the next hello
  std::uint64_t kept_dropped = 0;           // since the last hello

  // supervisor.cpp
  std::optional<std::string> open_files();
  std::optional<std::string> listen();
  void spawn(const std::vector<std::string>& extra_args = {});
  std::optional<std::string> write_state_file() const;
  void start_loops();
  void start_vendor_loops();  // the vendor's pipes and its end, read
  void respawn(const std::vector<std::string>& extra_args);
  void finish(int code);
  void log(const std::string& message) const { supervisor_log(spec.run_id, message); }

  asio::awaitable<void> accept_daemons();
  asio::awaitable<void> read_daemon(std::shared_ptr<DaemonConnection> connection);
  void on_daemon_line(const std::shared_ptr<DaemonConnection>& connection, std::string_view line);
  void on_attach(const std::shared_ptr<DaemonConnection>& connection, const Attach& attach);
  Hello hello() const;
  void send(const std::shared_ptr<DaemonConnection>& connection, const FromSupervisor& message);
  void tell(const FromSupervisor& message);  // to the attached daemon, if any
  void tell_out();                           // the transcript grew
  void keep_to_carry(std::string_view chunk, bool in_transcript);
  Out next_out();  // the `out` an OutMark is written as
  void pump_daemon(const std::shared_ptr<DaemonConnection>& connection);
  asio::awaitable<void> write_daemon(std::shared_ptr<DaemonConnection> connection);
  // By value: the caller's pointer may be `daemon` itself, which this resets.
  void drop_daemon(std::shared_ptr<DaemonConnection> connection);

  void arm_adopt_timer();
  void abandon();
  void halt_ungoverned();
  void kill_run();
  void finish_killed_run();  // the vendor reaped after abandon() or halt_ungoverned()
  void close_record_alone();

  void accept_in(std::string line);
  void close_vendor_stdin();
  void pump_stdin();
  asio::awaitable<void> write_stdin();
  asio::awaitable<void> read_vendor(asio::posix::stream_descriptor& pipe, bool is_stdout);
  // Appends all of `bytes` to a vendor output file, waiting out a write the disk refuses.
  asio::awaitable<void> append_whole(int fd, const std::filesystem::path& path, std::string_view bytes);
  asio::awaitable<void> wait_vendor();

  // supervisor_gateway.cpp
  std::optional<std::string> open_gateway();
  void tell_or_keep(const FromSupervisor& message);  // a gateway message: to the daemon, or kept for it
  void after_hello(const std::shared_ptr<DaemonConnection>& connection);
  void on_reserved(const Reserved& reserved);
  asio::awaitable<gateway::ReservationAnswer> reserve(gateway::Reservation reservation);

  // supervisor_hooks.cpp
  std::optional<std::string> open_hook_channel();
  asio::awaitable<void> accept_hooks();
  asio::awaitable<void> serve_hook(std::shared_ptr<HookConnection> hook);
  void reply_hook(std::uint64_t connection, std::string line);
};

using daemon::write_all;

// Binds a path socket for a peer of the run (the gateway's, the egress proxy's, the hook
// channel's): a stale file replaced, born 0600, given to `owner` (the run's user) when set.
std::optional<std::string> listen_on_path(local::acceptor& acceptor, const fs::path& path,
                                          std::optional<SpecIdentity> owner);

}  // namespace mh::supervisor
