// JsonWriter and the text it writes: string escaping, ryu-style doubles, byte-sorted keys,
// canonical and pretty forms, and excerpt (raw text made safe to quote on the wire). The wire's
// exact output rules live here alone; parsing is json_parse.cpp, typed reading json_field_reader.cpp.
#include "protocol/json.hpp"

#include <algorithm>
#include <array>
#include <boost/json/visit.hpp>
#include <charconv>
#include <cmath>
#include <vector>

namespace mh::protocol {

std::size_t utf8_sequence_length(std::string_view s, std::size_t i) {
  auto byte = [&](std::size_t k) -> unsigned {
    return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : 0x100u;
  };
  auto continuation = [](unsigned b, unsigned lo = 0x80, unsigned hi = 0xBF) { return b >= lo && b <= hi; };
  unsigned b0 = byte(0);
  if (b0 < 0x80) return 1;
  if (b0 >= 0xC2 && b0 <= 0xDF) return continuation(byte(1)) ? 2 : 0;
  if (b0 >= 0xE0 && b0 <= 0xEF) {
    // E0 needs A0..BF (no overlong forms), ED needs 80..9F (no surrogates).
    unsigned lo = b0 == 0xE0 ? 0xA0 : 0x80, hi = b0 == 0xED ? 0x9F : 0xBF;
    return continuation(byte(1), lo, hi) && continuation(byte(2)) ? 3 : 0;
  }
  if (b0 >= 0xF0 && b0 <= 0xF4) {
    // F0 needs 90..BF (no overlong forms), F4 needs 80..8F (nothing above U+10FFFF).
    unsigned lo = b0 == 0xF0 ? 0x90 : 0x80, hi = b0 == 0xF4 ? 0x8F : 0xBF;
    return continuation(byte(1), lo, hi) && continuation(byte(2)) && continuation(byte(3)) ? 4 : 0;
  }
  return 0;
}

namespace {

constexpr char kHex[] = "0123456789abcdef";

// Bytes that need a look: '"', '\\' and the C0 controls are escaped; bytes >= 0x80 start a
// multi-byte UTF-8 sequence that is checked. Everything else, including '/', is written raw.
constexpr std::array<bool, 256> make_escape_table() {
  std::array<bool, 256> t{};
  for (int c = 0; c < 0x20; ++c)
    t[c] = true;
  for (int c = 0x80; c < 0x100; ++c)
    t[c] = true;
  t['"'] = true;
  t['\\'] = true;
  return t;
}
constexpr auto kNeedsEscape = make_escape_table();

// The characters JSON escapes with a letter (\" \\ \n \r \t \b \f); 0 for the rest, which are
// written \u00xx.
constexpr std::array<char, 128> make_short_escapes() {
  std::array<char, 128> t{};
  t['"'] = '"';
  t['\\'] = '\\';
  t['\n'] = 'n';
  t['\r'] = 'r';
  t['\t'] = 't';
  t['\b'] = 'b';
  t['\f'] = 'f';
  return t;
}
constexpr auto kShortEscapes = make_short_escapes();

constexpr std::string_view kReplacementCharacter = "\xEF\xBF\xBD";  // U+FFFD

void append_escaped(std::string& out, std::string_view s) {
  out.push_back('"');
  std::size_t run_start = 0;
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    if (!kNeedsEscape[c]) {
      ++i;
      continue;
    }
    if (c >= 0x80) {
      // Non-ASCII is written raw when it is UTF-8. A string built from bytes that are not
      // (raw process output, a cut excerpt) gets U+FFFD for each bad byte, so the writer never
      // emits a line that a JSON reader, ours included, would refuse.
      std::size_t n = utf8_sequence_length(s, i);
      if (n > 0) {
        i += n;
        continue;
      }
      out.append(s.data() + run_start, i - run_start);
      out.append(kReplacementCharacter);
      run_start = ++i;
      continue;
    }
    out.append(s.data() + run_start, i - run_start);
    run_start = ++i;
    if (char letter = kShortEscapes[c]) {
      char e[2] = {'\\', letter};
      out.append(e, 2);
    } else {
      char u[6] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF]};
      out.append(u, 6);
    }
  }
  out.append(s.data() + run_start, s.size() - run_start);
  out.push_back('"');
}

