// A vendor transcript through an adapter's reader (what `metaharness translate` and a live run
// do with every line the vendor writes). The first byte picks the adapter (even: claude, odd:
// codex); the rest is the transcript. Vendor bytes are untrusted: whatever they are, the reader
// must not crash or hang, and what it produces must be a complete, well-formed stream whose every
// line reads back — a record it cannot map becomes opaque, never a broken line.
#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"
#include "fuzz_invariants.hpp"
#include "protocol/completeness.hpp"

using namespace mh;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1) return 0;
  static adapters::AdapterRegistry registry(adapters::HostConfig{});
  const adapters::Adapter* adapter = registry.find(data[0] % 2 == 0 ? "claude" : "codex");
  if (!adapter) fuzz::invariant_failed("an adapter is missing from the registry");
  std::string_view transcript = fuzz::as_text(data + 1, size - 1);

  std::string stream;
  for (const auto& event : adapter->translate(transcript, "fuzz")) {
    std::string line = protocol::serialize(event);
    if (line.find('\n') != std::string::npos) fuzz::invariant_failed("an event spans lines", line);
    auto back = protocol::read_event_line(line);
    if (!back) fuzz::invariant_failed("a translated event does not read back", line, back.error().message);
    stream += line;
    stream += '\n';
  }
  auto verdict = protocol::check_stream(stream);
  if (!verdict.complete_and_well_formed())
    fuzz::invariant_failed("a translated transcript is not a complete stream", verdict.summary(),
                           verdict.first_bad_reason);
  return 0;
}
