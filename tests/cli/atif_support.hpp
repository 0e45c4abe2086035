// What the ATIF tests share: hand-made event streams, and the check of a document against our
// restated schema (docs/atif/) by the python3-jsonschema validator (tests/cli/atif_validate.py).
#pragma once

#include <gtest/gtest.h>

#include <set>

#include "protocol/events.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {

// A stream written line by line: each add() is one event's fields after the envelope, the seq
// counted for it.
class HandStream {
 public:
  explicit HandStream(std::string run = "r-hand") : run_(std::move(run)) {}
  HandStream& add(const std::string& fields);
  // Frequent records, with every required field.
  HandStream& session_started(const std::string& adapter, const std::string& extra_fields = "");
  HandStream& session_ended(const std::string& fields = "");
  HandStream& stream_closed(const std::string& reason = "completed");
  std::vector<protocol::Event> events() const;  // a line that does not read fails the test
  const std::string& run() const { return run_; }
  std::uint64_t last_seq() const { return lines_.size(); }

 private:
  std::string run_;
  std::vector<std::string> lines_;
};

struct Validation {
  int status = -1;  // 0 valid, 1 invalid, 2 could not validate
  std::string output;
};

// The interpreter that has the jsonschema module: Debian's /usr/bin/python3 (python3-jsonschema,
// installed by ./run setup) first, else the first python3 on PATH. Empty when none has it.
std::string python_with_jsonschema();
// Validates documents (written under `dir`) against docs/atif/atif-v1.8.schema.json.
Validation validate_atif(const std::vector<json::value>& docs, const std::filesystem::path& dir);
Validation validate_atif_file(const std::filesystem::path& file);

// Every "seq" number and every member of a "seqs" array anywhere in the document: where each
// event of the stream landed.
std::multiset<std::uint64_t> seqs_in(const json::value& doc);

}  // namespace mh::test
