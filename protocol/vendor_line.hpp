// The first reading of a vendor's stdout line, before any adapter gives it meaning. Every adapter
// reads its vendor's lines the same way up to here, so the rule is written once: a line that is
// too long or is not a JSON object is `opaque` (with the digest of the whole line and its line
// number), a blank line counts as a line and says nothing, and any other line is a JSON object
// for the adapter to read. No vendor line is ever dropped on the way.
#pragma once

#include <boost/json/object.hpp>
#include <variant>

#include "protocol/events.hpp"
#include "protocol/line_framer.hpp"

namespace mh::protocol {

struct BlankLine {};

// Blank, unreadable (the opaque event to emit for it, vendor type and subtype unknown), or the
// record. An oversized line's digest is the framer's (LineFramer with digest_oversized).
using ClassifiedLine = std::variant<BlankLine, ev::Opaque, json::object>;

ClassifiedLine classify_vendor_line(const FramedLine& line);

}  // namespace mh::protocol
