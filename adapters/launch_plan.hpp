// The launch plan: everything needed to spawn a vendor, computed as a value before anything
// spawns (Adapter::plan), or the run's refusal before it (LaunchRefusal).
#pragma once

#include <boost/json/value.hpp>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "adapters/run_spec.hpp"
#include "protocol/events.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

struct ScratchFile {
  std::filesystem::path path;
  std::string contents;
  unsigned mode = 0600;
};

// A symbolic link made before spawning, after the directories and files (e.g. a seam
// plugin's pre-installed package: a read-only tree on the host, linked into the run's config dir
// rather than copied for every run).
struct ScratchLink {
  std::filesystem::path path;
  std::filesystem::path target;
};

// A side channel for vendor hook programs (a command hook runs as a process of its own, once
// per call): the run listens on an abstract Unix socket and the hook program, which inherits the
// vendor's environment, finds it through `env_var`. Every request is one JSON line (the hook's
// stdin), answered with one line (the hook's stdout; empty for no opinion).
struct HookChannel {
  std::string env_var;  // e.g. METAHARNESS_HOOK_SOCKET
  std::string address;  // as the vendor reaches it: an abstract name with a leading '@', or a path
  // Where the listener binds it when that differs from `address`: a path socket in the run
  // directory bound into the run's view at `address` (a run with a network namespace of its own,
  // where abstract sockets of the host are out of reach). Empty: `address` itself.
  std::filesystem::path bound_at;
};

struct LaunchPlan {
  std::string adapter;
  std::filesystem::path program;                         // absolute path of the vendor binary
  std::vector<std::string> args;                         // after argv[0]
  std::vector<std::pair<std::string, std::string>> env;  // constructed, never inherited
  // Set when `program` is a privileged hop before the drop to the run's user (the sandbox's bwrap
  // and setpriv, which end in mh-exec): `env` is then the hops' own fixed environment, and this
  // the vendor's, handed to mh-exec through a sealed memfd (ChildProcess::spawn) and applied only
  // there, after the drop.
  std::optional<std::vector<std::pair<std::string, std::string>>> handed_env;
  std::filesystem::path cwd;
  std::vector<std::filesystem::path> directories;  // created before spawning
  std::vector<ScratchFile> files;                  // written before spawning
  std::vector<ScratchLink> links;                  // made before spawning, after the files
  std::filesystem::path transcript_path;           // retained raw vendor stdout
  std::filesystem::path stdin_log_path;            // what metaharness wrote to the vendor
  proto::HermeticAttestation attestation;
  // The environment variable (name=value) every process of this run inherits, so leftovers can
  // be found and killed even after they escape the process tree.
  std::pair<std::string, std::string> run_marker;
  std::optional<HookChannel> hook_channel;
  std::vector<std::string> notes;  // human remarks printed with the plan
};

// The plan as printed and stored (plan.json): an environment entry's value is redacted when its
// name says it is a credential (…TOKEN…, …KEY…) or the run's vendor_env declares it.
json::value plan_to_json(const LaunchPlan& plan, const RunSpec& spec);

// Launch refusal: before anything spawns. Either a set of command results (one per needed
// command the adapter cannot honour, ids "start/<command>") or a plain launch error.
struct LaunchRefusal {
  std::vector<proto::ev::CommandResult> command_results;
  std::string message;  // for stderr / the socket client
};

}  // namespace mh::adapters
