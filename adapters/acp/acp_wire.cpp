#include "adapters/acp/acp_wire.hpp"

#include <algorithm>

#include "protocol/json.hpp"

namespace mh::adapters::acp {

namespace proto = mh::protocol;

namespace {

std::string line(json::object message) {
  message["jsonrpc"] = "2.0";
  return proto::canonical_json(message);
}

std::string request(OurId id, std::string_view method, json::object params) {
  return line(json::object{{"id", id.value}, {"method", method}, {"params", std::move(params)}});
}

// A string no longer than kMaxIdBytes, or nullopt.
std::optional<std::string> bounded_string(const json::object& o, std::string_view key) {
  auto s = proto::string_at(o, key);
  if (!s || s->empty() || s->size() > kMaxIdBytes) return std::nullopt;
  return s;
}

}  // namespace

std::string AgentId::key() const {
  return proto::canonical_json(value);
}

std::string initialize_request(OurId id, const ClientInfo& info) {
  return request(id, "initialize",
                 json::object{{"protocolVersion", kProtocolVersion},
                              {"clientCapabilities",
                               json::object{{"fs", json::object{{"readTextFile", false}, {"writeTextFile", false}}},
                                            {"terminal", false}}},
                              {"clientInfo", json::object{{"name", info.name}, {"version", info.version}}}});
}

std::string session_new_request(OurId id, std::string_view cwd) {
  return request(id, "session/new", json::object{{"cwd", cwd}, {"mcpServers", json::array{}}});
}

std::string session_prompt_request(OurId id, std::string_view session_id, const std::vector<std::string>& texts) {
  json::array prompt;
  for (const auto& text : texts)
    prompt.emplace_back(json::object{{"type", "text"}, {"text", text}});
  return request(id, "session/prompt", json::object{{"sessionId", session_id}, {"prompt", std::move(prompt)}});
}

std::string session_cancel_notification(std::string_view session_id) {
  return line(json::object{{"method", "session/cancel"}, {"params", json::object{{"sessionId", session_id}}}});
}

std::string permission_selected(const AgentId& id, std::string_view option_id) {
  return line(json::object{
      {"id", id.value},
      {"result", json::object{{"outcome", json::object{{"outcome", "selected"}, {"optionId", option_id}}}}}});
}

std::string permission_cancelled(const AgentId& id) {
  return line(
      json::object{{"id", id.value}, {"result", json::object{{"outcome", json::object{{"outcome", "cancelled"}}}}}});
}

std::string error_answer(const AgentId& id, int code, std::string_view message) {
  return line(json::object{{"id", id.value}, {"error", json::object{{"code", code}, {"message", message}}}});
}

AgentMessage classify(const json::object& m) {
  const json::value* id = m.if_contains("id");
  const json::value* method_value = m.if_contains("method");
  std::optional<std::string> method;
  if (method_value) {
    if (!method_value->is_string() || method_value->as_string().empty() ||
        method_value->as_string().size() > kMaxIdBytes)
      return Unreadable{"a method that is not a short non-empty string", std::nullopt};
    method = std::string(method_value->as_string());
  }
  if (auto v = proto::string_at(m, "jsonrpc"); m.contains("jsonrpc") && v != "2.0")
    return Unreadable{"jsonrpc is not \"2.0\"", method};
  static const json::object kEmpty;
  const json::value* params = m.if_contains("params");
  if (params && !params->is_object() && !params->is_null()) return Unreadable{"params that are not an object", method};
  const json::object& p = params && params->is_object() ? params->get_object() : kEmpty;

  if (method && id) {
    bool id_ok = (id->is_string() && id->as_string().size() <= kMaxIdBytes) || id->is_int64() || id->is_uint64();
    if (!id_ok) return Unreadable{"a request id that is neither a short string nor an integer", method};
    return AgentRequest{AgentId{*id}, *method, p};
  }
  if (method) return Notification{*method, p};
  if (!id) return Unreadable{"neither a method nor an id", std::nullopt};
  const json::value* result = m.if_contains("result");
  const json::value* error = m.if_contains("error");
  if ((result != nullptr) == (error != nullptr))
    return Unreadable{"an answer with not exactly one of result and error", {}};
  std::optional<std::uint64_t> ours;
  if (id->is_uint64()) ours = id->as_uint64();
  if (id->is_int64() && id->as_int64() >= 0) ours = static_cast<std::uint64_t>(id->as_int64());
  if (!ours) return Unreadable{"an answer whose id is not one of ours (a non-negative integer)", std::nullopt};
  Answer a{OurId{*ours}, std::nullopt, {}, std::nullopt};
  if (result) {
    a.result = *result;
  } else if (error->is_object()) {
    a.error_message = proto::string_at(error->get_object(), "message").value_or("");
    // The JSON-RPC error's data says what went wrong where the message is generic (Qwen Code 0.24.4:
    // "Internal error", the endpoint's own answer in data.details).
    auto is_http_error = [](std::int64_t status) { return status >= 400 && status <= 599; };
    if (const json::object* data = proto::object_at(error->get_object(), "data"))
      if (auto details = proto::string_at(*data, "details"); details && !details->empty()) {
        a.error_message += ": " + proto::excerpt(*details, 2000);
        if (details->size() > 4 && (*details)[3] == ' ' &&
            std::all_of(details->begin(), details->begin() + 3, [](char c) { return c >= '0' && c <= '9'; }))
          if (int status = std::stoi(details->substr(0, 3)); is_http_error(status)) a.http_status = status;
      }
    if (const json::value* code = error->get_object().if_contains("code"); code && code->is_int64()) {
      a.error_code = code->as_int64();
      if (is_http_error(*a.error_code)) a.http_status = static_cast<int>(*a.error_code);
    }
  } else {
    a.error_message = "(an error that is not an object)";
  }
  return a;
}

std::optional<std::string> PermissionRequest::option_of_kind(std::string_view wanted) const {
  for (const auto& o : options)
    if (o.kind == wanted) return o.option_id;
  return std::nullopt;
}

std::variant<PermissionRequest, std::string> read_permission_request(const json::object& params) {
  PermissionRequest r;
  auto session = bounded_string(params, "sessionId");
  if (!session) return std::string("no sessionId (a short string)");
  r.session_id = *session;
  const json::object* call = proto::object_at(params, "toolCall");
  if (!call) return std::string("no toolCall object");
  auto call_id = bounded_string(*call, "toolCallId");
  if (!call_id) return std::string("no toolCall.toolCallId (a short string)");
  r.tool_call_id = *call_id;
  r.title = proto::string_at(*call, "title");
  r.kind = proto::string_at(*call, "kind");
  if (const json::value* raw = call->if_contains("rawInput")) r.raw_input = *raw;
  const json::array* options = proto::array_at(params, "options");
  if (!options) return std::string("no options array");
  for (const auto& o : *options) {
    if (!o.is_object()) return std::string("an option that is not an object");
    auto id = bounded_string(o.get_object(), "optionId");
    auto kind = bounded_string(o.get_object(), "kind");
    if (!id || !kind) return std::string("an option without a short optionId and kind");
    r.options.push_back({*id, *kind});
  }
  return r;
}

}  // namespace mh::adapters::acp
