// The line framer: lines split at '\n' whatever the chunking, a hard bound on what is held,
// oversized lines reported (and optionally digested) without being held whole, and
// resynchronisation at the next newline.
#include "protocol/line_framer.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "protocol/digest.hpp"

namespace mh::protocol {
namespace {

// A copy of what the sink saw (its views are only valid during the call).
struct SeenLine {
  std::string text;
  std::uint64_t number;
  bool too_long;
  std::uint64_t length;
  std::string head;
  std::string digest;
  bool unterminated;
  bool early;
};

struct Collector {
  std::vector<SeenLine> lines;
  void operator()(const FramedLine& l) {
    lines.push_back(
        {std::string(l.text), l.number, l.too_long, l.length, std::string(l.head), l.digest, l.unterminated, l.early});
  }
};

std::vector<SeenLine> frame_in_chunks(std::string_view stream, std::size_t chunk, std::size_t bound = 64,
                                      bool digest = false) {
  LineFramer framer(bound, digest);
  Collector sink;
  for (std::size_t i = 0; i < stream.size(); i += chunk)
    framer.feed(stream.substr(i, chunk), sink);
  framer.finish(sink);
  return sink.lines;
}

TEST(LineFramer, SplitsLinesTheSameWayWhateverTheChunking) {
  const std::string stream = "alpha\n\nbeta gamma\n{\"x\":1}\n";
  for (std::size_t chunk : {1, 2, 3, 5, 7, 64, 1000}) {
    auto lines = frame_in_chunks(stream, chunk);
    ASSERT_EQ(lines.size(), 4u) << "chunk " << chunk;
    EXPECT_EQ(lines[0].text, "alpha");
    EXPECT_EQ(lines[1].text, "");  // blank lines are lines and count
    EXPECT_EQ(lines[2].text, "beta gamma");
    EXPECT_EQ(lines[3].text, "{\"x\":1}");
    for (std::size_t i = 0; i < lines.size(); ++i) {
      EXPECT_EQ(lines[i].number, i + 1);
      EXPECT_FALSE(lines[i].too_long);
      EXPECT_FALSE(lines[i].unterminated);
      EXPECT_EQ(lines[i].length, lines[i].text.size());
    }
  }
}

TEST(LineFramer, ATrailingLineWithoutNewlineIsFlaggedUnterminated) {
  auto lines = frame_in_chunks("one\ntwo", 3);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_FALSE(lines[0].unterminated);
  EXPECT_EQ(lines[1].text, "two");
  EXPECT_TRUE(lines[1].unterminated);
}

TEST(LineFramer, EmptyStreamHasNoLines) {
  EXPECT_TRUE(frame_in_chunks("", 4).empty());
  LineFramer framer;
  EXPECT_EQ(framer.lines_seen(), 0u);
}

TEST(LineFramer, ALineExactlyAtTheBoundIsALineOneByteMoreIsTooLong) {
  std::string at_bound(64, 'a');
  std::string over(65, 'b');
  for (std::size_t chunk : {1, 10, 200}) {
    auto lines = frame_in_chunks(at_bound + "\n" + over + "\nok\n", chunk);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_FALSE(lines[0].too_long);
    EXPECT_EQ(lines[0].text, at_bound);
    EXPECT_TRUE(lines[1].too_long);
    EXPECT_EQ(lines[1].text, "");
    EXPECT_EQ(lines[1].length, 65u);
    EXPECT_EQ(lines[1].number, 2u);
    EXPECT_EQ(lines[2].text, "ok");
    EXPECT_EQ(lines[2].number, 3u);
  }
}

TEST(LineFramer, TenMebibyteLineInSmallChunksNeverBuffersMoreThanTheBoundAndResynchronises) {
  constexpr std::size_t kBound = 64 * 1024;
  constexpr std::size_t kHuge = 10 * 1024 * 1024;
  LineFramer framer(kBound, /*digest_oversized=*/true);
  Collector sink;
  framer.feed("before\n", sink);
  // Feed the oversized line in 4 KiB pieces, generated on the fly, and watch what is held.
  std::string piece(4096, 'x');
  std::size_t most_buffered = 0;
  Sha256 whole;
  std::string head;
  for (std::size_t sent = 0; sent < kHuge; sent += piece.size()) {
    for (std::size_t i = 0; i < piece.size(); ++i)
      piece[i] = static_cast<char>('a' + (sent + i) % 26);
    whole.update(piece);
    if (head.size() < 96) head += piece.substr(0, 96 - head.size());
    framer.feed(piece, sink);
    most_buffered = std::max(most_buffered, framer.buffered());
    ASSERT_LE(framer.buffered(), kBound);
  }
  framer.feed("\nafter\n", sink);
  framer.finish(sink);

  EXPECT_LE(most_buffered, kBound);
  EXPECT_EQ(framer.buffered(), 0u);
  ASSERT_EQ(sink.lines.size(), 3u);
  EXPECT_EQ(sink.lines[0].text, "before");
  const SeenLine& big = sink.lines[1];
  EXPECT_TRUE(big.too_long);
  EXPECT_EQ(big.number, 2u);
  EXPECT_EQ(big.length, kHuge);
  EXPECT_EQ(big.head, head);  // the first bytes, for the refusal message
  EXPECT_EQ(big.digest, whole.finish_hex());
  EXPECT_FALSE(big.unterminated);
  EXPECT_EQ(sink.lines[2].text, "after");
  EXPECT_EQ(sink.lines[2].number, 3u);
  EXPECT_EQ(framer.lines_seen(), 3u);
}

TEST(LineFramer, DigestOfAnOversizedLineIsTheSha256OfTheWholeLine) {
  std::string line;
  for (int i = 0; i < 5000; ++i)
    line += std::to_string(i) + ",";
  for (std::size_t chunk : {1, 7, 100, 4096, 100000}) {
    auto lines = frame_in_chunks("{}\n" + line + "\n{}\n", chunk, 1000, /*digest=*/true);
    ASSERT_EQ(lines.size(), 3u);
    EXPECT_TRUE(lines[1].too_long);
    EXPECT_EQ(lines[1].digest, sha256_hex(line)) << "chunk " << chunk;
    EXPECT_EQ(lines[1].length, line.size());
    EXPECT_TRUE(lines[0].digest.empty());  // only oversized lines are digested
  }
}

TEST(LineFramer, TwoOversizedLinesInARowGetTheirOwnDigests) {
  std::string a(300, 'a'), b(400, 'b');
  auto lines = frame_in_chunks(a + "\n" + b + "\n", 13, 100, true);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].digest, sha256_hex(a));
  EXPECT_EQ(lines[1].digest, sha256_hex(b));
  EXPECT_EQ(lines[1].length, 400u);
}

