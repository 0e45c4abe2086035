#include "protocol/json.hpp"

#include <boost/json/parse.hpp>

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>

namespace mh::protocol {

std::optional<json::value> parse_json(std::string_view text, std::string* error) {
  json::parse_options options;
  options.max_depth = kMaxJsonDepth;
  boost::system::error_code ec;
  json::value v = json::parse(text, ec, json::storage_ptr(), options);
  if (ec) {
    if (error) *error = ec.message();
    return std::nullopt;
  }
  return v;
}

// ---------------------------------------------------------------------------------------------
// JsonWriter
// ---------------------------------------------------------------------------------------------

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Bytes that must be escaped: '"', '\\' and the C0 controls. Everything else, including
// non-ASCII UTF-8 and '/', is written raw (the reference implementation's rule).
constexpr std::array<bool, 256> make_escape_table() {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c) t[c] = true;
  t['"'] = true;
  t['\\'] = true;
  return t;
}
constexpr auto kNeedsEscape = make_escape_table();

void append_escaped(std::string& out, std::string_view s) {
  out.push_back('"');
  std::size_t run_start = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (!kNeedsEscape[c]) continue;
    out.append(s.data() + run_start, i - run_start);
    run_start = i + 1;
    switch (c) {
      case '"': out.append("\\\""); break;
      case '\\': out.append("\\\\"); break;
      case '\n': out.append("\\n"); break;
      case '\r': out.append("\\r"); break;
      case '\t': out.append("\\t"); break;
      case '\b': out.append("\\b"); break;
      case '\f': out.append("\\f"); break;
      default: {
        char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
        out.append(u, 6);
      }
    }
  }
  out.append(s.data() + run_start, s.size() - run_start);
  out.push_back('"');
}

void append_real(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out.append("null");
    return;
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;  // 64 bytes always suffice for the shortest form of a double
  std::string_view text(buf, static_cast<std::size_t>(end - buf));
  out.append(text);
  // An integral value must still read as a float: 1 -> 1.0 (but 1e+21 stays as it is).
  if (text.find_first_of(".eEn") == std::string_view::npos) out.append(".0");
}

template <class Fn>
void for_each_sorted(const json::object& object, Fn&& fn) {
  // Most vendor objects are small: sort pointers on the stack.
  constexpr std::size_t kInline = 16;
  std::array<const json::key_value_pair*, kInline> inline_items;
  std::vector<const json::key_value_pair*> heap_items;
  const json::key_value_pair** items = inline_items.data();
  if (object.size() > kInline) {
    heap_items.resize(object.size());
    items = heap_items.data();
  }
  std::size_t n = 0;
  for (const auto& kv : object) items[n++] = &kv;
  std::sort(items, items + n,
            [](const json::key_value_pair* a, const json::key_value_pair* b) {
              return a->key() < b->key();
            });
  for (std::size_t i = 0; i < n; ++i) fn(*items[i]);
}

}  // namespace

void JsonWriter::key(std::string_view name) {
  separate();
  append_escaped(out_, name);
  out_.push_back(':');
}

void JsonWriter::string(std::string_view text) {
  separate();
  append_escaped(out_, text);
}

void JsonWriter::null() {
  separate();
  out_.append("null");
}

void JsonWriter::boolean(bool v) {
  separate();
  out_.append(v ? "true" : "false");
}

void JsonWriter::integer(std::int64_t v) {
  separate();
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  out_.append(buf, end);
}

void JsonWriter::uinteger(std::uint64_t v) {
  separate();
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  out_.append(buf, end);
}

void JsonWriter::real(double v) {
  separate();
  append_real(out_, v);
}

void JsonWriter::value(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: null(); break;
    case json::kind::bool_: boolean(v.get_bool()); break;
    case json::kind::int64: integer(v.get_int64()); break;
    case json::kind::uint64: uinteger(v.get_uint64()); break;
    case json::kind::double_: real(v.get_double()); break;
    case json::kind::string: string(v.get_string()); break;
    case json::kind::array:
      begin_array();
      for (const auto& element : v.get_array()) value(element);
      end_array();
      break;
    case json::kind::object:
      begin_object();
      for_each_sorted(v.get_object(), [this](const json::key_value_pair& kv) {
        key(kv.key());
        value(kv.value());
      });
      end_object();
      break;
  }
}

