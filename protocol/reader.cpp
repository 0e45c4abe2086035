#include "protocol/reader.hpp"

#include <boost/throw_exception.hpp>
#include <stdexcept>

#include "protocol/wire_codec.hpp"

namespace mh::protocol {

namespace {

LineRefusal refuse(LineRefusalKind kind, std::string message, std::optional<std::string> id = std::nullopt) {
  return LineRefusal{kind, std::move(message), std::move(id)};
}

// Rules 1 and 2, shared by both directions: a JSON object carrying the expected format tag.
// Returns the object, or the refusal (with the line's id where it has a string one).
boost::system::result<json::object, LineRefusal> read_tagged_object(std::string_view line,
                                                                    std::string_view expected_format) {
  std::string parse_error;
  auto value = parse_json(line, &parse_error);
  if (!value)
    return refuse(LineRefusalKind::NotAnObject,
                  "not a JSON object: " + parse_error + " in \"" + excerpt(line, 60) + "\"");
  if (!value->is_object())
    return refuse(LineRefusalKind::NotAnObject, "not a JSON object: read " + describe_json(*value));
  json::object& o = value->get_object();
  std::optional<std::string> id;
  if (const json::value* idv = o.if_contains("id"); idv && idv->is_string()) id = std::string(idv->get_string());
  const json::value* format = o.if_contains("format");
  if (!format)
    return refuse(LineRefusalKind::UnknownFormat, "no format tag, expected \"" + std::string(expected_format) + "\"",
                  id);
  if (!format->is_string() || format->get_string() != expected_format)
    return refuse(
        LineRefusalKind::UnknownFormat,
        "unknown format tag " + describe_json(*format) + ", expected \"" + std::string(expected_format) + "\"", id);
  return std::move(o);
}

// ---------------------------------------------------------------------------------------------
// Command payloads
// ---------------------------------------------------------------------------------------------

std::string command_vocabulary() {
  std::string out;
  const auto& names = EnumNames<CommandName>::names;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ", ";
    out += names[i];
  }
  return out;
}

}  // namespace

boost::system::result<Event, LineRefusal> read_event_line(std::string_view line) {
  auto tagged = read_tagged_object(line, kEventFormat);
  if (!tagged) return tagged.error();
  const json::object& o = *tagged;
  FieldReader f(o, "envelope");
  Event event;
  std::string name = f.req_string("event");
  event.seq = f.req_u64("seq");
  event.run = f.req_string("run");
  event.at = f.opt_string("at");
  event.recorded_at = f.opt_string("recorded_at");
  if (!f.ok()) return refuse(LineRefusalKind::Malformed, "malformed event line: " + f.error());
  if (event.seq == 0) return refuse(LineRefusalKind::Malformed, "malformed event line: seq counts from 1");
  if (std::string cut_error; !read_cut_fields(o, event.cut, cut_error))
    return refuse(LineRefusalKind::Malformed, "malformed event line: " + cut_error);
  auto payload = read_event_payload(name, o);
  if (!payload) return payload.error();
  event.payload = std::move(*payload);
  return event;
}

boost::system::result<Command, LineRefusal> read_command_line(std::string_view line) {
  auto tagged = read_tagged_object(line, kCommandFormat);
  if (!tagged) return tagged.error();
  const json::object& o = *tagged;
  FieldReader f(o, "");
  std::optional<std::string> id;
  if (const json::value* idv = o.if_contains("id"); idv && idv->is_string()) id = std::string(idv->get_string());
  std::string name = f.req_string("command");
  if (!f.ok()) return refuse(LineRefusalKind::Malformed, "malformed command: " + f.error(), id);
  auto command_name = parse_enum<CommandName>(name);
  if (!command_name)
    return refuse(LineRefusalKind::UnknownName,
                  "unknown command \"" + excerpt(name, 60) + "\"; the vocabulary is " + command_vocabulary(), id);
  if (!id) {
    f.req_string("id");  // produces the precise complaint (missing, or wrong type)
    return refuse(LineRefusalKind::Malformed, "malformed " + name + ": " + f.error(), std::nullopt);
  }
  FieldReader payload_reader(o, "");
  CommandPayload payload = wire::kReaders<CommandPayload>[static_cast<std::size_t>(*command_name)](payload_reader);
  if (!payload_reader.ok())
    return refuse(LineRefusalKind::Malformed, "malformed " + name + ": " + payload_reader.error(), id);
  return Command{std::move(*id), std::move(payload)};
}

LineRefusal too_long_refusal(const FramedLine& line, std::size_t bound) {
  return refuse(LineRefusalKind::TooLong, "line " + std::to_string(line.number) + " is " + std::to_string(line.length) +
                                              " bytes, over the " + std::to_string(bound) +
                                              "-byte bound; it was discarded unread (it began \"" +
                                              excerpt(line.head, 60) + "\")");
}

CommandOutcome outcome_for(const LineRefusal& refusal) {
  return CommandOutcome::refused(RefusalCode::MALFORMED, std::string(to_string(refusal.kind)) + ": " + refusal.message);
}

void throw_exception_from_error(const LineRefusal& e, const boost::source_location& loc) {
  boost::throw_exception(std::runtime_error(e.message), loc);
}

// ---------------------------------------------------------------------------------------------
// Command serialization
// ---------------------------------------------------------------------------------------------

std::string serialize(const Command& command) {
  std::string out;
  JsonWriter w(out);
  w.begin_object();
  w.field("format", kCommandFormat);
  w.field("id", command.id);
  w.field("command", to_string(command_name(command.payload)));
  wire::write_alternative(w, command.payload);
  w.end_object();
  return out;
}

}  // namespace mh::protocol
