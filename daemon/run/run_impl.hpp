// Run::Impl, the state of one run on its strand, shared by the files that implement it: run.cpp
// (the public Run: create, the posts onto the strand, the snapshots), run_lifecycle.cpp (launch,
// command delivery, the core's timers and wind-up), run_record.cpp (the event log and the close),
// run_vendor_io.cpp (the child's pipes and its exit), run_hook_channel.cpp (the hook socket).
// Internal to daemon/run: nothing outside these files includes it.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <set>
#include <variant>

#include "daemon/file_modes.hpp"
#include "daemon/model/scripted_endpoint.hpp"
#include "daemon/process/child_process.hpp"
#include "daemon/process/run_containment.hpp"
#include "daemon/process/unique_fd.hpp"
#include "daemon/run/append_file.hpp"
#include "daemon/run/input_journal.hpp"
#include "daemon/run/run.hpp"
#include "daemon/run/run_core.hpp"
#include "daemon/run/run_timers.hpp"
#include "daemon/stream/event_log.hpp"
#include "daemon/stream/stream_redactor.hpp"
#include "daemon/supervisor/supervisor_link.hpp"
#include "daemon/supervisor/transcript_follower.hpp"
#include "protocol/line_framer.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
namespace json = boost::json;

// The wall clock now, in Unix milliseconds (a chunk's received_at).
std::int64_t unix_ms_now();

// Everything here runs on the strand unless it says otherwise. The run's lifecycle is the
// core's (RunCore::phase, run_core.hpp): the shell keeps no lifecycle flags of its own, only the
// facts of its I/O (the stdin queue, the grace timer, whether the child was reaped, whether the
// record failed) and the routes of command results back to their senders.
struct Run::Impl final : RunEffects {
  using Clock = std::chrono::steady_clock;
  using local_socket = asio::local::stream_protocol::socket;

  Impl(asio::io_context& io, const adapters::Adapter& adapter, RunOptions options)
      : io(io),
        strand(asio::make_strand(io)),
        adapter(adapter),
        options(std::move(options)),
        timers(
            strand,
            [this](journal::Input timeout) {
              input(std::move(timeout), Clock::now());
              after_core();
            },
            [this] { asio::co_spawn(strand, kill_everything(self.lock()), asio::detached); }) {}

  asio::io_context& io;
  asio::strand<asio::io_context::executor_type> strand;
  const adapters::Adapter& adapter;
  RunOptions options;
  // The run's secrets as its files other than events.jsonl are redacted with (the EventLog keeps
  // its own, from the same options.redactions).
  Redactor redactor{options.redactions};
  // A direct child's stdout and stderr are redacted as read, before the adapter or the file sees
  // them (a supervised run's are, by its supervisor, before they reach its transcript).
  StreamRedactor stdout_redactor, stderr_redactor;
  std::weak_ptr<Run> self;
  std::chrono::system_clock::time_point created_at = std::chrono::system_clock::now();

  std::optional<EventLog> log;
  std::shared_ptr<SharedStreamState> shared;
  std::variant<adapters::LaunchPlan, adapters::LaunchRefusal> planned;
  std::unique_ptr<model::ScriptedEndpoint> endpoint;
  std::unique_ptr<RunContainment> containment;  // when options.containment: made before the spawn
  std::unique_ptr<ChildProcess> child;
  std::unique_ptr<RunCore> core;  // from create on: the run's lifecycle and governing logic
  std::function<void(const RunOutcome&)> on_closed;
  RunOutcome outcome;
  bool log_failed = false;  // a write to the record failed: the run is stopped (after_core)

  AppendFile transcript, stdin_log, stderr_log;
  AppendFile hook_log;  // the hook channel's traffic, both directions (vendor-hooks.jsonl)
  std::optional<asio::posix::stream_descriptor> vendor_stdout, vendor_stderr;
  // The hook channel (plan.hook_channel): pending hook connections wait for their answer here.
  std::optional<asio::local::stream_protocol::acceptor> hook_acceptor;
  std::map<std::uint64_t, std::shared_ptr<local_socket>> hook_waiting;
  std::uint64_t hook_connections = 0;
  // The vendor's stdin: the queue and the one writer coroutine's plumbing.
  std::deque<std::optional<std::string>> to_vendor;  // nullopt: close stdin after what precedes
  bool writing = false;
  bool stdin_closed = false;
  bool vendor_reaped = false;  // the child was waited for: nothing is left to kill by pid
  RunTimers timers;            // the deadlines, the wall budget, the idle timeout and the grace (run_timers.hpp)

