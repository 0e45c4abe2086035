// The daemon's containment policy, from its config, decided once at start (docs/containment.md):
// where runs' cgroups go, whether runs are sandboxed, which user they run as, what the sandbox
// shows read-only and what it hides. A configured part that cannot work refuses the start, naming
// the key; a default part that cannot work here is left out, and every run then says so.
#pragma once

#include <boost/json/object.hpp>
#include <boost/system/result.hpp>
#include <filesystem>
#include <memory>
#include <optional>

#include "daemon/config/config.hpp"
#include "daemon/process/run_containment.hpp"

namespace mh::daemon {

// `config_file`: the config the daemon read (hidden from runs), if any.
boost::system::result<std::shared_ptr<const ContainmentPolicy>, std::string> make_containment_policy(
    const DaemonConfig& config, const std::optional<std::filesystem::path>& config_file);

// The runs' network (docs/gateway.md), decided once at start from runs.network: true, each run
// in a network namespace of its own whose only door is its model gateway ("gateway"); false, the
// host's network ("host"). Not configured: "gateway" where it can be built (the sandbox is on,
// runs are supervised — the supervisor hosts the gateway — and bwrap can unshare the network),
// else "host", and `why_host` says why. A configured "gateway" that cannot be built refuses the
// start, naming runs.network and the reason.
struct NetworkDecision {
  bool own_network = false;
  std::string why_host;  // when own_network is false and it was not configured so
};
boost::system::result<NetworkDecision, std::string> decide_network(const DaemonConfig& config,
                                                                   const ContainmentPolicy& policy);

// What a run's body gets on this host, by name (the `status` reply's `containment`; a host
// property, not an adapter's): `end` "cgroup" or "marker-sweep" (the fallback a process that
// drops its environment escapes), `cgroup` {dir, controllers} or null, `sandbox` "bwrap" or
// "none", `identity` "uid-per-run", "runs.user" or "daemon-user", and `unavailable`: each part
// left out, with the reason its runs' warnings carry.
boost::json::object containment_facts(const ContainmentPolicy& policy);
// The same with the runs' network: `network` "gateway" or "host" (and, for "host" by default,
// `unavailable.network`).
boost::json::object containment_facts(const ContainmentPolicy& policy, const NetworkDecision& network);

// Held by the daemon for its whole life: when it goes (the daemon's stop, or a start that failed
// after the policy was made) it removes the runs' cgroup parent, which rmdir does only when no
// run's group is left in it. A run that did not end within the shutdown grace keeps it, for the
// next start to find; that is logged.
class ContainmentCleanup {
 public:
  explicit ContainmentCleanup(std::shared_ptr<const ContainmentPolicy> policy) : policy_(std::move(policy)) {}
  ~ContainmentCleanup();
  ContainmentCleanup(const ContainmentCleanup&) = delete;
  ContainmentCleanup& operator=(const ContainmentCleanup&) = delete;

 private:
  std::shared_ptr<const ContainmentPolicy> policy_;
};

// Whether `cwd` is one a peer below admin may name: under one of `roots` (after resolving `..`
// and symlinks of the parts that exist). No roots: none is.
bool cwd_within_roots(const std::filesystem::path& cwd, const std::vector<std::filesystem::path>& roots);

}  // namespace mh::daemon
