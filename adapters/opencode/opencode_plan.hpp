// The opencode launch as a value (a sketch of the adapter's plan, issue 14): a scratch home and
// config directory, a generated config (the scripted or configured provider on the Anthropic
// wire, every tool asking, the loop kept on deny), and every path to the network other than the
// model endpoint cut. Computed before anything spawns; writes nothing. Facts:
// docs/reference/opencode-acp-wire.md. Not yet: the call-seam plugin and its pre-installed
// package (without it in the config directory, a configured plugin stalls start-up ~2.5 minutes
// offline), and the Adapter that hosts this in a run.
#pragma once

#include "adapters/adapter.hpp"

namespace mh::adapters::opencode {

// Where nothing listens on loopback: opencode fetches @opencode-ai/plugin from the npm registry at
// every start; pointed here, the fetch fails at once and reaches no one.
inline constexpr std::string_view kDeadRegistry = "http://127.0.0.1:9";
// The provider id the generated config names; the run's model is "<id>/<model>".
inline constexpr std::string_view kProviderId = "metaharness";

struct LaunchInputs {
  std::filesystem::path binary;   // the native opencode (default_binary, or the host's override)
  std::filesystem::path scratch;  // the run's private world (absolute)
  std::filesystem::path work;     // the vendor's cwd (absolute)
  ModelEndpoint endpoint;         // base URL without /v1, and the run's token
  std::string model = "scripted";
};

struct Launch {
  std::filesystem::path program;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;  // constructed, never inherited
  std::vector<std::filesystem::path> directories;
  std::vector<ScratchFile> files;
  std::filesystem::path config_dir;  // $XDG_CONFIG_HOME/opencode: where its plugin package must be
};

// The config file opencode reads from OPENCODE_CONFIG (canonical JSON).
std::string config_json(const ModelEndpoint& endpoint, std::string_view model);

Launch launch(const LaunchInputs& in);

}  // namespace mh::adapters::opencode
