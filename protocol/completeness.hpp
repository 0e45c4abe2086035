// Stream completeness, reader side (reference §4.4), plus line-by-line well-formedness.
// Without a final `stream.closed` a stream that never called Bash and one cut off before it
// could are the same bytes, so "no marker" is never complete.
#pragma once

#include "protocol/line_cut.hpp"
#include "protocol/line_framer.hpp"
#include "protocol/types.hpp"

namespace mh::protocol {

MH_NAMED_ENUM(Completeness, Complete, Truncated, Inconsistent);

struct StreamVerdict {
  Completeness kind = Completeness::Truncated;
  std::string reason;
  std::uint64_t lines = 0;                 // event lines read
  std::uint64_t events_before_marker = 0;  // from the marker (Complete only)
  std::optional<CloseReason> close_reason;
  std::optional<std::string> run_id;
  // The first line that is not a well-formed event in sequence (1-based), and why.
  std::optional<std::uint64_t> first_bad_line;
  std::string first_bad_reason;

  bool complete_and_well_formed() const { return kind == Completeness::Complete && !first_bad_line; }
  // One line for humans: "Complete: 41 events before stream.closed (completed), run r-1".
  std::string summary() const;
};

// Streaming: memory stays bounded whatever the stream's length. The default bound is the longest
// line a stream writer can be configured to write (protocol/line_cut.hpp): every line a writer
// produces is read and judged, none is refused for its length.
class StreamChecker {
 public:
  explicit StreamChecker(std::size_t max_line_bytes = kMaxEventLineBytes);
  void feed(std::string_view bytes);
  StreamVerdict finish();

 private:
  void on_line(const FramedLine& line);
  void bad(std::uint64_t line, std::string reason);

  LineFramer framer_;
  StreamVerdict v_;
  std::uint64_t markers_ = 0;
  std::uint64_t marker_line_ = 0;
  std::uint64_t marker_events_ = 0;
  std::uint64_t lines_after_marker_ = 0;
  std::optional<std::string> run_;
  bool torn_ = false;
};

StreamVerdict check_stream(std::string_view text);

}  // namespace mh::protocol
