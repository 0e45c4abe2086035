// The stdout records of Claude Code 2.1.197, shaped (keys, key order, nulls) as captured from
// the real CLI in /work/shared/reference/claude-code-wire.md and /tmp/probe/runs/*/wire.jsonl.
#pragma once

#include <boost/json.hpp>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace mh::standin {

namespace json = boost::json;

inline constexpr std::string_view kClaudeCodeVersion = "2.1.197";

// Token counts the real CLI reported against the mock for one API message (input 20, output
// 15 in the turn's usage; the assistant record carries message_start's output 1).
struct TurnUsage {
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  double cost_usd() const;  // Opus prices: $5 / $25 per Mtok
};

class Records {
 public:
  struct Identity {
    std::string session_id;
    std::string cwd;
    std::string model;      // system/init, modelUsage
    std::string api_model;  // assistant records
    std::vector<std::string> tools;
    std::string api_key_source;  // "ANTHROPIC_API_KEY" or "none"
    std::string config_dir;      // for transcript_path / memory_paths
  };

  explicit Records(Identity identity);

  void set_model(std::string model) { id_.model = std::move(model); }
  void set_session_id(std::string id) { id_.session_id = std::move(id); }
  std::string uuid();

  json::object initialize_response(const std::string& request_id, bool api_key_auth) const;
  json::object control_success(const std::string& request_id, std::optional<json::object> payload) const;
  json::object control_error(const std::string& request_id, const std::string& error) const;
  json::object control_cancel(const std::string& request_id) const;

  json::object init(const std::string& permission_mode);
  json::object status(const std::string& permission_mode);
  json::object assistant(const std::string& message_id, const std::string& request_id, json::object block);
  json::object synthetic_assistant(const std::string& text, const std::string& error);
  json::object api_retry(int attempt, int max_retries, int status, const std::string& error);
  json::object hook_callback(const std::string& request_id, const std::string& callback_id,
                             const std::string& prompt_id, const std::string& permission_mode,
                             const std::string& tool_name, const json::object& tool_input,
                             const std::string& tool_use_id) const;
  // A tool that ran (key order: tool_use_id first) ...
  json::object tool_result_ok(const std::string& tool_use_id, const std::string& content, bool write_is_error_key,
                              json::value tool_use_result);
  // ... and one that did not (key order: type first, tool_use_id last), as the real CLI writes
  // them.
  json::object tool_result_error(const std::string& tool_use_id, const std::string& content,
                                 json::value tool_use_result);
  json::object user_text(const std::string& text);

  struct ResultFields {
    std::string subtype = "success";
    bool is_error = false;
    std::optional<int> api_error_status;
    std::uint64_t duration_ms = 0;
    std::uint64_t num_turns = 1;
    std::optional<std::string> result;  // absent on error_during_execution
    std::optional<std::string> stop_reason;
    TurnUsage turn_usage;
    TurnUsage session_usage;  // cumulative: total_cost_usd and modelUsage
    json::array permission_denials;
    std::string terminal_reason = "completed";
    std::optional<std::string> errors;  // error_during_execution's diagnostic
  };
  json::object result(const ResultFields& f);

 private:
  // A record carrying one message: type, message, parent_tool_use_id, session_id, uuid.
  json::object message_record(std::string_view type, json::object message);
  // A "user" record carrying one content block (and, for a tool's result, its tool_use_result).
  json::object user_record(json::object block, std::optional<json::value> tool_use_result = std::nullopt);
  json::object usage_object(const TurnUsage& u) const;
  std::string transcript_path() const;
  std::string project_dir() const;

  Identity id_;
  std::mt19937_64 random_;
};

std::string iso_timestamp_now();

}  // namespace mh::standin
