// Claude Code stdout records, shaped as the real CLI 2.1.197 writes them (see
// ../shared/reference/claude-code-wire.md), for driving the run core without a process.
#pragma once

#include <cstdint>
#include <string>

#include "protocol/json.hpp"

namespace mh::test::claude_lines {

namespace json = boost::json;

inline std::string line(const json::object& o) {
  return mh::protocol::canonical_json(o);
}

inline std::string init(std::string session = "sess-1") {
  return line({{"type", "system"},
               {"subtype", "init"},
               {"cwd", "/scratch/work"},
               {"session_id", session},
               {"tools", json::array{"Bash", "Read", "Write", "Edit"}},
               {"mcp_servers", json::array{}},
               {"model", "claude-opus-4-8"},
               {"permissionMode", "default"},
               {"slash_commands", json::array{"compact"}},
               {"apiKeySource", "none"},
               {"claude_code_version", "2.1.197"},
               {"output_style", "default"},
               {"agents", json::array{"claude"}},
               {"skills", json::array{}},
               {"plugins", json::array{}},
               {"uuid", "u-init"}});
}

inline std::string initialize_ok() {
  return line(
      {{"type", "control_response"},
       {"response", json::object{{"subtype", "success"}, {"request_id", "mh-init"}, {"response", json::object{}}}}});
}

inline std::string control_ok(const std::string& id, json::value response = json::object{}) {
  return line({{"type", "control_response"},
               {"response", json::object{{"subtype", "success"}, {"request_id", id}, {"response", response}}}});
}

inline std::string control_error(const std::string& id, const std::string& error) {
  return line({{"type", "control_response"},
               {"response", json::object{{"subtype", "error"}, {"request_id", id}, {"error", error}}}});
}

inline std::string text(const std::string& t) {
  return line({{"type", "assistant"},
               {"message", json::object{{"id", "msg_1"},
                                        {"role", "assistant"},
                                        {"model", "claude-opus-4-8"},
                                        {"content", json::array{json::object{{"type", "text"}, {"text", t}}}},
                                        {"usage", json::object{{"input_tokens", 5}, {"output_tokens", 1}}}}},
               {"request_id", "req_1"},
               {"session_id", "sess-1"}});
}

// Another assistant text message (msg_9) with its own usage, and its request id when not empty.
inline std::string text_with_usage(const std::string& t, std::uint64_t input_tokens, std::uint64_t output_tokens,
                                   const std::string& request_id = "") {
  json::object o{
      {"type", "assistant"},
      {"message",
       json::object{{"id", "msg_9"},
                    {"role", "assistant"},
                    {"model", "claude-opus-4-8"},
                    {"content", json::array{json::object{{"type", "text"}, {"text", t}}}},
                    {"usage", json::object{{"input_tokens", input_tokens}, {"output_tokens", output_tokens}}}}}};
  if (!request_id.empty()) o["request_id"] = request_id;
  return line(o);
}

inline std::string tool_use(const std::string& id, const std::string& name, json::value input) {
  return line(
      {{"type", "assistant"},
       {"message", json::object{{"id", "msg_2"},
                                {"role", "assistant"},
                                {"model", "claude-opus-4-8"},
                                {"content", json::array{json::object{
                                                {"type", "tool_use"}, {"id", id}, {"name", name}, {"input", input}}}}}},
       {"request_id", "req_2"},
       {"session_id", "sess-1"}});
}

inline std::string hook_callback(const std::string& request_id, const std::string& tool_use_id, const std::string& name,
                                 json::value input) {
  json::object hook_input{{"session_id", "sess-1"},
                          {"hook_event_name", "PreToolUse"},
                          {"tool_name", name},
                          {"tool_input", input},
                          {"tool_use_id", tool_use_id}};
  return line({{"type", "control_request"},
               {"request_id", request_id},
               {"request", json::object{{"subtype", "hook_callback"},
                                        {"callback_id", "mh-pretooluse"},
                                        {"input", hook_input},
                                        {"tool_use_id", tool_use_id}}}});
}

inline std::string cancel(const std::string& request_id) {
  return line({{"type", "control_cancel_request"}, {"request_id", request_id}});
}

inline std::string tool_result(const std::string& tool_use_id, const std::string& content, bool is_error) {
  return line({{"type", "user"},
               {"message", json::object{{"role", "user"},
                                        {"content", json::array{json::object{{"tool_use_id", tool_use_id},
                                                                             {"type", "tool_result"},
                                                                             {"content", content},
                                                                             {"is_error", is_error}}}}}},
               {"timestamp", "2026-11-29T17:53:37.377Z"},
               {"tool_use_result", json::object{{"stdout", content}}}});
}

inline std::string result(json::array denials = {}, bool is_error = false, const std::string& subtype = "success",
                          const std::string& terminal = "completed") {
  return line(
      {{"type", "result"},
       {"subtype", subtype},
       {"is_error", is_error},
       {"api_error_status", nullptr},
       {"duration_ms", 423},
       {"num_turns", 2},
       {"result", "All done."},
       {"stop_reason", "end_turn"},
       {"session_id", "sess-1"},
       {"total_cost_usd", 0.00065},
       {"usage", json::object{{"input_tokens", 10}, {"output_tokens", 24}, {"iterations", json::array{}}}},
       {"modelUsage", json::object{{"claude-opus-4-8", json::object{{"inputTokens", 10}, {"costUSD", 0.00065}}}}},
       {"permission_denials", denials},
       {"terminal_reason", terminal}});
}

// A result that carries no usage figures at all (neither usage, modelUsage nor total_cost_usd).
inline std::string result_without_usage() {
  return line({{"type", "result"},
               {"subtype", "success"},
               {"is_error", false},
               {"num_turns", 1},
               {"result", "Done."},
               {"stop_reason", "end_turn"},
               {"session_id", "sess-1"},
               {"permission_denials", json::array{}},
               {"terminal_reason", "completed"}});
}

inline json::object denial(const std::string& tool_use_id, const std::string& name, json::value input) {
  return json::object{{"tool_name", name}, {"tool_use_id", tool_use_id}, {"tool_input", input}};
}

}  // namespace mh::test::claude_lines
