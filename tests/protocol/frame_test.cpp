#include "protocol/digest.hpp"
#include "protocol/frame.hpp"

#include <gtest/gtest.h>

namespace mh::protocol {
namespace {

// Reference §7.3: the canonical bytes and the digest the reference implementation pins.
constexpr std::string_view kCanonical =
    R"({"entities":null,"handoff":{"handoff":"none"},"next":[],"node":{"id":"implement"},"obligations":[{"asked_by":null,"text":"the suite is red before the implementation"}],"operations":[{"op":"dir.list"},{"op":"file.edit"},{"op":"file.read"},{"op":"file.write"},{"op":"search"},{"op":"shell"},{"op":"skill.load"}],"prior":[],"reaching":[{"asked_by":null,"text":"to verify: the suite is green"}],"step":{"attempt":1,"index":2,"state":"implement","workflow":"development/default"},"workflow":{"id":"development/default","version":"1"}})";
constexpr std::string_view kDigest = "43a6f845a21f3475569323950a9d276bfed3df11979adc3edf18878da6963a12";
constexpr std::string_view kDocumentSha = "ef897a58a624848aad942d69d2745b431f2eaad5180cd0f5b2e1c8975adcb93b";

Frame vector_frame() {
  auto loaded = load_frame(std::string(R"({"format":"metaharness.frame/1",)") +
                               std::string(kCanonical.substr(1)),
                           /*require_sealed=*/false);
  EXPECT_TRUE(loaded) << loaded.error().message;
  return *loaded;
}

TEST(Frame, CanonicalBytesAndDigestReproduceTheReferenceVector) {
  Frame f = vector_frame();
  EXPECT_EQ(canonical_frame_bytes(f), kCanonical);
  EXPECT_EQ(compute_frame_digest(f), kDigest);
}

TEST(Frame, DocumentFormReproducesTheGoldenFileByteForByte) {
  Frame f = vector_frame();
  seal(f);
  EXPECT_EQ(f.digest, kDigest);
  std::string doc = frame_document(f);
  EXPECT_EQ(sha256_hex(doc), kDocumentSha) << doc;
  auto reloaded = load_frame(doc);
  ASSERT_TRUE(reloaded) << reloaded.error().message;
  EXPECT_EQ(reloaded->digest, kDigest);
}

}  // namespace
}  // namespace mh::protocol
