// One governed run in the Asio world: the piece the daemon hosts many of, and `metaharness run`
// hosts one of. A Run owns a strand, and on that strand: its RunCore (the governing logic), its
// child process and the child's three pipes, one deadline timer per pending decision, the
// durable event log, and (when asked) an in-process scripted model endpoint. Everything that
// touches the run's state runs on its strand; the public members below only post to it.
//
// Readers never go through the strand: they open a StreamReader on stream() from their own
// executor and read events.jsonl at their own pace.
//
// This header names no Asio type (only a forward-declared io_context), so the daemon's other
// files and the CLI include it cheaply.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "adapters/adapter.hpp"
#include "daemon/process/directory_identity.hpp"
#include "daemon/run/budget_meter.hpp"
#include "daemon/run/run_observer.hpp"
#include "daemon/run/run_types.hpp"
#include "daemon/run/seam_probe.hpp"
#include "daemon/supervisor/supervisor_spec.hpp"
#include "protocol/hermetic_floor.hpp"
#include "protocol/reader.hpp"

namespace boost::asio {
class io_context;
}

namespace mh::daemon {

class SharedStreamState;
struct ContainmentPolicy;

struct RunOptions {
  adapters::RunSpec spec;
  std::filesystem::path run_dir;                        // created if missing; must be empty
  std::optional<std::filesystem::path> model_scenario;  // host a scripted endpoint for this run
  // Halt: how long the vendor gets to go on its own after interrupt + end_session + stdin close
  // before every process of the run is killed.
  std::chrono::milliseconds halt_grace{3000};
  // Normal end: how long the vendor gets to exit after its stdin is closed.
  std::chrono::milliseconds exit_grace{15000};
  // How long a run held open between turns waits for a message before it ends (0: forever).
  std::chrono::milliseconds idle_timeout{0};
  bool fsync_each_event = false;
  std::size_t max_vendor_line_bytes = 4u << 20;
  // Prices for a usd budget (the config's [prices]); a usd budget whose model has none is
  // refused at start.
  PriceTable prices;
  // Called on the run's strand whenever what it has spent changes (the daemon meters daily
  // budgets per owner from it).
  std::function<void(const Spend&)> on_spend;
  // An adopted run's spend as its replay rebuilt it: what the run had spent under the previous
  // daemon, already metered there (the daily ledger must not count it twice). Called once, on the
  // strand, before the run goes live; on_spend then reports from there on.
  std::function<void(const Spend&)> on_spend_replayed;
  // The owner's daily budget, reserved before the run's gateway forwards a model request (issue
  // 25, docs/policies.md; the server binds these to its DailySpendLedger with the run's id and
  // owner uid). Called on the run's strand; each answers at once (the ledger is shared by every
  // run under its own mutex), so ten runs of one uid asking together never hold more than the
  // budget. Unset: no daily budget applies to the run's requests.
  // - reserve_daily: a request's worst case; the reservation's id, or why the owner's day cannot
  //   take it (the run then closes `budget`, as a daily crossing closes it). `worst.usd` nullopt:
  //   the model has no price (refused when the day has a usd budget: unknown is not zero).
  // - settle_daily: the request's answer ended: the reservation is released and `actual` (what
  //   the request spent, usd nullopt when unknown) held in its place until on_spend reports it.
  // - release_daily: the run ended: every reservation it still holds is released.
  std::function<boost::system::result<std::uint64_t, std::string>(const Spend& worst)> reserve_daily;
  std::function<void(std::uint64_t reservation, const Spend& actual)> settle_daily;
  std::function<void()> release_daily;
  // Secret values that must never reach the record (issue 25 section 4): (NAME, value) — the run's
  // upstream credential, the spec's secret vendor_env values, the run's placeholder token. Every
  // occurrence of a value (of at least kMinRedactedBytes, daemon/stream/event_log.hpp) in a line
  // of events.jsonl, JSON-escaped form included, is written as `[redacted:NAME]`.
  std::vector<std::pair<std::string, std::string>> redactions;
  // The bound of every line of events.jsonl (runs.max_event_line_bytes; protocol/line_cut.hpp).
  std::size_t max_event_line_bytes = 1u << 20;
  // Told of every event appended (nullptr: nobody is).
  std::shared_ptr<RunObserver> observer;
  // Times the seam (nullptr, as in the daemon: nothing is timed).
  std::shared_ptr<SeamProbe> seam_probe;
  // The run's body: its cgroup, sandbox and identity (daemon/process/run_containment.hpp).
  // nullptr: none of them — the vendor is spawned as the plan says and its processes are found by
  // their marker at the end (the unit tests' and `metaharness run`'s way).
  std::shared_ptr<const ContainmentPolicy> containment;
  // The spec's cwd as a root daemon resolved and judged it as the run's submitter: which directory
  // that was, so the sandbox binds it only while it still is (a rename in a directory the
  // submitter may write could otherwise put another user's there). The daemon's own finding, never
  // read from the wire. nullopt: no such check (an admin's cwd, a daemon that is not root).
  std::optional<DirectoryIdentity> cwd_identity;
  // The run's body in a supervisor process of its own (daemon/supervisor, docs/supervisor.md),
  // so the run outlives this process and a later daemon can adopt it (Run::adopt). nullopt: the
  // vendor is this process's child and dies with it (`metaharness run`, the unit tests).
  struct Supervision {
    std::filesystem::path binary;                    // metaharness-supervisor
    std::chrono::milliseconds adopt_within{600000};  // how long the body waits for a daemon
    std::chrono::milliseconds attach_within{10000};  // how long a daemon waits for its supervisor
    // With no daemon this long, the body halts the run and closes its record (nullopt: never).
    std::optional<std::chrono::milliseconds> ungoverned_halt_after;
  };
  std::optional<Supervision> supervision;
  // The run's model gateway and egress proxy, hosted by its supervisor (docs/gateway.md): set
  // when the run names an upstream, or has a model_scenario under supervision. The daemon fills
  // them, listen addresses included, before the run is created (the plan's model_endpoint points
  // at the gateway as the vendor will reach it).
  std::optional<supervisor::SpecGateway> gateway;
  std::optional<supervisor::SpecEgress> egress;
  // network = "gateway": the run gets a network namespace of its own, loopback only, where
  // mh-exec relays kGatewayRelayPort and kEgressRelayPort to the gateway's and the egress
  // proxy's sockets (daemon/process/sandbox.hpp). false: the host's network (network = "host").
  bool own_network = false;
};

struct RunOutcome {
  protocol::CloseReason reason = protocol::CloseReason::error;
  protocol::ProcessTermination process;
  bool refused_at_start = false;  // nothing was spawned
  std::uint64_t events = 0;       // lines in the stream, stream.closed included
  std::uint32_t turns = 0;        // turns the vendor started
  std::optional<Spend> spend;     // what the run spent in all (none when nothing was spawned)
};

class Run : public std::enable_shared_from_this<Run> {
 public:
  // Prepares the run directory (spec.json), computes the launch plan and opens events.jsonl.
  // Nothing is spawned yet. Fails (as a value) when the run directory cannot be made.
  static boost::system::result<std::shared_ptr<Run>, std::string> create(boost::asio::io_context& io,
                                                                         const adapters::Adapter& adapter,
                                                                         RunOptions options);
  // Takes over a run a previous daemon left open, whose supervisor still holds its body
  // (options.run_dir names it; its spec is read from spec.json). The stream goes on in the same
  // events.jsonl; start() then rebuilds the core from the run's input journal, reconciles it with
  // what the supervisor says happened meanwhile, writes a RUN_ADOPTED warning where the gap was,
  // and governs the run on. When the run cannot be taken over once started, it is ended through
  // its cgroup and closed with a warning saying why (RECOVERED_AFTER_RESTART). Fails (as a value)
  // only when the run directory cannot be read at all.
  static boost::system::result<std::shared_ptr<Run>, std::string> adopt(boost::asio::io_context& io,
                                                                        const adapters::Adapter& adapter,
                                                                        RunOptions options);
  ~Run();

