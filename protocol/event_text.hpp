// One readable line per event, for `metaharness tail` on a terminal and the viewer page: time, seq, event, and the
// gist (tool name and input summary, decision and who decided, text excerpts).
#pragma once

#include <string>
#include <string_view>

namespace mh::protocol {

// `line` is one metaharness.event/1 line; anything else is printed as it is. Either way, control
// characters a terminal would act on are shown as text (\xNN, \uNNNN), never passed through.
std::string human_line(std::string_view line);

// `text` with every control character a terminal would act on (C0, DEL, C1) shown as text
// (\xNN, \uNNNN): for whatever of a run's or a vendor's words is printed to a terminal.
std::string printable(std::string_view text);

}  // namespace mh::protocol
