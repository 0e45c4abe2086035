#include "daemon/server/socket_api.hpp"

#include "daemon/server/requests.hpp"

namespace mh::daemon {

namespace {
void write_fields(protocol::JsonWriter& w, const json::object& fields) {
  // Insertion order: a reply's fields read in the order the API documents them.
  for (const auto& kv : fields) {
    w.key(kv.key());
    w.value(kv.value());
  }
}
}  // namespace

std::string request_vocabulary() {
  std::string out;
  for (const auto& r : request_table())
    out += (out.empty() ? "" : ", ") + std::string(r.name);
  return out;
}

LineKind classify_line(std::string_view line) {
  // A cheap look for the tag: the full read happens in the handler for that kind.
  auto v = protocol::parse_json(line);
  if (!v || !v->is_object()) return LineKind::other;
  const json::value* f = v->get_object().if_contains("format");
  if (!f || !f->is_string()) return LineKind::other;
  if (f->get_string() == kSocketFormat) return LineKind::request;
  if (f->get_string() == "metaharness.command/1") return LineKind::command;
  return LineKind::other;
}

boost::system::result<SocketRequest, SocketRefusal> read_request(std::string_view line) {
  using Result = boost::system::result<SocketRequest, SocketRefusal>;
  auto refuse = [](std::string code, std::string reason, std::optional<std::string> id = std::nullopt) {
    return Result(boost::system::in_place_error, SocketRefusal{std::move(code), std::move(reason), std::move(id)});
  };
  std::string error;
  auto v = protocol::parse_json(line, &error);
  if (!v) return refuse("NOT_JSON", "not a JSON object: " + error + " in \"" + protocol::excerpt(line, 60) + "\"");
  if (!v->is_object()) return refuse("NOT_JSON", "not a JSON object: read " + protocol::describe_json(*v));
  json::object& o = v->get_object();
  std::optional<std::string> id;
  if (const json::value* idv = o.if_contains("id"); idv && idv->is_string()) id = std::string(idv->get_string());
  const json::value* format = o.if_contains("format");
  if (!format) return refuse("UNKNOWN_FORMAT", "no format tag, expected \"" + std::string(kSocketFormat) + "\"", id);
  if (!format->is_string() || format->get_string() != kSocketFormat)
    return refuse(
        "UNKNOWN_FORMAT",
        "unknown format tag " + protocol::describe_json(*format) + ", expected \"" + std::string(kSocketFormat) + "\"",
        id);
  const json::value* name = o.if_contains("request");
  if (!name || !name->is_string())
    return refuse("MALFORMED", "no \"request\" name; the vocabulary is " + request_vocabulary(), id);
  std::string n(name->get_string());
  if (!find_request(n))
    return refuse("UNKNOWN_REQUEST",
                  "unknown request \"" + protocol::excerpt(n, 40) + "\"; the vocabulary is " + request_vocabulary(),
                  id);
  return SocketRequest{std::move(n), std::move(id), std::move(o)};
}

namespace {

// One metaharness.socket/1 line: the format, `kind` ("reply" or "request") naming it, the id
// (written null when absent only where `null_id`), then the fields.
std::string socket_line(std::string_view kind, std::string_view name, const std::optional<std::string>& id,
                        bool null_id, const json::object& fields) {
  std::string out;
  protocol::JsonWriter w(out);
  w.begin_object();
  w.field("format", kSocketFormat);
  w.field(kind, name);
  if (id || null_id) w.field("id", id);
  write_fields(w, fields);
  w.end_object();
  return out;
}

}  // namespace

std::string reply_line(std::string_view reply, const std::optional<std::string>& id, const json::object& fields) {
  return socket_line("reply", reply, id, /*null_id=*/true, fields);
}

std::string refusal_line(std::string_view code, std::string reason, const std::optional<std::string>& id) {
  json::object fields;
  fields["code"] = code;
  fields["reason"] = std::move(reason);
  return reply_line("refused", id, fields);
}

std::string refusal_line(const SocketRefusal& r) {
  return refusal_line(r.code, r.reason, r.id);
}

std::string request_line(std::string_view request, const std::optional<std::string>& id, const json::object& fields) {
  return socket_line("request", request, id, /*null_id=*/false, fields);
}

}  // namespace mh::daemon
