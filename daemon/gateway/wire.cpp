// What each wire is: its name, where its key goes, its model routes and its error shape.
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include "daemon/gateway/gateway.hpp"
#include "daemon/gateway/wire_error.hpp"

namespace mh::gateway {

std::optional<Wire> wire_from_name(std::string_view name) {
  if (name == "anthropic") return Wire::anthropic;
  if (name == "openai-responses") return Wire::openai_responses;
  return std::nullopt;
}

std::string_view wire_name(Wire wire) {
  return wire == Wire::anthropic ? "anthropic" : "openai-responses";
}

std::string_view default_key_header(Wire wire) {
  return wire == Wire::anthropic ? "x-api-key" : "authorization";
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
  }
  return false;
}

std::string wire_error_body(Wire wire, std::string_view type, std::string_view message, std::string_view code) {
  namespace json = boost::json;
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
