// The Gemini CLI launch plan: `gemini --acp` in the run's work dir with its home (HOME and
// GEMINI_CLI_HOME), temp dir and every settings tier inside the run's scratch: a generated user
// settings file (no usage statistics, no telemetry, no auto-update or update nag, no MCP server),
// the system settings, system defaults and trusted-folders files pointed at paths that do not
// exist, an admin policy that makes every tool ask, no extension, and the model endpoint's Gemini
// wire as the "gateway" auth type. What every vendor's plan shares is common_plan's
// (adapters/plan_common).
#pragma once

#include <map>
#include <string>

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"

namespace mh::adapters::gemini {

// The model a run gets when its spec names none (the endpoint is told this name in the path).
inline constexpr std::string_view kDefaultModel = "gemini-2.5-flash";

// The user settings file the plan writes ($GEMINI_CLI_HOME/.gemini/settings.json; canonical JSON),
// with the spec's vendor options (max_attempts: general.maxAttempts) in it.
std::string settings_json(const std::map<std::string, std::string>& vendor_options = {});
// The admin policy (TOML) the plan passes with --admin-policy: every tool asks the user, which in
// ACP mode is session/request_permission. The admin tier outranks every user, workspace and
// default rule (a default rule allows the read tools unasked).
std::string_view admin_policy_toml();

std::variant<LaunchPlan, LaunchRefusal> make_plan(const Adapter& adapter, const HostConfig& config, const RunSpec& spec,
                                                  const RunPaths& paths);

}  // namespace mh::adapters::gemini
