// A run's network and model path, decided by the daemon before the run is created
// (docs/gateway.md): which upstream its model gateway forwards to (the spec's `upstream`, else the
// adapter's [vendor.upstream]), the refusals a submit meets for them, and the gateway, egress and
// network options its supervisor gets, with the spec's model_endpoint pointed at the gateway as
// the vendor reaches it.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "adapters/adapter.hpp"
#include "daemon/config/config.hpp"
#include "daemon/run/run.hpp"

namespace mh::daemon {

class RunDir;

// What the network checks need to know of the daemon.
struct NetworkContext {
  const DaemonConfig& config;
  bool own_network = false;  // runs.network as decided at start (decide_network)
};

// A refusal by name: the socket code and why.
struct NetworkRefusal {
  std::string code;
  std::string reason;
};

// The submit's checks (every submit: the socket's and the fleet's). Fills spec.upstream from the
// adapter's [vendor.upstream] when the spec names no upstream, no model_endpoint and no
// model_scenario. Refused:
//   UPSTREAM_UNKNOWN         the name is no [upstreams.NAME]
//   UPSTREAM_WIRE_MISMATCH   the upstream serves another wire than the adapter speaks
//   UPSTREAM_NEEDS_SUPERVISION runs.supervise = false (the gateway lives in the run's supervisor)
//   MALFORMED                upstream together with model_endpoint or model_scenario
//   EGRESS_NEEDS_GATEWAY     egress on a run whose network is "host" (nothing would enforce it)
std::optional<NetworkRefusal> check_run_network(const NetworkContext& context, const adapters::Adapter& adapter,
                                                adapters::RunSpec& spec, bool has_scenario);

// Fills options.gateway, options.egress and options.own_network for a checked spec, and points
// options.spec.model_endpoint at the gateway (with the run's placeholder token) when the run has
// one. `scenario`: the run's scenario file (already written to the run directory), if any.
// nullopt, or why the run cannot be created.
std::optional<std::string> wire_run_network(const NetworkContext& context, const adapters::Adapter& adapter,
                                            const RunDir& dir, RunOptions& options,
                                            const std::optional<std::filesystem::path>& scenario);

// A port free on 127.0.0.1 now: bound to port 0, read, closed. The run's supervisor binds it
// later, so another process may take it meanwhile; the supervisor's bind then fails and the run is
// refused at launch, naming the port (a race, not a hole: nothing else is ever handed the run's
// token). nullopt when no port could be had.
std::optional<std::uint16_t> free_loopback_port();

// What a run a previous daemon left had of the network, read once from its supervisor's spec
// (0600, the daemon's; spec.json holds none of the values): the secrets its record must never hold
// in clear (supervisor::record_secrets), and whether it has a model gateway. Empty and false when
// that spec cannot be read.
struct AdoptedRunNetwork {
  std::vector<std::pair<std::string, std::string>> redactions;
  bool has_gateway = false;
};
AdoptedRunNetwork adopted_run_network(const RunDir& dir, const adapters::RunSpec& spec);

// The gate directory of a run: <run_dir>/gate, holding the sockets of its gateway and its egress
// proxy (bound into the run's view at kGateInView).
std::filesystem::path gate_dir(const RunDir& dir);

}  // namespace mh::daemon
