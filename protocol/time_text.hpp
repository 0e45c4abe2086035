// Timestamps as the wire writes them: RFC 3339, UTC, millisecond precision
// ("2026-12-01T09:13:31.042Z"). Pure formatting: the caller supplies the instant, so the
// protocol layer still reads no clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mh::protocol {

// Milliseconds since the Unix epoch -> RFC 3339; nullopt before 1970 or after 9999-12-31.
std::optional<std::string> rfc3339_millis(std::int64_t unix_ms);

}  // namespace mh::protocol
