#include "adapters/registry.hpp"

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include "adapters/vendor_descriptor.hpp"
#include "metaharness/build_info.hpp"

// The vendors compiled into this binary, one registration line each (adapters/<vendor>/ says the
// rest: its descriptor, <vendor>_descriptor.cpp, defines <vendor>::descriptor()).
#define MH_VENDORS(VENDOR) \
  VENDOR(claude)           \
  VENDOR(codex)            \
  VENDOR(opencode)         \
  VENDOR(gemini)           \
  VENDOR(qwen)

namespace mh::adapters {

#define MH_DECLARE_VENDOR(name)         \
  namespace name {                      \
  const VendorDescriptor& descriptor(); \
  }
MH_VENDORS(MH_DECLARE_VENDOR)
#undef MH_DECLARE_VENDOR

const std::vector<const VendorDescriptor*>& vendor_descriptors() {
#define MH_LIST_VENDOR(name) &name::descriptor(),
  static const std::vector<const VendorDescriptor*> all = {MH_VENDORS(MH_LIST_VENDOR)};
#undef MH_LIST_VENDOR
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
  // A vendor's helper programs (its hook program...) ship with this binary (build/bin, /usr/lib/metaharness).
  for (const VendorDescriptor* vendor : vendor_descriptors())
    for (const VendorHelper& helper : vendor->helpers) {
      const std::string key(helper.binary_key), env(helper.env);
      if (const char* bin = std::getenv(env.c_str()); bin && *bin)
        config.binaries[key] = bin;
      else
        config.binaries[key] = helper_program(helper.file_name);
    }
  return config;
}

std::filesystem::path helper_program(const std::filesystem::path& self_dir, std::string_view file_name) {
  std::error_code ec;
  if (!self_dir.empty() && std::filesystem::exists(self_dir / file_name, ec)) return self_dir / file_name;
  return std::filesystem::path(build_info::packaged_helper_dir) / file_name;
}

std::filesystem::path helper_program(std::string_view file_name) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  return helper_program(ec ? std::filesystem::path() : self.parent_path(), file_name);
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
