// Run::Impl, the run's shell: the state of one run on its strand and the core's live effects,
// implemented in run_impl.cpp. It owns the objects each way of running needs, each in its own
// file: the vendor's body, chosen once (direct_body / supervised_body), the way up (launch /
// adoption), the timers, the hook log, the gateway ledger, the input hold, and the effects switch
// a replay points the core through (replay_effects). It keeps for itself the record, the inputs'
// one door and the order of things. Internal to daemon/run: nothing outside it includes this
// header.
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
#include "daemon/run/body_host.hpp"
#include "daemon/run/effects_switch.hpp"
#include "daemon/run/gateway_ledger.hpp"
#include "daemon/run/hook_log.hpp"
#include "daemon/run/input_hold.hpp"
#include "daemon/run/input_journal.hpp"
#include "daemon/run/ledger_host.hpp"
#include "daemon/run/run.hpp"
#include "daemon/run/run_core.hpp"
#include "daemon/run/run_timers.hpp"
#include "daemon/run/vendor_body.hpp"
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
struct Run::Impl final : RunEffects, BodyHost, LedgerHost {
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
  std::weak_ptr<Run> self;
  std::chrono::system_clock::time_point created_at = std::chrono::system_clock::now();

  std::optional<EventLog> log;
  std::shared_ptr<SharedStreamState> shared;
  std::variant<adapters::LaunchPlan, adapters::LaunchRefusal> planned;
  std::unique_ptr<model::ScriptedEndpoint> endpoint;
  std::unique_ptr<RunContainment> containment;  // when options.containment: made before the spawn
  // What the core is made with: its effects go to this shell (the overrides below), or to an
  // adoption's ReplayEffects while the journal replays (effects_switch.hpp).
  EffectsSwitch effects{*this};
  std::unique_ptr<RunCore> core;  // from create on: the run's lifecycle and governing logic
  std::function<void(const RunOutcome&)> on_closed;
  RunOutcome outcome;
  bool log_failed = false;  // a write to the record failed: the run is stopped (after_core)
  // Writes to the record that failed (each cut back to the last whole line), and the first's
  // reason: what the RECORD_INCOMPLETE warning names before a late stream.closed.
  std::uint64_t record_failures = 0;
  std::string first_record_failure;
  void record_failed(const std::string& why);
  // stream.closed could not be written for want of space (ENOSPC/EDQUOT): the close is tried again
  // every kCloseRetry until space returns, with the record whole up to its last line meanwhile
  // (docs/soak.md, "A full disk"). The Run is kept alive by the wait.
  static constexpr std::chrono::milliseconds kCloseRetry{200};
  asio::steady_timer close_retry{strand};
  bool incomplete_warned = false;
  std::optional<std::string> warn_incomplete();
  void retry_close(protocol::CloseReason reason, protocol::ProcessTermination process,
                   std::optional<protocol::ev::RunResources> resources);
  bool try_close_late(protocol::CloseReason reason, protocol::ProcessTermination process,
                      const std::optional<protocol::ev::RunResources>& resources);

  HookLog hook_log{redactor};  // the hook channel's traffic, both directions (vendor-hooks.jsonl)
  // The vendor's process, chosen once when the run is launched or adopted: a direct child
  // (direct_body.hpp) or the child of the run's supervisor (supervised_body.hpp). The effect
  // overrides below call it; null until then (the core asks nothing of the vendor before start).
  std::unique_ptr<VendorBody> body;
  RunTimers timers;  // the deadlines, the wall budget, the idle timeout and the grace (run_timers.hpp)

  // The vendor's stdout, framed. A member because a supervised run feeds it across the
  // supervisor's messages, and an adoption's replay feeds it before the live run goes on.
  std::optional<protocol::LineFramer> framer;

  // Supervised (options.supervision): every input to the core is journaled first, so a daemon
  // that adopts the run can rebuild the core (adoption.hpp).
  std::optional<InputJournal> journal;
  std::uint64_t stdout_fed = 0;                             // vendor stdout bytes handed to the framer
  std::set<std::uint64_t> hooks_handed, hooks_gone_handed;  // hook connections the core was handed
  // What arrives from outside while an adopted run is rebuilt waits here (input_hold.hpp).
  InputHold until_live;

  // Every input to the core goes through input(): journaled (when the run keeps a journal), then
  // applied; a replay applies the journal's entries the same way.
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

