// The Qwen Code launch plan: `qwen --acp --auth-type anthropic --approval-mode default` in the run's
// work dir with its home (HOME, and QWEN_HOME for its settings) and temp dir inside the run's
// scratch: generated settings (every tool asks through permissions.ask rules, the side requests
// that carry tools switched off: managed memory, its dream, follow-up suggestions; no usage
// statistics, telemetry or auto-update; no MCP server), the system settings, system defaults and
// trusted-folders files pointed at paths that do not exist, and the model endpoint's Anthropic
// wire. What every vendor's plan shares is common_plan's (adapters/plan_common).
#pragma once

#include <map>
#include <string>

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters::qwen {

// The model a run gets when its spec names none (the endpoint is told this name).
inline constexpr std::string_view kDefaultModel = "claude-sonnet-4-5";

// The settings file the plan writes ($QWEN_HOME/settings.json; canonical JSON). `ask_every_call`:
// permissions.ask names every tool; without it (deny-only) Qwen Code's own default rules decide.
// The spec's vendor options (max_retries: model.generationConfig.maxRetries) go in it.
std::string settings_json(std::string_view model, bool ask_every_call = true,
                          const std::map<std::string, std::string>& vendor_options = {});

std::variant<LaunchPlan, LaunchRefusal> make_plan(const Adapter& adapter, const HostConfig& config, const RunSpec& spec,
                                                  const RunPaths& paths);

}  // namespace mh::adapters::qwen