TEST(LineFramer, WithoutDigestsAnOversizedLineCarriesNone) {
  auto lines = frame_in_chunks(std::string(300, 'z') + "\n", 50, 100, false);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_TRUE(lines[0].too_long);
  EXPECT_TRUE(lines[0].digest.empty());
}

TEST(LineFramer, AnOversizedLineCutOffByEndOfStreamIsTooLongAndUnterminated) {
  auto lines = frame_in_chunks("ok\n" + std::string(500, 'q'), 64, 100, true);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(lines[1].too_long);
  EXPECT_TRUE(lines[1].unterminated);
  EXPECT_EQ(lines[1].length, 500u);
  EXPECT_EQ(lines[1].digest, sha256_hex(std::string(500, 'q')));
}

TEST(LineFramer, AnOversizedLineArrivingInOneChunkIsHandledTheSame) {
  LineFramer framer(10, true);
  Collector sink;
  framer.feed("0123456789ABCDEF\nshort\n", sink);
  ASSERT_EQ(sink.lines.size(), 2u);
  EXPECT_TRUE(sink.lines[0].too_long);
  EXPECT_EQ(sink.lines[0].head, "0123456789ABCDEF");
  EXPECT_EQ(sink.lines[0].digest, sha256_hex("0123456789ABCDEF"));
  EXPECT_EQ(sink.lines[1].text, "short");
  EXPECT_EQ(framer.buffered(), 0u);
}

