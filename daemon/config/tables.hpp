// One reader per table of the config file (daemon/config only). Each takes its table (empty when
// the file has none) and the config so far, sets what its keys say, and returns "" or the refusal,
// which names the key and the reason. load_config (config.cpp) calls them in a fixed order and
// reports the first refusal.
#pragma once

#include <toml++/toml.h>

#include <string>

#include "daemon/config/config.hpp"

namespace mh::daemon::config_tables {

// daemon_tables.cpp: the daemon process's own tables.
std::string read_paths_table(const toml::table& paths, DaemonConfig& c);
std::string read_server_table(const toml::table& server, DaemonConfig& c);
std::string read_log_table(const toml::table& log, DaemonConfig& c);
// access_table.cpp
std::string read_access_table(const toml::table& access, DaemonConfig& c);
// vendor_table.cpp: [vendor] (its paths relative to the config file's directory).
std::string read_vendor_table(const toml::table& vendor, DaemonConfig& c);
// runs_table.cpp
std::string read_runs_table(const toml::table& runs, DaemonConfig& c);
// http_table.cpp
std::string read_http_table(const toml::table& http, DaemonConfig& c);
// fleet_table.cpp: read only when the file has a [fleet] table.
std::string read_fleet_table(const toml::table& fleet, DaemonConfig& c);
// upstreams_table.cpp: [upstreams.NAME], then [vendor.upstream] (which names them).
std::string read_upstreams_table(const toml::table& upstreams, DaemonConfig& c);
std::string read_vendor_upstream_table(const toml::table& vendor, DaemonConfig& c);
// budget_tables.cpp: [budgets] with [budgets.daily], and [prices."<model>"].
std::string read_budgets_table(const toml::table& budgets, DaemonConfig& c);
std::string read_prices_table(const toml::table& prices, DaemonConfig& c);

}  // namespace mh::daemon::config_tables
