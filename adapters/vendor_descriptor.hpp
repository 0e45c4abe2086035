// What the host knows of a vendor before any run: its id, where its pinned CLI lives under the
// vendor folder, the helper programs its runs execute and their config keys, what an ATIF export
// calls it and how its usage figures read, and how its adapter is made. Its pins (npm package,
// version, seam plugin package) are vendor/pins' line for its id (build_info::vendor_pins). Each
// vendor declares its own in its folder (adapters/<vendor>/<vendor>_descriptor.cpp); registry.cpp
// lists them, one line each, and what must know every vendor (the registry, the config's
// per-vendor keys, `vendor install` / `doctor` / `vendor list`, ATIF) loops over that list instead
// of naming vendors (issue 26 section 3; scripts/vendor_names.sh counts what still does).
#pragma once

#include <filesystem>
#include <memory>
#include <string_view>
#include <vector>

#include "adapters/adapter.hpp"
#include "adapters/host_config.hpp"

namespace mh::adapters {

// How a vendor's own usage records read, for an ATIF export's per-step metrics: Anthropic's
// (input excludes the cache), OpenAI's (input includes the cached part), or neither known.
enum class UsageShape { anthropic, openai, unknown };

// A program of the vendor's own that its runs execute beside the CLI, built with metaharness (a
// hook program the CLI runs per call). Found as [vendor] `config_key` says, else as `env` says,
// else as `file_name` beside the running metaharness binary; the plan looks it up in
// HostConfig::binaries under `binary_key`.
struct VendorHelper {
  std::string_view binary_key;  // its HostConfig::binaries key
  std::string_view config_key;  // its [vendor] key (an interface: a name once shipped is kept)
  std::string_view env;         // its environment override
  std::string_view file_name;   // its file beside the metaharness binary (build/bin, /usr/lib/...)
};

// How a scripted model asks this vendor's CLI to run one shell command: what the drivers that play
// a vendor on the scripted endpoint (the soak, scripts/make_seam_scenario.sh) write in a scenario
// step, and the call id the run's events then report for it. Facts of the CLI, kept with the rest
// of its identity so that no driver keeps a table of vendors.
struct ScriptedShell {
  std::string_view tool;            // the tool the model calls (the CLI's own name for its shell)
  std::string_view command_key;     // the input field that holds the command line
  std::string_view call_id_prefix;  // how the wire's call ids begin (the CLI may check the form)
  // The call_id the run's events report for the model's call `{id}` ("{id}": the same).
  std::string_view reported_call_id = "{id}";
  // The CLI also asks the model things with no tools (a title, a summary): a scenario answers them
  // with its `aux` step, or those requests would take the steps meant for the calls.
  bool side_requests = false;
};

struct VendorDescriptor {
  std::string_view id;                       // the adapter's id, as vendor/pins names it
  std::string_view atif_agent_name;          // Harbor's name for the agent in an ATIF export
  std::string_view binary_under_vendor_dir;  // the pinned CLI's native binary, under ./run setup's folder
  UsageShape usage_shape = UsageShape::unknown;
  std::unique_ptr<Adapter> (*make)(const HostConfig& config) = nullptr;
  std::vector<VendorHelper> helpers;  // none for most vendors
  // The CLI's own process, by its command name (/proc/<pid>/comm), among the run's processes.
  std::vector<std::string_view> process_names;
  // The run speaks the Agent Client Protocol with the CLI (adapters/acp): the client starts each
  // turn (session/prompt), so no vendor line makes a turn's start.
  bool over_acp = false;
  ScriptedShell scripted_shell;

  std::filesystem::path default_binary(const std::filesystem::path& vendor_dir) const {
    return vendor_dir / binary_under_vendor_dir;
  }
};

// Where `metaharness vendor install` and ./run setup put the package a vendor's seam plugin needs
// (vendor/pins' fourth field): a folder of its own under the vendor dir, one read-only tree that
// every run of that vendor links into its config dir.
inline std::filesystem::path seam_package_dir(std::string_view id, const std::filesystem::path& vendor_dir) {
  return vendor_dir / (std::string(id) + "-plugin");
}

// Every vendor compiled into this binary, in registration order (registry.cpp).
const std::vector<const VendorDescriptor*>& vendor_descriptors();
// The descriptor of `id`, or null.
const VendorDescriptor* find_vendor(std::string_view id);

}  // namespace mh::adapters
