// No secret in the record (issue 25 section 4): the values a run must never write — its
// upstream's credential, the spec's secret vendor_env values, its placeholder token — replaced by
// `[redacted:NAME]` in every line before it is written. EventLog runs each line of events.jsonl
// through one (the single door every event passes: exports, the viewer and fleet replicas read
// that file), and the run's own log lines can go through the same.
//
// A value is looked for as it appears in a serialized JSON line: JSON-escaped (protocol's
// JsonWriter, so a value holding '"' or '\' is found as written), and escaped twice (a vendor's
// JSON line carried as a string inside an event, e.g. an opaque's text or a tool's output). A
// value shorter than kMinRedactedBytes is not redacted: replacing every "abc" in the record would
// make it unreadable and protect nothing a guesser could not find (docs/hermetic.md).
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace mh::daemon {

inline constexpr std::size_t kMinRedactedBytes = 8;

class Redactor {
 public:
  Redactor() = default;
  // (NAME, value) pairs; values shorter than kMinRedactedBytes, and empty names, are ignored (a
  // nameless secret is named "secret"). NAME is written as characters [A-Za-z0-9_.-] only, so the
  // marker needs no escaping wherever it lands.
  explicit Redactor(const std::vector<std::pair<std::string, std::string>>& secrets);

  bool empty() const { return patterns_.empty(); }
  // The longest text replaced (0 when empty): how much of a stream a secret can still be
  // completing in (StreamRedactor).
  std::size_t longest() const { return patterns_.empty() ? 0 : patterns_.front().needle.size(); }
  // Replaces every occurrence in `text` from `from` on; the number replaced.
  std::size_t redact(std::string& text, std::size_t from = 0) const;

 private:
  struct Pattern {
    std::string needle;
    std::string marker;
  };
  std::vector<Pattern> patterns_;  // longest first: a secret that holds another is replaced whole
};

}  // namespace mh::daemon
