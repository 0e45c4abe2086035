// The public Run: create (the run directory, the scripted endpoint, the log, the plan), the
// thread-safe members that post onto the strand, and the snapshots. What runs on the strand is
// Run::Impl's (run_impl.hpp).
#include "daemon/run/run.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

#include "daemon/process/sandbox.hpp"
#include "daemon/process/vendor_provenance.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/run_impl.hpp"
#include "daemon/stream/close_syncer.hpp"

namespace mh::daemon {

using Clock = std::chrono::steady_clock;

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
// Run
// ---------------------------------------------------------------------------------------------

namespace {

// How a run's events.jsonl is written: the same for a new run and an adopted one.
EventLogOptions log_options_of(const RunOptions& options) {
  EventLogOptions log_options;
  log_options.durability = options.fsync_each_event ? Durability::fsync_each : Durability::write;
  log_options.max_line_bytes = options.max_event_line_bytes;
  log_options.redactions = options.redactions;  // issue 25: no secret in the record
  // stream.closed made durable off the run's io thread (close_syncer.hpp; issue 26 §5).
  log_options.close_syncer = CloseSyncer::shared();
  return log_options;
}

// What the daemon adds to an adapter's plan for the run's network (docs/gateway.md): the egress
// proxy in the vendor's environment (here, after the adapter's denylist has checked what the spec
// declared: a spec cannot set a proxy itself), and the network and model credential the
// attestation states.
void add_network(adapters::LaunchPlan& plan, const RunOptions& options) {
  if (options.egress) {
    const std::string proxy = "http://127.0.0.1:" + std::to_string(kEgressRelayPort);
    for (const char* name : {"HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"})
      plan.env.emplace_back(name, proxy);
    // The gateway is reached directly, never through the proxy (which refuses loopback).
    for (const char* name : {"NO_PROXY", "no_proxy"})
      plan.env.emplace_back(name, "127.0.0.1,localhost");
  }
  plan.attestation.network = options.own_network ? "gateway" : "host";
  if (options.gateway)
    plan.attestation.model_credential = options.gateway->scenario                ? "scenario"
                                        : options.gateway->upstream_name.empty() ? "raw-token"
                                                                                 : "gateway";
  else if (options.model_scenario)
    plan.attestation.model_credential = "scenario";
  else if (options.spec.model_endpoint)
    plan.attestation.model_credential = "raw-token";
}

}  // namespace

Run::Run(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Run::~Run() = default;

boost::system::result<std::shared_ptr<Run>, std::string> Run::create(asio::io_context& io,
                                                                     const adapters::Adapter& adapter,
                                                                     RunOptions options) {
  using Result = boost::system::result<std::shared_ptr<Run>, std::string>;
  auto fail = [](std::string m) { return Result(boost::system::in_place_error, std::move(m)); };
  std::error_code ec;
  options.run_dir = std::filesystem::absolute(options.run_dir, ec);
  make_directories(options.run_dir, ec);  // 0750 whatever the umask (daemon/file_modes.hpp)
  if (ec) return fail("cannot create the run directory " + options.run_dir.string() + ": " + ec.message());
  const RunDir dir(options.run_dir);
  if (std::filesystem::exists(dir.events()))
    return fail("the run directory " + options.run_dir.string() + " already holds a run");
  auto impl = std::make_unique<Impl>(io, adapter, std::move(options));
  Impl& i = *impl;

  // An in-process scripted endpoint gets a fresh token; the spec then names it. Not when the run's
  // gateway plays the scenario (a supervised run: the supervisor hosts it, so it outlives the
  // daemon as the run does); the daemon has then pointed the spec at the gateway already.
  const bool gateway_plays_scenario = i.options.gateway && i.options.gateway->scenario;
  if (i.options.model_scenario && !gateway_plays_scenario) {
    auto scenario = model::load_scenario_file(*i.options.model_scenario);
    if (!scenario)
      return fail("the model scenario " + i.options.model_scenario->string() +
                  " is refused: " + scenario.error().message());
    model::EndpointOptions endpoint_options;
    endpoint_options.log_path = dir.model_requests();
    // Its token is the run's model credential: redacted from the record as any other (the
    // endpoint's own log included: what the vendor sent may echo it). The log's redactor is
    // filled once the token is known; the endpoint writes nothing before start().
    auto log_redactor = std::make_shared<Redactor>();
    endpoint_options.redact_log_line = [log_redactor](std::string& line) { log_redactor->redact(line); };
    i.endpoint = std::make_unique<model::ScriptedEndpoint>(io, std::move(*scenario), endpoint_options);
    i.options.redactions.emplace_back("model_endpoint.token", i.endpoint->token());
    i.redactor = Redactor(i.options.redactions);
    *log_redactor = i.redactor;
    auto port = i.endpoint->start();
    if (!port) return fail("the scripted model endpoint could not start: " + port.error().message());
    i.options.spec.model_endpoint = adapters::ModelEndpoint{i.endpoint->base_url(), i.endpoint->token()};
  }

  if (auto problem = dir.write_spec(i.options.spec)) return fail(*problem);
  EventLogOptions log_options = log_options_of(i.options);
  auto log = EventLog::create(dir.events(), i.options.spec.run_id, log_options);
  if (!log) return fail(log.error());
  i.log.emplace(std::move(*log));
  i.shared = i.log->shared();
  i.planned = adapter.plan(i.options.spec, dir.paths());
  // The core exists from here on: it owns the lifecycle, so commands sent before the vendor is
  // spawned wait in it, and a run refused at launch is closed by it.
  auto* plan = std::get_if<adapters::LaunchPlan>(&i.planned);
  if (plan) add_network(*plan, i.options);
  // Issue 27 section 6. A stat in the daemon, whose submit kept the digest first (off its io thread).
  if (plan) plan->attestation.vendor_binary = shared_vendor_provenance().of(plan->program);
  i.core =
      std::make_unique<RunCore>(i.options.spec, adapter, plan ? adapter.open_session(i.options.spec, *plan) : nullptr,
                                i.effects, RunCoreOptions{i.options.halt_grace, &i.options.prices});
  auto run = std::shared_ptr<Run>(new Run(std::move(impl)));
  run->impl_->self = run;
  run->impl_->timers.bind(run);
  return run;
}

boost::system::result<std::shared_ptr<Run>, std::string> Run::adopt(asio::io_context& io,
                                                                    const adapters::Adapter& adapter,
                                                                    RunOptions options) {
  using Result = boost::system::result<std::shared_ptr<Run>, std::string>;
  auto fail = [](std::string m) { return Result(boost::system::in_place_error, std::move(m)); };
  if (!options.supervision) return fail("only a supervised run can be adopted");
  const RunDir dir(options.run_dir);
  json::value spec_json = dir.read_spec();
  if (!spec_json.is_object()) return fail("its spec.json cannot be read");
  auto spec = adapters::spec_from_json(spec_json.get_object());
  if (!spec) return fail("its spec.json is refused: " + spec.error());
  options.spec = std::move(*spec);
  options.spec.run_id = options.run_dir.filename().string();  // a submit's spec names none; the run is its directory
  auto impl = std::make_unique<Impl>(io, adapter, std::move(options));
  Impl& i = *impl;
  EventLogOptions log_options = log_options_of(i.options);
  auto recovered = EventLog::recover(dir.events(), i.options.spec.run_id, log_options);
  if (!recovered) return fail(recovered.error());
  if (recovered->report.already_closed) return fail("its stream is closed already");
  i.log.emplace(std::move(recovered->log));
  i.shared = i.log->shared();
  i.planned = adapter.plan(i.options.spec, dir.paths());
  auto* plan = std::get_if<adapters::LaunchPlan>(&i.planned);
  if (!plan) return fail("its adapter no longer plans it: " + std::get<adapters::LaunchRefusal>(i.planned).message);
  add_network(*plan, i.options);
  // The binary's digest is not read here (the adopting thread): the run's way up keeps it on the
  // hashing thread, then opens the session with the whole attestation (Impl::adopt).
  if (i.options.containment) {
    if (auto record = RunContainment::read_record(dir.root() / "body.json")) {
      auto adopted = RunContainment::adopt(*i.options.containment, i.options.spec.run_id, *plan, *record);
      if (!adopted) return fail(adopted.error());
      i.containment = std::move(*adopted);
    }
  }
  if (plan->hook_channel) {
    std::string error;
    if (!i.hook_log.open(dir.vendor_hooks(), error)) return fail(error);
  }
  i.core = std::make_unique<RunCore>(i.options.spec, adapter, adapter.open_session(i.options.spec, *plan), i.effects,
                                     RunCoreOptions{i.options.halt_grace, &i.options.prices});
  i.bring_up = &Impl::adopt;  // main takes the run over instead of launching it
  i.until_live.hold();        // what arrives waits until the run is rebuilt
  auto run = std::shared_ptr<Run>(new Run(std::move(impl)));
  run->impl_->self = run;
  run->impl_->timers.bind(run);
  return run;
}

namespace {

// One input for the core, posted onto the run's strand; afterwards the shell tells the core
// what is durable and rearms what the new phase needs (after_core).
template <class Input>
void post_input(std::shared_ptr<Run> run, Run::Impl& i, Input input) {
  asio::post(i.strand, [run = std::move(run), &i, input = std::move(input)]() mutable {
    auto handle = [run, &i, input = std::move(input)]() mutable {
      input(*i.core);
      i.after_core();
    };
    i.until_live.run_or_hold(std::move(handle));
  });
}

}  // namespace

void Run::start(std::function<void(const RunOutcome&)> on_closed) {
  asio::post(impl_->strand, [run = shared_from_this(), on_closed = std::move(on_closed)]() mutable {
    Impl& i = *run->impl_;
    if (i.core->phase() != RunCore::Phase::created) return;  // started once
    i.core->launch();
    i.on_closed = std::move(on_closed);
    asio::co_spawn(i.strand, i.main(run), asio::detached);
  });
}

void Run::command(protocol::Command command, std::optional<protocol::PeerIdentity> peer, ResultCallback on_result,
                  Clock::time_point received_at) {
  Impl& i = *impl_;
  post_input(
      shared_from_this(), i,
      [&i, command = std::move(command), peer, on_result = std::move(on_result), received_at](RunCore& core) mutable {
        SeamProbe* probe = i.options.seam_probe.get();
        if (probe) probe->command_received(received_at);
        (void)core;
        Impl::InputExtras extras;
        extras.ticket = i.route(std::move(on_result));
        extras.command = std::move(command);
        i.input(journal::CommandLine{{}, peer}, Clock::now(), std::move(extras));
        i.report_recorded(true);  // before command_done: the probe hears the record in the command's time
        if (probe) probe->command_done();
      });
}

void Run::unreadable_command(protocol::LineRefusal refusal, ResultCallback on_result) {
  Impl& i = *impl_;
  post_input(shared_from_this(), i,
             [&i, refusal = std::move(refusal), on_result = std::move(on_result)](RunCore&) mutable {
               Impl::InputExtras extras;
               extras.ticket = i.route(std::move(on_result));
               i.input(journal::Unreadable{refusal}, Clock::now(), std::move(extras));
             });
}

void Run::command_source_closed() {
  Impl& i = *impl_;
  post_input(shared_from_this(), i, [&i](RunCore&) { i.input(journal::SourceClosed{}, Clock::now()); });
}

void Run::budget_exhausted(std::string message) {
  Impl& i = *impl_;
  post_input(shared_from_this(), i, [&i, message = std::move(message)](RunCore&) {
    i.input(journal::BudgetExhausted{message}, Clock::now());
  });
}

void Run::host_warning(std::string code, std::string message, std::function<void(bool)> done) {
  Impl& i = *impl_;
  post_input(shared_from_this(), i,
             [&i, code = std::move(code), message = std::move(message), done = std::move(done)](RunCore&) {
               const bool open = !i.log->closed();
               if (open) i.input(journal::ShellWarning{code, message}, Clock::now());
               if (done) done(open);
             });
}

void Run::shutdown() {
  Impl& i = *impl_;
  post_input(shared_from_this(), i, [&i](RunCore&) { i.input(journal::Shutdown{}, Clock::now()); });
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

asio::io_context& Run::context() const {
  return impl_->io;
}

void Run::status(std::function<void(RunStatus)> callback) const {
  asio::post(impl_->strand, [run = std::const_pointer_cast<Run>(shared_from_this()), callback = std::move(callback)] {
    const Impl& i = *run->impl_;
    RunStatus s;
    s.run_id = i.options.spec.run_id;
    s.adapter = i.options.spec.adapter;
    bool closed = i.core->phase() == RunCore::Phase::closed;
    s.phase = i.core->public_phase();
    s.pending_decisions = i.core->pending_count();
    s.turns = i.core->turns();
    s.last_seq = i.log->last_seq();
    if (closed) s.close_reason = i.outcome.reason;
    s.pid = closed || !i.body ? 0 : i.body->pid();  // a closed run's child is reaped
    s.created_at = i.created_at;
    s.labels = i.options.spec.labels;
    s.spend = i.core->reported_spend();
    s.budget = i.options.spec.budget;
    s.progress = i.core->progress(Clock::now());
    callback(std::move(s));
  });
}

void Run::pending_calls(std::function<void(std::vector<PendingCallView>)> callback) const {
  asio::post(impl_->strand, [run = std::const_pointer_cast<Run>(shared_from_this()), callback = std::move(callback)] {
    Impl& i = *run->impl_;
    i.until_live.run_or_hold([run, &i, callback] {
      callback(i.core->phase() != RunCore::Phase::closed ? i.core->pending_calls(Clock::now())
                                                         : std::vector<PendingCallView>{});
    });
  });
}

}  // namespace mh::daemon
