// The stream checker, whole and in chunks. The first byte chooses the chunk size (1..256).
// Invariants: chunking never changes the verdict; Complete means exactly one marker, last, with
// the right count; a reason is always given and is wire-safe.
#include "fuzz_invariants.hpp"
#include "protocol/completeness.hpp"

using namespace mh;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  const std::size_t chunk = 1 + data[0];
  std::string_view stream = fuzz::as_text(data + 1, size - 1);

  protocol::StreamVerdict whole = protocol::check_stream(stream);
  protocol::StreamChecker checker;
  for (std::size_t i = 0; i < stream.size(); i += chunk)
    checker.feed(stream.substr(i, chunk));
  protocol::StreamVerdict pieces = checker.finish();

  if (whole.kind != pieces.kind || whole.reason != pieces.reason || whole.lines != pieces.lines ||
      whole.first_bad_line != pieces.first_bad_line || whole.first_bad_reason != pieces.first_bad_reason)
    fuzz::invariant_failed("chunking changed the verdict", whole.summary(), pieces.summary());
  if (whole.reason.empty()) fuzz::invariant_failed("a verdict without a reason");
  if (whole.first_bad_line && whole.first_bad_reason.empty()) fuzz::invariant_failed("a bad line without a reason");
  if (whole.kind == protocol::Completeness::Complete) {
    if (whole.lines == 0 || whole.events_before_marker + 1 != whole.lines)
      fuzz::invariant_failed("Complete without the marker being last and counting the lines", whole.summary());
  }
  fuzz::expect_wire_safe(whole.summary());
  fuzz::expect_wire_safe(whole.first_bad_reason);
  return 0;
}
