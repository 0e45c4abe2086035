// [paths], [server], [log]: the daemon process's own tables.
#include <map>
#include <string>

#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"

namespace mh::daemon::config_tables {

std::string read_paths_table(const toml::table& paths, DaemonConfig& c) {
  std::string error;
  TableReader r(paths, "paths.", error);
  std::string socket = c.socket.string(), state = c.state_dir.string(), mode = "0660";
  r.read<std::string>("socket", socket, [](const std::string& s) { return s.empty() ? "must not be empty" : ""; });
  r.read<std::string>("state_dir", state, [](const std::string& s) { return s.empty() ? "must not be empty" : ""; });
  r.read<std::string>("socket_mode", mode, [](const std::string& s) {
    return s.size() >= 3 && s.size() <= 4 && s.find_first_not_of("01234567") == std::string::npos
               ? ""
               : "must be an octal mode such as \"0660\"";
  });
  r.finish();
  c.socket = socket;
  c.state_dir = state;
  if (error.empty()) c.socket_mode = static_cast<unsigned>(std::stoul(mode, nullptr, 8));
  return error;
}

std::string read_server_table(const toml::table& server, DaemonConfig& c) {
  std::string error;
  TableReader r(server, "server.", error);
  r.read<unsigned>("threads", c.threads, [](const unsigned& v) { return v <= 256 ? "" : "must be at most 256"; });
  r.read<std::size_t>("max_line_bytes", c.max_line_bytes,
                      [](const std::size_t& v) { return v >= 1024 ? "" : "must be at least 1024"; });
  r.read<std::size_t>("max_connections", c.max_connections,
                      [](const std::size_t& v) { return v > 0 ? "" : "must be at least 1"; });
  r.read<std::size_t>("max_connections_per_uid", c.max_connections_per_uid,
                      [](const std::size_t& v) { return v > 0 ? "" : "must be at least 1"; });
  r.finish();
  return error;
}

std::string read_log_table(const toml::table& log, DaemonConfig& c) {
  std::string error;
  TableReader r(log, "log.", error);
  std::string level = "info";
  static const std::map<std::string, int> kLevels = {{"error", 3}, {"warning", 4}, {"info", 6}, {"debug", 7}};
  r.read<std::string>("level", level, [](const std::string& v) {
    return kLevels.count(v) ? "" : "must be one of error, warning, info, debug";
  });
  r.finish();
  if (error.empty()) c.log_level = kLevels.at(level);
  return error;
}

}  // namespace mh::daemon::config_tables