void JsonWriter::field(std::string_view k, const std::optional<std::string>& v) {
  key(k);
  if (v) string(*v); else null();
}
void JsonWriter::field_bool(std::string_view k, std::optional<bool> v) {
  key(k);
  if (v) boolean(*v); else null();
}
void JsonWriter::field_u64(std::string_view k, std::optional<std::uint64_t> v) {
  key(k);
  if (v) uinteger(*v); else null();
}
void JsonWriter::field_i64(std::string_view k, std::optional<std::int64_t> v) {
  key(k);
  if (v) integer(*v); else null();
}
void JsonWriter::field_f64(std::string_view k, std::optional<double> v) {
  key(k);
  if (v) real(*v); else null();
}
void JsonWriter::strings(const std::vector<std::string>& v) {
  begin_array();
  for (const auto& s : v) string(s);
  end_array();
}
void JsonWriter::field_strings(std::string_view k, const std::optional<std::vector<std::string>>& v) {
  key(k);
  if (v) strings(*v); else null();
}

std::string canonical_json(const json::value& v) {
  std::string out;
  JsonWriter(out).value(v);
  return out;
}

namespace {
void pretty(std::string& out, const json::value& v, int indent, bool sort_keys) {
  auto newline = [&](int level) {
    out.push_back('\n');
    out.append(static_cast<std::size_t>(level) * 2, ' ');
  };
  switch (v.kind()) {
    case json::kind::array: {
      const auto& a = v.get_array();
      if (a.empty()) {
        out.append("[]");
        return;
      }
      out.push_back('[');
      bool first = true;
      for (const auto& e : a) {
        if (!first) out.push_back(',');
        first = false;
        newline(indent + 1);
        pretty(out, e, indent + 1, sort_keys);
      }
      newline(indent);
      out.push_back(']');
      return;
    }
    case json::kind::object: {
      const auto& o = v.get_object();
      if (o.empty()) {
        out.append("{}");
        return;
      }
      out.push_back('{');
      bool first = true;
      auto member = [&](const json::key_value_pair& kv) {
        if (!first) out.push_back(',');
        first = false;
        newline(indent + 1);
        append_escaped(out, kv.key());
        out.append(": ");
        pretty(out, kv.value(), indent + 1, sort_keys);
      };
      if (sort_keys) for_each_sorted(o, member);
      else for (const auto& kv : o) member(kv);
      newline(indent);
      out.push_back('}');
      return;
    }
    default: {
      std::string scalar;
      JsonWriter(scalar).value(v);
      out.append(scalar);
    }
  }
}
}  // namespace

std::string pretty_json(const json::value& v, bool sort_keys) {
  std::string out;
  pretty(out, v, 0, sort_keys);
  out.push_back('\n');
  return out;
}

// ---------------------------------------------------------------------------------------------
// FieldReader
// ---------------------------------------------------------------------------------------------

std::string excerpt(std::string_view text, std::size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  std::size_t cut = max_bytes;
  // Step back over UTF-8 continuation bytes so the excerpt stays valid text.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return std::string(text.substr(0, cut)) + "\u2026";
}

std::string describe_json(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return v.get_bool() ? "true" : "false";
    case json::kind::int64:
    case json::kind::uint64:
    case json::kind::double_: return "the number " + canonical_json(v);
    case json::kind::string: return "the string " + canonical_json(json::value(excerpt(v.get_string(), 40)));
    case json::kind::array: return "an array";
    case json::kind::object: return "an object";
  }
  return "a value";
}

void FieldReader::fail(std::string message) {
  if (error_.empty()) error_ = context_.empty() ? std::move(message) : context_ + ": " + message;
}

const json::value* FieldReader::find(std::string_view k) const { return object_.if_contains(k); }

void FieldReader::wrong_type(std::string_view k, std::string_view expected, const json::value& found) {
  fail("field \"" + std::string(k) + "\" is " + describe_json(found) + ", expected " +
       std::string(expected));
}

