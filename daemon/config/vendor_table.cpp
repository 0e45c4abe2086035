// [vendor]: where the vendor CLIs are. [vendor.upstream] is read with [upstreams] (upstreams_table.cpp).
#include <filesystem>
#include <string>

#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"

namespace mh::daemon::config_tables {

std::string read_vendor_table(const toml::table& vendor, DaemonConfig& c) {
  std::string error;
  TableReader r(vendor, "vendor.", error);
  std::string dir = c.vendor.vendor_dir.string(), claude, codex, opencode, codex_hook;
  auto not_empty = [](const std::string& v) { return v.empty() ? "must not be empty" : ""; };
  r.read<std::string>("dir", dir, not_empty);
  r.read<std::string>("claude", claude);
  r.read<std::string>("codex", codex);
  r.read<std::string>("opencode", opencode);
  r.read<std::string>("codex_hook", codex_hook);
  r.known_elsewhere("upstream");  // [vendor.upstream], read with [upstreams]
  r.finish();
  // A relative path in [vendor] is relative to the config file's directory, resolved here, at
  // start: the runs are spawned from other directories (bwrap binds what it is given, the
  // supervisor starts in the run's cwd), where a relative path named nothing (issue 24).
  const std::filesystem::path base = c.config_file->parent_path();
  auto from_config = [&](const std::string& value) {
    std::filesystem::path p(value);
    return p.is_absolute() ? p : (base / p).lexically_normal();
  };
  if (vendor.contains("dir")) c.vendor.vendor_dir = from_config(dir);
  if (!claude.empty()) c.vendor.binaries["claude"] = from_config(claude);
  if (!codex.empty()) c.vendor.binaries["codex"] = from_config(codex);
  if (!opencode.empty()) c.vendor.binaries["opencode"] = from_config(opencode);
  if (!codex_hook.empty()) c.vendor.binaries["codex-hook"] = from_config(codex_hook);
  return error;
}

}  // namespace mh::daemon::config_tables
