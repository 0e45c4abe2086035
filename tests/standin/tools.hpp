// What a scripted tool call does when it is allowed to run. The stand-in runs no shell: a Bash
// command is read by a tiny interpreter that knows touch, echo (with > / >>), mkdir, sleep,
// pwd, cat, ls, true and ':', enough for marker files and interruptible running tools, and
// nothing that could surprise a load test. Write writes its file; Read reads it.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace mh::standin {

namespace json = boost::json;

struct ToolAction {
  enum class Kind { touch, mkdir, write_file, append_file, print, print_file, print_cwd, list_cwd, sleep, unsupported };
  Kind kind = Kind::print;
  std::vector<std::string> paths;
  std::string text;
  std::uint64_t ms = 0;
};

struct ToolPlan {
  enum class Shape { bash, write, read, other };  // how the tool_result record looks
  Shape shape = Shape::other;
  std::vector<ToolAction> actions;
  bool read_only = false;  // what the vendor's own pipeline would let run without asking
};

// The plan for `name` with `input` (after any updatedInput). `run_effect` false: the call runs
// no action at all (script "effect": "none"), but still takes `extra_ms`.
ToolPlan plan_tool(const std::string& name, const json::object& input, bool run_effect, std::uint64_t extra_ms);

// Accumulates what the immediate actions produced.
struct ToolOutput {
  std::string stdout_text;
  bool failed = false;
  std::string error_text;
};

// Performs one non-sleep action relative to the current directory.
void perform(const ToolAction& action, ToolOutput& out);

// The tool_result as the real CLI shapes it for this kind of tool.
struct ToolResult {
  std::string content;
  bool is_error = false;
  bool write_is_error_key = true;  // Bash writes "is_error":false; Read/Write omit it
  json::value tool_use_result;
};
ToolResult finish_tool(const ToolPlan& plan, const std::string& name, const json::object& input, const ToolOutput& out,
                       const std::optional<std::string>& scripted_output);

}  // namespace mh::standin
