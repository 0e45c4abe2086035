// Shared by the fuzz targets: a failed invariant prints what broke, with the bytes involved,
// and aborts so libFuzzer records the input.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "protocol/events.hpp"
#include "protocol/reader.hpp"

namespace mh::fuzz {

[[noreturn]] inline void invariant_failed(std::string_view what, std::string_view detail_a = {},
                                          std::string_view detail_b = {}) {
  std::fprintf(stderr, "INVARIANT BROKEN: %.*s\n  a: %.*s\n  b: %.*s\n", static_cast<int>(what.size()), what.data(),
               static_cast<int>(detail_a.size()), detail_a.data(), static_cast<int>(detail_b.size()), detail_b.data());
  std::abort();
}

inline std::string_view as_text(const std::uint8_t* data, std::size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A refusal's words go back on the wire (a warning, a command.result reason), so they must be
// text a reader accepts and gets back unchanged.
inline void expect_wire_safe(std::string_view message) {
  protocol::Event e{1, "fuzz", std::nullopt, protocol::ev::Warning{"REFUSED", std::string(message)}};
  std::string line = protocol::serialize(e);
  auto back = protocol::read_event_line(line);
  if (!back) invariant_failed("a refusal message is not writable on the wire", line, back.error().message);
  if (std::get<protocol::ev::Warning>(back->payload).message != message)
    invariant_failed("a refusal message does not survive the wire", message,
                     std::get<protocol::ev::Warning>(back->payload).message);
}

}  // namespace mh::fuzz
