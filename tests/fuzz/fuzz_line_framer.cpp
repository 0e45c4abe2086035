// The line framer against a plain reference split. The first two bytes choose the bound
// (1..256) and the chunk size (1..64); the rest is the stream. Invariants: the framer never
// holds more than the bound; it yields exactly the reference's lines, numbered from 1; a line
// over the bound is reported too long with its true length and the SHA-256 of its bytes.
#include <vector>

#include "fuzz_invariants.hpp"
#include "protocol/digest.hpp"
#include "protocol/line_framer.hpp"

using namespace mh;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  const std::size_t bound = 1 + data[0];
  const std::size_t chunk = 1 + (data[1] % 64);
  std::string_view stream = fuzz::as_text(data + 2, size - 2);

  std::vector<std::string_view> expected;
  for (std::size_t start = 0; start < stream.size();) {
    std::size_t nl = stream.find('\n', start);
    if (nl == std::string_view::npos) {
      expected.push_back(stream.substr(start));
      break;
    }
    expected.push_back(stream.substr(start, nl - start));
    start = nl + 1;
  }
  const bool ends_unterminated = !stream.empty() && stream.back() != '\n';

  protocol::LineFramer framer(bound, /*digest_oversized=*/true);
  std::size_t seen = 0;
  auto sink = [&](const protocol::FramedLine& line) {
    if (seen >= expected.size()) fuzz::invariant_failed("the framer yielded more lines than the stream has");
    std::string_view want = expected[seen];
    ++seen;
    if (line.number != seen) fuzz::invariant_failed("lines are not numbered 1, 2, 3, ...");
    if (line.length != want.size()) fuzz::invariant_failed("a line's length is wrong", want);
    if (line.unterminated != (ends_unterminated && seen == expected.size()))
      fuzz::invariant_failed("the unterminated flag is wrong", want);
    if (want.size() > bound) {
      if (!line.too_long) fuzz::invariant_failed("a line over the bound was not reported too long", want);
      if (line.digest != protocol::sha256_hex(want))
        fuzz::invariant_failed("an oversized line's digest is wrong", want);
      if (want.substr(0, line.head.size()) != line.head)
        fuzz::invariant_failed("an oversized line's head is wrong", want);
    } else {
      if (line.too_long) fuzz::invariant_failed("a line within the bound was reported too long", want);
      if (line.text != want) fuzz::invariant_failed("a line's text is wrong", want, line.text);
    }
  };
  for (std::size_t i = 0; i < stream.size(); i += chunk) {
    framer.feed(stream.substr(i, chunk), sink);
    if (framer.buffered() > bound) fuzz::invariant_failed("the framer holds more than its bound");
  }
  framer.finish(sink);
  if (seen != expected.size()) fuzz::invariant_failed("the framer yielded fewer lines than the stream has");
  if (framer.buffered() != 0) fuzz::invariant_failed("the framer holds bytes after finish");
  return 0;
}