  // Starts the run on its strand. `on_closed` is called on the strand once stream.closed is
  // durable (also for a run refused at start: it gets its command results, then the marker).
  void start(std::function<void(const RunOutcome&)> on_closed = {});

  // Commands. Thread-safe. `received_at` is when the line was read (for a SeamProbe).
  // `on_result` (optional) is called on the strand exactly once with the command's result, as
  // the core decides it (RunCore::command_answered): `recorded` when it is the command.result in
  // the stream, durable; not recorded when the stream had already closed (or could not take
  // it), so the client must be told directly.
  using ResultCallback = std::function<void(const protocol::ev::CommandResult&, bool recorded)>;
  void command(protocol::Command command, std::optional<protocol::PeerIdentity> peer, ResultCallback on_result = {},
               std::chrono::steady_clock::time_point received_at = std::chrono::steady_clock::now());
  void unreadable_command(protocol::LineRefusal refusal, ResultCallback on_result = {});
  // The one-shot command source (stdin) ended: the run ends at its next idle point.
  void command_source_closed();
  // The host is going away: stop the run now; it closes `killed`.
  void shutdown();
  // A budget kept outside the run (its owner's daily budget) is exhausted: the run stops and
  // closes `budget`, with a warning carrying `message`.
  void budget_exhausted(std::string message);
  // Something the host states about the run (the fleet: this host lost its lease and another
  // closed the run there): a `warning` in the stream, journaled like the shell's own. Nothing
  // once the stream has closed — no line may follow stream.closed; `done(written)` says which.
  void host_warning(std::string code, std::string message, std::function<void(bool written)> done = {});

  // The event stream readers attach to. Always valid.
  std::shared_ptr<SharedStreamState> stream() const;
  const std::string& id() const;
  const std::filesystem::path& run_dir() const;
  // The io_context the run lives on (its strand, its child's pipes, its timers): a connection
  // that reads or decides the run is best served there too (daemon/server/connection_home.hpp).
  boost::asio::io_context& context() const;

  // Snapshots taken on the strand; the callback runs there.
  void status(std::function<void(RunStatus)> callback) const;
  void pending_calls(std::function<void(std::vector<PendingCallView>)> callback) const;

  struct Impl;

 private:
  explicit Run(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Exit status of `metaharness run` for an outcome: 0 completed; 2 refused at start or could not
// launch; 3 error; 4 halted (steer-halt); 5 budget; 6 killed.
int exit_status_for(const RunOutcome& outcome);
// Under `--hermetic strict` the gating rows decide too (reference §10.3): 2 refused at start (no
// verdict); 1 a gating gap, whatever else happened (a gap outranks everything but a refusal); a
// completed run exits 0 only when every gating row is ok and the stream is complete, else 3;
// any other end keeps its own status (3 error, 4 halted, 5 budget, 6 killed).
int exit_status_for(const RunOutcome& outcome, const protocol::AuditReport& audit);

}  // namespace mh::daemon
