#include "protocol/event_text.hpp"

#include "protocol/json.hpp"

namespace mh::protocol {

namespace {

namespace json = boost::json;

std::string str(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (!v || v->is_null()) return "";
  if (v->is_string()) return std::string(v->get_string());
  return canonical_json(*v);
}

// Single line, bounded: newlines folded, long text cut.
std::string gist(std::string_view text, std::size_t max = 80) {
  std::string flat;
  for (char c : text)
    flat.push_back(c == '\n' || c == '\r' || c == '\t' ? ' ' : c);
  return excerpt(flat, max);
}

std::string quoted(std::string_view text, std::size_t max = 80) {
  return "\"" + gist(text, max) + "\"";
}

// When the line was written (`recorded_at`, the stream writer's clock on every line it writes),
// else the vendor's own time (`at`), as HH:MM:SS.mmm UTC. Never the time of printing: a stream
// read later would look minutes apart or out of order. A line with neither (translate's output
// without vendor times) shows a placeholder.
std::string time_of(const json::object& o) {
  for (auto key : {"recorded_at", "at"}) {
    std::string t = str(o, key);
    auto sep = t.find('T');
    if (sep != std::string::npos && t.size() >= sep + 13) return t.substr(sep + 1, 12);
  }
  return "--:--:--.---";
}

std::string decision_gist(const json::object& o) {
  const json::value* d = o.if_contains("decision");
  if (!d || !d->is_object()) return "?";
  const auto& dec = d->get_object();
  std::string kind = str(dec, "decision");
  std::string out = kind;
  if (kind == "deny") out += " " + quoted(str(dec, "reason"), 60);
  if (kind == "replace") out += " with " + gist(str(dec, "input"), 60);
  out += " by " + str(o, "decided_by");
  if (const json::value* peer = o.if_contains("peer"); peer && peer->is_object())
    out += " (uid " + str(peer->get_object(), "uid") + ", pid " + str(peer->get_object(), "pid") +
           (str(peer->get_object(), "via").empty() ? std::string() : ", via " + str(peer->get_object(), "via")) + ")";
  if (!str(o, "latency_ms").empty()) out += " after " + str(o, "latency_ms") + " ms";
  return out;
}

std::string outcome_gist(const json::object& o) {
  const json::value* v = o.if_contains("outcome");
  if (!v || !v->is_object()) return "?";
  const auto& out = v->get_object();
  if (str(out, "result") == "ok") {
    std::string applies = str(out, "applies_at");
    return "ok" + (applies.empty() ? std::string() : " (applies at " + applies + ")");
  }
  const json::value* r = out.if_contains("refused");
  if (!r || !r->is_object()) return "refused";
  return "refused " + str(r->get_object(), "code") + ": " + gist(str(r->get_object(), "reason"), 100);
}

}  // namespace

namespace {

// U+202A-U+202E (E2 80 AA-AE) and U+2066-U+2069 (E2 81 A6-A9), by their last two UTF-8 bytes.
bool bidi_control(unsigned char second, unsigned char third) {
  return (second == 0x80 && third >= 0xaa && third <= 0xae) || (second == 0x81 && third >= 0xa6 && third <= 0xa9);
}

// `prefix` and `code` in `digits` lowercase hex digits: \x1b, \u009b, \u202e.
void append_escape(std::string& out, std::string_view prefix, unsigned code, int digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += prefix;
  for (int shift = 4 * (digits - 1); shift >= 0; shift -= 4)
    out.push_back(kHex[(code >> shift) & 0xf]);
}

}  // namespace

// What a terminal would act on instead of showing, shown as text: the C0 controls and DEL as
// \xNN, and the C1 controls (U+0080-U+009F, which a terminal may take as ESC sequences in their
// UTF-8 form too) and the bidirectional overrides and isolates as \uNNNN. A run writes the
// model's text and its tools' output into the stream, and a line printed raw could move the
// cursor over the line an approver reads (an outside tester's spoofed `tool.requested`), retitle
// the window or recolour the screen.
std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7f) {
      append_escape(out, "\\x", c, 2);
    } else if (c == 0xc2 && i + 1 < text.size() && static_cast<unsigned char>(text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(text[i + 1]) <= 0x9f) {
      append_escape(out, "\\u", static_cast<unsigned char>(text[++i]), 4);
    } else if (c == 0xe2 && i + 2 < text.size() &&
               bidi_control(static_cast<unsigned char>(text[i + 1]), static_cast<unsigned char>(text[i + 2]))) {
      // A bidirectional override or isolate (U+202A-U+202E, U+2066-U+2069) reorders what the
      // reader sees after it: shown as its code point.
      const unsigned code = 0x2000u + ((static_cast<unsigned char>(text[i + 1]) & 0x3fu) << 6) +
                            (static_cast<unsigned char>(text[i + 2]) & 0x3fu);
      i += 2;
      append_escape(out, "\\u", code, 4);
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

namespace {

// The readable line, before printable().
std::string human_line_of(std::string_view line) {
  auto v = parse_json(line);
  if (!v || !v->is_object() || str(v->get_object(), "format") != "metaharness.event/1") return std::string(line);
  const auto& o = v->get_object();
  std::string event = str(o, "event");
  std::string g;
  if (event == "session.started") {
    g = str(o, "adapter") + " " + str(o, "harness_version") + ", model " + str(o, "model") + ", session " +
        str(o, "session_id");
  } else if (event == "session.ended") {
    const json::value* denials = o.if_contains("permission_denials");
    std::size_t n = denials && denials->is_array() ? denials->get_array().size() : 0;
    g = str(o, "subtype") + (str(o, "is_error") == "true" ? " (error)" : "") + ", " + std::to_string(n) +
        " vendor denial(s), census " + gist(str(o, "census"), 120);
  } else if (event == "turn.started" || event == "turn.ended") {
    g = "turn " + str(o, "turn") + (event == "turn.ended" ? " " + str(o, "stop_reason") : std::string());
  } else if (event == "text" || event == "thinking" || event == "injection") {
    g = quoted(str(o, "text"));
  } else if (event == "thinking.estimate") {
    g = str(o, "estimate") + " tokens (estimate)";
  } else if (event == "tool.requested") {
    g = str(o, "call_id") + " " + str(o, "name") + " " + gist(str(o, "input"), 70);
    if (str(o, "decision_required") == "true") g += " [awaiting a decision, " + str(o, "deadline_ms") + " ms]";
  } else if (event == "tool.decided") {
    g = str(o, "call_id") + " " + decision_gist(o);
  } else if (event == "tool.result") {
    std::string err = str(o, "is_error");
    g = str(o, "call_id") +
        (err == "true"    ? " error"
         : err == "false" ? " ok"
                          : "") +
        " " + gist(str(o, "content"), 70);
  } else if (event == "usage") {
    const json::value* u = o.if_contains("usage");
    if (u && u->is_object())
      g = str(u->get_object(), "input_tokens") + " in, " + str(u->get_object(), "output_tokens") + " out";
  } else if (event == "rate_limit") {
    g = gist(str(o, "info"), 100);
  } else if (event == "command.result") {
    g = str(o, "id") + " " + outcome_gist(o);
  } else if (event == "warning") {
    g = str(o, "code") + ": " + gist(str(o, "message"), 100);
  } else if (event == "opaque") {
    g = str(o, "vendor_type") + "/" + str(o, "vendor_subtype") + " (line " + str(o, "source_line") + ")";
  } else if (event == "auth.expired") {
    g = quoted(str(o, "detail"));
  } else if (event == "stream.closed") {
    g = str(o, "reason") + " after " + str(o, "events") + " event(s), process " + gist(str(o, "process"), 60);
  }
  // A line the writer cut to the bound says so, so a reader never takes a prefix for the whole.
  if (const json::value* cut = o.if_contains("cut"); cut && cut->is_array())
    for (const auto& c : cut->get_array())
      if (c.is_object())
        g += " [" + str(c.get_object(), "field") + " cut: " + str(c.get_object(), "kept") + " of " +
             str(c.get_object(), "bytes") + " bytes kept]";
  std::string out = time_of(o) + "  " + str(o, "seq");
  if (out.size() < 22) out.append(22 - out.size(), ' ');
  out += event;
  if (!g.empty()) {
    if (event.size() < 16) out.append(16 - event.size(), ' ');
    out += " " + g;
  }
  return out;
}

}  // namespace

std::string human_line(std::string_view line) {
  return printable(human_line_of(line));
}

}  // namespace mh::protocol
