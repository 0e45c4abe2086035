// The daemon's configuration: embedded defaults that work with no file at all, overridden by a
// TOML file (config/metaharness.toml documents every key). A bad file is refused at start with
// the key and the reason; an unknown key is refused too (a typo is never silently ignored).
#pragma once

#include <boost/system/result.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"
#include "daemon/fleet/fleet_config.hpp"
#include "daemon/run/budget_meter.hpp"

namespace mh::daemon {

enum class Role { none = 0, observe = 1, control = 2, admin = 3 };
std::string_view to_string(Role role);

// gids hold the numeric grants and the groups granted by name (resolved when the config loads).
struct Grants {
  std::set<std::uint32_t> uids;
  std::set<std::uint32_t> gids;
};

// The groups a peer belongs to: the gid its credentials carry, and the supplementary groups of its
// uid's user in the host's group database (getgrouplist), which is where `usermod -aG` puts a
// member. A uid with no user entry has its gid alone.
std::set<std::uint32_t> groups_of(std::uint32_t uid, std::uint32_t gid);
// The groups of uid's user as the database has them (its primary group and supplementary ones),
// for a uid known by its number alone (a peer host's claim); empty when there is no such user.
std::set<std::uint32_t> groups_of_user(std::uint32_t uid);
// The primary group of uid's user; nullopt when there is no such user.
std::optional<std::uint32_t> primary_gid_of(std::uint32_t uid);

// One [upstreams.NAME] (docs/gateway.md): where a run's model gateway forwards, and the key it
// adds. The key is never read into the daemon's config: the daemon checks at start that it can be
// read and is not empty, and hands the supervisor its path (the gateway reads it, and again when
// it changes).
struct UpstreamConfig {
  std::string name;
  std::string wire;  // "anthropic" | "openai-responses"
  std::string url;   // https://…, or http:// on a loopback host only
  // `credential` (a file) or `credential_name` (systemd's $CREDENTIALS_DIRECTORY/<name>), exactly
  // one; credential_path is the file either names. systemd removes the credentials directory when
  // the unit stops while a supervisor may keep serving its run: the supervisor keeps the last key
  // it read.
  std::optional<std::filesystem::path> credential;
  std::optional<std::string> credential_name;
  std::filesystem::path credential_path;
  std::optional<std::filesystem::path> ca_file;
  std::string header;  // which header carries the key; "" the wire's default
};

struct DaemonConfig {
  // [paths]
  std::filesystem::path socket;
  std::filesystem::path state_dir;
  unsigned socket_mode = 0660;
  // [vendor]
  adapters::HostConfig vendor;
  // [vendor.upstream]: adapter id -> the upstream its runs use when the spec names none.
  std::map<std::string, std::string> default_upstream;
  // [upstreams.NAME]
  std::map<std::string, UpstreamConfig> upstreams;
  // [runs]
  std::size_t max_active_runs = 2000;
  std::chrono::milliseconds halt_grace{3000};
  std::chrono::milliseconds exit_grace{15000};
  std::chrono::milliseconds shutdown_grace{10000};
  std::chrono::milliseconds idle_timeout{600000};
  std::uint64_t decision_deadline_ms = 55000;
  // Stalls (issue 27, docs/policies.md): a run whose vendor makes no output for stall_after while
  // no decision is pending is warned RUN_STALLED, and halted when on_stall is "halt". The defaults
  // of a spec that names neither; 0 s: never named stalled.
  std::chrono::seconds stall_after{600};
  std::string on_stall = "warn";  // "warn" | "halt"
  // Parking (issue 27 §5): a spec that names no park_after_ms gets this; unset: never parked.
  std::optional<std::chrono::seconds> park_after;
  bool fsync_each_event = false;
  // How long a submit's request_id keeps pointing at the run it made (docs/socket-api.md).
  std::chrono::seconds request_id_retention{std::chrono::hours(24 * 7)};
  std::size_t max_vendor_line_bytes = 4u << 20;
  std::size_t max_event_line_bytes = 1u << 20;  // protocol/line_cut.hpp: the bound of every event line
  // The run's body (docs/containment.md).
  std::string cgroup_root;       // "": the daemon's own cgroup; "none": no cgroups; else a cgroup2 path
  std::string sandbox = "auto";  // "auto": bwrap if installed; "bwrap": required; "none"
  std::string run_user;          // root daemon: "" one uid per run, else this user (name or uid)
  std::vector<std::filesystem::path> workspace_roots;       // where a non-admin peer may name a cwd
  std::vector<std::filesystem::path> sandbox_read_only;     // more paths every sandboxed run sees, read-only
  std::optional<std::uint64_t> memory_max_bytes, pids_max;  // per-run defaults (cgroup limits)
  std::optional<std::uint32_t> cpu_max_percent;
  // Runs that outlive the daemon (docs/supervisor.md): each run's body in a supervisor process of
  // its own, adopted by the next daemon after a crash, a kill or a restart.
  bool supervise = true;
  std::filesystem::path supervisor;                // "": metaharness-supervisor beside this executable
  std::chrono::milliseconds adopt_within{600000};  // how long a body waits for a daemon to come back
  // runs.ungoverned_halt_after_s: a run whose daemon is gone this long is halted by its supervisor,
  // which closes its record `killed` (docs/supervisor.md). nullopt: runs go on (to adopt_within).
  std::optional<std::chrono::milliseconds> ungoverned_halt_after;
  std::string on_stop = "halt";  // "halt": a stop ends every run; "detach": runs go on (supervise only)
  // The runs' network (docs/gateway.md): "gateway" (a network namespace of each run's own, its
  // model gateway the only door), "host" (the host's network), or "" (not configured: "gateway"
  // where the sandbox and supervision are available, else "host"; decided at start by
  // decide_network in containment_policy.hpp).
  std::string network;
  // [server]
  unsigned threads = 0;  // 0: one per hardware thread
  std::size_t max_line_bytes = 1u << 20;
  std::size_t max_connections = 4096;
  // At most this many connections of one uid, so that no one peer can hold every slot; an admin
  // peer is held to neither bound while it is within kAdminConnectionReserve past max_connections.
  std::size_t max_connections_per_uid = 2048;
  static constexpr std::size_t kAdminConnectionReserve = 16;
  // [access]
  Grants observe, control, admin;
  bool owner_is_admin = true;  // the daemon's own uid administers it
  bool root_is_admin = true;   // uid 0 administers it, whatever user the daemon runs as
  // [log]
  int log_level = 6;  // syslog priority: 3 error, 4 warning, 6 info, 7 debug
  // [budgets]: defaults for a run that names none of its own (per key).
  adapters::Budgets default_budget;
  // [budgets.daily]: per owner uid and UTC day, across all that uid's runs (tokens and priced usd).
  adapters::Budgets daily_budget;
  // [prices."<model>"]: USD per million tokens, for usd budgets.
  PriceTable prices;

