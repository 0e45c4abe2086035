#include "protocol/time_text.hpp"

#include <cstdio>
#include <ctime>

namespace mh::protocol {

std::optional<std::string> rfc3339_millis(std::int64_t unix_ms) {
  if (unix_ms < 0 || unix_ms > 253402300799999) return std::nullopt;  // not a year RFC 3339 can write
  std::time_t secs = static_cast<std::time_t>(unix_ms / 1000);
  std::tm utc{};
  gmtime_r(&secs, &utc);
  char buf[96];  // sized for any int fields, so the format can never truncate
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1, utc.tm_mday,
                utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(unix_ms % 1000));
  return std::string(buf);
}

}  // namespace mh::protocol
