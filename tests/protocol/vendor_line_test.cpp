// The first reading of a vendor line, shared by every adapter: too long or not a JSON object is
// opaque with the whole line's digest and its line number, blank says nothing, anything else is
// the record.
#include "protocol/vendor_line.hpp"

#include <gtest/gtest.h>

#include <vector>

#include "protocol/digest.hpp"

namespace mh::protocol {
namespace {

FramedLine line_of(std::string_view text, std::uint64_t number) {
  FramedLine line;
  line.text = text;
  line.number = number;
  line.length = text.size();
  return line;
}

TEST(VendorLine, AJsonObjectIsTheRecord) {
  auto classified = classify_vendor_line(line_of(R"({"type":"assistant","n":1})", 3));
  auto* record = std::get_if<json::object>(&classified);
  ASSERT_NE(record, nullptr);
  EXPECT_EQ(record->at("type").as_string(), "assistant");
  EXPECT_EQ(record->at("n").as_int64(), 1);
}

TEST(VendorLine, BlankLinesSayNothing) {
  for (std::string_view blank : {"", " ", "\t", "\r", " \t\r "})
    EXPECT_TRUE(std::holds_alternative<BlankLine>(classify_vendor_line(line_of(blank, 1)))) << "\"" << blank << "\"";
}

TEST(VendorLine, WhatIsNotAJsonObjectIsOpaqueWithItsDigestAndLine) {
  for (std::string_view text : {"not json", "[1,2]", "\"a string\"", "42", "null", "{\"open\":", "  x  "}) {
    auto classified = classify_vendor_line(line_of(text, 7));
    auto* opaque = std::get_if<ev::Opaque>(&classified);
    ASSERT_NE(opaque, nullptr) << text;
    EXPECT_EQ(opaque->digest, sha256_hex(text)) << text;
    EXPECT_EQ(opaque->source_line, 7u) << text;
    EXPECT_EQ(opaque->vendor_type, std::nullopt) << "nothing was read, so the type is unknown";
    EXPECT_EQ(opaque->vendor_subtype, std::nullopt);
  }
}

TEST(VendorLine, ATooLongLineIsOpaqueWithTheFramersDigestOfTheWholeLine) {
  // The framer discards an oversized line as it passes, digesting it: that digest is the record's.
  const std::string huge = "{\"type\":\"assistant\",\"pad\":\"" + std::string(200, 'x') + "\"}";
  LineFramer framer(64, /*digest_oversized=*/true);
  std::vector<ClassifiedLine> seen;
  framer.feed(huge + "\n{}\n", [&](const FramedLine& line) { seen.push_back(classify_vendor_line(line)); });
  ASSERT_EQ(seen.size(), 2u);
  auto* opaque = std::get_if<ev::Opaque>(&seen[0]);
  ASSERT_NE(opaque, nullptr) << "a valid JSON object that is too long is still never read";
  EXPECT_EQ(opaque->digest, sha256_hex(huge));
  EXPECT_EQ(opaque->source_line, 1u);
  EXPECT_TRUE(std::holds_alternative<json::object>(seen[1])) << "the framer resynchronised at the newline";
}

}  // namespace
}  // namespace mh::protocol
