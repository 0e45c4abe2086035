#include "adapters/registry.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "adapters/claude/claude_adapter.hpp"
#include "adapters/codex/codex_adapter.hpp"
#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "metaharness/build_info.hpp"

namespace mh::adapters {

// The vendors compiled into this binary: one line each (a vendor's own folder says the rest).
const std::vector<const VendorDescriptor*>& vendor_descriptors() {
  static const std::vector<const VendorDescriptor*> all = {
      &claude::descriptor(),
      &codex::descriptor(),
      &opencode::descriptor(),
  };
  return all;
}

const VendorDescriptor* find_vendor(std::string_view id) {
  for (const VendorDescriptor* d : vendor_descriptors())
    if (d->id == id) return d;
  return nullptr;
}

HostConfig host_config_from_environment() {
  HostConfig config;
  if (const char* dir = std::getenv("METAHARNESS_VENDOR_DIR"); dir && *dir)
    config.vendor_dir = dir;
  else
    config.vendor_dir = std::filesystem::path(build_info::default_vendor_dir);
  for (const auto& pin : build_info::vendor_pins) {
    std::string var = "METAHARNESS_" + std::string(pin.adapter) + "_BIN";
    std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
    if (const char* bin = std::getenv(var.c_str()); bin && *bin) config.binaries[std::string(pin.adapter)] = bin;
  }
  // Codex's per-call hook program ships next to this binary (build/bin, /usr/bin...).
  if (const char* hook = std::getenv("METAHARNESS_CODEX_HOOK_BIN"); hook && *hook) {
    config.binaries["codex-hook"] = hook;
  } else {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) config.binaries["codex-hook"] = self.parent_path() / "mh-codex-hook";
  }
  return config;
}

AdapterRegistry::AdapterRegistry(HostConfig config) : config_(std::move(config)) {
  for (const VendorDescriptor* vendor : vendor_descriptors())
    adapters_.push_back(vendor->make(config_));
}

AdapterRegistry::~AdapterRegistry() = default;

const Adapter* AdapterRegistry::find(std::string_view id) const {
  for (const auto& a : adapters_)
    if (a->id() == id) return a.get();
  return nullptr;
}

std::vector<std::string_view> AdapterRegistry::ids() const {
  std::vector<std::string_view> out;
  for (const auto& a : adapters_)
    out.push_back(a->id());
  return out;
}

}  // namespace mh::adapters
