// The filesystem a run's processes see, made with bubblewrap: the launch plan is rewritten to
// start `bwrap <layout> -- <the vendor> <its args>`, and everything the run starts inherits that
// view.
//
// The view is built from an allowlist, so what is not named does not exist in it:
//   - the system, read-only: /usr and /etc, the top-level links into /usr (/bin, /lib, /lib64,
//     /sbin, …) as links, and any extra read-only path the daemon names (the vendor's install,
//     metaharness's own hook programs);
//   - writable: the run's scratch (its HOME and TMPDIR), its work directory, nothing else;
//   - fresh: /proc, /dev (bwrap's minimal one), /tmp (an empty tmpfs: the host's /tmp is not
//     there), and /etc/passwd and /etc/group replaced by files naming the run's user when the
//     run has an identity of its own;
//   - hidden even under a bound path: every path in `hidden` (the daemon's config, state
//     directory and socket), as an empty tmpfs (a directory) or /dev/null (a file).
// So /root, /home, the daemon's state (other runs), its config and its socket are invisible.
// The network: with `own_network` (network = "gateway", docs/containment.md) the run gets a
// network namespace of its own with loopback only, so neither the internet, nor the host's
// loopback services (the daemon's HTTP listener, a NATS node, other runs' gateways), nor any
// abstract Unix socket of the host is reachable. Its only way out is the run directory's gate/,
// bound read-only at kGateInView: the gateway's and the egress proxy's sockets (relayed onto the
// run's own 127.0.0.1 by mh-exec, so the vendor speaks plain HTTP to a loopback port) and the hook
// channel, moved there from its abstract name. Without it (network = "host") the network is not
// touched: the host's, abstract sockets included. The vendors' own sandboxes (Codex starts its own
// bwrap) nest inside: bwrap needs nothing but /proc and user namespaces.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "adapters/adapter.hpp"
#include "daemon/process/directory_identity.hpp"

namespace mh::daemon {

// mh-exec beside this program (a build tree: build/bin), else where the package installs it
// (/usr/lib/metaharness/mh-exec).
std::filesystem::path default_exec_helper();

struct SandboxSpec {
  std::filesystem::path bwrap = "/usr/bin/bwrap";
  std::vector<std::filesystem::path> read_only;  // beyond the system
  std::vector<std::filesystem::path> writable;   // beyond the plan's scratch and cwd
  std::vector<std::filesystem::path> hidden;
  // The run's own /etc/passwd and /etc/group (written by the caller), bound over the system's.
  std::optional<std::filesystem::path> passwd_file, group_file;
  // Under a root daemon: the identity the run takes once the sandbox is built. bwrap runs as root
  // (so it can bind paths only root may reach) keeping just CAP_SETUID and CAP_SETGID, and
  // setpriv (util-linux) drops to this uid/gid with no supplementary groups and no inheritable
  // capabilities before it execs the vendor; bwrap's no_new_privs keeps file capabilities and
  // setuid binaries from giving anything back.
  struct RunAs {
    uid_t uid = 0;
    gid_t gid = 0;
  };
  std::optional<RunAs> run_as;
  std::filesystem::path setpriv = "/usr/bin/setpriv";
  // The last hop, mh-exec (default_exec_helper()): bound read-only into the view, it applies the
  // vendor's environment after the drop (see sandboxed()).
  std::filesystem::path exec_helper = default_exec_helper();
  // network = "gateway" (docs/gateway.md): the run gets a network namespace of its own with
  // loopback only. `gate_dir` (the run directory's gate/, holding the gateway's, the egress
  // proxy's and the hook channel's sockets) is bound at kGateInView; mh-exec relays each of
  // `relays` from the run's own loopback to its socket there; the plan's hook channel is moved
  // from an abstract name (out of reach in a new network namespace) to its socket there.
  struct Relay {
    std::uint16_t port = 0;        // on 127.0.0.1 inside the run's network namespace
    std::filesystem::path socket;  // as seen inside the view (under kGateInView)
  };
  struct OwnNetwork {
    std::filesystem::path gate_dir;
    std::vector<Relay> relays;
  };
  std::optional<OwnNetwork> own_network;
  // The operator's cwd as a root daemon checked it as the run's submitter (directory_as_uid.hpp):
  // the descriptor the spawner opens for its bind must be this directory (exec_handoff.hpp).
  // nullopt: no such check was made (an admin's cwd, a daemon that is not root).
  std::optional<DirectoryIdentity> cwd_identity;
};

// Where the run's gate directory appears inside its view.
inline constexpr const char* kGateInView = "/run/metaharness";
// The ports the relays listen on inside a run's own network namespace (no other run shares it).
inline constexpr std::uint16_t kGatewayRelayPort = 41000;
inline constexpr std::uint16_t kEgressRelayPort = 41001;

// The plan, rewritten to run inside the sandbox: `bwrap <layout> [-- setpriv <drop>] -- mh-exec --
// <the vendor> <its args>`. The privileged hops (bwrap, setpriv) get a fixed environment, the run
// marker alone (ChildProcess adds the handover's descriptor); the plan's environment becomes
// `handed_env`, which mh-exec applies after the drop. So nothing a run declares reaches a program
// that runs with more privilege than the run. The writable set is the plan's cwd, every
// directory it creates (its scratch), and spec.writable. Paths that do not exist on the host are
// left out (bwrap would refuse them), except the plan's own, which exist by the time it spawns.
// Reads the host's top-level entries (lstat) to mirror /bin → usr/bin style links.
adapters::LaunchPlan sandboxed(const adapters::LaunchPlan& plan, const SandboxSpec& spec);

// The bwrap arguments alone (for plan.json and the tests).
std::vector<std::string> sandbox_args(const adapters::LaunchPlan& plan, const SandboxSpec& spec);

}  // namespace mh::daemon