  // The vendor's stdout, framed. A member because a supervised run feeds it across the
  // supervisor's messages, and an adoption's replay feeds it before the live run goes on.
  std::optional<protocol::LineFramer> framer;

  // Supervised (options.supervision): the vendor is the child of a supervisor process of the
  // run's own (daemon/supervisor), which outlives this daemon; every input to the core is
  // journaled first, so a daemon that adopts the run can rebuild the core (run_supervised.cpp).
  std::unique_ptr<SupervisorLink> link;
  std::optional<InputJournal> journal;
  TranscriptFollower transcript_reader;                     // the transcript the supervisor writes, as it grows
  std::uint64_t stdout_fed = 0;                             // transcript bytes handed to the framer
  pid_t vendor_pid = 0;                                     // the supervisor's child (not ours: it is not reaped here)
  std::optional<protocol::ProcessTermination> vendor_exit;  // as the supervisor reported it
  bool vendor_stdout_ended = false, vendor_stderr_ended = false;
  std::set<std::uint64_t> hooks_handed, hooks_gone_handed;  // hook connections the core was handed
  bool adopting = false;  // made by Run::adopt: main takes the run over instead of launching it
  // While an adopted run is being rebuilt, what arrives from outside (commands, snapshots) waits
  // here, in order, and runs once the run is live: the replay hands the core only what the
  // journal holds, and a snapshot shows the rebuilt run, not a half-built one.
  bool adoption_pending = false;
  std::vector<std::function<void()>> until_adopted;
  void when_adopted(std::function<void()> f);
  void adoption_over();

  // An adoption's replay of the journal: what the core does while it is rebuilt is checked
  // against the record (events up to the stream's last seq are not written again) and collected
  // (answers to the vendor, timers), then reconciled with what the supervisor says happened.
  struct Replay {
    std::uint64_t recorded_last = 0;          // the stream's last seq when the adoption began
    std::uint64_t seq = 0;                    // the seq the core's last replayed event got
    std::vector<std::string> recorded_types;  // the type of each recorded event, by seq - 1
    Instant now{};                            // the entry being replayed
    std::string stdin_bytes;                  // every line the core wrote to the vendor, with its '\n'
    bool stdin_closed = false;
    std::optional<Instant> kill_at;  // a grace that began before the adoption ends then
    std::map<std::uint64_t, std::string> hook_replies;
    std::map<std::string, Instant> deadlines;
    std::optional<Instant> wall;
    std::optional<std::string> diverged;  // the core did not do what the record says: not adoptable
  };
  std::optional<Replay> replay;
  Instant hello_at{};  // when the adopting attach's hello arrived: its ungoverned_ms was true then

  // Every input to the core goes through input(): journaled (when the run keeps a journal), then
  // applied; a replay applies the journal's entries the same way (run_inputs.cpp).
  struct InputExtras {
    Ticket ticket = kUnrouted;
    std::optional<protocol::Command> command;  // a live command, already parsed
    std::optional<json::value> hook_request;   // a live hook request, already parsed
    std::string_view bytes;                    // a live chunk of vendor stdout, already read
  };
  void input(journal::Input in, Instant now);
  void input(journal::Input in, Instant now, InputExtras extras);
  void apply(const journal::Input& in, Instant now, InputExtras& extras);
  void feed_stdout(std::string_view bytes, std::int64_t received_unix_ms, Instant now);

  // Where each command's one result goes (the core decides it; the shell only routes it).
  Ticket next_ticket = kUnrouted;
  std::map<Ticket, ResultCallback> result_routes;

  // The record and the close (run_record.cpp). The other RunEffects overrides sit below with
  // the file that defines them: vendor I/O, the hook channel, the timers and spend.
  std::uint64_t emit(protocol::EventPayload payload, std::optional<std::string> at) override;
  std::uint64_t emit_cut(protocol::EventPayload payload, std::optional<std::string> at,
                         std::vector<protocol::CutField> cut) override;
  void command_answered(Ticket ticket, const protocol::ev::CommandResult& result, bool recorded) override;
  void report_recorded(bool durable);
  void release_log();
  void finish(protocol::CloseReason reason, protocol::ProcessTermination process);