// The reference implementation prints doubles with ryu's pretty printer (serde_json). Its
// layout is not std::to_chars's: to_chars picks whichever of fixed and scientific is shorter
// (0.0001 -> "1e-04", 1000000.0 -> "1e+06"), ryu decides by the decimal exponent alone
// (0.0001 -> "0.0001", 1000000.0 -> "1000000.0", 1e16 -> "1e16", 1e-7 -> "1e-7"). So take the
// shortest round-trip digits from to_chars in scientific form and lay them out as ryu does.
void append_real(std::string& out, double v) {
  if (!std::isfinite(v)) {
    out.append("null");
    return;
  }
  char sci[40];
  auto [end, ec] = std::to_chars(sci, sci + sizeof sci, v, std::chars_format::scientific);
  (void)ec;  // 40 bytes always suffice: at most "-d.dddddddddddddddde-ddd"
  const char* p = sci;
  if (*p == '-') {
    out.push_back('-');
    ++p;
  }
  char digits[20];
  int length = 0;
  for (; p < end && *p != 'e'; ++p)
    if (*p != '.') digits[length++] = *p;
  ++p;  // 'e'
  bool negative_exponent = *p == '-';
  ++p;  // the exponent's sign is always written
  int exponent = 0;
  for (; p < end; ++p)
    exponent = exponent * 10 + (*p - '0');
  if (negative_exponent) exponent = -exponent;

  if (length == 1 && digits[0] == '0') {  // zero, either sign
    out.append("0.0");
    return;
  }
  // ryu's terms: the value is digits x 10^k, and 10^(kk-1) <= value < 10^kk.
  const int kk = exponent + 1;
  const int k = kk - length;
  std::string_view all(digits, static_cast<std::size_t>(length));
  if (k >= 0 && kk <= 16) {  // 1234e7 -> 12340000000.0
    out.append(all);
    out.append(static_cast<std::size_t>(k), '0');
    out.append(".0");
  } else if (kk > 0 && kk <= 16) {  // 1234e-2 -> 12.34
    out.append(all.substr(0, static_cast<std::size_t>(kk)));
    out.push_back('.');
    out.append(all.substr(static_cast<std::size_t>(kk)));
  } else if (kk > -5 && kk <= 0) {  // 1234e-6 -> 0.001234
    out.append("0.");
    out.append(static_cast<std::size_t>(-kk), '0');
    out.append(all);
  } else {  // 1e30, 1234e30 -> 1.234e33, 1e-7
    out.push_back(digits[0]);
    if (length > 1) {
      out.push_back('.');
      out.append(all.substr(1));
    }
    out.push_back('e');
    char buf[8];
    auto [exp_end, exp_ec] = std::to_chars(buf, buf + sizeof buf, kk - 1);
    (void)exp_ec;
    out.append(buf, exp_end);
  }
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
  for (const auto& kv : object)
    items[n++] = &kv;
  std::sort(items, items + n,
            [](const json::key_value_pair* a, const json::key_value_pair* b) { return a->key() < b->key(); });
  for (std::size_t i = 0; i < n; ++i)
    fn(*items[i]);
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

namespace {
// A 64-bit integer in decimal: 24 bytes always hold it, so to_chars cannot fail.
template <class Integer>
void append_integer(std::string& out, Integer v) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
  (void)ec;
  out.append(buf, end);
}
}  // namespace

void JsonWriter::integer(std::int64_t v) {
  separate();
  append_integer(out_, v);
}

void JsonWriter::uinteger(std::uint64_t v) {
  separate();
  append_integer(out_, v);
}

void JsonWriter::real(double v) {
  separate();
  append_real(out_, v);
}

void JsonWriter::value(const json::value& v) {
  // One overload per kind (json::visit dispatches); an object's keys are written sorted.
  struct Write {
    JsonWriter& w;
    void operator()(std::nullptr_t) const { w.null(); }
    void operator()(bool b) const { w.boolean(b); }
    void operator()(std::int64_t n) const { w.integer(n); }
    void operator()(std::uint64_t n) const { w.uinteger(n); }
    void operator()(double d) const { w.real(d); }
    void operator()(const json::string& s) const { w.string(s); }
    void operator()(const json::array& a) const {
      w.begin_array();
      for (const auto& element : a)
        w.value(element);
      w.end_array();
    }
    void operator()(const json::object& o) const {
      w.begin_object();
      for_each_sorted(o, [this](const json::key_value_pair& kv) {
        w.key(kv.key());
        w.value(kv.value());
      });
      w.end_object();
    }
  };
  json::visit(Write{*this}, v);
}

namespace {
// `"k":` then the value through `write`, or null.
template <class T, class Write>
void field_or_null(JsonWriter& w, std::string_view k, const std::optional<T>& v, Write write) {
  w.key(k);
  if (v)
    write(*v);
  else
    w.null();
}
}  // namespace

