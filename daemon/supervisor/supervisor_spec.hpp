// What the daemon hands a run's supervisor: a JSON file (mode 0600) the supervisor reads once at
// start (`metaharness-supervisor --spec <file>`). The vendor's plan as it is to be spawned, the
// run directory's files it writes, where it joins and as whom, the hook channel it serves, and
// how long it waits with no daemon attached before it kills the run. See docs/supervisor.md.
#pragma once

#include <sys/types.h>

#include <boost/json/value.hpp>
#include <boost/system/result.hpp>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mh::supervisor {

namespace fs = std::filesystem;

struct SpecIdentity {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
};

struct SpecHookChannel {
  // Where to listen: an abstract socket name with a leading '@', or an absolute path (a run with
  // a network namespace of its own: the socket is in the run directory, bound into the view).
  std::string address;
  std::uint32_t uid = 0;  // the peer must be this user (the run's own)
  std::string marker;     // NAME=VALUE: the peer's environment must carry it whole
};

// Where a gateway or an egress proxy listens: a Unix socket path (bound into the run's view and
// relayed onto the run's own loopback by mh-exec: network = "gateway"), or a port on the host's
// loopback (network = "host").
struct SpecListen {
  std::optional<fs::path> path;
  std::optional<std::uint16_t> tcp_port;
};

// The run's model gateway (docs/gateway.md), hosted by the supervisor.
struct SpecGateway {
  std::string upstream_name;
  std::string wire;                    // "anthropic" | "openai-responses" | "gemini"
  std::string url;                     // empty with `scenario`: the supervisor's own scripted endpoint
  std::optional<fs::path> credential;  // the key's file (read by the supervisor, never by the run)
  std::optional<fs::path> ca_file;
  std::string header;  // which header carries the key; empty: the wire's default
  // A run's model_scenario: the supervisor hosts the scripted endpoint itself (so it outlives
  // the daemon as the run does) and makes it this gateway's upstream; every request it serves is
  // recorded in `scenario_log` (the run's model-requests.jsonl).
  std::optional<fs::path> scenario;
  std::optional<fs::path> scenario_log;
  std::string token;     // the run's placeholder: the only credential the gateway accepts
  bool reserve = false;  // budgets apply: every model request asks the daemon first (`reserve`)
  SpecListen listen;
};

struct SpecEgress {
  std::vector<std::string> allowed;  // "host:port"
  SpecListen listen;
};

struct SupervisorSpec {
  std::uint32_t protocol = 1;  // the spec's own format (the wire's version at the time)
  std::string run_id;
  fs::path socket;  // "<run dir>/supervisor.sock": the supervisor listens here
  // The plan as spawned.
  fs::path program;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  // A sandboxed plan's: `env` is then the privileged hops' fixed environment, and this the
  // vendor's, handed over to mh-exec after the drop (LaunchPlan::handed_env). The supervisor itself
  // runs with an empty environment and never applies either to itself.
  std::optional<std::vector<std::pair<std::string, std::string>>> vendor_env;
  fs::path cwd;
  fs::path transcript;             // vendor stdout, appended byte for byte
  fs::path stderr_log;             // vendor stderr, appended ("stderr" in the file)
  fs::path stdin_log;              // every byte accepted for the vendor's stdin
  std::optional<fs::path> cgroup;  // the run's cgroup directory: the vendor joins it before exec
  std::optional<SpecIdentity> identity;
  // Who the run is once it has started: `identity` when the supervisor spawns the vendor as that
  // user; a sandboxed run's user, which setpriv drops to inside the sandbox (`identity` is then
  // null: bwrap starts as root). The sockets the run connects to (the gateway's, the egress
  // proxy's, a hook channel on a path) are given to it. Null: the run is the supervisor's user.
  std::optional<SpecIdentity> run_user;
  std::optional<SpecHookChannel> hook_channel;
  std::optional<SpecGateway> gateway;
  std::optional<SpecEgress> egress;
  // The names of the vendor environment's values the run spec marks secret: with the gateway's
  // key and placeholder, what the supervisor redacts from what it writes (record_secrets).
  std::set<std::string> secret_env;
  std::uint64_t adopt_within_ms = 0;  // how long to wait with no daemon attached
  // runs.ungoverned_halt_after_s: with no daemon attached this long, the supervisor halts the run
  // and closes its record itself (shorter than adopt_within_ms; absent: never).
  std::optional<std::uint64_t> ungoverned_halt_after_ms;

  // The run directory: where supervisor.json and supervisor.log are (the socket's directory).
  fs::path run_dir() const { return socket.parent_path(); }
  fs::path state_file() const { return run_dir() / "supervisor.json"; }
  fs::path log_file() const { return run_dir() / "supervisor.log"; }
  std::optional<SpecIdentity> run_owner() const { return run_user ? run_user : identity; }
};

// A Unix socket address holds 107 bytes: a longer path (a deep state directory) is reached through
// a descriptor of its directory, as /proc/self/fd/<N>/<name>, which `dir_fd` keeps open (-1: the
// path was short enough, and is returned as it is). Empty when the directory cannot be opened.
std::string reachable_socket_path(const fs::path& socket, int& dir_fd);

// What a run's record must never hold in clear (docs/gateway.md, "No secret in the record"), as
// (NAME, value): the key of its gateway's upstream as the credential file holds it now
// ("upstream.NAME", or "model_endpoint.token" for a raw endpoint's), the run's placeholder
// ("gateway.token"), and each vendor_env value named in `secret_names` (its name). The daemon
// redacts its events and logs with these, the supervisor what it writes.
std::vector<std::pair<std::string, std::string>> record_secrets(
    const std::optional<SpecGateway>& gateway, const std::vector<std::pair<std::string, std::string>>& vendor_env,
    const std::set<std::string>& secret_names);
// The same from a spec: its vendor environment (handed over when sandboxed) and `secret_env`.
std::vector<std::pair<std::string, std::string>> record_secrets(const SupervisorSpec& spec);

boost::json::value spec_to_json(const SupervisorSpec& spec);
// Refuses by name: a missing or mistyped field, a relative path, an empty run id.
boost::system::result<SupervisorSpec, std::string> spec_from_json(const boost::json::value& value);
boost::system::result<SupervisorSpec, std::string> parse_spec(std::string_view text);

}  // namespace mh::supervisor