std::string FieldReader::req_string(std::string_view k) {
  const json::value* v = find(k);
  if (!v) {
    fail("missing required field \"" + std::string(k) + "\"");
    return {};
  }
  if (!v->is_string()) {
    wrong_type(k, "a string", *v);
    return {};
  }
  return std::string(v->get_string());
}

std::optional<std::string> FieldReader::opt_string(std::string_view k) {
  const json::value* v = find(k);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_string()) {
    wrong_type(k, "a string or null", *v);
    return std::nullopt;
  }
  return std::string(v->get_string());
}

bool FieldReader::req_bool(std::string_view k) {
  const json::value* v = find(k);
  if (!v) {
    fail("missing required field \"" + std::string(k) + "\"");
    return false;
  }
  if (!v->is_bool()) {
    wrong_type(k, "a boolean", *v);
    return false;
  }
  return v->get_bool();
}

std::optional<bool> FieldReader::opt_bool(std::string_view k) {
  const json::value* v = find(k);
  if (!v || v->is_null()) return std::nullopt;
  if (!v->is_bool()) {
    wrong_type(k, "a boolean or null", *v);
    return std::nullopt;
  }
  return v->get_bool();
}

namespace {
std::optional<std::uint64_t> as_u64(const json::value& v) {
  if (v.is_uint64()) return v.get_uint64();
  if (v.is_int64() && v.get_int64() >= 0) return static_cast<std::uint64_t>(v.get_int64());
  return std::nullopt;
}
}  // namespace

std::uint64_t FieldReader::req_u64(std::string_view k) {
  const json::value* v = find(k);
  if (!v) {
    fail("missing required field \"" + std::string(k) + "\"");
    return 0;
  }
  auto n = as_u64(*v);
  if (!n) {
    wrong_type(k, "a non-negative integer", *v);
    return 0;
  }
  return *n;
}

std::optional<std::uint64_t> FieldReader::opt_u64(std::string_view k) {
  const json::value* v = find(k);
  if (!v || v->is_null()) return std::nullopt;
  auto n = as_u64(*v);
  if (!n) wrong_type(k, "a non-negative integer or null", *v);
  return n;
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
  const json::value* v = find(k);
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_int64()) return v->get_int64();
  if (v->is_uint64() && v->get_uint64() <= static_cast<std::uint64_t>(INT64_MAX))
    return static_cast<std::int64_t>(v->get_uint64());
  wrong_type(k, "an integer or null", *v);
  return std::nullopt;
}

std::optional<double> FieldReader::opt_f64(std::string_view k) {
  const json::value* v = find(k);
  if (!v || v->is_null()) return std::nullopt;
  if (v->is_double()) return v->get_double();
  if (v->is_int64()) return static_cast<double>(v->get_int64());
  if (v->is_uint64()) return static_cast<double>(v->get_uint64());
  wrong_type(k, "a number or null", *v);
  return std::nullopt;
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

const json::object* FieldReader::req_object(std::string_view k) {
  const json::value* v = find(k);
  if (!v) {
    fail("missing required field \"" + std::string(k) + "\"");
    return nullptr;
  }
  if (!v->is_object()) {
    wrong_type(k, "an object", *v);
    return nullptr;
  }
  return &v->get_object();
}

const json::object* FieldReader::opt_object(std::string_view k) {
  const json::value* v = find(k);
  if (!v || v->is_null()) return nullptr;
  if (!v->is_object()) {
    wrong_type(k, "an object or null", *v);
    return nullptr;
  }
  return &v->get_object();
}

const json::array* FieldReader::opt_array(std::string_view k) {
  const json::value* v = find(k);
  if (!v || v->is_null()) return nullptr;
  if (!v->is_array()) {
    wrong_type(k, "an array or null", *v);
    return nullptr;
  }
  return &v->get_array();
}

const json::array* FieldReader::req_array(std::string_view k) {
  const json::value* v = find(k);
  if (!v) {
    fail("missing required field \"" + std::string(k) + "\"");
    return nullptr;
  }
  if (!v->is_array()) {
    wrong_type(k, "an array", *v);
    return nullptr;
  }
  return &v->get_array();
}

}  // namespace mh::protocol
