#include "protocol/line_cut.hpp"

#include <algorithm>

#include "protocol/digest.hpp"
#include "protocol/json.hpp"

namespace mh::protocol {

namespace {

// Each round serializes the whole event again: a cut line costs a few rounds, and only a line
// over the bound ever pays for one.
constexpr int kMaxRounds = 64;
// What one cut record adds to the line, beyond its field name and pointer (keys, numbers, digest).
constexpr std::size_t kCutRecordBytes = 160;

// A payload field whose content may be cut: a typed string, or a free-form JSON value.
struct Slot {
  std::string field;
  std::string pointer;
  std::string* text = nullptr;
  json::value* value = nullptr;
};

void slots_of(ev::Text& e, std::vector<Slot>& out) {
  out.push_back({"text", "/text", &e.text, nullptr});
}
void slots_of(ev::Thinking& e, std::vector<Slot>& out) {
  out.push_back({"text", "/text", &e.text, nullptr});
}
void slots_of(ev::Injection& e, std::vector<Slot>& out) {
  out.push_back({"text", "/text", &e.text, nullptr});
}
void slots_of(ev::Warning& e, std::vector<Slot>& out) {
  out.push_back({"message", "/message", &e.message, nullptr});
}
void slots_of(ev::ToolRequested& e, std::vector<Slot>& out) {
  out.push_back({"input", "/input", nullptr, &e.input});
}
void slots_of(ev::ToolResult& e, std::vector<Slot>& out) {
  out.push_back({"content", "/content", nullptr, &e.content});
  out.push_back({"tool_use_result", "/tool_use_result", nullptr, &e.tool_use_result});
}
void slots_of(ev::SessionEnded& e, std::vector<Slot>& out) {
  if (e.final_answer) out.push_back({"final_answer", "/final_answer/text", &e.final_answer->text, nullptr});
  if (e.permission_denials)
    for (std::size_t i = 0; i < e.permission_denials->size(); ++i)
      out.push_back({"permission_denials", "/permission_denials/" + std::to_string(i) + "/tool_input", nullptr,
                     &(*e.permission_denials)[i].tool_input});
}
template <class T>
void slots_of(T&, std::vector<Slot>&) {}

std::vector<Slot> slots(EventPayload& payload) {
  std::vector<Slot> out;
  std::visit([&](auto& e) { slots_of(e, out); }, payload);
  return out;
}

// One string that may be shortened, wherever it sits.
struct Leaf {
  std::string field;
  std::string pointer;
  std::string* text = nullptr;
  json::string* json_text = nullptr;

