#include "protocol/completeness.hpp"

#include "protocol/reader.hpp"

namespace mh::protocol {

StreamChecker::StreamChecker(std::size_t max_line_bytes) : framer_(max_line_bytes) {}

void StreamChecker::feed(std::string_view bytes) {
  framer_.feed(bytes, [this](const FramedLine& line) { on_line(line); });
}

void StreamChecker::bad(std::uint64_t line, std::string reason) {
  if (!v_.first_bad_line) {
    v_.first_bad_line = line;
    v_.first_bad_reason = std::move(reason);
  }
}

void StreamChecker::on_line(const FramedLine& line) {
  ++v_.lines;
  if (markers_ > 0) ++lines_after_marker_;
  if (line.unterminated) torn_ = true;
  if (line.too_long) {
    bad(line.number, too_long_refusal(line, framer_.max_line_bytes()).message);
    return;
  }
  auto event = read_event_line(line.text);
  if (!event) {
    bad(line.number, std::string(to_string(event.error().kind)) + ": " + event.error().message);
    return;
  }
  if (line.unterminated) bad(line.number, "the last line has no newline: it is torn");
  if (event->seq != line.number)
    bad(line.number, "seq " + std::to_string(event->seq) + " where " + std::to_string(line.number) +
                         " was due (a gap, a duplicate or a reordering)");
  if (!run_)
    run_ = event->run;
  else if (*run_ != event->run)
    bad(line.number, "run \"" + excerpt(event->run, 40) + "\" where the stream is run \"" + excerpt(*run_, 40) + "\"");
  if (auto* closed = std::get_if<ev::StreamClosed>(&event->payload)) {
    ++markers_;
    marker_line_ = line.number;
    marker_events_ = closed->events;
    v_.close_reason = closed->reason;
    v_.run_id = closed->run_id;
    if (closed->run_id != event->run)
      bad(line.number, "stream.closed names run \"" + excerpt(closed->run_id, 40) +
                           "\" but the line belongs to run \"" + excerpt(event->run, 40) + "\"");
  }
}

StreamVerdict StreamChecker::finish() {
  framer_.finish([this](const FramedLine& line) { on_line(line); });
  if (!v_.run_id) v_.run_id = run_;
  if (markers_ == 0) {
    v_.kind = Completeness::Truncated;
    v_.reason = v_.lines == 0 ? "the stream is empty: no stream.closed marker"
                              : "no stream.closed marker after " + std::to_string(v_.lines) +
                                    " line(s): cut off, or written by a producer that never closes";
    if (torn_) v_.reason += "; the last line is torn";
  } else if (markers_ > 1) {
    v_.kind = Completeness::Inconsistent;
    v_.reason = std::to_string(markers_) + " stream.closed markers; exactly one may close a stream";
  } else if (lines_after_marker_ > 0) {
    v_.kind = Completeness::Inconsistent;
    v_.reason = "stream.closed at line " + std::to_string(marker_line_) + " is followed by " +
                std::to_string(lines_after_marker_) + " more line(s); it must be last";
  } else if (marker_events_ != marker_line_ - 1) {
    v_.kind = Completeness::Inconsistent;
    v_.reason = "stream.closed counts " + std::to_string(marker_events_) + " event(s) before it, but " +
                std::to_string(marker_line_ - 1) + " line(s) precede it";
  } else {
    v_.kind = Completeness::Complete;
    v_.events_before_marker = marker_events_;
    v_.reason = std::to_string(marker_events_) + " event(s) before stream.closed";
  }
  return v_;
}

std::string StreamVerdict::summary() const {
  std::string s = std::string(to_string(kind)) + ": " + reason;
  if (kind == Completeness::Complete && close_reason) s += " (reason " + std::string(to_string(*close_reason)) + ")";
  if (run_id) s += ", run " + *run_id;
  return s;
}

StreamVerdict check_stream(std::string_view text) {
  StreamChecker checker;
  checker.feed(text);
  return checker.finish();
}

}  // namespace mh::protocol
