// One run from launch (or adoption) to wind-up: main brings the run up the way chosen when it
// was made (launch writes the plan's files, opens the transcripts and the hook channel, spawns
// the vendor or its supervisor and starts the core; adopt hands over to an Adoption), then waits
// for the body to be gone and winds up; route keeps where a command's result goes; after_core
// (after every input) tells the core what is durable and rearms the idle timer; the deadline,
// wall-budget and idle timers wake the core on the strand. Separate from the I/O files: this is
// the order of things.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "daemon/process/sandbox.hpp"
#include "daemon/run/adoption.hpp"
#include "daemon/run/direct_body.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/run_impl.hpp"
#include "daemon/run/supervised_body.hpp"

namespace mh::daemon {

// One run, launched or adopted: brought up the way chosen when the run was made (launch, or
// adopt for Run::adopt), then the body runs until the vendor is gone, then the one wind-up.
asio::awaitable<void> Run::Impl::main(std::shared_ptr<Run> keep) {
  (void)keep;
  auto way_up = (this->*bring_up)();
  const bool live = co_await std::move(way_up);
  // An adopted run's inputs that waited while it was rebuilt run now, in order: on the live run,
  // or answered by the closed one. (A launched run holds none.)
  until_live.release();
  if (!live || core->phase() == RunCore::Phase::closed) co_return;
  protocol::ProcessTermination termination = co_await body->run_until_gone();
  // The vendor's stdout has ended and no process of the run is left: wind up.
  protocol::CloseReason reason = core->wind_up(termination, Clock::now(), stderr_tail());
  report_recorded(true);
  finish(reason, termination);
}

// Takes the run over (main's way up for a run made by Run::adopt): its supervisor is the body.
asio::awaitable<bool> Run::Impl::adopt() {
  auto made = std::make_unique<SupervisedBody>(*this);
  Adoption adoption(*this, *made);
  body = std::move(made);
  auto taking_over = adoption.take_over();
  co_return co_await std::move(taking_over);
}

// Launches the run (main's way up for a run made by Run::create): writes the plan's files, opens
// the transcripts and the hook channel, spawns the vendor (or its supervisor) and starts the
// core. True when the vendor runs; false when the run was refused or failed (and is closed).
asio::awaitable<bool> Run::Impl::launch() {
  if (auto* refusal = std::get_if<adapters::LaunchRefusal>(&planned)) {
    refuse("LAUNCH_REFUSED", refusal->message, refusal->command_results);
    co_return false;
  }
  if (auto unpriced = refuse_unpriced_budget(options.spec, adapter, options.prices)) {
    refuse("LAUNCH_REFUSED", *unpriced, {});
    co_return false;
  }
  if (!options.containment && adapters::any_limit(options.spec.limits)) {
    // Nothing here could enforce them: refused by name before anything is made, never ignored.
    refuse("LAUNCH_REFUSED",
           "run: limits " + protocol::canonical_json(adapters::limits_to_json(options.spec.limits)) +
               " cannot be enforced: this run has no cgroup (it is not contained; the daemon's runs are)",
           {});
    co_return false;
  }
  auto& plan = std::get<adapters::LaunchPlan>(planned);
  std::string error;
  std::error_code ec;
  for (const auto& d : plan.directories) {
    make_directories(d, ec);  // 0750 whatever the umask
    if (ec) {
      refuse("LAUNCH_FAILED", "cannot create " + d.string() + ": " + ec.message(), {});
      co_return false;
    }
  }
  const RunDir dir(options.run_dir);
  for (const auto& f : plan.files) {
    if (auto problem = write_file(f.path, f.contents, f.mode)) {
      refuse("LAUNCH_FAILED", *problem, {});
      co_return false;
    }
  }
  for (const auto& l : plan.links) {
    std::filesystem::create_symlink(l.target, l.path, ec);
    if (ec) {
      refuse("LAUNCH_FAILED", "cannot link " + l.path.string() + " to " + l.target.string() + ": " + ec.message(), {});
      co_return false;
    }
  }
  if (auto problem = dir.write_plan(plan, options.spec)) {
    refuse("LAUNCH_FAILED", *problem, {});
    co_return false;
  }
  // The body is chosen here, once. A supervised run's transcripts are its supervisor's to write,
  // and its hook channel is the supervisor's to serve; this daemon keeps only the hook log.
  const bool supervised = options.supervision.has_value();
  DirectBody* direct = nullptr;
  SupervisedBody* supervised_body = nullptr;
  if (supervised) {
    auto made = std::make_unique<SupervisedBody>(*this);
    supervised_body = made.get();
    body = std::move(made);
  } else {
    auto made = std::make_unique<DirectBody>(*this);
    direct = made.get();
    body = std::move(made);
  }
  if (direct && !direct->open_transcripts(plan, dir, error)) {
    refuse("LAUNCH_FAILED", error, {});
    co_return false;
  }
  // The gateway lives in the run's supervisor (it must outlive this daemon as the run does):
  // without one there is nobody to host it.
  if (!supervised && (options.gateway || options.egress)) {
    refuse("LAUNCH_REFUSED",
           "run: a model gateway (an upstream, or a model_scenario behind the gateway) needs a supervised run, and "
           "runs.supervise is false",
           {});
    co_return false;
  }
  // network = "gateway": only the sandbox can give the run a network of its own; never a run
  // that quietly keeps the host's.
  std::optional<SandboxSpec::OwnNetwork> own_network;
  if (options.own_network) {
    if (!options.containment || !options.containment->sandbox) {
      refuse("LAUNCH_FAILED",
             "network = \"gateway\" needs the sandbox: " +
                 (options.containment ? options.containment->no_sandbox_why : std::string("the run is not contained")),
             {});
      co_return false;
    }
    own_network.emplace();
    own_network->gate_dir = options.run_dir / "gate";
    // The gateway's and the egress proxy's sockets are in the gate (the daemon put them there), so
    // the run reaches each as kGateInView/<name>, relayed onto its own loopback by mh-exec.
    auto relay = [&](const supervisor::SpecListen& listen, std::uint16_t port, const char* what) -> bool {
      if (!listen.path) return true;  // a port on the host's loopback: nothing to relay
      if (listen.path->parent_path().lexically_normal() != own_network->gate_dir.lexically_normal()) {
        refuse("LAUNCH_FAILED",
               std::string("the ") + what + "'s socket " + listen.path->string() + " is not in the run's gate " +
                   own_network->gate_dir.string(),
               {});
        return false;
      }
      own_network->relays.push_back(
          SandboxSpec::Relay{port, std::filesystem::path(kGateInView) / listen.path->filename()});
      return true;
    };
    if (options.gateway && !relay(options.gateway->listen, kGatewayRelayPort, "gateway")) co_return false;
    if (options.egress && !relay(options.egress->listen, kEgressRelayPort, "egress proxy")) co_return false;
  }
  if (plan.hook_channel && !hook_log.open(dir.vendor_hooks(), error)) {
    refuse("LAUNCH_FAILED", error, {});
    co_return false;
  }
  SpawnOptions spawn_options;
  const adapters::LaunchPlan* to_spawn = &plan;
  if (supervised) {  // from the first input on: what the shell states goes in too
    auto journal_made = InputJournal::create(options.run_dir / "core-inputs.jsonl");
    if (!journal_made) {
      refuse("LAUNCH_FAILED", journal_made.error(), {});
      co_return false;
    }
    journal.emplace(std::move(*journal_made));
  }
  if (options.containment) {
    auto prepared = RunContainment::prepare(*options.containment, log->run_id(), options.run_dir, plan,
                                            limits_of(options.spec), own_network);
    if (!prepared) {
      refuse("LAUNCH_REFUSED", prepared.error(), {});
      co_return false;
    }
    containment = std::move(*prepared);
    for (const auto& [code, message] : containment->warnings())
      input(journal::ShellWarning{code, message}, Clock::now());  // journaled: an adoption states them again
    to_spawn = &containment->launch_plan();
    spawn_options = containment->spawn_options();
  }
  // A supervised run's hook channel is its supervisor's to serve. Opened here, after the
  // containment: a run with a network of its own has it on a path in its gate, not on the
  // abstract name the adapter gave it (to_spawn->hook_channel says which).
  if (direct && to_spawn->hook_channel && !direct->open_hook_channel(*to_spawn->hook_channel, error)) {
    refuse("LAUNCH_FAILED", error, {});
    co_return false;
  }
  if (supervised_body) {
    auto failed = co_await supervised_body->launch(*to_spawn, spawn_options);
    if (failed) {
      refuse("LAUNCH_FAILED", *failed, {});
      co_return false;
    }
  } else if (auto spawned = direct->spawn(*to_spawn, spawn_options); !spawned) {
    refuse("LAUNCH_FAILED", spawned.error(), {});
    co_return false;
  }
  input(journal::Start{}, Clock::now());  // the commands that waited for the spawn are handled here, in order
  after_core();
  co_return true;
}

// Refused before anything spawned: the command results (one per needed command the adapter
// cannot honour) or a warning naming the launch refusal, then the marker.
void Run::Impl::refuse(const std::string& code, const std::string& message,
                       const std::vector<protocol::ev::CommandResult>& results) {
  for (const auto& r : results)
    emit(r, std::nullopt);
  if (results.empty()) emit(protocol::ev::Warning{code, message}, std::nullopt);
  outcome.refused_at_start = true;
  finish(protocol::CloseReason::error, protocol::ProcessTermination{});
}

// After every input: what the core emitted is durable unless the log holds it (release_log
// reports it then); a failed record stops the run; an idle run's idle timer is (re)armed.
void Run::Impl::after_core() {
  report_recorded(true);
  RunCore::Phase phase = core->phase();
  if (phase == RunCore::Phase::closed) return;
  // While an adoption replays the journal the core is pointed at the replay: the timers are the
  // reconciliation's to arm, once the replay is over, and a failed record stops the run then.
  if (effects.replaying()) return;
  if (log_failed && !core->ending()) input(journal::Shutdown{}, Clock::now());  // not governed off the record
  if (core->phase() == RunCore::Phase::idle && options.idle_timeout.count() > 0) {
    timers.arm_idle(options.idle_timeout);
  } else {
    timers.cancel_idle();
  }
}

Ticket Run::Impl::route(ResultCallback on_result) {
  Ticket ticket = ++next_ticket;
  if (on_result) result_routes.emplace(ticket, std::move(on_result));
  return ticket;
}

void Run::Impl::command_answered(Ticket ticket, const protocol::ev::CommandResult& result, bool recorded) {
  auto it = result_routes.find(ticket);
  if (it == result_routes.end()) return;  // nobody waits on it: it is in the stream only
  ResultCallback callback = std::move(it->second);
  result_routes.erase(it);
  callback(result, recorded);
}

void Run::Impl::arm_deadline(const std::string& call_id, Instant when) {
  timers.arm_deadline(call_id, when);
}

void Run::Impl::cancel_deadline(const std::string& call_id) {
  timers.cancel_deadline(call_id);
}

void Run::Impl::arm_wall_budget(Instant when) {
  timers.arm_wall_budget(when);
}

void Run::Impl::spend_changed(const Spend& spend) {
  if (options.on_spend) options.on_spend(spend);
}

}  // namespace mh::daemon