  std::string_view view() const {
    return text ? std::string_view(*text) : std::string_view(json_text->data(), json_text->size());
  }
  std::size_t size() const { return view().size(); }
  void keep(std::size_t n) {
    if (text)
      text->resize(n);
    else
      json_text->resize(n);
  }
};

void leaves_in(const std::string& field, const std::string& pointer, json::value& v, std::vector<Leaf>& out) {
  if (v.is_string()) {
    out.push_back({field, pointer, nullptr, &v.get_string()});
  } else if (v.is_array()) {
    auto& a = v.get_array();
    for (std::size_t i = 0; i < a.size(); ++i)
      leaves_in(field, pointer + "/" + std::to_string(i), a[i], out);
  } else if (v.is_object()) {
    for (auto& kv : v.get_object())
      leaves_in(field, pointer + "/" + pointer_token(kv.key()), kv.value(), out);
  }
}

// The longest prefix of at most n bytes that ends on a character boundary (a cut never splits a
// UTF-8 sequence; bytes that were not UTF-8 to begin with the writer replaces anyway).
std::size_t boundary(std::string_view s, std::size_t n) {
  if (n >= s.size()) return s.size();
  for (int back = 0; back < 3 && n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80; ++back)
    --n;
  return n;
}

std::size_t reserialize(std::string& out, std::size_t start, const Event& event) {
  out.resize(start);
  serialize_to(out, event);
  return out.size() - start;
}

// Shortens one leaf by enough to cover `over` bytes (a removed byte is at least one serialized
// byte), recording the cut the first time. False when cutting it cannot shorten the line.
bool cut_leaf(Event& event, Leaf& leaf, const std::string& form, std::size_t over) {
  auto recorded =
      std::find_if(event.cut.begin(), event.cut.end(), [&](const CutField& c) { return c.pointer == leaf.pointer; });
  std::size_t record = recorded == event.cut.end() ? kCutRecordBytes + leaf.field.size() + leaf.pointer.size() : 0;
  if (leaf.size() <= record) return false;  // the record would cost more than the cut saves
  std::size_t need = over + record;
  std::size_t target = boundary(leaf.view(), leaf.size() > need ? leaf.size() - need : 0);
  if (recorded == event.cut.end()) {
    event.cut.push_back(CutField{leaf.field, leaf.pointer, form, leaf.size(), 0, sha256_hex(leaf.view())});
    recorded = event.cut.end() - 1;
  }
  leaf.keep(target);
  recorded->kept = target;
  return true;
}

// First try: the longest strings inside the candidate fields, structure kept.
bool cut_strings(std::string& out, std::size_t start, Event& event, std::size_t max) {
  std::vector<Leaf> leaves;
  for (auto& slot : slots(event.payload)) {
    if (slot.text)
      leaves.push_back({slot.field, slot.pointer, slot.text, nullptr});
    else
      leaves_in(slot.field, slot.pointer, *slot.value, leaves);
  }
  for (int round = 0; round < kMaxRounds; ++round) {
    std::size_t length = reserialize(out, start, event);
    if (length <= max) return true;
    auto longest = std::max_element(leaves.begin(), leaves.end(),
                                    [](const Leaf& a, const Leaf& b) { return a.size() < b.size(); });
    if (longest == leaves.end() || !cut_leaf(event, *longest, "text", length - max)) return false;
  }
  return reserialize(out, start, event) <= max;
}

// Second try: whole fields, a non-string value replaced by its canonical JSON text, then cut.
bool cut_values(std::string& out, std::size_t start, Event& event, std::size_t max) {
  std::vector<Slot> fields = slots(event.payload);
  for (int round = 0; round < kMaxRounds; ++round) {
    std::size_t length = reserialize(out, start, event);
    if (length <= max) return true;
    Slot* largest = nullptr;
    std::size_t largest_size = 0;
    std::string largest_text;
    for (auto& slot : fields) {
      std::string text;
      std::size_t size = slot.text                 ? slot.text->size()
                         : slot.value->is_string() ? slot.value->get_string().size()
                                                   : (text = canonical_json(*slot.value)).size();
      if (size > largest_size) {
        largest = &slot;
        largest_size = size;
        largest_text = std::move(text);
      }
    }
    if (!largest) return false;
    std::string form = "text";
    if (largest->value && !largest->value->is_string()) {
      form = "json";
      *largest->value = json::string(largest_text);
    }
    Leaf leaf{largest->field, largest->pointer, largest->text,
              largest->value ? &largest->value->get_string() : nullptr};
    if (!cut_leaf(event, leaf, form, length - max)) return false;
  }
  return reserialize(out, start, event) <= max;
}

}  // namespace

std::size_t serialize_within(std::string& out, Event& event, std::size_t max_line_bytes) {
  const std::size_t start = out.size();
  const std::size_t whole = reserialize(out, start, event);
  if (whole <= max_line_bytes) return whole;
  const std::string whole_digest = sha256_hex(std::string_view(out).substr(start));
  const Event original = event;
  if (cut_strings(out, start, event, max_line_bytes)) return out.size() - start;
  event = original;
  if (cut_values(out, start, event, max_line_bytes)) return out.size() - start;
  // What is never cut is itself over the bound: say so in the event's place.
  std::string name(event_name(original.payload));
  Event warning{original.seq, original.run, original.at,
                ev::Warning{"EVENT_TOO_LONG", "a " + name + " event of " + std::to_string(whole) +
                                                  " bytes could not be cut to the " + std::to_string(max_line_bytes) +
                                                  "-byte event line bound (what is never cut is over it); the "
                                                  "line's SHA-256 is " +
                                                  whole_digest + ", and the vendor transcript holds the whole record"}};
  warning.recorded_at = original.recorded_at;
  event = std::move(warning);
  return reserialize(out, start, event);
}

// RFC 6901: '~' and '/' in a key are escaped.
std::string pointer_token(std::string_view key) {
  return escape_chars(key, {{'~', "~0"}, {'/', "~1"}});
}

}  // namespace mh::protocol
