// A frame document through load / seal / write / verify. Invariants: a document that loads
// unsealed can be sealed, and the sealed document verifies and is written back byte-identically;
// a document that verifies states exactly its canonical digest; refusals are wire-safe; the
// text renderer never fails.
#include "fuzz_invariants.hpp"
#include "protocol/digest.hpp"
#include "protocol/frame.hpp"

using namespace mh;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view document = fuzz::as_text(data, size);
  auto sealed = protocol::load_frame(document, /*require_sealed=*/true);
  auto loaded = protocol::load_frame(document, /*require_sealed=*/false);
  if (sealed) {
    if (!loaded) fuzz::invariant_failed("a sealed frame does not load unsealed", document, loaded.error().message);
    if (sealed->digest != protocol::compute_frame_digest(*sealed))
      fuzz::invariant_failed("a verified frame states another digest", sealed->digest);
  } else {
    fuzz::expect_wire_safe(sealed.error().message);
  }
  if (!loaded) {
    fuzz::expect_wire_safe(loaded.error().message);
    return 0;
  }
  protocol::Frame frame = *loaded;
  protocol::seal(frame);
  if (!protocol::is_digest(frame.digest)) fuzz::invariant_failed("seal produced no digest", frame.digest);
  std::string written = protocol::frame_document(frame);
  auto reread = protocol::load_frame(written, /*require_sealed=*/true);
  if (!reread) fuzz::invariant_failed("a sealed document does not verify", written, reread.error().message);
  std::string rewritten = protocol::frame_document(*reread);
  if (rewritten != written) fuzz::invariant_failed("frame_document is not a fixed point", written, rewritten);
  if (protocol::canonical_frame_bytes(*reread) != protocol::canonical_frame_bytes(frame))
    fuzz::invariant_failed("the canonical form changed on the way round", written);
  std::string text = protocol::render_frame_text(*reread);
  if (text.find(frame.digest) == std::string::npos)
    fuzz::invariant_failed("the frame text does not cite the digest", text);
  return 0;
}
