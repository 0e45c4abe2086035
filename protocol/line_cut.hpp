// One bound for every event line a writer produces (issue 9, item 2). A vendor can hand us content
// of any size (Codex caps a command's output near 1 MiB, and the tool.result carrying it is then a
// longer line still); a reader must never meet a line it refuses for its length. So the writer
// serializes each event within a bound: content that would cross it is cut at a UTF-8 character
// boundary, and the line says what was cut (Event::cut: where, the whole's size and SHA-256). The
// whole content stays in the retained vendor transcript. Every reader accepts lines up to
// kMaxEventLineBytes, the largest bound a writer can be configured with.
#pragma once

#include <cstddef>
#include <string>

#include "protocol/events.hpp"

namespace mh::protocol {

inline constexpr std::size_t kDefaultMaxEventLineBytes = 1u << 20;  // 1 MiB
// The configurable range. The floor leaves room for everything that is never cut (ids, names,
// subjects, the cut records themselves); the ceiling is what every reader accepts.
inline constexpr std::size_t kMinEventLineBytes = 64u << 10;  // 64 KiB
inline constexpr std::size_t kMaxEventLineBytes = 16u << 20;  // 16 MiB

// What may be cut, per event: text, thinking and injection `text`; tool.requested `input`;
// tool.result `content` and `tool_use_result`; session.ended `final_answer.text` and each
// `permission_denials[].tool_input`; warning `message`. Within a JSON value the longest strings
// are cut first (form "text"); a value made of too many small pieces is replaced by the cut text
// of its canonical JSON (form "json"). Nothing else is ever changed: ids, names, `bytes`
// (tool.result keeps the whole output's size), subjects, the envelope.
//
// Appends `event` as one line (no '\n') of at most `max_line_bytes` bytes to `out`, cutting
// `event`'s content as needed (event.cut then lists every cut). If even the bare event cannot
// fit (what is never cut is itself over the bound), a `warning` EVENT_TOO_LONG with the same seq
// takes its place, naming the event, its size and the digest of its whole line: the stream keeps
// its sequence and says so, rather than hold a line no reader would take.
// Returns the number of bytes appended.
std::size_t serialize_within(std::string& out, Event& event, std::size_t max_line_bytes = kDefaultMaxEventLineBytes);

// One JSON Pointer reference token for `key` (RFC 6901: '~' and '/' escaped), as a cut field's
// path names it.
std::string pointer_token(std::string_view key);

}  // namespace mh::protocol
