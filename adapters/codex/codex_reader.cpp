// Codex app-server notifications and items -> metaharness events (codex 0.171.0, shapes in
// ../shared/reference/codex-wire.md §5). What nothing here maps is `opaque`, with its method, its
// item type and the digest of its line: no notification is dropped.
#include <algorithm>

#include "adapters/adapter_outputs.hpp"
#include "adapters/codex/codex_internal.hpp"
#include "protocol/digest.hpp"
#include "protocol/json.hpp"
#include "protocol/time_text.hpp"

namespace mh::adapters::codex {

namespace {

using proto::object_at;
using proto::string_at;
using proto::u64_at;

// Codex notifications carry emittedAtMs: the vendor's own clock, as RFC 3339.
std::optional<std::string> at_of(const json::object& message) {
  const json::value* ms = message.if_contains("emittedAtMs");
  if (!ms) {
    if (const json::object* params = object_at(message, "params")) ms = params->if_contains("emittedAtMs");
  }
  auto exact = ms ? proto::exact_int64(*ms) : std::nullopt;
  if (!exact) return std::nullopt;
  return proto::rfc3339_millis(*exact);
}

// The HTTP status inside a codexErrorInfo ({"httpConnectionFailed":{"httpStatusCode":401}}, ...).
std::optional<std::uint64_t> http_status(const json::value* info) {
  if (!info || !info->is_object()) return std::nullopt;
  for (const auto& kv : info->get_object())
    if (kv.value().is_object())
      if (auto s = u64_at(kv.value().get_object(), "httpStatusCode")) return s;
  return std::nullopt;
}

proto::TokenUsage token_usage(const json::object& u) {
  proto::TokenUsage t;
  t.input_tokens = u64_at(u, {"inputTokens", "input_tokens"});
  t.output_tokens = u64_at(u, {"outputTokens", "output_tokens"});
  t.cache_read_input_tokens = u64_at(u, {"cachedInputTokens", "cached_input_tokens"});
  t.thinking_tokens = u64_at(u, {"reasoningOutputTokens", "reasoning_output_tokens"});
  return t;
}

// A tool item's outcome, as item/completed reports it. Its status: completed is no error, failed
// is one, and so is declined where the call was declined (a sub-agent tool is never declined).
proto::ev::ToolResult item_result(const std::string& id, const json::object& item, bool declined_is_error) {
  proto::ev::ToolResult r;
  r.call_id = id;
  r.outcome_source = "item/completed";
  auto status = string_at(item, "status");
  if (status == "completed")
    r.is_error = false;
  else if (status == "failed" || (declined_is_error && status == "declined"))
    r.is_error = true;
  r.tool_use_result = nullptr;
  return r;
}

// The fields of a model's function_call arguments that ask to run it another way: Codex's hook
// input, item and approval drop them (the approval's reason is the justification, nothing says
// the sandbox was asked off).
json::object escalation_fields(std::string_view arguments) {
  json::object out;
  auto args = proto::parse_json(arguments);
  if (!args || !args->is_object()) return out;
  for (std::string_view key : {"sandbox_permissions", "justification"})
    if (const json::value* v = args->get_object().if_contains(key)) out[key] = *v;
  return out;
}

void append_line(std::string& text, std::string_view part) {
  if (!text.empty()) text += '\n';
  text += part;
}

}  // namespace

std::optional<std::string> Reader::agent_of(const std::string& thread) const {
  if (thread.empty() || main_thread_.empty() || thread == main_thread_) return std::nullopt;
  return thread;
}

json::value Reader::file_changes(const std::string& item) const {
  auto it = file_changes_.find(item);
  return it != file_changes_.end() ? it->second : json::value(nullptr);
}

void Reader::add_model_request(ToolCall& call) const {
  auto it = model_calls_.find(call.call_id);
  if (it == model_calls_.end() || !call.input.is_object()) return;
  for (const auto& kv : it->second)
    call.input.get_object()[kv.key()] = kv.value();
  if (string_at(it->second, "sandbox_permissions") == "require_escalated") call.escalation = true;
}

void Reader::notification(const std::string& method, const json::object& m, const json::object& params,
                          std::string_view raw, std::uint64_t line_no, AdapterOutputs& sink) {
  auto at = at_of(m);
  const std::optional<std::string> agent = agent_of(string_at(params, "threadId").value_or(""));
  if (agent && (method == "turn/started" || method == "turn/completed")) {
    // A sub-agent's turn happens inside one of the main agent's turns; turn.* count the main
    // agent's turns only (a sub-agent's turn end closes nothing the run decides on).
    emit_opaque(sink, method, std::nullopt, proto::sha256_hex(raw), line_no, at);
    return;
  }
  if (method == "turn/started") {
    if (const json::object* turn = object_at(params, "turn")) active_turn_ = string_at(*turn, "id").value_or("");
    answer_this_turn_.clear();
    sink.turn_started(at);
    return;
  }
  if (method == "turn/completed") {
    const json::object* turn = object_at(params, "turn");
    std::string status = turn ? string_at(*turn, "status").value_or("") : "";
    std::string turn_id = turn ? string_at(*turn, "id").value_or("") : "";
    ++turns_completed_;
    last_status_ = status;
    last_answer_ = answer_this_turn_;
    last_answer_turn_ = turn_id.empty() ? std::nullopt : std::optional<std::string>(turn_id);
    last_http_status_.reset();
    if (turn)
      if (const json::object* error = object_at(*turn, "error"))
        if (auto code = http_status(error->if_contains("codexErrorInfo"))) last_http_status_ = std::to_string(*code);
    if (turn_id == active_turn_) active_turn_.clear();
    // What this turn's steers and calls left behind cannot reach a later turn: a steer Codex took
    // and never showed in the thread is the run core's to report (STEER_UNDELIVERED), and a later
    // user message of the same words is not that steer.
    steers_in_flight_.clear();
    model_calls_.clear();
    sink.turn_ended(status.empty() ? std::nullopt : std::optional<std::string>(status), at);
    return;
  }
  if (method == "item/started" || method == "item/completed") {
    item(method == "item/started", params, agent, raw, line_no, at, sink);
    return;
  }
  if (method == "thread/tokenUsage/updated") {
    const json::object* usage = object_at(params, "tokenUsage");
    const json::object* last = usage ? object_at(*usage, "last") : nullptr;
    const json::object* total = usage ? object_at(*usage, "total") : nullptr;
    if (last) {
      sink.event(proto::ev::Usage{std::nullopt, model_, token_usage(*last)}, at);
      // The session's total is the main thread's; a sub-agent's spend shows in its usage events.
      if (total && !agent) total_usage_ = token_usage(*total);
      return;
    }
  }
  if (method == "account/rateLimits/updated") {
    const json::object* limits = object_at(params, "rateLimits");
    const json::object* primary = limits ? object_at(*limits, "primary") : nullptr;
    if (primary) {
      proto::RateLimitInfo info;
      info.window = string_at(*limits, "limitId");
      if (!info.window) info.window = string_at(*limits, "limitName");
      if (const json::value* used = primary->if_contains("usedPercent"); used && used->is_double())
        info.utilization = used->get_double();
      else if (auto whole = used ? proto::exact_int64(*used) : std::nullopt)
        info.utilization = static_cast<double>(*whole);
      if (const json::value* resets = primary->if_contains("resetsAt")) info.resets_at = proto::exact_int64(*resets);
      sink.event(proto::ev::RateLimit{info}, at);
      return;
    }
  }
  if (method == "error") {
    const json::object* error = object_at(params, "error");
    bool will_retry = proto::bool_at(params, "willRetry").value_or(false);
    if (error && http_status(error->if_contains("codexErrorInfo")) == 429u) {
      // Throttled (retried or final): the vendor's HTTP status. Codex names no window, no
      // utilization and no reset time on this notification, so those stay unknown.
      proto::RateLimitInfo info;
      info.status = "429";
      sink.event(proto::ev::RateLimit{info}, at);
      return;
    }
    if (error && !will_retry && http_status(error->if_contains("codexErrorInfo")) == 401u) {
      // The credential the run launched with stopped working: the vendor's own words.
      std::string detail = string_at(*error, "message").value_or("");
      if (auto more = string_at(*error, "additionalDetails"); more && !more->empty()) detail += " (" + *more + ")";
      sink.event(proto::ev::AuthExpired{credential_source_, detail, line_no}, at);
      return;
    }
  }
  if (method == "rawResponseItem/completed") {
    // The model's own output item (experimentalRawEvents), read before Codex asks anything about
    // the call. It restates the call, so it stays opaque; what only it says is kept for the call.
    const json::object* raw = object_at(params, "item");
    if (raw && string_at(*raw, "type") == "function_call")
      if (auto call_id = string_at(*raw, "call_id"))
        model_calls_[*call_id] = escalation_fields(string_at(*raw, "arguments").value_or(""));
  }
  if (method == "serverRequest/resolved") return;  // control traffic: the answer it confirms is recorded
  emit_opaque(sink, method, std::nullopt, proto::sha256_hex(raw), line_no, at);
}

void Reader::item(bool started, const json::object& params, const std::optional<std::string>& agent,
                  std::string_view raw, std::uint64_t line_no, std::optional<std::string> at, AdapterOutputs& sink) {
  const json::object* item = object_at(params, "item");
  auto type = item ? string_at(*item, "type") : std::nullopt;
  auto id = item ? string_at(*item, "id") : std::nullopt;
  std::string method = started ? "item/started" : "item/completed";
  if (!item || !type || !id) {
    emit_opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
    return;
  }
  auto field = [&](std::string_view k) { return item->contains(k) ? item->at(k) : json::value(nullptr); };
  auto presented = [&](ToolCall call) {
    call.agent = agent;
    sink.call_presented(std::move(call), at);
  };
  if (started) {
    // The vendor announces the call it is about to run: the call's presentation, if nothing
    // presented it before (the hook comes first for every kind it covers).
    if (*type == "commandExecution") {
      ToolCall call{*id, "Bash", json::object{{"command", field("command")}, {"cwd", field("cwd")}},
                    proto::Seam::control_request};
      add_model_request(call);
      presented(std::move(call));
    } else if (*type == "fileChange") {
      file_changes_[*id] = field("changes");
      presented(
          ToolCall{*id, "apply_patch", json::object{{"changes", field("changes")}}, proto::Seam::control_request});
    } else if (*type == "imageView") {
      presented(ToolCall{*id, "view_image", json::object{{"path", field("path")}}, proto::Seam::hook});
    } else if (*type == "mcpToolCall") {
      std::string name =
          "mcp__" + string_at(*item, "server").value_or("") + "__" + string_at(*item, "tool").value_or("");
      presented(ToolCall{*id, name, field("arguments"), proto::Seam::hook});
    } else if (*type == "webSearch") {
      // Switched off at launch; should one appear, it is recorded as what it is: ungated.
      presented(ToolCall{*id, "web_search", field("query"), proto::Seam::none});
    } else {
      emit_opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
    }
    return;
  }
  if (agent && (*type == "agentMessage" || *type == "reasoning")) {
    // A sub-agent's words are not the main agent's: text / thinking carry no agent, so they
    // are kept as what they are (and are never taken for the run's final answer).
    emit_opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
  } else if (*type == "agentMessage") {
    std::string text = string_at(*item, "text").value_or("");
    answer_this_turn_ = text;
    sink.event(proto::ev::Text{std::move(text), std::nullopt}, at);
  } else if (*type == "reasoning") {
    std::string text;
    for (std::string_view key : {"summary", "content"})
      if (const json::value* parts = item->if_contains(key); parts && parts->is_array())
        for (const auto& p : parts->get_array()) {
          if (p.is_string())
            append_line(text, p.get_string());
          else if (p.is_object())
            if (auto t = string_at(p.get_object(), "text")) append_line(text, *t);
        }
    sink.event(proto::ev::Thinking{std::move(text), std::nullopt}, at);
  } else if (*type == "userMessage") {
    // Every user message on this thread is one metaharness sent: a turn's input (the prompt,
    // an injected message or frame text, already in the stream as injection where it was
    // put in) or a steer, which only shows here, once it has landed in the running turn.
    std::string text;
    if (const json::value* content = item->if_contains("content"); content && content->is_array())
      for (const auto& c : content->get_array())
        if (c.is_object())
          if (auto t = string_at(c.get_object(), "text")) append_line(text, *t);
    auto steer = std::find(steers_in_flight_.begin(), steers_in_flight_.end(), text);
    if (steer != steers_in_flight_.end()) {
      steers_in_flight_.erase(steer);
      sink.event(proto::ev::Injection{std::move(text), "steer"}, at);
    } else {
      emit_opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
    }
  } else if (*type == "collabAgentToolCall") {
    // A sub-agent tool's outcome (spawn_agent, wait_agent, ...): which agents it reached and
    // their states, so a consumer can tie a later tool.requested.agent to the spawn that made it.
    proto::ev::ToolResult r = item_result(*id, *item, /*declined_is_error=*/false);
    r.content = json::object{{"tool", field("tool")},
                             {"status", field("status")},
                             {"receiverThreadIds", field("receiverThreadIds")},
                             {"agentsStates", field("agentsStates")}};
    sink.event(std::move(r), at);
  } else if (*type == "commandExecution" || *type == "fileChange" || *type == "imageView" || *type == "mcpToolCall") {
    proto::ev::ToolResult r = item_result(*id, *item, /*declined_is_error=*/true);
    if (*type == "commandExecution") {
      if (const json::value* code = item->if_contains("exitCode")) r.exit_code = proto::exact_int64(*code);
      r.content = field("aggregatedOutput");
    } else if (*type == "mcpToolCall") {
      r.content = item->contains("result") ? item->at("result") : field("error");
    } else if (*type == "fileChange") {
      r.content = field("changes");
    }
    if (r.content.is_string()) r.bytes = r.content.get_string().size();
    sink.event(std::move(r), at);
  } else {
    emit_opaque(sink, method, type, proto::sha256_hex(raw), line_no, at);
  }
}

std::optional<proto::ev::SessionEnded> Reader::session_ended() const {
  if (turns_completed_ == 0) return std::nullopt;
  proto::ev::SessionEnded e;
  if (last_status_ == "completed" && !last_answer_.empty())
    e.final_answer = proto::FinalAnswer{last_answer_, last_answer_turn_};
  if (last_status_ == "completed")
    e.is_error = false;
  else if (last_status_ == "failed")
    e.is_error = true;
  e.subtype = last_status_;
  e.terminal_reason = last_status_;
  e.api_error_status = last_http_status_;
  e.num_turns = turns_completed_;
  e.usage = total_usage_;
  return e;  // Codex keeps no denial list of its own: permission_denials stays null (unknown)
}

}  // namespace mh::adapters::codex
