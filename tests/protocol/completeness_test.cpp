// Stream completeness (reference §4.4) and well-formedness: the verdict, and the first line
// that is not a well-formed event in sequence.
#include "protocol/completeness.hpp"

#include <gtest/gtest.h>

#include "protocol/events.hpp"

namespace mh::protocol {
namespace {

std::string text_line(std::uint64_t seq, std::string_view run = "r-1") {
  return serialize(Event{seq, std::string(run), std::nullopt, ev::Text{"line " + std::to_string(seq), std::nullopt}}) +
         "\n";
}

std::string closed_line(std::uint64_t seq, std::uint64_t events, std::string_view run = "r-1",
                        CloseReason reason = CloseReason::completed) {
  ev::StreamClosed closed;
  closed.events = events;
  closed.reason = reason;
  closed.run_id = std::string(run);
  return serialize(Event{seq, std::string(run), std::nullopt, closed}) + "\n";
}

// n text events then a correct stream.closed.
std::string complete_stream(std::uint64_t n) {
  std::string s;
  for (std::uint64_t i = 1; i <= n; ++i)
    s += text_line(i);
  return s + closed_line(n + 1, n);
}

TEST(Completeness, AStreamEndingInACorrectMarkerIsComplete) {
  StreamVerdict v = check_stream(complete_stream(3));
  EXPECT_EQ(v.kind, Completeness::Complete);
  EXPECT_TRUE(v.complete_and_well_formed());
  EXPECT_EQ(v.lines, 4u);
  EXPECT_EQ(v.events_before_marker, 3u);
  EXPECT_EQ(v.close_reason, CloseReason::completed);
  EXPECT_EQ(v.run_id, "r-1");
  EXPECT_FALSE(v.first_bad_line.has_value());
  EXPECT_EQ(v.summary(), "Complete: 3 event(s) before stream.closed (reason completed), run r-1");
}

TEST(Completeness, AMarkerAloneIsACompleteEmptyRun) {
  StreamVerdict v = check_stream(closed_line(1, 0, "r-1", CloseReason::steer_halt));
  EXPECT_EQ(v.kind, Completeness::Complete);
  EXPECT_EQ(v.close_reason, CloseReason::steer_halt);
  EXPECT_TRUE(v.complete_and_well_formed());
}

TEST(Completeness, NoMarkerIsTruncatedNeverComplete) {
  std::string s = text_line(1) + text_line(2);
  StreamVerdict v = check_stream(s);
  EXPECT_EQ(v.kind, Completeness::Truncated);
  EXPECT_FALSE(v.complete_and_well_formed());
  EXPECT_EQ(v.reason, "no stream.closed marker after 2 line(s): cut off, or written by a producer that never closes");
  EXPECT_FALSE(v.first_bad_line.has_value());  // every line is fine; the stream is just short
}

TEST(Completeness, AnEmptyStreamIsTruncated) {
  StreamVerdict v = check_stream("");
  EXPECT_EQ(v.kind, Completeness::Truncated);
  EXPECT_EQ(v.reason, "the stream is empty: no stream.closed marker");
  EXPECT_EQ(v.lines, 0u);
  EXPECT_EQ(v.summary(), "Truncated: the stream is empty: no stream.closed marker");
}

TEST(Completeness, ATornLastLineIsTruncatedAndNamed) {
  std::string full = complete_stream(2);
  std::string torn = full.substr(0, full.size() - 20);  // cut inside the stream.closed line
  StreamVerdict v = check_stream(torn);
  EXPECT_EQ(v.kind, Completeness::Truncated);
  EXPECT_NE(v.reason.find("the last line is torn"), std::string::npos) << v.reason;
  ASSERT_TRUE(v.first_bad_line.has_value());
  EXPECT_EQ(*v.first_bad_line, 3u);
  EXPECT_NE(v.first_bad_reason.find("NotAnObject"), std::string::npos) << v.first_bad_reason;
}

TEST(Completeness, AMarkerWithoutItsNewlineIsCompleteButNotWellFormed) {
  std::string s = complete_stream(1);
  s.pop_back();
  StreamVerdict v = check_stream(s);
  EXPECT_EQ(v.kind, Completeness::Complete);
  EXPECT_FALSE(v.complete_and_well_formed());
  EXPECT_EQ(v.first_bad_line, 2u);
  EXPECT_EQ(v.first_bad_reason, "the last line has no newline: it is torn");
}

TEST(Completeness, TwoMarkersAreInconsistent) {
  std::string s = text_line(1) + closed_line(2, 1) + closed_line(3, 2);
  StreamVerdict v = check_stream(s);
  EXPECT_EQ(v.kind, Completeness::Inconsistent);
  EXPECT_EQ(v.reason, "2 stream.closed markers; exactly one may close a stream");
}

TEST(Completeness, AMarkerThatIsNotLastIsInconsistent) {
  std::string s = text_line(1) + closed_line(2, 1) + text_line(3) + text_line(4);
  StreamVerdict v = check_stream(s);
  EXPECT_EQ(v.kind, Completeness::Inconsistent);
  EXPECT_EQ(v.reason, "stream.closed at line 2 is followed by 2 more line(s); it must be last");
}

TEST(Completeness, AMarkerCountingTheWrongNumberOfEventsIsInconsistent) {
  for (std::uint64_t stated : {0u, 2u, 4u}) {
    std::string s = text_line(1) + text_line(2) + text_line(3) + closed_line(4, stated);
    StreamVerdict v = check_stream(s);
    EXPECT_EQ(v.kind, Completeness::Inconsistent) << stated;
    EXPECT_EQ(v.reason,
              "stream.closed counts " + std::to_string(stated) + " event(s) before it, but 3 line(s) precede it");
  }
}

// ---------------------------------------------------------------------------------------------
// Well-formedness: the first bad line, named
// ---------------------------------------------------------------------------------------------

TEST(WellFormed, ASeqGapNamesTheLine) {
  std::string s = text_line(1) + text_line(2) + text_line(4) + text_line(5) + closed_line(5, 4);
  StreamVerdict v = check_stream(s);
  ASSERT_TRUE(v.first_bad_line.has_value());
  EXPECT_EQ(*v.first_bad_line, 3u);
  EXPECT_EQ(v.first_bad_reason, "seq 4 where 3 was due (a gap, a duplicate or a reordering)");
  EXPECT_FALSE(v.complete_and_well_formed());
}

TEST(WellFormed, ADuplicateSeqNamesTheLine) {
  std::string s = text_line(1) + text_line(2) + text_line(2) + closed_line(4, 3);
  StreamVerdict v = check_stream(s);
  EXPECT_EQ(v.kind, Completeness::Complete);  // the marker itself is consistent ...
  EXPECT_EQ(v.first_bad_line, 3u);            // ... but the stream is not well-formed
  EXPECT_EQ(v.first_bad_reason, "seq 2 where 3 was due (a gap, a duplicate or a reordering)");
  EXPECT_FALSE(v.complete_and_well_formed());
}

TEST(WellFormed, ALineOfAnotherRunNamesBothRuns) {
  std::string s = text_line(1) + text_line(2, "r-2") + closed_line(3, 2);
  StreamVerdict v = check_stream(s);
  EXPECT_EQ(v.first_bad_line, 2u);
  EXPECT_EQ(v.first_bad_reason, "run \"r-2\" where the stream is run \"r-1\"");
}

TEST(WellFormed, AMarkerNamingAnotherRunIsBad) {
  std::string closed = closed_line(2, 1);
  closed.replace(closed.find(R"("run_id":"r-1")"), 14, R"("run_id":"r-9")");
  StreamVerdict v = check_stream(text_line(1) + closed);
  EXPECT_EQ(v.first_bad_line, 2u);
  EXPECT_EQ(v.first_bad_reason, "stream.closed names run \"r-9\" but the line belongs to run \"r-1\"");
}

TEST(WellFormed, ALineThatIsNotAnEventIsNamedWithTheReadersRefusal) {
  std::string s = text_line(1) +
                  R"({"format":"metaharness.command/1","id":"c1","command":"halt"})"
                  "\n" +
                  text_line(3) + closed_line(4, 3);
  StreamVerdict v = check_stream(s);
  EXPECT_EQ(v.kind, Completeness::Complete);
  EXPECT_EQ(v.first_bad_line, 2u);
  EXPECT_EQ(v.first_bad_reason.rfind("UnknownFormat: ", 0), 0u) << v.first_bad_reason;
  std::string blank = text_line(1) + "\n" + text_line(3) + closed_line(4, 3);
  StreamVerdict b = check_stream(blank);
  EXPECT_EQ(b.first_bad_line, 2u);
  EXPECT_EQ(b.first_bad_reason.rfind("NotAnObject: ", 0), 0u) << b.first_bad_reason;
}

TEST(WellFormed, OnlyTheFirstBadLineIsNamed) {
  std::string s = text_line(1) + "garbage\n" + text_line(7) + closed_line(4, 3);
  StreamVerdict v = check_stream(s);
  EXPECT_EQ(v.first_bad_line, 2u);
}

TEST(WellFormed, AnOversizedLineIsBadWithoutBeingHeld) {
  StreamChecker checker(/*max_line_bytes=*/256);
  checker.feed(text_line(1));
  std::string big = serialize(Event{2, "r-1", std::nullopt, ev::Text{std::string(1000, 'x'), std::nullopt}}) + "\n";
  for (std::size_t i = 0; i < big.size(); i += 10)
    checker.feed(std::string_view(big).substr(i, 10));
  checker.feed(closed_line(3, 2));
  StreamVerdict v = checker.finish();
  EXPECT_EQ(v.kind, Completeness::Complete);
  EXPECT_EQ(v.first_bad_line, 2u);
  EXPECT_EQ(v.first_bad_reason.rfind("line 2 is ", 0), 0u) << v.first_bad_reason;
  EXPECT_NE(v.first_bad_reason.find("over the 256-byte bound"), std::string::npos) << v.first_bad_reason;
}

TEST(WellFormed, ChunkingDoesNotChangeTheVerdict) {
  std::string s = complete_stream(20);
  for (std::size_t chunk : {1, 3, 64, 100000}) {
    StreamChecker checker;
    for (std::size_t i = 0; i < s.size(); i += chunk)
      checker.feed(std::string_view(s).substr(i, chunk));
    StreamVerdict v = checker.finish();
    EXPECT_TRUE(v.complete_and_well_formed()) << chunk << ": " << v.summary();
    EXPECT_EQ(v.events_before_marker, 20u);
  }
}

TEST(Completeness, KindsHaveTheirNames) {
  EXPECT_EQ(to_string(Completeness::Complete), "Complete");
  EXPECT_EQ(to_string(Completeness::Truncated), "Truncated");
  EXPECT_EQ(to_string(Completeness::Inconsistent), "Inconsistent");
}

}  // namespace
}  // namespace mh::protocol
