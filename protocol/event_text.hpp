// One readable line per event, for `metaharness tail` on a terminal and the viewer page: time, seq, event, and the
// gist (tool name and input summary, decision and who decided, text excerpts).
#pragma once

#include <string>
#include <string_view>

namespace mh::protocol {

// `line` is one metaharness.event/1 line; anything else is printed as it is.
std::string human_line(std::string_view line);

}  // namespace mh::protocol
