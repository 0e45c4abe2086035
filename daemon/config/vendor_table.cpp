// [vendor]: where the vendor CLIs are. [vendor.upstream] is read with [upstreams] (upstreams_table.cpp).
#include <filesystem>
#include <string>
#include <vector>

#include "adapters/vendor_descriptor.hpp"
#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"

namespace mh::daemon::config_tables {

std::string read_vendor_table(const toml::table& vendor, DaemonConfig& c) {
  std::string error;
  TableReader r(vendor, "vendor.", error);
  std::string dir = c.vendor.vendor_dir.string();
  auto not_empty = [](const std::string& v) { return v.empty() ? "must not be empty" : ""; };
  r.read<std::string>("dir", dir, not_empty);
  // Each vendor's binary override is keyed by its id (adapters/vendor_descriptor.hpp).
  const auto& vendors = adapters::vendor_descriptors();
  std::vector<std::string> binaries(vendors.size());
  for (std::size_t i = 0; i < vendors.size(); ++i)
    r.read<std::string>(std::string(vendors[i]->id).c_str(), binaries[i]);
  // And each vendor's helper programs by their own keys (VendorHelper::config_key).
  std::vector<std::pair<const adapters::VendorHelper*, std::string>> helpers;
  for (const adapters::VendorDescriptor* v : vendors)
    for (const adapters::VendorHelper& h : v->helpers)
      helpers.emplace_back(&h, std::string());
  for (auto& [helper, value] : helpers)
    r.read<std::string>(std::string(helper->config_key).c_str(), value);
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
  for (std::size_t i = 0; i < vendors.size(); ++i)
    if (!binaries[i].empty()) c.vendor.binaries[std::string(vendors[i]->id)] = from_config(binaries[i]);
  for (const auto& [helper, value] : helpers)
    if (!value.empty()) c.vendor.binaries[std::string(helper->binary_key)] = from_config(value);
  return error;
}

}  // namespace mh::daemon::config_tables
