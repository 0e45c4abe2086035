#include "daemon/server/adoption.hpp"

#include "daemon/log.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/run_network.hpp"
#include "daemon/server/server.hpp"
#include "daemon/supervisor/supervisor_link.hpp"

namespace mh::daemon {

std::size_t adopt_runs(Server& server, const std::vector<std::string>& ids) {
  const CgroupParent* cgroups =
      server.containment && server.containment->cgroups ? &*server.containment->cgroups : nullptr;
  std::size_t adopted = 0;
  for (const std::string& id : ids) {
    RunDir dir = RunDir::in_state_dir(server.config.state_dir, id);
    auto meta = dir.read_meta();
    const adapters::Adapter* adapter = meta ? server.adapters.find(meta->adapter) : nullptr;
    if (!adapter) {
      server.registry.recover_cut_off(
          id, cgroups, meta ? "its adapter \"" + meta->adapter + "\" is unknown here" : "its run.json cannot be read");
      continue;
    }
    RunOptions options = run_options(server, dir);
    if (!options.supervision) {
      server.registry.recover_cut_off(id, cgroups, "runs.supervise is off: nothing here adopts runs");
      continue;
    }
    // A supervisor that has ended (it gave up waiting for a daemon, or was killed) has nothing to
    // hand over: the run is recovered now, never shown live while an attach waits on its socket.
    if (auto recorded = recorded_supervisor(dir.root()); recorded && !recorded->running) {
      server.registry.recover_cut_off(id, cgroups,
                                      "its supervisor (pid " + std::to_string(recorded->pid) +
                                          ") had ended before this start; its supervisor.log says why");
      continue;
    }
    auto spec_json = dir.read_spec();
    auto spec = spec_json.is_object() ? adapters::spec_from_json(spec_json.get_object())
                                      : adapters::spec_from_json(json::object{});
    if (spec) {
      options.on_spend = server.spend_reporter(id, meta->owner_uid);
      server.wire_daily_reservations(options, id, meta->owner_uid);
      AdoptedRunNetwork network = adopted_run_network(dir, *spec);
      options.redactions = std::move(network.redactions);
      options.on_spend_replayed = server.spend_seeder(id);
      options.observer = server.run_observer(*spec, network.has_gateway);
    }
    auto run = Run::adopt(server.pool.next_for_run(), *adapter, std::move(options));
    if (!run) {
      server.registry.recover_cut_off(id, cgroups, "not adopted: " + run.error());
      continue;
    }
    RunRecord record{dir.root(),
                     *run,
                     (*run)->stream(),
                     meta->owner_uid,
                     meta->adapter,
                     meta->labels,
                     spec ? spec->budget : adapters::Budgets{}};
    server.registry.adopted(id, std::move(record));
    (*run)->start(server.close_reporter(id));
    log(LogPriority::info, "run " + id + ": adopted from the previous daemon");
    ++adopted;
  }
  return adopted;
}

}  // namespace mh::daemon
