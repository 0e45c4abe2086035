// Where the pinned vendor CLIs live on this host: the host's choice (config file, environment),
// never a submitting client's. Every adapter's factory takes it (adapters/registry.hpp).
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace mh::adapters {

// Host-side configuration for adapters: where the pinned vendor CLIs live. This is the host's
// choice (config file / environment), never the submitting client's.
struct HostConfig {
  std::filesystem::path vendor_dir;                       // holds node_modules/ from ./run setup
  std::map<std::string, std::filesystem::path> binaries;  // per-adapter override
};

// The default host configuration: vendor_dir from $METAHARNESS_VENDOR_DIR, else build_info::default_vendor_dir;
// a binary override from $METAHARNESS_<ADAPTER>_BIN (e.g. METAHARNESS_CLAUDE_BIN).
HostConfig host_config_from_environment();

}  // namespace mh::adapters