TEST(LineFramer, CarriageReturnsAreKeptAsPartOfTheLine) {
  // The wire is '\n'-terminated; a '\r' is content, and the JSON reader refuses it if it matters.
  auto lines = frame_in_chunks("a\r\nb\n", 1);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].text, "a\r");
}

// Early mode (the daemon's socket): the refusal goes out when the bound is crossed, not when the
// newline arrives, and the line is then discarded up to its newline with no second report.
TEST(LineFramer, EarlyModeReportsAnOversizedLineWhenTheBoundIsCrossedAndOnlyThen) {
  LineFramer framer(100, /*digest_oversized=*/false, /*report_early=*/true);
  Collector sink;
  framer.feed("first\n", sink);
  framer.feed(std::string(60, 'a'), sink);
  EXPECT_EQ(sink.lines.size(), 1u) << "under the bound: nothing to say yet";
  framer.feed(std::string(60, 'b'), sink);
  ASSERT_EQ(sink.lines.size(), 2u) << "the bound is crossed with no newline in sight: reported now";
  const SeenLine& refused = sink.lines[1];
  EXPECT_TRUE(refused.too_long);
  EXPECT_EQ(refused.number, 2u);
  EXPECT_EQ(refused.length, 120u) << "what had arrived when the bound was crossed";
  EXPECT_EQ(refused.head.substr(0, 3), "aaa");
  EXPECT_TRUE(refused.early);
  EXPECT_LE(framer.buffered(), 100u);
  for (int i = 0; i < 100; ++i)
    framer.feed(std::string(1000, 'c'), sink);
  EXPECT_EQ(sink.lines.size(), 2u) << "the rest is discarded silently";
  EXPECT_EQ(framer.buffered(), 0u);
  framer.feed("c\nnext\n", sink);
  framer.finish(sink);
  ASSERT_EQ(sink.lines.size(), 3u) << "no second report at the newline";
  EXPECT_EQ(sink.lines[2].text, "next");
  EXPECT_EQ(sink.lines[2].number, 3u);
}

TEST(LineFramer, EarlyModeSaysSoAndTheDefaultStillReportsAtTheEndWithTheDigest) {
  std::string big(300, 'z');
  for (std::size_t chunk : {1, 7, 64, 1000}) {
    LineFramer early(100, false, true);
    Collector e;
    for (std::size_t i = 0; i < big.size(); i += chunk)
      early.feed(std::string_view(big).substr(i, chunk), e);
    ASSERT_EQ(e.lines.size(), 1u) << "reported before the newline, chunk " << chunk;
    early.feed("\n", e);
    early.finish(e);
    EXPECT_EQ(e.lines.size(), 1u);
    EXPECT_GT(e.lines[0].length, 100u);
    EXPECT_LE(e.lines[0].length, 100u + chunk);
  }
  auto late = frame_in_chunks(big + "\n", 7, 100, /*digest=*/true);
  ASSERT_EQ(late.size(), 1u);
  EXPECT_EQ(late[0].length, 300u) << "the vendor path: the whole length";
  EXPECT_FALSE(late[0].early);
  EXPECT_EQ(late[0].digest, sha256_hex(big));
}

TEST(LineFramer, EarlyModeAtEndOfStreamReportsAnUnfinishedOversizedLineOnce) {
  LineFramer framer(10, false, true);
  Collector sink;
  framer.feed("ok\n0123456789ABCDEF", sink);
  framer.finish(sink);
  ASSERT_EQ(sink.lines.size(), 2u);
  EXPECT_TRUE(sink.lines[1].too_long);
  EXPECT_FALSE(sink.lines[1].unterminated) << "reported when crossed; the end adds nothing";
}

TEST(LineFramer, ReportsItsBound) {
  EXPECT_EQ(LineFramer().max_line_bytes(), kDefaultMaxLineBytes);
  EXPECT_EQ(kDefaultMaxLineBytes, 1u << 20);
  EXPECT_EQ(LineFramer(123).max_line_bytes(), 123u);
}

}  // namespace
}  // namespace mh::protocol
