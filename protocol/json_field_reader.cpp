// FieldReader: a parsed object read into typed values, or one precise complaint naming the field,
// what it held and what was expected. Kept apart from the writer because it is the wire's
// reading side; describe_json and exact_int64 are the value descriptions its complaints use.
#include <cstdint>
#include <limits>

#include "protocol/json.hpp"

namespace mh::protocol {

std::optional<std::int64_t> exact_int64(const json::value& v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64()) {
    if (v.get_uint64() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) return std::nullopt;
    return static_cast<std::int64_t>(v.get_uint64());
  }
  if (v.is_double()) {
    double d = v.get_double();
    // 2^63 is exactly representable; every double below it in magnitude converts without overflow.
    constexpr double kLimit = 9223372036854775808.0;
    if (!(d >= -kLimit && d < kLimit) || d != static_cast<double>(static_cast<std::int64_t>(d))) return std::nullopt;
    return static_cast<std::int64_t>(d);
  }
  return std::nullopt;
}

std::string describe_json(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      return "null";
    case json::kind::bool_:
      return v.get_bool() ? "true" : "false";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_:
      return "the number " + canonical_json(v);
    case json::kind::string:
      return "the string " + canonical_json(json::value(excerpt(v.get_string(), 40)));
    case json::kind::array:
      return "an array";
    case json::kind::object:
      return "an object";
  }
  return "a value";
}

void FieldReader::fail(std::string message) {
  if (error_.empty()) error_ = context_.empty() ? std::move(message) : context_ + ": " + message;
}

const json::value* FieldReader::find(std::string_view k) const {
  return object_.if_contains(k);
}

void FieldReader::wrong_type(std::string_view k, std::string_view expected, const json::value& found) {
  fail("field \"" + std::string(k) + "\" is " + describe_json(found) + ", expected " + std::string(expected));
}

// One typed field: `get` converts the value (nullopt: it is of another type, refused as not
// `expected`). A missing key is refused when the field is required; absent or null reads as
// nullopt when it is nullable.
template <class T, class Get>
std::optional<T> FieldReader::read_as(std::string_view k, bool nullable, std::string_view expected, Get get) {
  const json::value* v = find(k);
  if (!v || (nullable && v->is_null())) {
    if (!nullable) fail("missing required field \"" + std::string(k) + "\"");
    return std::nullopt;
  }
  std::optional<T> out = get(*v);
  if (!out) wrong_type(k, expected, *v);
  return out;
}

namespace {
std::optional<std::string> get_string(const json::value& v) {
  if (!v.is_string()) return std::nullopt;
  return std::string(v.get_string());
}
std::optional<bool> get_bool(const json::value& v) {
  if (!v.is_bool()) return std::nullopt;
  return v.get_bool();
}
std::optional<std::int64_t> get_i64(const json::value& v) {
  if (v.is_int64()) return v.get_int64();
  if (v.is_uint64() && v.get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(v.get_uint64());
  return std::nullopt;
}
std::optional<const json::object*> get_object(const json::value& v) {
  if (!v.is_object()) return std::nullopt;
  return &v.get_object();
}
std::optional<const json::array*> get_array(const json::value& v) {
  if (!v.is_array()) return std::nullopt;
  return &v.get_array();
}
}  // namespace

std::string FieldReader::req_string(std::string_view k) {
  return read_as<std::string>(k, false, "a string", get_string).value_or(std::string());
}

std::optional<std::string> FieldReader::opt_string(std::string_view k) {
  return read_as<std::string>(k, true, "a string or null", get_string);
}

bool FieldReader::req_bool(std::string_view k) {
  return read_as<bool>(k, false, "a boolean", get_bool).value_or(false);
}

std::optional<bool> FieldReader::opt_bool(std::string_view k) {
  return read_as<bool>(k, true, "a boolean or null", get_bool);
}

std::uint64_t FieldReader::req_u64(std::string_view k) {
  return read_as<std::uint64_t>(k, false, "a non-negative integer", as_u64).value_or(0);
}

std::optional<std::uint64_t> FieldReader::opt_u64(std::string_view k) {
  return read_as<std::uint64_t>(k, true, "a non-negative integer or null", as_u64);
}

std::uint32_t FieldReader::req_u32(std::string_view k) {
  std::uint64_t n = req_u64(k);
  if (n > UINT32_MAX) {
    fail("field \"" + std::string(k) + "\" does not fit 32 bits");
    return 0;
  }
  return static_cast<std::uint32_t>(n);
}

std::optional<std::int64_t> FieldReader::opt_i64(std::string_view k) {
  return read_as<std::int64_t>(k, true, "an integer or null", get_i64);
}

std::optional<double> FieldReader::opt_f64(std::string_view k) {
  return read_as<double>(k, true, "a number or null", as_f64);
}

json::value FieldReader::any(std::string_view k) {
  const json::value* v = find(k);
  return v ? *v : json::value(nullptr);
}

std::optional<std::vector<std::string>> FieldReader::opt_strings(std::string_view k) {
  const json::value* v = find(k);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_array()) {
    wrong_type(k, "an array of strings or null", *v);
    return std::nullopt;
  }
  std::vector<std::string> out;
  out.reserve(v->get_array().size());
  for (const auto& e : v->get_array()) {
    if (!e.is_string()) {
      fail("field \"" + std::string(k) + "\" holds " + describe_json(e) + ", expected strings only");
      return std::nullopt;
    }
    out.emplace_back(e.get_string());
  }
  return out;
}

std::vector<std::string> FieldReader::strings_or_empty(std::string_view k) {
  auto v = opt_strings(k);
  return v ? std::move(*v) : std::vector<std::string>{};
}

// Objects and arrays are read in place: the pointer is into the parsed document.
const json::object* FieldReader::req_object(std::string_view k) {
  return read_as<const json::object*>(k, false, "an object", get_object).value_or(nullptr);
}

const json::object* FieldReader::opt_object(std::string_view k) {
  return read_as<const json::object*>(k, true, "an object or null", get_object).value_or(nullptr);
}

const json::array* FieldReader::opt_array(std::string_view k) {
  return read_as<const json::array*>(k, true, "an array or null", get_array).value_or(nullptr);
}

const json::array* FieldReader::req_array(std::string_view k) {
  return read_as<const json::array*>(k, false, "an array", get_array).value_or(nullptr);
}

}  // namespace mh::protocol
