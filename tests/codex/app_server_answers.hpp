// What Codex 0.171.0's app-server answers on a scratch launch (captured; see
// ../shared/reference/codex-wire.md §5), for the tests that drive the Codex session with its own
// record shapes: no account (the provider is not OpenAI's), no plugin, no instruction override,
// no MCP server. And how such a test finds the request an answer is for.
#pragma once

#include <boost/json.hpp>
#include <string_view>
#include <vector>

namespace mh::codex_answers {

namespace json = boost::json;

inline json::object initialize() {
  return {{"userAgent", "metaharness/0.171.0 (Debian 12; x86_64) unknown"}, {"codexHome", "/x"}};
}
inline json::object thread_start() {
  return {{"thread", json::object{{"id", "thr_1"}, {"cwd", "/work"}}},
          {"model", "gpt-5.5"},
          {"approvalPolicy", "untrusted"},
          {"cwd", "/work"},
          {"instructionSources", json::array{}}};
}
inline json::object no_account() {
  return {{"account", nullptr}, {"userId", nullptr}, {"requiresOpenaiAuth", false}, {"workspaceRouting", nullptr}};
}
inline json::object no_plugins() {
  return {{"marketplaces", json::array{}}, {"marketplaceLoadErrors", json::array{}}};
}
inline json::object default_config() {
  return {{"config", json::object{{"model", "gpt-5.5"},
                                  {"instructions", nullptr},
                                  {"developer_instructions", nullptr},
                                  {"model_instructions_file", nullptr},
                                  {"personality", nullptr},
                                  {"project_root_markers", json::array{}},
                                  {"mcp_servers", json::object{}}}}};
}
inline json::object no_mcp_servers() {
  return {{"data", json::array{}}, {"nextCursor", nullptr}};
}

// The last request (a line with an id) among what the session wrote, with this method; null if none.
inline const json::object* last_request(const std::vector<json::object>& written, std::string_view method) {
  for (auto it = written.rbegin(); it != written.rend(); ++it)
    if (it->contains("method") && it->at("method").is_string() && it->at("method").get_string() == method &&
        it->contains("id"))
      return &*it;
  return nullptr;
}

}  // namespace mh::codex_answers
