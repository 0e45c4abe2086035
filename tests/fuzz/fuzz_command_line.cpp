// One command line through the reader. Invariants: a refusal is answerable — the
// command.result built from it (under the id read, or "-") is a readable event line; a command
// that reads re-serializes to a line that reads back and re-serializes to the same bytes.
#include "fuzz_invariants.hpp"

using namespace mh;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view line = fuzz::as_text(data, size);
  auto read = protocol::read_command_line(line);
  if (!read) {
    const protocol::LineRefusal& refusal = read.error();
    protocol::Event answer{1, "fuzz", std::nullopt,
                           protocol::ev::CommandResult{refusal.id.value_or("-"), protocol::outcome_for(refusal)}};
    std::string answer_line = protocol::serialize(answer);
    auto back = protocol::read_event_line(answer_line);
    if (!back)
      fuzz::invariant_failed("the answer to a refused command does not read", answer_line, back.error().message);
    if (protocol::serialize(*back) != answer_line)
      fuzz::invariant_failed("the answer to a refused command is not a fixed point", answer_line);
    return 0;
  }
  std::string once = protocol::serialize(*read);
  auto again = protocol::read_command_line(once);
  if (!again) fuzz::invariant_failed("a serialized command does not read back", once, again.error().message);
  if (again->id != read->id) fuzz::invariant_failed("a command changed its id on the way round", once);
  if (again->payload.index() != read->payload.index())
    fuzz::invariant_failed("a command changed its name on the way round", once);
  std::string twice = protocol::serialize(*again);
  if (twice != once) fuzz::invariant_failed("serialize(read(serialize(c))) != serialize(c)", once, twice);
  return 0;
}
