// Reader rules for both directions of the wire. A line is refused by name, saying what was
// read: not a JSON object, a missing or unknown format tag, an unknown event or command name,
// a known name with a payload that does not fit (Malformed), or a line over the length bound.
// Unknown fields on a known name are ignored.
#pragma once

#include <boost/system/result.hpp>

#include "protocol/commands.hpp"
#include "protocol/events.hpp"
#include "protocol/line_framer.hpp"

namespace mh::protocol {

MH_NAMED_ENUM(LineRefusalKind, TooLong, NotAnObject, UnknownFormat, UnknownName, Malformed);

struct LineRefusal {
  LineRefusalKind kind;
  std::string message;
  // Commands: the `id` read from the line when one was readable, so the refusal can be
  // answered under it (the wire answers under "-" otherwise).
  std::optional<std::string> id;
};

boost::system::result<Event, LineRefusal> read_event_line(std::string_view line);
boost::system::result<Command, LineRefusal> read_command_line(std::string_view line);

// Payload-only parsing for callers that already hold a parsed object and know the name.
boost::system::result<EventPayload, LineRefusal> read_event_payload(std::string_view name, const json::object& object);

// The refusal for a line the framer reported as too long.
LineRefusal too_long_refusal(const FramedLine& line, std::size_t bound);

// The command.result outcome answering a command line that could not be read: MALFORMED,
// with the refusal's own words.
CommandOutcome outcome_for(const LineRefusal& refusal);

[[noreturn]] void throw_exception_from_error(const LineRefusal& e, const boost::source_location& loc);

}  // namespace mh::protocol
