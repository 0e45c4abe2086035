// A Redactor for a byte stream written as it comes (a vendor's stdout and stderr, issue 25 section
// 4): a secret may be split across two reads, so bytes are held back until no secret can still
// be completing in them — up to the last newline (the vendors write whole JSON lines), and, for a
// line longer than `hold_bound`, all but its last `longest needle - 1` bytes. Every byte fed comes
// out, redacted, exactly once; finish() gives what is still held when the stream ends.
//
// With an empty Redactor nothing is held: feed() returns the chunk itself, so a run with no
// secret writes its transcript byte for byte, as before.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "daemon/stream/redactor.hpp"

namespace mh::daemon {

class StreamRedactor {
 public:
  explicit StreamRedactor(std::size_t hold_bound = 1u << 20) : hold_bound_(hold_bound) {}

  // What may be written now, redacted with `redactor` (valid until the next call). The redactor
  // may change between calls (a rotated key): each call uses the one it is given.
  std::string_view feed(std::string_view chunk, const Redactor& redactor);
  // The rest, redacted: the stream ended.
  std::string_view finish(const Redactor& redactor);

  std::size_t held() const { return pending_.size(); }

 private:
  std::size_t hold_bound_;
  std::string pending_;  // fed, not yet given out
  std::string out_;      // the last answer
};

}  // namespace mh::daemon
