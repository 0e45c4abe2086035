// The opencode launch plan: `opencode acp` in the run's work dir with every world it reads or
// writes inside the run's scratch (HOME, XDG_CONFIG_HOME / DATA / CACHE / STATE, TMPDIR), a
// generated config (the model endpoint as an Anthropic-wire provider, "permission": "ask" for
// every tool, the loop kept on deny), the seam plugin (opencode_plugin.hpp) in the config dir with
// its package pre-installed beside it, and every path to the network other than the model
// endpoint cut. What every vendor's plan shares is common_plan's (adapters/plan_common). Facts:
// docs/reference/opencode-acp-wire.md.
#pragma once

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters::opencode {

// Where nothing listens on loopback: opencode fetches @opencode-ai/plugin from the npm registry at
// every start; pointed here, the fetch fails at once and reaches no one.
inline constexpr std::string_view kDeadRegistry = "http://127.0.0.1:9";
// The provider id the generated config names; the run's model is "<id>/<model>".
inline constexpr std::string_view kProviderId = "metaharness";
// The model a run gets when its spec names none (the endpoint is told this name).
inline constexpr std::string_view kDefaultModel = "claude-sonnet-4-5";

// The config file opencode reads from OPENCODE_CONFIG (canonical JSON). `ask_every_call`: the
// permission rule is "ask" for every tool (the ACP permission is the second gate); without it
// (deny-only) opencode's own default rules decide what the seam does not deny.
std::string config_json(const ModelEndpoint& endpoint, std::string_view model, bool ask_every_call = true);

std::variant<LaunchPlan, LaunchRefusal> make_plan(const Adapter& adapter, const HostConfig& config, const RunSpec& spec,
                                                  const RunPaths& paths);

}  // namespace mh::adapters::opencode
