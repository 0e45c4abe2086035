// The JSON layer of the wire: a compact writer with the reference implementation's exact output
// rules, and a field reader that turns a parsed object into typed values or a precise complaint.
//
// Why our own writer: Boost.JSON parses for us, but its serializer keeps insertion order and
// prints doubles as `2.5E-1`. The wire needs protocol objects in declaration order, free-form
// vendor JSON with keys sorted byte-wise at every depth, and shortest round-trip floats that
// always look like floats (`0.0`, `0.25`). Those rules are what make two implementations'
// streams byte-comparable, so they live in exactly one place: here.
#pragma once

#include <boost/json/value.hpp>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mh::protocol {

namespace json = boost::json;

// Nesting bound for every JSON text we parse: vendor tool inputs are shallow in practice and
// a hostile line must not recurse without limit.
inline constexpr std::size_t kMaxJsonDepth = 64;

// Parses one JSON text. Returns nullopt (and a short reason) on any syntax error.
std::optional<json::value> parse_json(std::string_view text, std::string* error = nullptr);

// Appends compact JSON to a caller-owned string. Commas are inferred from the last byte
// written, so a writer can be handed to nested serializers without shared state.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void begin_object() {
    separate();
    out_.push_back('{');
  }
  void end_object() { out_.push_back('}'); }
  void begin_array() {
    separate();
    out_.push_back('[');
  }
  void end_array() { out_.push_back(']'); }

  void key(std::string_view name);
  // A key already in its written form (`"name":`), for keys known at compile time that need no
  // escaping (protocol/wire_codec.hpp builds them from the type descriptions).
  void key_literal(std::string_view quoted_key) {
    separate();
    out_.append(quoted_key);
  }
  // Escapes '"', '\\' and controls (\n \r \t \b \f short, others \u00xx); writes '/' and UTF-8
  // raw; a byte that is not part of well-formed UTF-8 is written as U+FFFD.
  void string(std::string_view text);
  void null();
  void boolean(bool v);
  void integer(std::int64_t v);
  void uinteger(std::uint64_t v);
  // Shortest round-trip form; integral values get `.0`; non-finite values become null.
  void real(double v);
  // Free-form JSON: object keys sorted byte-wise at every depth (the canonical form).
  void value(const json::value& v);

  // Field helpers: `key` followed by the value, `null` for an empty optional.
  void field(std::string_view k, std::string_view v) {
    key(k);
    string(v);
  }
  void field(std::string_view k, const std::string& v) {
    key(k);
    string(v);
  }
  void field(std::string_view k, const char* v) {
    key(k);
    string(v);
  }
  void field(std::string_view k, const std::optional<std::string>& v);
  void field_bool(std::string_view k, std::optional<bool> v);
  void field_u64(std::string_view k, std::optional<std::uint64_t> v);
  void field_i64(std::string_view k, std::optional<std::int64_t> v);
  void field_f64(std::string_view k, std::optional<double> v);
  void field_json(std::string_view k, const json::value& v) {
    key(k);
    value(v);
  }
  void field_strings(std::string_view k, const std::optional<std::vector<std::string>>& v);
  void strings(const std::vector<std::string>& v);

  std::string& out() { return out_; }

 private:
  void separate() {
    if (!out_.empty()) {
      char last = out_.back();
      if (last != '{' && last != '[' && last != ':' && last != ',' && last != '\n') out_.push_back(',');
    }
  }
  std::string& out_;
};

// Canonical compact text of a free-form value (sorted keys at every depth).
std::string canonical_json(const json::value& v);
// Pretty form with two-space indentation, `"key": value`, trailing newline: the layout of a
// frame document on disk (keys sorted) and of descriptors whose field order is documented
// (sort_keys = false keeps insertion order).
std::string pretty_json(const json::value& v, bool sort_keys = true);

// Reads typed fields out of one JSON object and remembers the first thing that did not fit,
// naming the field and what was found. Missing nullable fields read as null (absent and null
// are the same to a reader; only writers must never omit).
class FieldReader {
 public:
  FieldReader(const json::object& object, std::string context) : object_(object), context_(std::move(context)) {}

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  void fail(std::string message);
  const json::object& object() const { return object_; }

