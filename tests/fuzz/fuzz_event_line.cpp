// One event line through the reader. Invariants: a refusal's message is wire-safe; a line that
// reads re-serializes to a line that reads back as the same event and re-serializes to the
// same bytes (serialization is a fixed point after one pass).
#include "fuzz_invariants.hpp"

using namespace mh;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view line = fuzz::as_text(data, size);
  auto read = protocol::read_event_line(line);
  if (!read) {
    fuzz::expect_wire_safe(read.error().message);
    return 0;
  }
  std::string once = protocol::serialize(*read);
  auto again = protocol::read_event_line(once);
  if (!again) fuzz::invariant_failed("a serialized event does not read back", once, again.error().message);
  if (again->payload.index() != read->payload.index())
    fuzz::invariant_failed("an event changed its name on the way round", once);
  std::string twice = protocol::serialize(*again);
  if (twice != once) fuzz::invariant_failed("serialize(read(serialize(e))) != serialize(e)", once, twice);
  if (once.find('\n') != std::string::npos) fuzz::invariant_failed("a serialized event spans lines", once);
  return 0;
}
