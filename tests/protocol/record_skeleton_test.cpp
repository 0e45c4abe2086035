// An oversized vendor record read as it streams past: its structure and small values kept, its
// long strings cut with their whole size and digest, within a budget.
#include "protocol/record_skeleton.hpp"

#include <gtest/gtest.h>

#include "protocol/digest.hpp"
#include "protocol/json.hpp"
#include "protocol/line_framer.hpp"

namespace mh::protocol {
namespace {

// Feeds the bytes in small pieces, as a pipe hands them over.
const RecordSkeleton* read_in_pieces(SkeletonReader& reader, std::string_view bytes, std::size_t piece = 7) {
  for (std::size_t i = 0; i < bytes.size(); i += piece)
    reader.feed(bytes.substr(i, piece));
  return reader.finish();
}

TEST(RecordSkeleton, KeepsTheStructureAndCutsTheLongStringsWithTheirWholeSizeAndDigest) {
  std::string big(10'000, 'a');
  big += "\xc3\xa9 tail";  // a two-byte character near the end
  json::object record{
      {"type", "result"},
      {"result", big},
      {"usage", json::object{{"input_tokens", 10}, {"output_tokens", 24}}},
      {"message", json::object{{"content", json::array{json::object{{"type", "text"}, {"text", big}}}}}},
      {"stop_reason", "end_turn"}};
  SkeletonReader reader(8'000);  // a string keeps at most 2000 bytes
  const RecordSkeleton* s = read_in_pieces(reader, canonical_json(record));
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->complete);
  EXPECT_EQ(s->record.at("type"), "result");
  EXPECT_EQ(s->record.at("stop_reason"), "end_turn") << "the members after a cut string are kept";
  EXPECT_EQ(s->record.at("usage").as_object().at("output_tokens").to_number<int>(), 24);
  ASSERT_EQ(s->cuts.size(), 2u);
  // canonical_json sorts keys: message before result.
  EXPECT_EQ(s->cuts[0].pointer, "/message/content/0/text");
  EXPECT_EQ(s->cuts[1].pointer, "/result");
  for (const auto& c : s->cuts) {
    EXPECT_EQ(c.bytes, big.size());
    EXPECT_EQ(c.kept, 2000u);
    EXPECT_EQ(c.digest, sha256_hex(big));
  }
  EXPECT_EQ(s->record.at("result").as_string(), big.substr(0, 2000));
}

TEST(RecordSkeleton, SaysWhereItStoppedKeepingWhenTheBudgetRunsOut) {
  json::array many;
  for (int i = 0; i < 1000; ++i)
    many.push_back(i);
  json::object record{{"a_type", "assistant"}, {"b_many", many}, {"c_after", "lost"}};
  SkeletonReader reader(2'000);
  const RecordSkeleton* s = read_in_pieces(reader, canonical_json(record));
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->complete);
  EXPECT_EQ(s->missing_from.rfind("/b_many/", 0), 0u) << s->missing_from;
  EXPECT_EQ(s->record.at("a_type"), "assistant");
  EXPECT_FALSE(s->record.contains("c_after"));
}

TEST(RecordSkeleton, IsNothingForALineThatIsNotOneJsonObject) {
  SkeletonReader a(4096);
  EXPECT_EQ(read_in_pieces(a, std::string(5000, 'x')), nullptr);
  SkeletonReader b(4096);
  EXPECT_EQ(read_in_pieces(b, "[1,2,3]"), nullptr);
  SkeletonReader c(4096);
  EXPECT_EQ(read_in_pieces(c, R"({"type":"result","result":"unterminated)"), nullptr);
}

TEST(RecordSkeleton, TheVendorFramerHandsTheSkeletonOfAnOversizedLineWithItsDigest) {
  std::string line = canonical_json(json::object{{"type", "result"}, {"result", std::string(9000, 'r')}});
  LineFramer framer(4096, /*digest_oversized=*/true);
  int seen = 0;
  framer.feed(line + "\n{\"type\":\"system\"}\n", [&](const FramedLine& l) {
    if (++seen != 1) {
      EXPECT_EQ(l.skeleton, nullptr) << "a line within the bound is held whole";
      return;
    }
    ASSERT_TRUE(l.too_long);
    EXPECT_EQ(l.digest, sha256_hex(line));
    ASSERT_TRUE(l.skeleton);
    EXPECT_EQ(l.skeleton->record.at("type"), "result");
    ASSERT_EQ(l.skeleton->cuts.size(), 1u);
    EXPECT_EQ(l.skeleton->cuts[0].bytes, 9000u);
  });
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace mh::protocol