  // The hook channel (run_hook_channel.cpp).
  void reply_hook(std::uint64_t connection, std::string line) override;
  void log_hook(std::uint64_t connection, std::string_view direction, const json::value& message);
  bool open_hook_channel(const adapters::HookChannel& channel, std::string& error);
  asio::awaitable<void> accept_hooks(std::shared_ptr<Run> keep);
  asio::awaitable<void> serve_hook(std::shared_ptr<Run> keep, std::shared_ptr<local_socket> socket);

  // Vendor I/O (run_vendor_io.cpp).
  // Reading the vendor's output: wait until the pipe is readable, then drain it into a buffer
  // that belongs to the io thread, not to the run. An idle run therefore holds no read buffer at
  // all (1,000 idle runs cost no 80 MiB of buffers); the framer keeps only a partial line.
  static constexpr std::size_t kChunk = 64 * 1024;
  static constexpr std::size_t kDrainPerTurn = 256 * 1024;  // then yield to other runs
  void write_vendor(std::string line) override;
  std::string stderr_tail() const;
  void close_vendor_stdin() override;
  void terminate_vendor(std::chrono::milliseconds grace) override;
  void pump_stdin();
  asio::awaitable<void> write_stdin(std::shared_ptr<Run> keep);
  static char* thread_buffer();
  template <class Consume>
  asio::awaitable<bool> drain(asio::posix::stream_descriptor& from, Consume&& consume);
  template <class Consume>
  asio::awaitable<void> read_until_end(asio::posix::stream_descriptor& from, Consume& consume);
  asio::awaitable<void> read_stdout();
  asio::awaitable<void> read_stderr();
  asio::awaitable<protocol::ProcessTermination> supervise_exit();
  void arm_grace(std::chrono::milliseconds grace);
  asio::awaitable<void> kill_everything(std::shared_ptr<Run> keep);
  void arm_grace_at(Instant when);

  // Supervised runs (run_supervised.cpp).
  // A message of the run's gateway or egress proxy (Reserve, GatewayUsage, GatewayRefused,
  // Egress), from the supervisor's loop: run_gateway.cpp.
  void on_gateway_message(const supervisor::FromSupervisor& message);
  void on_reserve(const supervisor::Reserve& reserve);
  // The run ended: whatever it still holds of its owner's day is released (release_daily).
  void release_reservations();
  // A reservation granted and not yet settled, by the gateway's request number. Not journaled:
  // a reservation is a promise to the live ledger, which a restart empties (docs/policies.md).
  struct Reservation {
    Spend worst;
    std::optional<std::uint64_t> daily;  // the ledger's id, when the owner's day was reserved too
  };
  std::map<std::uint64_t, Reservation> reservations;
  // The reasons an upstream could not be reached that the stream was told (once each).
  static constexpr std::size_t kMaxUpstreamFailuresTold = 16;
  std::set<std::string> upstream_failures_told;
  asio::awaitable<bool> launch_supervised(const adapters::LaunchPlan& to_spawn, const SpawnOptions& spawn_options);
  asio::awaitable<protocol::ProcessTermination> supervise_body();
  asio::awaitable<void> read_transcript_to(std::uint64_t end, const supervisor::Out* out = nullptr);
  asio::awaitable<void> end_body(std::optional<pid_t> root);
  asio::awaitable<void> adopt_main(std::shared_ptr<Run> keep);
  void give_up_adoption(const std::string& why);
  asio::awaitable<void> end_unadoptable(std::string why);
  std::optional<std::string> replay_journal();
  void reconcile_after_replay(Instant now);

  // Launch, delivery, the core's timers and wind-up (run_lifecycle.cpp).
  asio::awaitable<void> main(std::shared_ptr<Run> keep);
  static asio::awaitable<bool> wrap(asio::awaitable<void> a);
  void refuse(const std::string& code, const std::string& message,
              const std::vector<protocol::ev::CommandResult>& results);
  void after_core();
  Ticket route(ResultCallback on_result);
  void arm_deadline(const std::string& call_id, Instant when) override;
  void cancel_deadline(const std::string& call_id) override;
  void arm_wall_budget(Instant when) override;
  // The stall timer (issue 27 §2), set once the run is live: an adoption's replay and catch-up
  // leave it as the rebuilt core last wanted it, never running out on output not yet read.
  void arm_stall(std::optional<Instant> when) override {
    when_adopted([this, when] { timers.arm_stall(when); });
  }
  void spend_changed(const Spend& spend) override;
};

}  // namespace mh::daemon
