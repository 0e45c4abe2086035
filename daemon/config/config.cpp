// The defaults, the client's idea of the socket, and load_config: the file parsed, its top level
// checked, then each table handed to its reader (tables.hpp) in a fixed order; the first refusal
// is the answer.
#include "daemon/config/config.hpp"

#include <toml++/toml.h>

#include <cstdlib>
#include <set>
#include <sstream>

#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"

namespace mh::daemon {

using config_tables::env;

namespace {

// systemd may hand several directories (colon-separated); the first is ours.
std::filesystem::path first_of(const char* list) {
  std::string s(list);
  return std::filesystem::path(s.substr(0, s.find(':')));
}

}  // namespace

DaemonConfig default_config() {
  DaemonConfig c;
  c.vendor = adapters::host_config_from_environment();
  if (const char* runtime = env("RUNTIME_DIRECTORY"); runtime && env("STATE_DIRECTORY")) {
    c.socket = first_of(runtime) / "metaharness.sock";
    c.state_dir = first_of(env("STATE_DIRECTORY"));
    c.defaults_from = "systemd (RUNTIME_DIRECTORY, STATE_DIRECTORY)";
  } else if (const char* xdg_runtime = env("XDG_RUNTIME_DIR")) {
    c.socket = std::filesystem::path(xdg_runtime) / "metaharness" / "metaharness.sock";
    if (const char* xdg_state = env("XDG_STATE_HOME"))
      c.state_dir = std::filesystem::path(xdg_state) / "metaharness";
    else if (const char* home = env("HOME"))
      c.state_dir = std::filesystem::path(home) / ".local/state/metaharness";
    else
      c.state_dir = std::filesystem::absolute("metaharness-state");
    c.defaults_from = "the user's XDG directories";
  } else {
    c.socket = std::filesystem::absolute("metaharness-state/metaharness.sock");
    c.state_dir = std::filesystem::absolute("metaharness-state");
    c.defaults_from = "a local folder (./metaharness-state)";
  }
  return c;
}

std::filesystem::path client_socket_choice(const std::filesystem::path& own_default,
                                           const std::filesystem::path& system_socket) {
  std::error_code ec;
  if (std::filesystem::exists(own_default, ec)) return own_default;
  // The directory is world-visible even where the socket is not (0750): a peer outside the group
  // is then told it cannot reach the system socket, which is the truth, rather than about a
  // local folder it never meant.
  if (std::filesystem::is_directory(system_socket.parent_path(), ec)) return system_socket;
  return own_default;
}

std::filesystem::path default_socket_path() {
  if (const char* explicit_path = env("METAHARNESS_SOCKET")) return explicit_path;
  return client_socket_choice(default_config().socket, kSystemSocket);
}

namespace {

// The file as a TOML table; "" or why it cannot be read.
std::string parse_file(const std::filesystem::path& file, toml::table& root) {
  try {
    root = toml::parse_file(file.string());
  } catch (const toml::parse_error& e) {
    std::ostringstream ss;
    ss << "cannot read the config " << file.string() << " at line " << e.source().begin.line << ", column "
       << e.source().begin.column << ": " << e.description();
    return ss.str();
  }
  return "";
}

// The top level holds the known tables only, each a table.
std::string top_level_problem(const toml::table& root) {
  static const std::set<std::string> kTables = {"paths",   "vendor", "runs", "server", "access",   "log",
                                                "budgets", "prices", "http", "fleet",  "upstreams"};
  for (const auto& [key, node] : root) {
    std::string k(key.str());
    if (!kTables.count(k))
      return "unknown key " + k +
             " (the config has the tables paths, vendor, runs, server, access, log, budgets, prices, http, "
             "fleet, upstreams)";
    if (!node.is_table()) return k + ": must be a table ([" + k + "])";
  }
  return "";
}

// Each table's reader, in the order their refusals are reported. [vendor] is read twice: its own
// keys, and [vendor.upstream] once the upstreams it names are known. [fleet] is read only when the
// file has one (its absence means one host).
using TableRead = std::string (*)(const toml::table&, DaemonConfig&);
struct TableStep {
  const char* table;
  TableRead read;
  bool only_if_present;
};
constexpr TableStep kSteps[] = {
    {"paths", config_tables::read_paths_table, false},
    {"vendor", config_tables::read_vendor_table, false},
    {"runs", config_tables::read_runs_table, false},
    {"server", config_tables::read_server_table, false},
    {"access", config_tables::read_access_table, false},
    {"log", config_tables::read_log_table, false},
    {"http", config_tables::read_http_table, false},
    {"fleet", config_tables::read_fleet_table, true},
    {"upstreams", config_tables::read_upstreams_table, false},
    {"vendor", config_tables::read_vendor_upstream_table, false},
    {"budgets", config_tables::read_budgets_table, false},
    {"prices", config_tables::read_prices_table, false},
};

}  // namespace

boost::system::result<DaemonConfig, std::string> load_config(const std::optional<std::filesystem::path>& file) {
  using Result = boost::system::result<DaemonConfig, std::string>;
  DaemonConfig c = default_config();
  if (!file) return c;
  c.config_file = std::filesystem::absolute(*file);
  toml::table root;
  if (auto error = parse_file(*file, root); !error.empty()) return Result(boost::system::in_place_error, error);
  if (auto error = top_level_problem(root); !error.empty()) return Result(boost::system::in_place_error, error);
  static const toml::table kEmpty;
  for (const auto& step : kSteps) {
    const toml::table* t = root[step.table].as_table();
    if (!t && step.only_if_present) continue;
    if (auto error = step.read(t ? *t : kEmpty, c); !error.empty()) return Result(boost::system::in_place_error, error);
  }
  return c;
}

}  // namespace mh::daemon
