#include "tests/standin/records.hpp"

#include <unistd.h>

#include <chrono>
#include <ctime>

namespace mh::standin {

double TurnUsage::cost_usd() const {
  return static_cast<double>(input_tokens) * 5e-6 + static_cast<double>(output_tokens) * 25e-6;
}

std::string iso_timestamp_now() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[96];  // sized for any int the compiler can imagine in each field
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(ms));
  return buf;
}

Records::Records(Identity identity)
    : id_(std::move(identity)),
      random_(static_cast<std::uint64_t>(::getpid()) ^
              static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count())) {}

std::string Records::uuid() {
  std::uint64_t hi = random_(), lo = random_();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // RFC 4122 variant
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08x-%04x-%04x-%04x-%012llx", static_cast<unsigned>(hi >> 32),
                static_cast<unsigned>((hi >> 16) & 0xffff), static_cast<unsigned>(hi & 0xffff),
                static_cast<unsigned>(lo >> 48), static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

// "/tmp/x/work" -> "-tmp-x-work", as the CLI names its per-project directory.
std::string Records::project_dir() const {
  std::string slug = id_.cwd;
  for (auto& c : slug)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '-';
  return id_.config_dir + "/projects/" + slug;
}

std::string Records::transcript_path() const {
  return project_dir() + "/" + id_.session_id + ".jsonl";
}

json::object Records::initialize_response(const std::string& request_id, bool api_key_auth) const {
  auto command = [](std::string_view name, std::string_view description, std::string_view hint = "") {
    return json::object{{"name", name}, {"description", description}, {"argumentHint", hint}};
  };
  json::array commands{
      command("debug", "Enable debug logging for this session and help diagnose issues", "[issue description]"),
      command("clear", "Clear conversation history and free up context"),
      command("compact", "Clear conversation history but keep a summary in context",
              "<optional custom summarization instructions>"),
      command("context", "Visualize current context usage as a colored grid"),
      command("init", "Initialize a new CLAUDE.md file with codebase documentation"),
      command("review", "Review a pull request")};
  auto agent = [](std::string_view name, std::string_view description) {
    return json::object{{"name", name}, {"description", description}};
  };
  json::array agents{agent("claude", "Catch-all for any task that doesn't fit a more specific agent."),
                     agent("Explore", "Fast read-only search agent for locating code."),
                     agent("general-purpose", "General-purpose agent for researching complex questions."),
                     agent("Plan", "Software architect agent for designing implementation plans."),
                     agent("statusline-setup", "Use this agent to configure the user's Claude Code status line.")};
  json::array levels{"low", "medium", "high", "xhigh", "max"};
  json::array models{
      json::object{{"value", "default"},
                   {"resolvedModel", id_.model},
                   {"displayName", "Default (recommended)"},
                   {"description", "Use the default model (currently Opus 4.8 (1M context)) \u00b7 $5/$25 per Mtok"},
                   {"supportsEffort", true},
                   {"supportedEffortLevels", levels},
                   {"supportsAdaptiveThinking", true},
                   {"supportsFastMode", true},
                   {"supportsAutoMode", true}},
      json::object{{"value", "sonnet"},
                   {"resolvedModel", "claude-sonnet-5"},
                   {"displayName", "Sonnet"},
                   {"description", "Sonnet 5 \u00b7 Efficient for routine tasks \u00b7 $3/$15 per Mtok"},
                   {"supportsEffort", true},
                   {"supportedEffortLevels", levels},
                   {"supportsAdaptiveThinking", true},
                   {"supportsAutoMode", true}},
      json::object{{"value", "haiku"},
                   {"resolvedModel", "claude-haiku-4-5-20251001"},
                   {"displayName", "Haiku"},
                   {"description", "Haiku 4.5 \u00b7 Fastest for quick answers \u00b7 $1/$5 per Mtok"}}};
  json::object account =
      api_key_auth
          ? json::object{{"tokenSource", "none"}, {"apiKeySource", "ANTHROPIC_API_KEY"}, {"apiProvider", "firstParty"}}
          : json::object{{"tokenSource", "ANTHROPIC_AUTH_TOKEN"}, {"apiProvider", "firstParty"}};
  json::object payload{{"commands", std::move(commands)},
                       {"agents", std::move(agents)},
                       {"output_style", "default"},
                       {"available_output_styles", json::array{"default", "Proactive", "Explanatory", "Learning"}},
                       {"models", std::move(models)},
                       {"account", std::move(account)},
                       {"pid", ::getpid()}};
  return control_success(request_id, std::move(payload));
}

json::object Records::control_success(const std::string& request_id, std::optional<json::object> payload) const {
  json::object response{{"subtype", "success"}, {"request_id", request_id}};
  if (payload) response["response"] = std::move(*payload);  // interrupt's reply has no payload
  return json::object{{"type", "control_response"}, {"response", std::move(response)}};
}

json::object Records::control_error(const std::string& request_id, const std::string& error) const {
  return json::object{{"type", "control_response"},
                      {"response", json::object{{"subtype", "error"}, {"request_id", request_id}, {"error", error}}}};
}

json::object Records::control_cancel(const std::string& request_id) const {
  return json::object{{"type", "control_cancel_request"}, {"request_id", request_id}};
}

json::object Records::init(const std::string& permission_mode) {
  json::array tools;
  for (const auto& t : id_.tools)
    tools.emplace_back(t);
  json::array slash{"debug", "clear", "compact", "context", "init", "review", "security-review", "usage"};
  return json::object{{"type", "system"},
                      {"subtype", "init"},
                      {"cwd", id_.cwd},
                      {"session_id", id_.session_id},
                      {"tools", std::move(tools)},
                      {"mcp_servers", json::array{}},
                      {"model", id_.model},
                      {"permissionMode", permission_mode},
                      {"slash_commands", std::move(slash)},
                      {"apiKeySource", id_.api_key_source},
                      {"claude_code_version", kClaudeCodeVersion},
                      {"output_style", "default"},
                      {"agents", json::array{"claude", "Explore", "general-purpose", "Plan", "statusline-setup"}},
                      {"skills", json::array{"debug"}},
                      {"plugins", json::array{}},
                      {"analytics_disabled", true},
                      {"product_feedback_disabled", true},
                      {"uuid", uuid()},
                      {"memory_paths", json::object{{"auto", project_dir() + "/memory/"}}},
                      {"fast_mode_state", "off"}};
}

json::object Records::status(const std::string& permission_mode) {
  return json::object{{"type", "system"},  {"subtype", "status"},
                      {"status", nullptr}, {"permissionMode", permission_mode},
                      {"uuid", uuid()},    {"session_id", id_.session_id}};
}

json::object Records::assistant(const std::string& message_id, const std::string& request_id, json::object block) {
  json::object message{{"id", message_id},
                       {"type", "message"},
                       {"role", "assistant"},
                       {"model", id_.api_model},
                       {"content", json::array{std::move(block)}},
                       {"stop_reason", nullptr},
                       {"stop_sequence", nullptr},
                       {"usage", json::object{{"input_tokens", 20},
                                              {"output_tokens", 1},
                                              {"cache_creation_input_tokens", 0},
                                              {"cache_read_input_tokens", 0}}},
                       {"context_management", nullptr}};
  json::object record = message_record("assistant", std::move(message));
  record["request_id"] = request_id;
  return record;
}

json::object Records::synthetic_assistant(const std::string& text, const std::string& error) {
  json::object usage{
      {"input_tokens", 0},
      {"output_tokens", 0},
      {"cache_creation_input_tokens", 0},
      {"cache_read_input_tokens", 0},
      {"server_tool_use", json::object{{"web_search_requests", 0}, {"web_fetch_requests", 0}}},
      {"service_tier", nullptr},
      {"cache_creation", json::object{{"ephemeral_1h_input_tokens", 0}, {"ephemeral_5m_input_tokens", 0}}},
      {"inference_geo", nullptr},
      {"iterations", nullptr},
      {"speed", nullptr}};
  json::object message{{"id", uuid()},
                       {"container", nullptr},
                       {"model", "<synthetic>"},
                       {"role", "assistant"},
                       {"stop_details", nullptr},
                       {"stop_reason", "stop_sequence"},
                       {"stop_sequence", ""},
                       {"type", "message"},
                       {"usage", std::move(usage)},
                       {"content", json::array{json::object{{"type", "text"}, {"text", text}}}},
                       {"context_management", nullptr}};
  json::object record = message_record("assistant", std::move(message));
  record["error"] = error;
  record["request_id"] = "req_standin_err";
  return record;
}

json::object Records::api_retry(int attempt, int max_retries, int status, const std::string& error) {
  return json::object{
      {"type", "system"},        {"subtype", "api_retry"}, {"attempt", attempt}, {"max_retries", max_retries},
      {"retry_delay_ms", 572.5}, {"error_status", status}, {"error", error},     {"session_id", id_.session_id},
      {"uuid", uuid()}};
}

json::object Records::hook_callback(const std::string& request_id, const std::string& callback_id,
                                    const std::string& prompt_id, const std::string& permission_mode,
                                    const std::string& tool_name, const json::object& tool_input,
                                    const std::string& tool_use_id) const {
  json::object input{{"session_id", id_.session_id},
                     {"transcript_path", transcript_path()},
                     {"cwd", id_.cwd},
                     {"prompt_id", prompt_id},
                     {"permission_mode", permission_mode},
                     {"effort", json::object{{"level", "high"}}},
                     {"hook_event_name", "PreToolUse"},
                     {"tool_name", tool_name},
                     {"tool_input", tool_input},
                     {"tool_use_id", tool_use_id}};
  return json::object{{"type", "control_request"},
                      {"request_id", request_id},
                      {"request", json::object{{"subtype", "hook_callback"},
                                               {"callback_id", callback_id},
                                               {"input", std::move(input)},
                                               {"tool_use_id", tool_use_id}}}};
}

json::object Records::tool_result_ok(const std::string& tool_use_id, const std::string& content,
                                     bool write_is_error_key, json::value tool_use_result) {
  json::object block{{"tool_use_id", tool_use_id}, {"type", "tool_result"}, {"content", content}};
  if (write_is_error_key) block["is_error"] = false;
  return user_record(std::move(block), std::move(tool_use_result));
}

json::object Records::tool_result_error(const std::string& tool_use_id, const std::string& content,
                                        json::value tool_use_result) {
  json::object block{{"type", "tool_result"}, {"content", content}, {"is_error", true}, {"tool_use_id", tool_use_id}};
  return user_record(std::move(block), std::move(tool_use_result));
}

json::object Records::user_text(const std::string& text) {
  return user_record(json::object{{"type", "text"}, {"text", text}});
}

json::object Records::message_record(std::string_view type, json::object message) {
  return json::object{{"type", type},
                      {"message", std::move(message)},
                      {"parent_tool_use_id", nullptr},
                      {"session_id", id_.session_id},
                      {"uuid", uuid()}};
}

json::object Records::user_record(json::object block, std::optional<json::value> tool_use_result) {
  json::object record =
      message_record("user", json::object{{"role", "user"}, {"content", json::array{std::move(block)}}});
  record["timestamp"] = iso_timestamp_now();
  if (tool_use_result) record["tool_use_result"] = std::move(*tool_use_result);
  return record;
}

json::object Records::usage_object(const TurnUsage& u) const {
  return json::object{
      {"input_tokens", u.input_tokens},
      {"cache_creation_input_tokens", 0},
      {"cache_read_input_tokens", 0},
      {"output_tokens", u.output_tokens},
      {"server_tool_use", json::object{{"web_search_requests", 0}, {"web_fetch_requests", 0}}},
      {"service_tier", "standard"},
      {"cache_creation", json::object{{"ephemeral_1h_input_tokens", 0}, {"ephemeral_5m_input_tokens", 0}}},
      {"inference_geo", ""},
      {"iterations", json::array{}},
      {"speed", "standard"}};
}

json::object Records::result(const ResultFields& f) {
  json::object model_usage;
  if (f.session_usage.input_tokens > 0 || f.session_usage.output_tokens > 0)
    model_usage[id_.model] = json::object{{"inputTokens", f.session_usage.input_tokens},
                                          {"outputTokens", f.session_usage.output_tokens},
                                          {"cacheReadInputTokens", 0},
                                          {"cacheCreationInputTokens", 0},
                                          {"webSearchRequests", 0},
                                          {"costUSD", f.session_usage.cost_usd()},
                                          {"contextWindow", 1000000},
                                          {"maxOutputTokens", 64000}};
  json::object r{{"type", "result"}, {"subtype", f.subtype}};
  if (f.subtype == "error_during_execution") {
    // The interrupt / end_session shape: no api_error_status, no result text, no ttft.
    r["duration_ms"] = f.duration_ms;
    r["duration_api_ms"] = 0;
    r["is_error"] = f.is_error;
  } else {
    r["is_error"] = f.is_error;
    r["api_error_status"] = f.api_error_status ? json::value(*f.api_error_status) : json::value(nullptr);
    r["duration_ms"] = f.duration_ms;
    r["duration_api_ms"] = f.api_error_status ? 0 : f.duration_ms;
    if (!f.api_error_status) {
      r["ttft_ms"] = 1;
      r["ttft_stream_ms"] = 1;
      r["time_to_request_ms"] = 1;
    }
  }
  r["num_turns"] = f.num_turns;
  if (f.result) r["result"] = *f.result;
  r["stop_reason"] = f.stop_reason ? json::value(*f.stop_reason) : json::value(nullptr);
  r["session_id"] = id_.session_id;
  r["total_cost_usd"] = f.session_usage.cost_usd();
  r["usage"] = usage_object(f.turn_usage);
  r["modelUsage"] = std::move(model_usage);
  r["permission_denials"] = f.permission_denials;
  r["terminal_reason"] = f.terminal_reason;
  r["fast_mode_state"] = "off";
  r["uuid"] = uuid();
  if (f.errors) r["errors"] = json::array{*f.errors};
  return r;
}

}  // namespace mh::standin