void JsonWriter::field(std::string_view k, const std::optional<std::string>& v) {
  field_or_null(*this, k, v, [this](const std::string& s) { string(s); });
}
void JsonWriter::field_bool(std::string_view k, std::optional<bool> v) {
  field_or_null(*this, k, v, [this](bool b) { boolean(b); });
}
void JsonWriter::field_u64(std::string_view k, std::optional<std::uint64_t> v) {
  field_or_null(*this, k, v, [this](std::uint64_t n) { uinteger(n); });
}
void JsonWriter::field_i64(std::string_view k, std::optional<std::int64_t> v) {
  field_or_null(*this, k, v, [this](std::int64_t n) { integer(n); });
}
void JsonWriter::field_f64(std::string_view k, std::optional<double> v) {
  field_or_null(*this, k, v, [this](double d) { real(d); });
}
void JsonWriter::strings(const std::vector<std::string>& v) {
  begin_array();
  for (const auto& s : v)
    string(s);
  end_array();
}
void JsonWriter::field_strings(std::string_view k, const std::optional<std::vector<std::string>>& v) {
  field_or_null(*this, k, v, [this](const std::vector<std::string>& list) { strings(list); });
}

std::string canonical_json(const json::value& v) {
  std::string out;
  JsonWriter(out).value(v);
  return out;
}

namespace {
// A container's brackets and the separators between its members, each member on a line of its
// own one level deeper; an empty container is written whole ("[]", "{}").
class PrettyMembers {
 public:
  PrettyMembers(std::string& out, int indent, char open, char close, bool empty)
      : out_(out), indent_(indent), close_(close) {
    out_.push_back(open);
    if (empty) out_.push_back(close);
    done_ = empty;
  }
  bool empty() const { return done_; }
  // Before each member.
  void next() {
    if (!first_) out_.push_back(',');
    first_ = false;
    newline(indent_ + 1);
  }
  void close() {
    newline(indent_);
    out_.push_back(close_);
  }

 private:
  void newline(int level) {
    out_.push_back('\n');
    out_.append(static_cast<std::size_t>(level) * 2, ' ');
  }
  std::string& out_;
  int indent_;
  char close_;
  bool first_ = true;
  bool done_ = false;
};

void pretty(std::string& out, const json::value& v, int indent, bool sort_keys) {
  if (const json::array* a = v.if_array()) {
    PrettyMembers members(out, indent, '[', ']', a->empty());
    if (members.empty()) return;
    for (const auto& e : *a) {
      members.next();
      pretty(out, e, indent + 1, sort_keys);
    }
    members.close();
  } else if (const json::object* o = v.if_object()) {
    PrettyMembers members(out, indent, '{', '}', o->empty());
    if (members.empty()) return;
    auto member = [&](const json::key_value_pair& kv) {
      members.next();
      append_escaped(out, kv.key());
      out.append(": ");
      pretty(out, kv.value(), indent + 1, sort_keys);
    };
    if (sort_keys)
      for_each_sorted(*o, member);
    else
      for (const auto& kv : *o)
        member(kv);
    members.close();
  } else {
    std::string scalar;  // a writer of its own: JsonWriter separates by what `out` ends with
    JsonWriter(scalar).value(v);
    out.append(scalar);
  }
}
}  // namespace

std::string pretty_json(const json::value& v, bool sort_keys) {
  std::string out;
  pretty(out, v, 0, sort_keys);
  out.push_back('\n');
  return out;
}

std::string escape_chars(std::string_view text, std::initializer_list<std::pair<char, std::string_view>> escapes) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    auto escape = std::find_if(escapes.begin(), escapes.end(), [c](const auto& e) { return e.first == c; });
    if (escape != escapes.end())
      out += escape->second;
    else
      out.push_back(c);
  }
  return out;
}

std::string excerpt(std::string_view text, std::size_t max_bytes) {
  // Excerpts quote raw input (a line that did not parse may not be UTF-8 at all) into refusal
  // messages that go back on the wire, so invalid bytes become U+FFFD and a cut never splits a
  // character.
  std::string out;
  std::size_t i = 0;
  const std::size_t limit = text.size() <= max_bytes ? text.size() : max_bytes;
  while (i < text.size()) {
    std::size_t n = utf8_sequence_length(text, i);
    std::size_t width = n > 0 ? n : 1;
    if (i + width > limit) break;
    if (n > 0)
      out.append(text.substr(i, n));
    else
      out.append(kReplacementCharacter);
    i += width;
  }
  if (i < text.size()) out += "\u2026";
  return out;
}

}  // namespace mh::protocol