  // The record and the close. The other RunEffects overrides sit below with their part:
  // the vendor effects, the hook channel, the timers and spend.
  std::uint64_t emit(protocol::EventPayload payload, std::optional<std::string> at) override;
  std::uint64_t emit_cut(protocol::EventPayload payload, std::optional<std::string> at,
                         std::vector<protocol::CutField> cut) override;
  void command_answered(Ticket ticket, const protocol::ev::CommandResult& result, bool recorded) override;
  void report_recorded(bool durable);
  void release_log();
  void finish(protocol::CloseReason reason, protocol::ProcessTermination process);
  // The hook channel's answers go to the body; both bodies keep its traffic in the hook log.
  void reply_hook(std::uint64_t connection, std::string line) override;

  // The vendor's side: the effects handed to the body.
  void write_vendor(std::string line) override;
  std::string stderr_tail() const;
  void close_vendor_stdin() override;
  void terminate_vendor(std::chrono::milliseconds grace) override;
  asio::awaitable<void> kill_everything(std::shared_ptr<Run> keep);

  // The run's side of its gateway: its messages and the reservations it granted
  // (gateway_ledger.hpp).
  GatewayLedger gateway{*this};

  // Launch, delivery, the core's timers and wind-up.
  // One main for a launched and an adopted run; the way up is chosen when the run is made.
  asio::awaitable<void> main(std::shared_ptr<Run> keep);
  asio::awaitable<bool> launch();
  asio::awaitable<bool> adopt();  // through an Adoption (adoption.hpp)
  using WayUp = asio::awaitable<bool> (Impl::*)();
  WayUp bring_up = &Impl::launch;  // Run::adopt: &Impl::adopt
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
    until_live.run_or_hold([this, when] { timers.arm_stall(when); });
  }
  void spend_changed(const Spend& spend) override;
  // Parking (issue 27 §5): the park timer is the RunTimers'; main waits on park_wake while the
  // run is parked and its vendor gone, and every input pokes it (after_core) so main looks again.
  void arm_park(const std::string& call_id, std::optional<Instant> when) override { timers.arm_park(call_id, when); }
  void resume_vendor() override { park_wake.cancel(); }
  asio::steady_timer park_wake{strand};
  bool park_waiting = false;
  // Parked and gone: waits for the decision (then starts the vendor again: true) or the run's end
  // (false).
  asio::awaitable<bool> wait_parked();

  // The run as its body sees it (body_host.hpp): the body's questions, then what the vendor did
  // as the core's inputs (run_impl.cpp); run_options serves the gateway ledger too.
  Strand& executor() override { return strand; }
  std::shared_ptr<Run> keep_alive() override { return self.lock(); }
  const RunOptions& run_options() const override { return options; }
  const std::string& run_id() const override { return log->run_id(); }
  RunContainment* box() override { return containment.get(); }
  const adapters::LaunchPlan& plan() const override { return std::get<adapters::LaunchPlan>(planned); }
  const Redactor& secrets() const override { return redactor; }
  HookLog& hook_traffic() override { return hook_log; }
  std::uint64_t stdout_handed() const override { return stdout_fed; }
  bool parked() const override { return core->phase() == RunCore::Phase::parked; }
  bool closed() const override { return core->phase() == RunCore::Phase::closed; }
  void arm_grace_at(Instant when) override { timers.arm_grace_at(when); }
  void cancel_grace() override { timers.cancel_grace(); }
  void vendor_out(std::string_view chunk, Instant now) override;
  void vendor_end() override;
  void hook_request(std::uint64_t connection, std::string line, json::value parsed, Instant now) override;
  void hook_gone(std::uint64_t connection) override;
  void shell_warning(std::string code, std::string message) override;
  void gateway_message(const supervisor::FromSupervisor& message, SupervisorLink& link) override {
    gateway.on_message(message, link);
  }

  // The run as its gateway ledger sees it (ledger_host.hpp; run_options above serves both).
  bool record_closed() const override { return closed() || log->closed(); }
  bool forwards_no_model_request() const override {
    const auto& ending = core->ending();
    return record_closed() || (ending && ending->forced);
  }
  std::optional<Crossing> reserve_check(const Spend& worst, const Spend& held) const override {
    return core->reserve_check(worst, held);
  }
  void gateway_inputs(std::vector<journal::Input> inputs) override;
};

}  // namespace mh::daemon
