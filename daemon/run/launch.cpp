// Launch (launch.hpp).
#include "daemon/run/launch.hpp"

#include "daemon/process/sandbox.hpp"
#include "daemon/run/direct_body.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/run_impl.hpp"
#include "daemon/run/supervised_body.hpp"

namespace mh::daemon {

using Clock = std::chrono::steady_clock;

Launch::Launch(Run::Impl& run) : run_(run) {}

asio::awaitable<bool> Launch::run() {
  if (auto* refusal = std::get_if<adapters::LaunchRefusal>(&run_.planned)) {
    run_.refuse("LAUNCH_REFUSED", refusal->message, refusal->command_results);
    co_return false;
  }
  if (auto unpriced = refuse_unpriced_budget(run_.options.spec, run_.adapter, run_.options.prices)) {
    run_.refuse("LAUNCH_REFUSED", *unpriced, {});
    co_return false;
  }
  if (!run_.options.containment && adapters::any_limit(run_.options.spec.limits)) {
    // Nothing here could enforce them: refused by name before anything is made, never ignored.
    run_.refuse("LAUNCH_REFUSED",
                "run: limits " + protocol::canonical_json(adapters::limits_to_json(run_.options.spec.limits)) +
                    " cannot be enforced: this run has no cgroup (it is not contained; the daemon's runs are)",
                {});
    co_return false;
  }
  auto& plan = std::get<adapters::LaunchPlan>(run_.planned);
  std::string error;
  std::error_code ec;
  for (const auto& d : plan.directories) {
    make_directories(d, ec);  // 0750 whatever the umask
    if (ec) {
      run_.refuse("LAUNCH_FAILED", "cannot create " + d.string() + ": " + ec.message(), {});
      co_return false;
    }
  }
  const RunDir dir(run_.options.run_dir);
  for (const auto& f : plan.files) {
    if (auto problem = write_file(f.path, f.contents, f.mode)) {
      run_.refuse("LAUNCH_FAILED", *problem, {});
      co_return false;
    }
  }
  for (const auto& l : plan.links) {
    std::filesystem::create_symlink(l.target, l.path, ec);
    if (ec) {
      run_.refuse("LAUNCH_FAILED", "cannot link " + l.path.string() + " to " + l.target.string() + ": " + ec.message(),
                  {});
      co_return false;
    }
  }
  if (auto problem = dir.write_plan(plan, run_.options.spec)) {
    run_.refuse("LAUNCH_FAILED", *problem, {});
    co_return false;
  }
  // The body is chosen here, once. A supervised run's transcripts are its supervisor's to write,
  // and its hook channel is the supervisor's to serve; this daemon keeps only the hook log.
  const bool supervised = run_.options.supervision.has_value();
  DirectBody* direct = nullptr;
  SupervisedBody* supervised_body = nullptr;
  if (supervised) {
    auto made = std::make_unique<SupervisedBody>(run_);
    supervised_body = made.get();
    run_.body = std::move(made);
  } else {
    auto made = std::make_unique<DirectBody>(run_);
    direct = made.get();
    run_.body = std::move(made);
  }
  if (direct && !direct->open_transcripts(plan, dir, error)) {
    run_.refuse("LAUNCH_FAILED", error, {});
    co_return false;
  }
  // The gateway lives in the run's supervisor (it must outlive this daemon as the run does):
  // without one there is nobody to host it.
  if (!supervised && (run_.options.gateway || run_.options.egress)) {
    run_.refuse(
        "LAUNCH_REFUSED",
        "run: a model gateway (an upstream, or a model_scenario behind the gateway) needs a supervised run, and "
        "runs.supervise is false",
        {});
    co_return false;
  }
  // network = "gateway": only the sandbox can give the run a network of its own; never a run
  // that quietly keeps the host's.
  std::optional<SandboxSpec::OwnNetwork> own_network;
  if (run_.options.own_network) {
    if (!run_.options.containment || !run_.options.containment->sandbox) {
      run_.refuse("LAUNCH_FAILED",
                  "network = \"gateway\" needs the sandbox: " + (run_.options.containment
                                                                     ? run_.options.containment->no_sandbox_why
                                                                     : std::string("the run is not contained")),
                  {});
      co_return false;
    }
    own_network.emplace();
    own_network->gate_dir = run_.options.run_dir / "gate";
    // The gateway's and the egress proxy's sockets are in the gate (the daemon put them there), so
    // the run reaches each as kGateInView/<name>, relayed onto its own loopback by mh-exec.
    auto relay = [&](const supervisor::SpecListen& listen, std::uint16_t port, const char* what) -> bool {
      if (!listen.path) return true;  // a port on the host's loopback: nothing to relay
      if (listen.path->parent_path().lexically_normal() != own_network->gate_dir.lexically_normal()) {
        run_.refuse("LAUNCH_FAILED",
                    std::string("the ") + what + "'s socket " + listen.path->string() + " is not in the run's gate " +
                        own_network->gate_dir.string(),
                    {});
        return false;
      }
      own_network->relays.push_back(
          SandboxSpec::Relay{port, std::filesystem::path(kGateInView) / listen.path->filename()});
      return true;
    };
    if (run_.options.gateway && !relay(run_.options.gateway->listen, kGatewayRelayPort, "gateway")) co_return false;
    if (run_.options.egress && !relay(run_.options.egress->listen, kEgressRelayPort, "egress proxy")) co_return false;
  }
  if (plan.hook_channel && !run_.hook_log.open(dir.vendor_hooks(), error)) {
    run_.refuse("LAUNCH_FAILED", error, {});
    co_return false;
  }
  SpawnOptions spawn_options;
  const adapters::LaunchPlan* to_spawn = &plan;
  if (supervised) {  // from the first input on: what the shell states goes in too
    auto journal_made = InputJournal::create(run_.options.run_dir / "core-inputs.jsonl");
    if (!journal_made) {
      run_.refuse("LAUNCH_FAILED", journal_made.error(), {});
      co_return false;
    }
    run_.journal.emplace(std::move(*journal_made));
  }
  if (run_.options.containment) {
    auto prepared = RunContainment::prepare(*run_.options.containment, run_.log->run_id(), run_.options.run_dir, plan,
                                            limits_of(run_.options.spec), own_network, run_.options.cwd_identity);
    if (!prepared) {
      run_.refuse("LAUNCH_REFUSED", prepared.error(), {});
      co_return false;
    }
    run_.containment = std::move(*prepared);
    for (const auto& [code, message] : run_.containment->warnings())
      run_.input(journal::ShellWarning{code, message}, Clock::now());  // journaled: an adoption states them again
    to_spawn = &run_.containment->launch_plan();
    spawn_options = run_.containment->spawn_options();
  }
  // A supervised run's hook channel is its supervisor's to serve. Opened here, after the
  // containment: a run with a network of its own has it on a path in its gate, not on the
  // abstract name the adapter gave it (to_spawn->hook_channel says which).
  if (direct && to_spawn->hook_channel && !direct->open_hook_channel(*to_spawn->hook_channel, error)) {
    run_.refuse("LAUNCH_FAILED", error, {});
    co_return false;
  }
  if (supervised_body) {
    auto failed = co_await supervised_body->launch(*to_spawn, spawn_options);
    if (failed) {
      run_.refuse("LAUNCH_FAILED", *failed, {});
      co_return false;
    }
  } else if (auto spawned = direct->spawn(*to_spawn, spawn_options); !spawned) {
    run_.refuse("LAUNCH_FAILED", spawned.error(), {});
    co_return false;
  }
  run_.input(journal::Start{}, Clock::now());  // the commands that waited for the spawn are handled here, in order
  run_.after_core();
  co_return true;
}

}  // namespace mh::daemon
