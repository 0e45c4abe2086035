// What Codex says about its own hermetic surface, read from app-server's answers at the start of a
// run (codex 0.171.0, measured: docs/hermetic.md, "Codex: where each row's evidence comes from").
// Each function reads one answer's `result` and gives session.started's evidence for one row, in
// Codex's own words: nullopt when the answer does not say (a missing or malformed field), which is
// unknown, never none. Pure: no I/O.
#pragma once

#include "protocol/events.hpp"

namespace mh::adapters::codex {

namespace json = boost::json;

// H4, from account/read: the account's `type` as Codex spells it ("apiKey", "chatgpt",
// "amazonBedrock", "gcp"), or "none" when Codex answers `account: null` (it holds no account: the
// run's provider is not OpenAI's, so its per-run token is the only credential).
std::optional<std::string> credential_source(const json::object& result);

// H1a, from plugin/installed: every plugin Codex reports installed and enabled (an installed plugin
// whose `enabled` is not false counts), as {name, marketplace, local version}. Unknown when a
// marketplace failed to load (Codex's list may then be short).
std::optional<std::vector<protocol::PluginRef>> installed_plugins(const json::object& result);

// H1b, from config/read (the effective config seen from the working directory). Codex has no
// output style; what shapes how the model writes is its base instructions and what is added to
// them: `model_instructions_file` and `instructions` replace the base instructions,
// `developer_instructions` adds a developer message, and `personality` (deprecated in 0.171.0:
// "friendly and pragmatic no longer select a style") is reported as set. "default" when Codex
// reports every one of them unset (null; personality also "none"); otherwise "custom: " and the
// ones set; unknown when any of the four keys is missing.
std::optional<std::string> output_style(const json::object& result);

// H5, from one page of mcpServerStatus/list: the servers Codex names ({name, runtimeStatus}), and
// the cursor of the next page if there is one.
struct McpServerPage {
  std::vector<protocol::McpServerRef> servers;
  std::optional<std::string> next_cursor;
};
std::optional<McpServerPage> mcp_server_page(const json::object& result);

// H11, from thread/start: the instruction files Codex reports loaded (`instructionSources`, AGENTS.md
// and the like, its own and the project's), each as written (a source that is not a path string, as
// its JSON). Metaharness puts none anywhere, so every one is a memory file from outside. Unknown
// when the answer carries no such list.
std::optional<std::vector<std::string>> instruction_sources(const json::object& result);

}  // namespace mh::adapters::codex