  // [http]: the metrics listener (docs/metrics.md). Absent: nothing listens and nothing is counted.
  struct HttpListen {
    std::string address;     // an IP address, bound exactly as given
    std::uint16_t port = 0;  // 0: any free port (the bound one is written to <state_dir>/http.addr)
  };
  std::optional<HttpListen> http_listen;

  // [fleet]: hosts joined through NATS JetStream (docs/fleet.md). Absent: one host, and no NATS
  // code path runs at all.
  std::optional<fleet::FleetConfig> fleet;

  // The file this config was read from (nullopt: defaults only); runs never see it.
  std::optional<std::filesystem::path> config_file;

  // Where the defaults came from, for the start-up log line.
  std::string defaults_from;

  // The peer's role: the highest that its uid or any of its groups (groups_of) is granted.
  Role role_of(std::uint32_t uid, std::uint32_t gid) const;
  // The same over groups already known (the pure rule, for tests).
  Role role_of(std::uint32_t uid, const std::set<std::uint32_t>& groups) const;
};

// The defaults for this environment:
//   under systemd (RUNTIME_DIRECTORY / STATE_DIRECTORY set): $RUNTIME_DIRECTORY/metaharness.sock
//     and $STATE_DIRECTORY (/run/metaharness, /var/lib/metaharness with the shipped unit);
//   for a user (XDG_RUNTIME_DIR set): $XDG_RUNTIME_DIR/metaharness/metaharness.sock and
//     ${XDG_STATE_HOME:-~/.local/state}/metaharness;
//   otherwise a local folder: ./metaharness-state/{metaharness.sock,runs}.
DaemonConfig default_config();

// [http] listen: "ADDRESS:PORT" with an IP address ("127.0.0.1:9464", "[::1]:9464"); a host
// name, a missing address or a bad port is refused, saying why.
boost::system::result<DaemonConfig::HttpListen, std::string> parse_http_listen(std::string_view text);

// Defaults, then the file (if any) on top. Errors name the key and the reason.
boost::system::result<DaemonConfig, std::string> load_config(const std::optional<std::filesystem::path>& file);

// The socket the packaged metaharness.socket listens on.
inline constexpr const char* kSystemSocket = "/run/metaharness/metaharness.sock";

// The client side's idea of where the daemon's socket is: $METAHARNESS_SOCKET, else the daemon's
// default for this environment when a socket is there, else the system daemon's (kSystemSocket)
// when its directory exists (a host with the package), else the daemon's default.
std::filesystem::path default_socket_path();
// The rule above without the environment: the daemon's default for this environment, and the
// system socket.
std::filesystem::path client_socket_choice(const std::filesystem::path& own_default,
                                           const std::filesystem::path& system_socket);

}  // namespace mh::daemon