  std::string req_string(std::string_view k);
  std::optional<std::string> opt_string(std::string_view k);
  bool req_bool(std::string_view k);
  std::optional<bool> opt_bool(std::string_view k);
  std::uint64_t req_u64(std::string_view k);
  std::optional<std::uint64_t> opt_u64(std::string_view k);
  std::uint32_t req_u32(std::string_view k);
  std::optional<std::int64_t> opt_i64(std::string_view k);
  std::optional<double> opt_f64(std::string_view k);
  // Any JSON, including null; a missing key reads as null.
  json::value any(std::string_view k);
  std::optional<std::vector<std::string>> opt_strings(std::string_view k);
  std::vector<std::string> strings_or_empty(std::string_view k);
  const json::object* req_object(std::string_view k);
  const json::object* opt_object(std::string_view k);
  const json::array* opt_array(std::string_view k);
  const json::array* req_array(std::string_view k);

 private:
  const json::value* find(std::string_view k) const;
  void wrong_type(std::string_view k, std::string_view expected, const json::value& found);
  template <class T, class Get>
  std::optional<T> read_as(std::string_view k, bool nullable, std::string_view expected, Get get);

  const json::object& object_;
  std::string context_;
  std::string error_;
};

// Lenient getters for vendor records, which are untrusted and shaped as the vendor pleases: a
// field that is missing, null or of another type reads as unknown (nullopt, or nullptr), never as
// an error and never as a default. FieldReader above is the strict counterpart for the wire's own
// lines; both read numbers through as_u64 / as_f64, so a number means the same to each.
std::optional<std::string> string_at(const json::object& o, std::string_view key);
std::optional<bool> bool_at(const json::object& o, std::string_view key);
std::optional<std::uint64_t> u64_at(const json::object& o, std::string_view key);
// The first of `keys` that holds a non-negative integer (a vendor that spells one field two ways).
std::optional<std::uint64_t> u64_at(const json::object& o, std::initializer_list<std::string_view> keys);
std::optional<double> f64_at(const json::object& o, std::string_view key);
const json::object* object_at(const json::object& o, std::string_view key);
const json::array* array_at(const json::object& o, std::string_view key);
// The string elements of an array, in order (other elements are skipped); a missing key or a
// value that is not an array is unknown (nullopt), never [].
std::optional<std::vector<std::string>> strings_at(const json::object& o, std::string_view key);

// A non-negative integer (int64 >= 0 or uint64); anything else, a double included, is nullopt.
std::optional<std::uint64_t> as_u64(const json::value& v);
// Any number, as a double; anything else is nullopt.
std::optional<double> as_f64(const json::value& v);

// An integer a vendor wrote, when it is one that fits: int64, a uint64 up to INT64_MAX, or a
// double with no fraction inside the int64 range. Anything else (1e300, 2^64-1, 1.5, a string)
// is nullopt, never an exception or an overflowing cast: vendor bytes are untrusted.
std::optional<std::int64_t> exact_int64(const json::value& v);

// A short, bounded human description of a JSON value for refusal messages ("a number",
// "the string \"allo…\"").
std::string describe_json(const json::value& v);
// `text` with each character that `escapes` names replaced by its escape (a small table:
// RFC 6901's ~0 and ~1, the Prometheus text format's \\ \" \n).
std::string escape_chars(std::string_view text, std::initializer_list<std::pair<char, std::string_view>> escapes);
// First `max_bytes` of a text, cut at a UTF-8 boundary, with an ellipsis when cut. Bytes that
// are not UTF-8 come out as U+FFFD, so an excerpt is always safe to write on the wire.
std::string excerpt(std::string_view text, std::size_t max_bytes = 80);
// Length (1-4) of the well-formed UTF-8 sequence starting at text[i], or 0 when the bytes there
// are not one (overlong forms, surrogates and code points above U+10FFFF are not).
std::size_t utf8_sequence_length(std::string_view text, std::size_t i);

}  // namespace mh::protocol
