#include "adapters/opencode/opencode_plan.hpp"

#include "protocol/json.hpp"

namespace mh::adapters::opencode {

std::string config_json(const ModelEndpoint& endpoint, std::string_view model) {
  std::string base = endpoint.base_url;
  while (!base.empty() && base.back() == '/')
    base.pop_back();
  json::object provider{// Bundled in the binary: no install is attempted for it.
                        {"npm", "@ai-sdk/anthropic"},
                        {"name", "metaharness"},
                        {"options", json::object{{"baseURL", base + "/v1"}, {"apiKey", endpoint.token}}},
                        {"models", json::object{{model, json::object{{"name", model}}}}}};
  std::string qualified = std::string(kProviderId) + "/" + std::string(model);
  return protocol::canonical_json(
      json::object{{"provider", json::object{{kProviderId, std::move(provider)}}},
                   {"model", qualified},
                   // The session title is asked of the small model: the same endpoint, never a hosted default.
                   {"small_model", qualified},
                   // Every call of every tool asks over ACP before its side effect (observed: bash, write, a
                   // long bash); without it nothing asks.
                   {"permission", "ask"},
                   // A reject otherwise ends the whole turn; with it the model reads the refusal and goes on.
                   {"experimental", json::object{{"continue_loop_on_deny", true}}},
                   {"autoupdate", false},
                   {"share", "disabled"}});
}

Launch launch(const LaunchInputs& in) {
  Launch l;
  l.program = in.binary;
  l.args = {"acp", "--cwd", in.work.string()};
  auto home = in.scratch / "home";
  auto xdg = in.scratch / "xdg";
  auto tmp = in.scratch / "tmp";
  auto config_file = in.scratch / "opencode.json";
  l.config_dir = xdg / "config" / "opencode";
  l.directories = {home, xdg / "config", l.config_dir, xdg / "data", xdg / "cache", xdg / "state", tmp, in.work};
  // 0600: it carries the run's token.
  l.files.push_back(ScratchFile{config_file, config_json(in.endpoint, in.model), 0600});
  l.env = {
      {"HOME", home.string()},
      {"PATH", "/usr/bin:/bin"},  // rg (glob, grep) and the shell the bash tool runs
      {"TMPDIR", tmp.string()},   // it unpacks a native module here at start
      {"XDG_CONFIG_HOME", (xdg / "config").string()},
      {"XDG_DATA_HOME", (xdg / "data").string()},  // its sessions database and log
      {"XDG_CACHE_HOME", (xdg / "cache").string()},
      {"XDG_STATE_HOME", (xdg / "state").string()},
      {"OPENCODE_CONFIG", config_file.string()},
      {"OPENCODE_DISABLE_AUTOUPDATE", "1"},
      {"OPENCODE_DISABLE_MODELS_FETCH", "1"},
      {"npm_config_registry", std::string(kDeadRegistry)},
  };
  return l;
}

}  // namespace mh::adapters::opencode
