#include "adapters/codex/codex_evidence.hpp"

#include <array>

namespace mh::adapters::codex {

using protocol::array_at;
using protocol::string_at;

std::optional<std::string> credential_source(const json::object& result) {
  const json::value* account = result.if_contains("account");
  if (!account) return std::nullopt;
  if (account->is_null()) return std::string("none");
  if (!account->is_object()) return std::nullopt;
  return string_at(account->get_object(), "type");
}

std::optional<std::vector<protocol::PluginRef>> installed_plugins(const json::object& result) {
  const json::array* marketplaces = array_at(result, "marketplaces");
  if (!marketplaces) return std::nullopt;
  if (const json::array* errors = array_at(result, "marketplaceLoadErrors"); errors && !errors->empty())
    return std::nullopt;
  std::vector<protocol::PluginRef> out;
  for (const auto& m : *marketplaces) {
    if (!m.is_object()) return std::nullopt;
    const json::array* plugins = array_at(m.get_object(), "plugins");
    if (!plugins) return std::nullopt;
    for (const auto& p : *plugins) {
      if (!p.is_object()) return std::nullopt;
      const json::object& plugin = p.get_object();
      const json::value* installed = plugin.if_contains("installed");
      const json::value* enabled = plugin.if_contains("enabled");
      if (installed && installed->is_bool() && !installed->get_bool()) continue;
      if (enabled && enabled->is_bool() && !enabled->get_bool()) continue;
      auto version = string_at(plugin, "localVersion");
      if (!version) version = string_at(plugin, "version");
      out.push_back({string_at(plugin, "name"), string_at(m.get_object(), "name"), std::move(version)});
    }
  }
  return out;
}

std::optional<std::string> output_style(const json::object& result) {
  const json::value* config = result.if_contains("config");
  if (!config || !config->is_object()) return std::nullopt;
  const json::object& c = config->get_object();
  static constexpr std::array<std::string_view, 3> kInstructions = {"model_instructions_file", "instructions",
                                                                    "developer_instructions"};
  std::string set;
  auto add = [&](std::string what) { set += (set.empty() ? "" : ", ") + what; };
  const json::value* personality = c.if_contains("personality");
  if (!personality) return std::nullopt;
  if (!personality->is_null() && !(personality->is_string() && personality->get_string() == "none"))
    add("personality " + (personality->is_string() ? std::string(personality->get_string()) : std::string("set")));
  for (auto key : kInstructions) {
    const json::value* v = c.if_contains(key);
    if (!v) return std::nullopt;
    if (!v->is_null()) add(std::string(key));
  }
  if (set.empty()) return std::string("default");
  return "custom: " + set;
}

std::optional<McpServerPage> mcp_server_page(const json::object& result) {
  const json::array* data = array_at(result, "data");
  if (!data) return std::nullopt;
  McpServerPage page;
  for (const auto& s : *data) {
    if (!s.is_object()) return std::nullopt;
    page.servers.push_back({string_at(s.get_object(), "name"), string_at(s.get_object(), "runtimeStatus")});
  }
  page.next_cursor = string_at(result, "nextCursor");
  return page;
}

std::optional<std::vector<std::string>> instruction_sources(const json::object& result) {
  const json::array* sources = array_at(result, "instructionSources");
  if (!sources) return std::nullopt;
  std::vector<std::string> out;
  for (const auto& s : *sources)
    out.push_back(s.is_string() ? std::string(s.get_string()) : protocol::canonical_json(s));
  return out;
}

}  // namespace mh::adapters::codex
