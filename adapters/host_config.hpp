// Where the pinned vendor CLIs live on this host: the host's choice (config file, environment),
// never a submitting client's. Every adapter's factory takes it (adapters/registry.hpp).
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>

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

// Where a program that ships with metaharness (the supervisor, mh-exec, a vendor's hook program) is:
// beside the binary in `self_dir` (a build tree's bin/) when it is there, else in the package's
// helper folder (build_info::packaged_helper_dir, /usr/lib/metaharness), so an installed daemon
// finds them with no config key naming each.
std::filesystem::path helper_program(const std::filesystem::path& self_dir, std::string_view file_name);

// helper_program() beside the running binary (/proc/self/exe); the packaged folder when that
// cannot be read.
std::filesystem::path helper_program(std::string_view file_name);

}  // namespace mh::adapters
