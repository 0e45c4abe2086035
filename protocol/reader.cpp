#include "protocol/reader.hpp"

#include <boost/throw_exception.hpp>
#include <stdexcept>

namespace mh::protocol {

namespace {

LineRefusal refuse(LineRefusalKind kind, std::string message, std::optional<std::string> id = std::nullopt) {
  return LineRefusal{kind, std::move(message), std::move(id)};
}

// Rules 1 and 2, shared by both directions: a JSON object carrying the expected format tag.
// On success returns the object; on refusal fills `refusal`.
std::optional<json::value> read_tagged_object(std::string_view line, std::string_view expected_format,
                                              std::optional<LineRefusal>& refusal) {
  std::string parse_error;
  auto value = parse_json(line, &parse_error);
  if (!value) {
    refusal =
        refuse(LineRefusalKind::NotAnObject, "not a JSON object: " + parse_error + " in \"" + excerpt(line, 60) + "\"");
    return std::nullopt;
  }
  if (!value->is_object()) {
    refusal = refuse(LineRefusalKind::NotAnObject, "not a JSON object: read " + describe_json(*value));
    return std::nullopt;
  }
  const json::object& o = value->get_object();
  std::optional<std::string> id;
  if (const json::value* idv = o.if_contains("id"); idv && idv->is_string()) id = std::string(idv->get_string());
  const json::value* format = o.if_contains("format");
  if (!format) {
    refusal =
        refuse(LineRefusalKind::UnknownFormat, "no format tag, expected \"" + std::string(expected_format) + "\"", id);
    return std::nullopt;
  }
  if (!format->is_string() || format->get_string() != expected_format) {
    refusal = refuse(
        LineRefusalKind::UnknownFormat,
        "unknown format tag " + describe_json(*format) + ", expected \"" + std::string(expected_format) + "\"", id);
    return std::nullopt;
  }
  return value;
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

std::optional<CommandPayload> read_command_payload(CommandName name, FieldReader& f) {
  switch (name) {
    case CommandName::tool_decide: {
      cmd::ToolDecide c;
      c.call_id = f.req_string("call_id");
      if (!f.ok()) return std::nullopt;
      const json::value* d = f.object().if_contains("decision");
      if (!d) {
        f.fail("missing required field \"decision\"");
        return std::nullopt;
      }
      std::string error;
      auto decision = read_decision(*d, error);
      if (!decision) {
        f.fail(error);
        return std::nullopt;
      }
      c.decision = std::move(*decision);
      return c;
    }
    case CommandName::frame_set: {
      const json::value* fv = f.object().if_contains("frame");
      if (!fv) {
        f.fail("missing required field \"frame\"");
        return std::nullopt;
      }
      auto frame = frame_from_json(*fv, /*require_sealed=*/true);
      if (!frame) {
        f.fail("the frame is refused (" + std::string(to_string(frame.error().kind)) + "): " + frame.error().message);
        return std::nullopt;
      }
      std::optional<StepOutcome> step_outcome;
      if (const json::value* so = f.object().if_contains("step_outcome"); so && !so->is_null()) {
        std::string error;
        step_outcome = read_step_outcome(*so, error);
        if (!step_outcome) {
          f.fail("step_outcome: " + error);
          return std::nullopt;
        }
      }
      return cmd::FrameSet{std::move(*frame), std::move(step_outcome)};
    }
    case CommandName::message_inject: {
      std::string text = f.req_string("text");
      if (!f.ok()) return std::nullopt;
      return cmd::MessageInject{std::move(text)};
    }
    case CommandName::steer: {
      std::string text = f.req_string("text");
      if (!f.ok()) return std::nullopt;
      return cmd::Steer{std::move(text)};
    }
    case CommandName::permission_set: {
      std::string posture = f.req_string("posture");
      if (!f.ok()) return std::nullopt;
      if (posture.empty()) {
        f.fail("field \"posture\" is empty");
        return std::nullopt;
      }
      return cmd::PermissionSet{std::move(posture)};
    }
    case CommandName::interrupt: {
      auto reason = f.opt_string("reason");
      if (!f.ok()) return std::nullopt;
      return cmd::Interrupt{std::move(reason)};
    }
    case CommandName::halt: {
      auto reason = f.opt_string("reason");
      if (!f.ok()) return std::nullopt;
      return cmd::Halt{std::move(reason)};
    }
  }
  return std::nullopt;
}

}  // namespace

boost::system::result<Event, LineRefusal> read_event_line(std::string_view line) {
  std::optional<LineRefusal> refusal;
  auto value = read_tagged_object(line, kEventFormat, refusal);
  if (!value) return *refusal;
  const json::object& o = value->get_object();
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
  std::optional<LineRefusal> refusal;
  auto value = read_tagged_object(line, kCommandFormat, refusal);
  if (!value) return *refusal;
  const json::object& o = value->get_object();
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
  auto payload = read_command_payload(*command_name, payload_reader);
  if (!payload) return refuse(LineRefusalKind::Malformed, "malformed " + name + ": " + payload_reader.error(), id);
  return Command{std::move(*id), std::move(*payload)};
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
  std::visit(
      [&](const auto& c) {
        using T = std::decay_t<decltype(c)>;
        if constexpr (std::is_same_v<T, cmd::ToolDecide>) {
          w.field("call_id", c.call_id);
          w.key("decision");
          write_decision(w, c.decision);
        } else if constexpr (std::is_same_v<T, cmd::FrameSet>) {
          w.field_json("frame", frame_to_json(c.frame, true));
          if (c.step_outcome) {
            w.key("step_outcome");
            write(w, *c.step_outcome);
          }
        } else if constexpr (std::is_same_v<T, cmd::MessageInject> || std::is_same_v<T, cmd::Steer>) {
          w.field("text", c.text);
        } else if constexpr (std::is_same_v<T, cmd::PermissionSet>) {
          w.field("posture", c.posture);
        } else {
          w.field("reason", c.reason);
        }
      },
      command.payload);
  w.end_object();
  return out;
}

}  // namespace mh::protocol
