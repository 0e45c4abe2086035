#include "adapters/acp/acp_updates.hpp"

#include "adapters/adapter_outputs.hpp"
#include "protocol/json.hpp"

namespace mh::adapters::acp {

namespace {

using proto::object_at;
using proto::string_at;

// The text of a content block ({type: text, text}); nullopt for any other block (image, audio,
// resource...), which is not ours to render.
std::optional<std::string> text_of(const json::object& update) {
  const json::object* content = object_at(update, "content");
  if (!content || string_at(*content, "type") != "text") return std::nullopt;
  return string_at(*content, "text");
}

bool is_empty_input(const json::value& v) {
  return v.is_null() || (v.is_object() && v.get_object().empty());
}

}  // namespace

std::optional<proto::TokenUsage> token_usage(const json::object& u) {
  proto::TokenUsage t;
  // The spec's camelCase; Gemini CLI's prompt result spells its quota's counts in snake case.
  t.input_tokens = proto::u64_at(u, {"inputTokens", "input_tokens"});
  t.output_tokens = proto::u64_at(u, {"outputTokens", "output_tokens"});
  t.cache_read_input_tokens = proto::u64_at(u, "cachedReadTokens");
  t.cache_creation_input_tokens = proto::u64_at(u, "cachedWriteTokens");
  t.thinking_tokens = proto::u64_at(u, "thoughtTokens");
  if (!t.input_tokens && !t.output_tokens && !t.cache_read_input_tokens && !t.cache_creation_input_tokens &&
      !t.thinking_tokens)
    return std::nullopt;
  return t;
}

std::string UpdateReader::tool_name(const std::string& call_id, std::string title, const json::object* notice) const {
  if (const json::object* meta = notice ? object_at(*notice, "_meta") : nullptr)
    if (auto tool = string_at(*meta, "toolName"); tool && !tool->empty() && tool->size() <= kMaxIdBytes) return *tool;
  if (tool_of_call_)
    if (auto tool = tool_of_call_(call_id)) return *tool;
  return title;
}

OpenCall* UpdateReader::find(const std::string& call_id) {
  auto it = calls_.find(call_id);
  return it == calls_.end() ? nullptr : &it->second;
}

OpenCall* UpdateReader::track(const std::string& call_id, std::string name, std::string kind) {
  if (auto* known = find(call_id)) return known;
  if (calls_.size() >= kMaxOpenCalls) return nullptr;
  return &(calls_[call_id] = OpenCall{std::move(name), std::move(kind), nullptr, false});
}

bool UpdateReader::read(const json::object& update, AdapterOutputs& sink) {
  auto kind = string_at(update, "sessionUpdate");
  if (!kind) return false;
  if (*kind == "agent_message_chunk" || *kind == "agent_thought_chunk") {
    // Qwen Code 0.24.4 reports a model request's usage on a message chunk (_meta.usage, the spec's
    // token fields), the chunk's text empty; an empty chunk with no usage says nothing: opaque.
    bool usage_read = false;
    if (const json::object* meta = object_at(update, "_meta"))
      if (const json::object* u = object_at(*meta, "usage"))
        if (auto usage = token_usage(*u)) {
          sink.event(proto::ev::Usage{std::nullopt, std::nullopt, *usage, std::string("request")}, std::nullopt);
          usage_read = true;
        }
    auto text = text_of(update);
    if (!text || text->empty()) return usage_read;
    if (*kind == "agent_message_chunk")
      sink.event(proto::ev::Text{*text, std::nullopt}, std::nullopt);
    else
      sink.event(proto::ev::Thinking{*text, std::nullopt}, std::nullopt);
    return true;
  }
  if (*kind == "tool_call" || *kind == "tool_call_update") return tool_call(update, *kind == "tool_call", sink);
  if (*kind == "usage_update") {
    // The spec's usage_update reports the context window (used/size, cost); only token counts
    // are a usage event. Anything else it says is the agent's, recorded opaque.
    auto usage = token_usage(update);
    if (!usage) return false;
    sink.event(proto::ev::Usage{std::nullopt, std::nullopt, *usage, std::string("request")}, std::nullopt);
    return true;
  }
  // user_message_chunk (a replay), plan, available_commands_update, current_mode_update,
  // config_option_update, session_info_update...: nothing of ours to say: opaque.
  return false;
}

bool UpdateReader::tool_call(const json::object& update, bool first_notice, AdapterOutputs& sink) {
  auto id = string_at(update, "toolCallId");
  if (!id || id->empty() || id->size() > kMaxIdBytes) return false;
  auto status = string_at(update, "status");
  OpenCall* call = find(*id);
  if (!call) {
    // A call's first notice names it; an update for a call never announced still ends it.
    call = track(
        *id,
        tool_name(*id, string_at(update, "title").value_or(string_at(update, "kind").value_or("unknown")), &update),
        string_at(update, "kind").value_or(""));
    if (!call) return false;
  } else if (first_notice) {
    return false;  // a second announcement of a call already open: not ours to reconcile
  }
  if (const json::value* raw = update.if_contains("rawInput"); raw && !is_empty_input(*raw)) {
    // The fullest input: a first notice may carry only the cwd, the in_progress update all.
    if (!raw->is_object() || !call->input.is_object() || raw->get_object().size() >= call->input.get_object().size())
      call->input = *raw;
  }
  if (status != "completed" && status != "failed") return true;  // pending / in_progress: kept, said at the end

  if (!call->presented) {
    ToolCall record{*id, call->name, call->input, proto::Seam::none};
    sink.call_presented(std::move(record), std::nullopt);
  }
  proto::ev::ToolResult r;
  r.call_id = *id;
  r.outcome_source = "tool_call_update";
  r.is_error = status == "failed";
  if (const json::value* content = update.if_contains("content")) r.content = *content;
  if (const json::value* raw = update.if_contains("rawOutput")) {
    r.tool_use_result = *raw;
    // Where the agent reports an exit status (e.g. rawOutput.metadata.exit).
    if (raw->is_object())
      if (const json::object* meta = object_at(raw->get_object(), "metadata"))
        if (const json::value* exit = meta->if_contains("exit"); exit && exit->is_int64())
          r.exit_code = exit->as_int64();
  }
  calls_.erase(*id);
  sink.event(std::move(r), std::nullopt);
  return true;
}

}  // namespace mh::adapters::acp
