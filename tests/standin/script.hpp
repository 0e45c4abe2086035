// The stand-in's script: what the "model" does in each turn (README.md documents the format).
// Loaded and validated in full before the stand-in reads stdin, so a typo fails loudly at
// spawn instead of half-way through a load test.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tests/standin/standin_identity.hpp"

namespace mh::standin {

struct ToolCallSpec {
  std::string id;
  std::string name;
  boost::json::object input;
  bool run_effect = true;             // "effect": "auto" (default) or "none"
  std::optional<std::string> output;  // tool_result text on success, instead of the effect's
  std::uint64_t duration_ms = 0;      // extra running time, interruptible
  std::optional<bool> read_only;      // overrides the built-in classification
};

struct ApiErrorSpec {
  int status = 401;
  std::string message;              // the API's error message
  std::optional<std::string> text;  // the synthetic assistant text, verbatim
  int retries = 0;                  // system/api_retry records before giving up
};

struct BackgroundSpec {
  std::uint64_t seconds = 300;
  bool setsid = true;  // its own session, like `setsid cmd &`
  bool orphan = true;  // re-parented away at once, like `(cmd &)`
};

struct Step {
  enum class Kind { text, thinking, tool_use, wait, idle, chatter, crash, api_error, spawn_background };
  Kind kind = Kind::text;
  bool continues_message = false;      // same API message (message.id) as the previous step
  std::string text;                    // text / thinking
  std::vector<ToolCallSpec> calls;     // tool_use (and sleep, which is a Bash tool_use)
  std::uint64_t ms = 0;                // wait
  std::uint64_t count = 0, bytes = 0;  // chatter
  int signal = 0;                      // crash: by signal ...
  std::optional<int> exit_code;        // ... or by exit status
  ApiErrorSpec api_error;
  BackgroundSpec background;
};

struct Script {
  std::optional<std::string> session_id;
  std::string model = "claude-opus-4-8[1m]";  // as system/init and modelUsage name it
  std::string api_model = "claude-opus-4-8";  // as assistant records name it
  std::vector<std::string> tools;
  std::vector<std::vector<Step>> turns;
};

// The script in `text`, or an error naming the first thing wrong and where (e.g. "turns[1][0]").
struct LoadResult {
  std::optional<Script> script;
  std::string error;
};
LoadResult parse_script(std::string_view text);
LoadResult load_script_file(const std::string& path);

// The 24 tools the real CLI offers by default (system/init "tools").
std::vector<std::string> default_tools();

}  // namespace mh::standin
