// The adapters compiled into this binary, and the host's configuration for them (where the
// pinned vendor CLIs live).
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/adapter.hpp"
#include "adapters/host_config.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

// The adapters compiled into this binary.
class AdapterRegistry {
 public:
  explicit AdapterRegistry(HostConfig config);
  ~AdapterRegistry();
  const Adapter* find(std::string_view id) const;
  std::vector<std::string_view> ids() const;
  const HostConfig& config() const { return config_; }

 private:
  HostConfig config_;
  std::vector<std::unique_ptr<Adapter>> adapters_;
};

}  // namespace mh::adapters
