// Claude Code stdout record -> metaharness events. Every record yields at least one output (an
// event, a call, a turn); one that yields nothing becomes `opaque`, so no record ever vanishes.
#include "adapters/claude/claude_reader.hpp"

#include <cmath>

#include "adapters/adapter_outputs.hpp"
#include "adapters/claude/claude_adapter.hpp"
#include "protocol/digest.hpp"

namespace mh::adapters::claude {

namespace {

using proto::array_at;
using proto::bool_at;
using proto::f64_at;
using proto::object_at;
using proto::string_at;
using proto::strings_at;
using proto::u64_at;

// The token counts of a usage object, which Claude spells two ways: snake_case in the API's usage
// (assistant message.usage, result.usage), camelCase in result.modelUsage.
struct CountKeys {
  std::string_view input, output, cache_read, cache_creation;
};
constexpr CountKeys kApiUsage = {"input_tokens", "output_tokens", "cache_read_input_tokens",
                                 "cache_creation_input_tokens"};
constexpr CountKeys kModelUsage = {"inputTokens", "outputTokens", "cacheReadInputTokens", "cacheCreationInputTokens"};

proto::TokenUsage token_counts(const json::object& u, const CountKeys& keys) {
  proto::TokenUsage t;
  t.input_tokens = u64_at(u, keys.input);
  t.output_tokens = u64_at(u, keys.output);
  t.cache_read_input_tokens = u64_at(u, keys.cache_read);
  t.cache_creation_input_tokens = u64_at(u, keys.cache_creation);
  return t;
}

// Claude's usage object (assistant message.usage and result.usage) -> TokenUsage (§8.5).
proto::TokenUsage map_usage(const json::object& u) {
  proto::TokenUsage t = token_counts(u, kApiUsage);
  t.service_tier = string_at(u, "service_tier");
  if (const json::object* d = object_at(u, "output_tokens_details")) t.thinking_tokens = u64_at(*d, "thinking_tokens");
  if (const json::array* it = array_at(u, "iterations")) t.iterations = it->size();
  t.speed = string_at(u, "speed");
  return t;
}

proto::ev::Opaque opaque_of(std::optional<std::string> type, std::optional<std::string> subtype, std::string digest,
                            std::uint64_t line_no) {
  return proto::ev::Opaque{std::move(type), std::move(subtype), std::move(digest), line_no};
}

// The vendor's own words for an auth failure: the synthetic assistant message's text.
std::optional<std::string> auth_failure_words(const json::object& record) {
  const json::value* message = record.if_contains("message");
  if (message && message->is_object()) {
    if (const json::value* content = message->get_object().if_contains("content"); content && content->is_array()) {
      for (const auto& block : content->get_array())
        if (block.is_object())
          if (auto text = string_at(block.get_object(), "text")) return text;
    }
  }
  if (auto result = string_at(record, "result")) return result;
  return std::nullopt;
}

}  // namespace

void Reader::read_record(const json::object& record, const proto::FramedLine& line, AdapterOutputs& sink) {
  const std::size_t before = sink.size();  // what this record produced is what follows
  const std::uint64_t line_no = line.number;
  auto type = string_at(record, "type");
  auto subtype = string_at(record, "subtype");
  auto at = string_at(record, "timestamp");
  bool retry = type == "system" && subtype == "api_retry";

  // Claude gave up on the credential (its synthetic assistant record carries the error): once,
  // before the record's own events, in the vendor's words, so an embedder can act without
  // matching vendor prose. A retry record carries the same error word and is not a give-up.
  if (auto error = string_at(record, "error"); error && *error == "authentication_failed" && !retry)
    credential_given_up(auth_failure_words(record), line_no, at, sink);

  if (retry) {
    map_api_retry(record, line, at, sink);
  } else if (type == "system" && subtype == "task_started") {
    // A sub-agent starts: remember which Agent call spawned it, so its calls can be attributed
    // when Claude asks about them (hook input agent_id) before it shows them. The record itself
    // maps to nothing else and stays opaque.
    auto task = string_at(record, "task_id");
    auto call = string_at(record, "tool_use_id");
    if (task && call && string_at(record, "task_type") == "local_agent") spawning_calls_[*task] = *call;
  } else if (type == "system" && subtype == "init") {
    map_init(record, at, sink);
  } else if (type == "system" && subtype == "thinking_tokens") {
    if (auto estimate = u64_at(record, "estimated_tokens")) {
      std::optional<std::int64_t> delta;
      if (const json::value* d = record.if_contains("estimated_tokens_delta"); d && d->is_int64())
        delta = d->get_int64();
      else if (d && d->is_uint64())
        delta = static_cast<std::int64_t>(d->get_uint64());
      sink.event(proto::ev::ThinkingEstimate{*estimate, delta}, at);
    }
  } else if (type == "assistant") {
    map_assistant(record, at, line_no, sink);
  } else if (type == "user") {
    map_user(record, at, line_no, sink);
  } else if (type == "rate_limit_event") {
    if (const json::object* info = object_at(record, "rate_limit_info")) {
      const auto& i = *info;
      proto::RateLimitInfo r;
      r.status = string_at(i, "status");
      r.window = string_at(i, "rateLimitType");
      if (const json::value* resets = i.if_contains("resetsAt")) r.resets_at = proto::exact_int64(*resets);
      r.utilization = f64_at(i, "utilization");
      r.using_overage = bool_at(i, "isUsingOverage");
      sink.event(proto::ev::RateLimit{r}, at);
    }
  } else if (type == "result") {
    map_result(record, at, line_no, sink);
  }

  if (sink.records_since(before) == 0)
    sink.event(opaque_of(type, subtype, line.too_long ? line.digest : proto::sha256_hex(line.text), line_no), at);
}

void Reader::read_skeleton(const proto::RecordSkeleton& skeleton, const proto::FramedLine& line, AdapterOutputs& sink) {
  skeleton_cuts_ = &skeleton.cuts;
  carried_.assign(skeleton.cuts.size(), false);
  read_record(skeleton.record, line, sink);
  skeleton_cuts_ = nullptr;
  auto list = [&](bool which) {
    std::string out;
    for (std::size_t i = 0; i < skeleton.cuts.size(); ++i) {
      if (carried_[i] != which) continue;
      const auto& c = skeleton.cuts[i];
      out += (out.empty() ? "" : ", ") + c.pointer + " (" + std::to_string(c.kept) + " of " + std::to_string(c.bytes) +
             " bytes kept, SHA-256 " + c.digest + ")";
    }
    return out;
  };
  std::string message = "line " + std::to_string(line.number) + " of claude's stdout is " +
                        std::to_string(line.length) + " bytes, over the vendor line bound (max_vendor_line_bytes); " +
                        "it was read as it passed, its long strings cut, and the transcript holds it whole (SHA-256 " +
                        line.digest + ")";
  if (auto carried = list(true); !carried.empty()) message += "; cut, and said so in the events' cut: " + carried;
  if (auto dropped = list(false); !dropped.empty()) message += "; cut, and carried by no event: " + dropped;
  if (!skeleton.complete)
    message += "; the record from " + skeleton.missing_from + " on was over what may be held, and is not mapped";
  sink.event(proto::ev::Warning{"VENDOR_LINE_CUT", std::move(message)}, std::nullopt);
}

std::vector<proto::CutField> Reader::carry(const std::string& from, std::string_view field, std::string_view to) {
  std::vector<proto::CutField> out;
  if (!skeleton_cuts_) return out;
  for (std::size_t i = 0; i < skeleton_cuts_->size(); ++i) {
    const auto& c = (*skeleton_cuts_)[i];
    bool under = c.pointer == from || (c.pointer.size() > from.size() && c.pointer.compare(0, from.size(), from) == 0 &&
                                       c.pointer[from.size()] == '/');
    if (!under) continue;
    carried_[i] = true;
    out.push_back(proto::CutField{std::string(field), std::string(to) + c.pointer.substr(from.size()), "text", c.bytes,
                                  c.kept, c.digest});
  }
  return out;
}

void Reader::emit(AdapterOutputs& sink, proto::EventPayload payload, const std::optional<std::string>& at,
                  std::vector<proto::CutField> cut) {
  if (cut.empty())
    sink.event(std::move(payload), at);
  else
    sink.event_cut(std::move(payload), at, std::move(cut));
}

std::optional<std::string> Reader::spawning_call(std::string_view agent_id) const {
  if (auto it = spawning_calls_.find(agent_id); it != spawning_calls_.end()) return it->second;
  return std::nullopt;
}

void Reader::credential_given_up(std::optional<std::string> detail, std::uint64_t line_no,
                                 const std::optional<std::string>& at, AdapterOutputs& sink) {
  if (turn_auth_expired_) return;  // the synthetic record and the result report one give-up
  turn_auth_expired_ = true;
  sink.event(proto::ev::AuthExpired{credential_source_, std::move(detail), line_no}, at);
}

// Claude is about to retry a failed API call. A 401 it retries is not yet an expired credential
// (one that then succeeds was never one): a warning, and auth.expired only if it gives up. A 429
// is a throttled run: rate_limit, resetting when Claude's own retry delay (which honours the
// endpoint's retry-after) has elapsed, placed on the clock by when the line was read. Other
// retries (overloaded, server_error) say nothing a neutral event can carry: opaque.
void Reader::map_api_retry(const json::object& r, const proto::FramedLine& line, const std::optional<std::string>& at,
                           AdapterOutputs& sink) {
  auto status = u64_at(r, "error_status");
  auto error = string_at(r, "error");
  auto attempt = u64_at(r, "attempt");
  auto max_retries = u64_at(r, "max_retries");
  auto count = [](const std::optional<std::uint64_t>& n) { return n ? std::to_string(*n) : std::string("?"); };
  if (status == 401u || error == "authentication_failed") {
    sink.event(
        proto::ev::Warning{"VENDOR_AUTH_RETRY",
                           "claude is retrying a request the model endpoint refused (HTTP " +
                               (status ? std::to_string(*status) : std::string("status unknown")) + ", \"" +
                               error.value_or("") + "\"), attempt " + count(attempt) + " of " + count(max_retries) +
                               "; the credential counts as expired only if claude gives up (auth.expired)"},
        at);
  } else if (status == 429u) {
    proto::RateLimitInfo info;
    info.status = std::to_string(*status);
    auto delay_ms = f64_at(r, "retry_delay_ms");
    // A vendor number is untrusted: a delay past a millennium (or not a number) is no reset time.
    constexpr double kMaxDelayMs = 1000.0 * 86400 * 365 * 1000;
    if (line.received_unix_ms && delay_ms && *delay_ms >= 0 && *delay_ms <= kMaxDelayMs) {
      auto until_ms = *line.received_unix_ms + static_cast<std::int64_t>(std::ceil(*delay_ms));
      info.resets_at = until_ms / 1000 + (until_ms % 1000 != 0 ? 1 : 0);  // rounded up to a second
    }
    sink.event(proto::ev::RateLimit{info}, at);
  }
}

void Reader::map_init(const json::object& r, const std::optional<std::string>& at, AdapterOutputs& sink) {
  if (!saw_init_) {
    saw_init_ = true;
    credential_source_ = string_at(r, "apiKeySource");
    proto::ev::SessionStarted s;
    s.adapter = "claude";
    s.adapter_class = proto::AdapterClass::harness;
    s.harness_version = string_at(r, "claude_code_version");
    s.session_id = string_at(r, "session_id");
    s.model = string_at(r, "model");
    s.permission_mode = string_at(r, "permissionMode");
    s.credential_source = credential_source_;
    s.output_style = string_at(r, "output_style");
    s.cwd = string_at(r, "cwd");
    s.offered_tools = strings_at(r, "tools");
    s.withheld = std::nullopt;  // Claude does not say what it withheld: unknown, never []
    s.slash_commands = strings_at(r, "slash_commands");
    s.skills = strings_at(r, "skills");
    s.agents = strings_at(r, "agents");
    if (const json::value* p = r.if_contains("plugins"); p && p->is_array()) {
      std::vector<proto::PluginRef> plugins;
      for (const auto& e : p->get_array())
        if (e.is_object())
          plugins.push_back({string_at(e.get_object(), "name"), string_at(e.get_object(), "source"),
                             string_at(e.get_object(), "version")});
      s.plugins = std::move(plugins);
    }
    if (const json::value* m = r.if_contains("mcp_servers"); m && m->is_array()) {
      std::vector<proto::McpServerRef> servers;
      for (const auto& e : m->get_array())
        if (e.is_object()) servers.push_back({string_at(e.get_object(), "name"), string_at(e.get_object(), "status")});
      s.mcp_servers = std::move(servers);
    }
    s.inputs_digest = launch_.inputs_digest;
    s.transcript = launch_.transcript;
    s.hermetic = launch_.attestation;
    sink.event(std::move(s), at);
  }
  // Claude writes one system/init per turn: it is the vendor's word that a turn began.
  if (skip_turn_start_) {
    skip_turn_start_ = false;
    // A resumed process (parking) is a new process: the mode it runs in is said and compared with
    // the run's (POSTURE_DRIFT when it differs), as the first process's was at session.started.
    sink.posture_reported(Posture{string_at(r, "permissionMode"), std::nullopt}, "resume");
    return;
  }
  sink.turn_started(at);
}

void Reader::map_assistant(const json::object& r, const std::optional<std::string>& at, std::uint64_t line_no,
                           AdapterOutputs& sink) {
  const json::value* message = r.if_contains("message");
  if (!message || !message->is_object()) return;  // -> whole-record opaque
  const auto& m = message->get_object();
  auto request_id = string_at(r, "request_id");
  if (const json::value* content = m.if_contains("content"); content && content->is_array()) {
    std::size_t index = 0;
    for (const auto& block_value : content->get_array()) {
      const std::string at_block = "/message/content/" + std::to_string(index++);
      if (!block_value.is_object()) {
        sink.event(opaque_of("assistant", std::nullopt, proto::sha256_hex(proto::canonical_json(block_value)), line_no),
                   at);
        continue;
      }
      const auto& block = block_value.get_object();
      auto block_type = string_at(block, "type");
      if (block_type == "text" && string_at(block, "text")) {
        emit(sink, proto::ev::Text{*string_at(block, "text"), request_id}, at,
             carry(at_block + "/text", "text", "/text"));
      } else if (block_type == "thinking" && string_at(block, "thinking")) {
        emit(sink, proto::ev::Thinking{*string_at(block, "thinking"), request_id}, at,
             carry(at_block + "/thinking", "text", "/text"));
      } else if (block_type == "tool_use" && string_at(block, "id") && string_at(block, "name")) {
        const json::value* input = block.if_contains("input");
        ToolCall call{*string_at(block, "id"), *string_at(block, "name"), input ? *input : json::value(nullptr)};
        // A sub-agent's records carry the id of the Agent call that spawned it; the main
        // agent's carry null.
        call.agent = string_at(r, "parent_tool_use_id");
        sink.call_presented(std::move(call), at);
      } else {
        std::optional<std::string> subtype = block_type && !block_type->empty() ? block_type : std::nullopt;
        sink.event(opaque_of("assistant", subtype, proto::sha256_hex(proto::canonical_json(block_value)), line_no), at);
      }
    }
  }
  // Claude writes one assistant record per content block, each repeating its API message's
  // usage: report it once per message, or a consumer summing usage would count it N times.
  auto message_id = string_at(m, "id");
  bool repeated = message_id && *message_id == last_usage_message_;
  if (const json::value* usage = m.if_contains("usage"); usage && usage->is_object() && !repeated) {
    // As of the request's start (output_tokens is ~1): provisional until the turn's own figures.
    sink.event(proto::ev::Usage{request_id, string_at(m, "model"), map_usage(usage->get_object()), "request"}, at);
    if (message_id) last_usage_message_ = *message_id;
  }
}

void Reader::map_user(const json::object& r, const std::optional<std::string>& at, std::uint64_t line_no,
                      AdapterOutputs& sink) {
  const json::value* message = r.if_contains("message");
  if (!message || !message->is_object()) return;
  bool synthetic = bool_at(r, "isSynthetic").value_or(false);
  std::optional<std::string> origin = synthetic ? "synthetic" : "user";
  // A user record inside a sub-agent's conversation (parent_tool_use_id set) was written by the
  // agent that spawned it (its task prompt), not by whoever drives the run.
  if (const json::value* parent = r.if_contains("parent_tool_use_id"); parent && parent->is_string() && !synthetic)
    origin = "subagent";
  const json::value* content = message->get_object().if_contains("content");
  if (!content) return;
  if (content->is_string()) {
    emit(sink, proto::ev::Injection{std::string(content->get_string()), origin}, at,
         carry("/message/content", "text", "/text"));
    return;
  }
  if (!content->is_array()) return;
  json::value tool_use_result = nullptr;
  if (const json::value* t = r.if_contains("tool_use_result")) tool_use_result = *t;
  std::size_t index = 0;
  for (const auto& block_value : content->get_array()) {
    const std::string at_block = "/message/content/" + std::to_string(index++);
    if (!block_value.is_object()) {
      sink.event(opaque_of("user", std::nullopt, proto::sha256_hex(proto::canonical_json(block_value)), line_no), at);
      continue;
    }
    const auto& block = block_value.get_object();
    auto block_type = string_at(block, "type");
    if (block_type == "tool_result" && string_at(block, "tool_use_id")) {
      proto::ev::ToolResult result;
      result.call_id = *string_at(block, "tool_use_id");
      result.is_error = bool_at(block, "is_error");
      auto cut = carry(at_block + "/content", "content", "/content");
      if (const json::value* c = block.if_contains("content")) {
        result.content = *c;
        result.bytes = c->is_string() ? c->get_string().size() : proto::canonical_json(*c).size();
        // Cut content: a string's whole size is known; other JSON's is not.
        if (!cut.empty())
          result.bytes = c->is_string() ? std::optional<std::uint64_t>(cut.front().bytes) : std::nullopt;
      }
      result.tool_use_result = tool_use_result;
      auto cut_sibling = carry("/tool_use_result", "tool_use_result", "/tool_use_result");
      cut.insert(cut.end(), cut_sibling.begin(), cut_sibling.end());
      emit(sink, std::move(result), at, std::move(cut));
    } else if (block_type == "text" && string_at(block, "text")) {
      emit(sink, proto::ev::Injection{*string_at(block, "text"), origin}, at,
           carry(at_block + "/text", "text", "/text"));
    } else {
      sink.event(opaque_of("user", block_type, proto::sha256_hex(proto::canonical_json(block_value)), line_no), at);
    }
  }
}

void Reader::map_result(const json::object& r, const std::optional<std::string>& at, std::uint64_t line_no,
                        AdapterOutputs& sink) {
  proto::ev::SessionEnded e;
  e.is_error = bool_at(r, "is_error");
  e.subtype = string_at(r, "subtype");
  e.stop_reason = string_at(r, "stop_reason");
  e.terminal_reason = string_at(r, "terminal_reason");
  // Claude writes the HTTP status as a number; the wire field is a string. Its decimal text is
  // still the vendor's own value, not a paraphrase.
  if (const json::value* v = r.if_contains("api_error_status")) {
    if (v->is_string())
      e.api_error_status = std::string(v->get_string());
    else if (v->is_int64() || v->is_uint64())
      e.api_error_status = proto::canonical_json(*v);
  }
  e.num_turns = u64_at(r, "num_turns");
  e.duration_ms = u64_at(r, "duration_ms");
  e.duration_api_ms = u64_at(r, "duration_api_ms");
  e.ttft_ms = u64_at(r, "ttft_ms");
  e.time_to_request_ms = u64_at(r, "time_to_request_ms");
  e.total_cost_usd = f64_at(r, "total_cost_usd");
  if (const json::value* d = r.if_contains("permission_denials"); d && d->is_array()) {
    any_denial_list_ = true;
    for (const auto& item : d->get_array()) {
      if (!item.is_object()) continue;
      const auto& o = item.get_object();
      const json::value* input = o.if_contains("tool_input");
      denials_.push_back(proto::PermissionDenial{string_at(o, "tool_name").value_or(""), string_at(o, "tool_use_id"),
                                                 input ? *input : json::value(nullptr)});
    }
  }
  if (const json::object* s = object_at(r, "subagent_stats")) e.subagents_spawned = u64_at(*s, "spawned");
  if (const json::object* u = object_at(r, "usage")) e.usage = map_usage(*u);
  if (const json::value* mu = r.if_contains("modelUsage"); mu && mu->is_object()) {
    std::map<std::string, proto::TokenUsage> per_model;
    for (const auto& kv : mu->get_object()) {
      if (!kv.value().is_object()) continue;
      const auto& u = kv.value().get_object();
      proto::TokenUsage t = token_counts(u, kModelUsage);
      t.cost_usd = f64_at(u, "costUSD");
      per_model.emplace(std::string(kv.key()), t);
    }
    e.model_usage = std::move(per_model);
  }
  // The turn ended because Claude gave up on an API error: say so before the turn ends. A 401
  // already reported by the synthetic record is not reported again; a 429 is a throttled run,
  // with no reset time (Claude gives none when it gives up).
  if (e.api_error_status == "401") credential_given_up(string_at(r, "result"), line_no, at, sink);
  if (e.api_error_status == "429") {
    proto::RateLimitInfo info;
    info.status = e.api_error_status;
    sink.event(proto::ev::RateLimit{info}, at);
  }
  turn_usage(r, e, at, sink);
  turn_auth_expired_ = false;
  last_result_ = std::move(e);
  sink.turn_ended(string_at(r, "stop_reason"), at);
}

namespace {

// A cumulative figure's growth since the previous result: null where either is unknown, or where
// it shrank (that is no turn's figure: the vendor's count did not simply grow).
std::optional<std::uint64_t> growth(const std::optional<std::uint64_t>& now, const std::optional<std::uint64_t>& before,
                                    bool seen_before) {
  if (!now) return std::nullopt;
  if (!seen_before) return now;
  if (!before || *now < *before) return std::nullopt;
  return *now - *before;
}
std::optional<double> growth(const std::optional<double>& now, const std::optional<double>& before, bool seen_before) {
  if (!now) return std::nullopt;
  if (!seen_before) return now;
  if (!before || *now < *before) return std::nullopt;
  return *now - *before;
}

bool moved(const proto::TokenUsage& d) {
  for (const auto* n : {&d.input_tokens, &d.output_tokens, &d.cache_read_input_tokens, &d.cache_creation_input_tokens})
    if (!*n || **n != 0) return true;  // unknown is not "did not move"
  return !d.cost_usd || *d.cost_usd != 0;
}

}  // namespace

// The turn's own figures, as `usage` events of scope "turn" (before turn.ended). Claude's assistant
// records carry each request's usage as of its start (output_tokens ~1, observed on 2.1.197); its
// result carries the turn's `usage`, but `modelUsage` and `total_cost_usd` summed over the session
// so far. So a turn's per-model figures are the growth of the cumulative ones since the previous
// result, and its cost is the growth of the vendor's own cost: never computed, null where unknown.
void Reader::turn_usage(const json::object& r, const proto::ev::SessionEnded& e, const std::optional<std::string>& at,
                        AdapterOutputs& sink) {
  std::optional<double> turn_cost = growth(e.total_cost_usd, session_cost_, session_cost_.has_value());
  if (e.total_cost_usd && (!session_cost_ || *e.total_cost_usd >= *session_cost_)) session_cost_ = e.total_cost_usd;
  std::vector<proto::ev::Usage> per_model;
  if (e.model_usage) {
    for (const auto& [model, now] : *e.model_usage) {
      auto before = session_models_.find(model);
      bool seen = before != session_models_.end();
      const proto::TokenUsage none;
      const proto::TokenUsage& prev = seen ? before->second : none;
      proto::TokenUsage d;
      d.input_tokens = growth(now.input_tokens, prev.input_tokens, seen);
      d.output_tokens = growth(now.output_tokens, prev.output_tokens, seen);
      d.cache_read_input_tokens = growth(now.cache_read_input_tokens, prev.cache_read_input_tokens, seen);
      d.cache_creation_input_tokens = growth(now.cache_creation_input_tokens, prev.cache_creation_input_tokens, seen);
      d.cost_usd = growth(now.cost_usd, prev.cost_usd, seen);
      session_models_[model] = now;
      if (moved(d)) per_model.push_back(proto::ev::Usage{std::nullopt, model, d, "turn"});
    }
  }
  // One model's cost left unsaid is still the session cost's growth, when no other model moved.
  if (per_model.size() == 1 && !per_model.front().usage.cost_usd) per_model.front().usage.cost_usd = turn_cost;
  if (!per_model.empty()) {
    for (auto& u : per_model)
      sink.event(std::move(u), at);
    return;
  }
  // No model's figures moved (or Claude gave none per model): the turn's own usage, at the
  // session cost's growth.
  if (const json::object* u = object_at(r, "usage")) {
    proto::TokenUsage t = map_usage(*u);
    t.cost_usd = turn_cost;
    sink.event(proto::ev::Usage{std::nullopt, std::nullopt, t, "turn"}, at);
  }
}

std::optional<proto::ev::SessionEnded> Reader::session_ended() const {
  if (!last_result_) return std::nullopt;
  proto::ev::SessionEnded e = *last_result_;
  // Claude reports denials per turn; the session's record carries every turn's list, in order,
  // each entry exactly as the vendor wrote it (never added to, never re-derived).
  if (any_denial_list_) e.permission_denials = denials_;
  return e;
}

}  // namespace mh::adapters::claude
