// A vendor record too long to hold (over the vendor line bound), read as it streams past: a SAX
// parse that keeps the record's structure and its small values, and of each long string only its
// first bytes, with the whole string's byte length and SHA-256. An adapter can then still tell
// what the record was (a `result` ends a turn whatever the size of its text) and map it, its long
// content cut the way the stream writer cuts an event (protocol/line_cut.hpp), instead of seeing
// an opaque line and waiting for a turn end that already went by.
//
// Memory is bounded by the budget given (the line bound: what the framer would have held): once
// it is spent, the rest of the record is parsed but not kept, and the skeleton says so.
#pragma once

#include <boost/json/object.hpp>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace mh::protocol {

namespace json = boost::json;

// One string of the record that the skeleton holds only the start of.
struct SkeletonCut {
  std::string pointer;      // RFC 6901 pointer into the record
  std::uint64_t bytes = 0;  // the whole string's UTF-8 byte length
  std::uint64_t kept = 0;   // bytes kept from its start (a UTF-8 character boundary)
  std::string digest;       // SHA-256 (lowercase hex) of the whole string
};

struct RecordSkeleton {
  json::object record;  // the record, its long strings cut to their first bytes
  std::vector<SkeletonCut> cuts;
  // False when the budget ran out: the members after `missing_from` were parsed and not kept.
  bool complete = true;
  std::string missing_from;  // pointer of the first value not kept
};

class SkeletonReader {
 public:
  // `budget`: bytes the skeleton may hold (strings, keys, and a few bytes per value).
  explicit SkeletonReader(std::size_t budget);
  ~SkeletonReader();
  SkeletonReader(SkeletonReader&&) noexcept;
  SkeletonReader& operator=(SkeletonReader&&) noexcept;

  // The record's bytes, in order, in pieces of any size.
  void feed(std::string_view bytes);
  // The skeleton, or nullptr when the bytes were not one JSON object. Valid until the next call
  // to feed() or finish() on this reader.
  const RecordSkeleton* finish();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mh::protocol
