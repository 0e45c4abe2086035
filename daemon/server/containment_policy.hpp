// The daemon's containment policy, from its config, decided once at start (docs/containment.md):
// where runs' cgroups go, whether runs are sandboxed, which user they run as, what the sandbox
// shows read-only and what it hides. A configured part that cannot work refuses the start, naming
// the key; a default part that cannot work here is left out, and every run then says so.
#pragma once

#include <boost/system/result.hpp>
#include <filesystem>
#include <memory>
#include <optional>

#include "daemon/process/run_containment.hpp"
#include "daemon/server/config.hpp"

namespace mh::daemon {

// `config_file`: the config the daemon read (hidden from runs), if any.
boost::system::result<std::shared_ptr<const ContainmentPolicy>, std::string> make_containment_policy(
    const DaemonConfig& config, const std::optional<std::filesystem::path>& config_file);

// Whether `cwd` is one a peer below admin may name: under one of `roots` (after resolving `..`
// and symlinks of the parts that exist). No roots: none is.
bool cwd_within_roots(const std::filesystem::path& cwd, const std::vector<std::filesystem::path>& roots);

}  // namespace mh::daemon
