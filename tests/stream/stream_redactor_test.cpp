// A vendor's stdout and stderr are redacted as they are read (issue 25 section 4): a secret split
// across two reads is still found, every byte fed comes out exactly once, a line longer than the
// hold bound does not hold memory without bound, and a stream with no secret passes untouched.
#include "daemon/stream/stream_redactor.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mh::daemon::test {
namespace {

const std::string kKey = "sk-ant-api03-THE-REAL-KEY-0123456789";

Redactor key_redactor() {
  return Redactor({{"upstream.main", kKey}});
}

// Feeds `text` in pieces of `piece` bytes, then finishes; what came out, in order.
std::string through(StreamRedactor& stream, const Redactor& redactor, const std::string& text, std::size_t piece) {
  std::string out;
  for (std::size_t at = 0; at < text.size(); at += piece)
    out.append(stream.feed(std::string_view(text).substr(at, piece), redactor));
  out.append(stream.finish(redactor));
  return out;
}

TEST(StreamRedactor, ASecretSplitAcrossEveryPossibleReadBoundaryIsStillRedacted) {
  const Redactor redactor = key_redactor();
  const std::string text = "{\"type\":\"text\",\"text\":\"key " + kKey + " here\"}\n{\"type\":\"end\"}\n";
  const std::string expected =
      "{\"type\":\"text\",\"text\":\"key [redacted:upstream.main] here\"}\n{\"type\":\"end\"}\n";
  for (std::size_t piece = 1; piece <= text.size(); ++piece) {
    StreamRedactor stream;
    EXPECT_EQ(through(stream, redactor, text, piece), expected) << "pieces of " << piece;
    EXPECT_EQ(stream.held(), 0u);
  }
}

TEST(StreamRedactor, WholeLinesGoOutAtOnceAndAPartialLineIsHeldUntilItsNewline) {
  const Redactor redactor = key_redactor();
  StreamRedactor stream;
  EXPECT_EQ(stream.feed("{\"a\":1}\n{\"b\":", redactor), "{\"a\":1}\n");
  EXPECT_EQ(stream.held(), 5u);
  EXPECT_EQ(stream.feed("2}\n", redactor), "{\"b\":2}\n");
  EXPECT_EQ(stream.held(), 0u);
}

TEST(StreamRedactor, ALineLongerThanTheHoldBoundGoesOutInPiecesAndASecretAcrossThemIsRedacted) {
  const Redactor redactor = key_redactor();
  const std::size_t bound = 64;
  StreamRedactor stream(bound);
  // One line of ~10 KB with the key at several places, fed in 50-byte reads: never more than the
  // bound plus a read is held, and the key never comes out in clear.
  std::string line;
  for (int i = 0; i < 200; ++i)
    line += (i % 37 == 5) ? kKey : std::string("0123456789abcdefghij");
  line += "\n";
  std::string out;
  for (std::size_t at = 0; at < line.size(); at += 50) {
    out.append(stream.feed(std::string_view(line).substr(at, 50), redactor));
    EXPECT_LE(stream.held(), bound + 50);
  }
  out.append(stream.finish(redactor));
  EXPECT_EQ(out.find(kKey), std::string::npos);
  std::string expected = line;
  redactor.redact(expected);
  EXPECT_EQ(out, expected);
}

TEST(StreamRedactor, WithNoSecretEveryChunkPassesThroughAsItIsAndNothingIsHeld) {
  const Redactor none;
  StreamRedactor stream;
  const std::string chunk = "{\"partial\":";
  const std::string_view out = stream.feed(chunk, none);
  EXPECT_EQ(out, chunk);
  EXPECT_EQ(out.data(), chunk.data()) << "not copied";
  EXPECT_EQ(stream.held(), 0u);
  EXPECT_EQ(stream.finish(none), "");
}

TEST(StreamRedactor, ARotatedKeyIsRedactedFromTheNextChunkOn) {
  const Redactor old_key = key_redactor();
  const std::string new_value = "sk-ant-api03-THE-NEW-KEY-9876543210";
  const Redactor new_key({{"upstream.main", kKey}, {"upstream.main", new_value}});
  StreamRedactor stream;
  std::string out(stream.feed("{\"k\":\"" + kKey + "\"}\n", old_key));
  out.append(stream.feed("{\"k\":\"" + new_value + "\"}\n", new_key));
  out.append(stream.finish(new_key));
  EXPECT_EQ(out, "{\"k\":\"[redacted:upstream.main]\"}\n{\"k\":\"[redacted:upstream.main]\"}\n");
}

TEST(StreamRedactor, WhatIsHeldAtTheEndOfTheStreamComesOutRedacted) {
  const Redactor redactor = key_redactor();
  StreamRedactor stream;
  EXPECT_EQ(stream.feed("no newline, then the key " + kKey.substr(0, 10), redactor), "");
  EXPECT_EQ(stream.feed(kKey.substr(10), redactor), "");
  EXPECT_EQ(stream.finish(redactor), "no newline, then the key [redacted:upstream.main]");
}

}  // namespace
}  // namespace mh::daemon::test
