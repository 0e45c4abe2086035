// What each wire is: its name, where its key goes, its model routes and its error shape.
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "daemon/gateway/gateway.hpp"
#include "daemon/gateway/wire_error.hpp"

namespace mh::gateway {

std::optional<Wire> wire_from_name(std::string_view name) {
  if (name == "anthropic") return Wire::anthropic;
  if (name == "openai-responses") return Wire::openai_responses;
  if (name == "gemini") return Wire::gemini;
  return std::nullopt;
}

std::string_view wire_name(Wire wire) {
  switch (wire) {
    case Wire::anthropic:
      return "anthropic";
    case Wire::openai_responses:
      return "openai-responses";
    case Wire::gemini:
      return "gemini";
  }
  return "unknown";
}

std::string_view default_key_header(Wire wire) {
  switch (wire) {
    case Wire::anthropic:
      return "x-api-key";
    case Wire::openai_responses:
      return "authorization";
    case Wire::gemini:
      return "x-goog-api-key";
  }
  return "authorization";
}

std::optional<GeminiRoute> gemini_route(std::string_view path) {
  // /v1beta/models/MODEL:METHOD (the Gemini CLI) or /v1/models/MODEL:METHOD. The model is one
  // path segment of plain characters: no '/', no '.'-segments, nothing to re-route upstream.
  std::string_view rest;
  if (path.starts_with("/v1beta/models/"))
    rest = path.substr(15);
  else if (path.starts_with("/v1/models/"))
    rest = path.substr(11);
  else
    return std::nullopt;
  const std::size_t colon = rest.find(':');
  if (colon == std::string_view::npos || colon == 0) return std::nullopt;
  const std::string_view model = rest.substr(0, colon);
  const std::string_view method = rest.substr(colon + 1);
  static constexpr std::string_view model_chars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.";
  if (model.find_first_not_of(model_chars) != std::string_view::npos || model.find("..") != std::string_view::npos)
    return std::nullopt;
  if (method != "generateContent" && method != "streamGenerateContent" && method != "countTokens") return std::nullopt;
  return GeminiRoute{std::string(model), std::string(method)};
}

bool route_allowed(Wire wire, std::string_view method, std::string_view path) {
  // Exact paths only: a prefix match would let /v1/messages/batches (batch jobs, spent outside
  // the meter) through.
  if (method != "POST") return false;
  switch (wire) {
    case Wire::anthropic:
      return path == "/v1/messages" || path == "/v1/messages/count_tokens";
    case Wire::openai_responses:
      // Codex is given base_url …/v1 and posts /v1/responses; a client given the bare origin
      // as its base posts /responses.
      return path == "/v1/responses" || path == "/responses";
    case Wire::gemini:
      // The model calls only: not the model list, files, caches, tuning or batches.
      return gemini_route(path).has_value();
  }
  return false;
}

std::string_view gemini_status_name(unsigned status) {
  switch (status) {
    case 401:
      return "UNAUTHENTICATED";
    case 403:
      return "PERMISSION_DENIED";
    case 404:
      return "NOT_FOUND";
    case 429:
      return "RESOURCE_EXHAUSTED";
    case 502:
    case 503:
      return "UNAVAILABLE";
    default:
      return status >= 500 ? "INTERNAL" : "INVALID_ARGUMENT";
  }
}

std::string wire_error_body(Wire wire, std::string_view type, std::string_view message, std::string_view code,
                            unsigned status) {
  namespace json = boost::json;
  if (wire == Wire::gemini) {
    // google.rpc.Status as the Gemini API sends it; the gateway's own reason (route_not_allowed,
    // budget_exceeded, ...) in details, as the API's ErrorInfo carries its reason.
    json::object error{{"code", status}, {"message", message}, {"status", gemini_status_name(status)}};
    if (!code.empty())
      error["details"] = json::array{json::object{
          {"@type", "type.googleapis.com/google.rpc.ErrorInfo"}, {"reason", code}, {"domain", "metaharness"}}};
    return json::serialize(json::object{{"error", std::move(error)}});
  }
  if (wire == Wire::anthropic)
    return json::serialize(
        json::object{{"type", "error"}, {"error", json::object{{"type", type}, {"message", message}}}});
  json::object error{{"message", message}, {"type", type}, {"param", nullptr}};
  if (code.empty())
    error["code"] = nullptr;
  else
    error["code"] = code;
  return json::serialize(json::object{{"error", std::move(error)}});
}

}  // namespace mh::gateway
