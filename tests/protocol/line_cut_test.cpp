// One bound for every event line the writer produces: content over it is cut at a UTF-8 boundary,
// the line says what was cut (size and SHA-256 of the whole), and every reader takes the result.
#include "protocol/line_cut.hpp"

#include <gtest/gtest.h>

#include "protocol/completeness.hpp"
#include "protocol/digest.hpp"
#include "protocol/reader.hpp"

namespace mh::protocol {
namespace {

// About `bytes` bytes of output with a multi-byte character every few bytes, so a careless cut
// would split one.
std::string output_of(std::size_t bytes) {
  std::string out;
  out.reserve(bytes + 8);
  for (std::size_t i = 0; out.size() < bytes; ++i)
    out += i % 7 == 0 ? "\xC3\xA9" /* é */ : i % 11 == 0 ? "\xE2\x82\xAC" /* € */ : i % 13 == 0 ? "\n" : "x";
  return out;
}

Event result_event(std::string content) {
  ev::ToolResult r;
  r.call_id = "call_big";
  r.exit_code = 0;
  r.is_error = false;
  r.bytes = content.size();
  r.content = json::string(content);
  r.tool_use_result = nullptr;
  Event e{7, "r-1", std::nullopt, std::move(r)};
  e.recorded_at = "2026-12-01T09:30:00.123Z";
  return e;
}

// `e` written within the smallest bound a writer can have (the line must fit), then read back.
boost::system::result<Event, LineRefusal> written_within_the_smallest_bound(Event e) {
  std::string out;
  serialize_within(out, e, kMinEventLineBytes);
  EXPECT_LE(out.size(), kMinEventLineBytes);
  return read_event_line(out);
}

bool is_utf8(std::string_view s) {
  for (std::size_t i = 0; i < s.size();) {
    std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

TEST(LineCut, ALineUnderTheBoundIsWrittenExactlyAsSerializeWritesIt) {
  Event e = result_event("small output");
  std::string out;
  serialize_within(out, e, kDefaultMaxEventLineBytes);
  EXPECT_EQ(out, serialize(result_event("small output")));
  EXPECT_TRUE(e.cut.empty());
  EXPECT_EQ(out.find("\"cut\""), std::string::npos) << "nothing cut: no key";
}

// The observed case: a Codex command output near 1 MiB made a 1,048,898-byte tool.result line.
TEST(LineCut, AToolResultOverTheBoundIsCutAtACharacterBoundaryAndSaysWhatWasCut) {
  const std::string whole = output_of(1048576 + 4096);
  Event e = result_event(whole);
  std::string out = "prefix\n";  // it appends, like the log's scratch buffer
  std::size_t n = serialize_within(out, e, kDefaultMaxEventLineBytes);
  EXPECT_EQ(out.substr(0, 7), "prefix\n");
  std::string_view line = std::string_view(out).substr(7);
  ASSERT_EQ(line.size(), n);
  EXPECT_LE(line.size(), kDefaultMaxEventLineBytes);
  EXPECT_GT(line.size(), kDefaultMaxEventLineBytes - 64 * 1024) << "cut to the bound, not far below it";

  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  const auto& r = std::get<ev::ToolResult>(read->payload);
  EXPECT_EQ(r.bytes, whole.size()) << "bytes stays the whole output's size";
  EXPECT_EQ(r.call_id, "call_big");
  std::string kept(r.content.get_string());
  EXPECT_TRUE(is_utf8(kept)) << "never a split character";
  EXPECT_EQ(whole.compare(0, kept.size(), kept), 0) << "a prefix of the whole";
  ASSERT_EQ(read->cut.size(), 1u);
  const CutField& cut = read->cut[0];
  EXPECT_EQ(cut.field, "content");
  EXPECT_EQ(cut.pointer, "/content");
  EXPECT_EQ(cut.form, "text");
  EXPECT_EQ(cut.bytes, whole.size());
  EXPECT_EQ(cut.kept, kept.size());
  EXPECT_EQ(cut.digest, sha256_hex(whole));
  EXPECT_EQ(read->recorded_at, "2026-12-01T09:30:00.123Z") << "the envelope is untouched";
  EXPECT_EQ(read->seq, 7u);
}

TEST(LineCut, TheLongestStringInsideAToolInputIsCutAndNamedByItsPointer) {
  const std::string content = output_of(200 * 1024);
  ev::ToolRequested t;
  t.call_id = "toolu_w";
  t.name = "Write";
  t.input = json::object{{"file_path", "/w/a.txt"}, {"content", content}, {"a/b~c", "small"}};
  t.subjects = {"/w/a.txt"};
  auto read = written_within_the_smallest_bound(Event{3, "r-1", std::nullopt, std::move(t)});
  ASSERT_TRUE(read) << read.error().message;
  const auto& req = std::get<ev::ToolRequested>(read->payload);
  EXPECT_EQ(req.input.at("file_path"), "/w/a.txt") << "a short string is left alone";
  EXPECT_EQ(req.input.at("a/b~c"), "small");
  EXPECT_EQ(req.subjects, std::vector<std::string>{"/w/a.txt"});
  ASSERT_EQ(read->cut.size(), 1u);
  EXPECT_EQ(read->cut[0].field, "input");
  EXPECT_EQ(read->cut[0].pointer, "/input/content");
  EXPECT_EQ(read->cut[0].digest, sha256_hex(content));
  EXPECT_EQ(read->cut[0].kept, req.input.at("content").get_string().size());
}

TEST(LineCut, AValueOfManySmallPiecesIsReplacedByItsCutCanonicalJson) {
  json::array many;
  for (int i = 0; i < 40000; ++i)
    many.emplace_back(json::object{{"n", i}, {"s", "ab"}});
  json::value whole = many;
  ev::ToolResult r;
  r.call_id = "c";
  r.content = whole;
  r.tool_use_result = nullptr;
  auto read = written_within_the_smallest_bound(Event{1, "r-1", std::nullopt, std::move(r)});
  ASSERT_TRUE(read) << read.error().message;
  ASSERT_EQ(read->cut.size(), 1u);
  EXPECT_EQ(read->cut[0].form, "json");
  EXPECT_EQ(read->cut[0].pointer, "/content");
  std::string canonical = canonical_json(whole);
  EXPECT_EQ(read->cut[0].bytes, canonical.size());
  EXPECT_EQ(read->cut[0].digest, sha256_hex(canonical));
  const auto& content = std::get<ev::ToolResult>(read->payload).content;
  ASSERT_TRUE(content.is_string());
  EXPECT_EQ(canonical.compare(0, content.get_string().size(), content.get_string()), 0);
}

TEST(LineCut, TextThinkingAndInjectionAreCutToo) {
  const std::string big = output_of(100 * 1024);
  for (EventPayload p : {EventPayload(ev::Text{big, std::nullopt}), EventPayload(ev::Thinking{big, std::nullopt}),
                         EventPayload(ev::Injection{big, std::string("embedder")})}) {
    auto read = written_within_the_smallest_bound(Event{1, "r-1", std::nullopt, p});
    ASSERT_TRUE(read) << read.error().message;
    ASSERT_EQ(read->cut.size(), 1u) << event_name(p);
    EXPECT_EQ(read->cut[0].pointer, "/text");
    EXPECT_EQ(read->cut[0].bytes, big.size());
  }
}

TEST(LineCut, AnEventThatCannotBeCutToTheBoundIsReplacedByANamedWarningWithTheSameSeq) {
  ev::ToolRequested t;
  t.call_id = "toolu_x";
  t.name = std::string(100 * 1024, 'n');  // a name is never cut
  t.input = json::object{};
  auto read = written_within_the_smallest_bound(Event{9, "r-1", std::nullopt, std::move(t)});
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->seq, 9u);
  const auto* w = std::get_if<ev::Warning>(&read->payload);
  ASSERT_TRUE(w);
  EXPECT_EQ(w->code, "EVENT_TOO_LONG");
  EXPECT_NE(w->message.find("tool.requested"), std::string::npos) << w->message;
}

// At the largest bound a writer can be configured with, the reader's default takes the line.
TEST(LineCut, CheckStreamTakesEveryLineTheWriterProducesUpToTheLargestBound) {
  std::string stream;
  Event big = result_event(output_of(kMaxEventLineBytes + 1000));
  big.seq = 1;
  serialize_within(stream, big, kMaxEventLineBytes);
  EXPECT_LE(stream.size(), kMaxEventLineBytes);
  EXPECT_GT(stream.size(), kDefaultMaxLineBytes) << "a line far over the old 1 MiB reader bound";
  stream.push_back('\n');
  Event closed{2, "r-1", std::nullopt, ev::StreamClosed{1, CloseReason::completed, "r-1", {}}};
  serialize_within(stream, closed);
  stream.push_back('\n');
  auto verdict = check_stream(stream);
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
}

TEST(LineCut, AMalformedCutRecordIsRefusedByName) {
  std::string line = serialize(Event{1, "r-1", std::nullopt, ev::Text{"t", std::nullopt}});
  line.insert(line.size() - 1, R"(,"cut":[{"field":"text","pointer":"/text","form":"text","bytes":1,"kept":5,)"
                               R"("digest":"00"}])");
  auto read = read_event_line(line);
  ASSERT_FALSE(read);
  EXPECT_NE(read.error().message.find("cut"), std::string::npos) << read.error().message;
}

}  // namespace
}  // namespace mh::protocol
