#include "protocol/types.hpp"

#include <algorithm>

#include "protocol/wire_codec.hpp"

namespace mh::protocol {

namespace {

// Whitespace as Rust's char::is_whitespace (Unicode White_Space) sees it, since the reference
// refuses a deny whose reason trims to nothing: a reason of no-break spaces is as empty to the
// model as one of ASCII blanks.
bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_blank(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    std::size_t n = utf8_sequence_length(s, i);
    if (n == 0) return false;  // not text at all, so not blank either
    auto byte = [&](std::size_t k) { return static_cast<char32_t>(static_cast<unsigned char>(s[i + k])); };
    char32_t c = n == 1   ? byte(0)
                 : n == 2 ? ((byte(0) & 0x1F) << 6) | (byte(1) & 0x3F)
                 : n == 3
                     ? ((byte(0) & 0x0F) << 12) | ((byte(1) & 0x3F) << 6) | (byte(2) & 0x3F)
                     : ((byte(0) & 0x07) << 18) | ((byte(1) & 0x3F) << 12) | ((byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
    if (!is_unicode_whitespace(c)) return false;
    i += n;
  }
  return true;
}

}  // namespace

std::string_view decision_name(const Decision& d) {
  static constexpr std::string_view names[] = {"allow", "deny", "replace", "abstain"};
  return names[d.index()];
}

void write_decision(JsonWriter& w, const Decision& d) {
  w.begin_object();
  w.field("decision", decision_name(d));
  if (auto* deny = std::get_if<decision::Deny>(&d)) w.field("reason", deny->reason);
  if (auto* replace = std::get_if<decision::Replace>(&d)) w.field_json("input", replace->input);
  w.end_object();
}

std::optional<Decision> read_decision(const json::value& v, std::string& error) {
  if (v.is_string()) {
    std::string_view s = v.get_string();
    if (s == "allow") return decision::Allow{};
    if (s == "abstain") return decision::Abstain{};
    if (s == "deny") {
      error = "a deny needs a non-empty reason: write {\"decision\":\"deny\",\"reason\":\"…\"}";
    } else if (s == "replace") {
      error = "a replace needs an input: write {\"decision\":\"replace\",\"input\":…}";
    } else {
      error = "unknown decision " + describe_json(v) + "; the vocabulary is allow, deny, replace, abstain";
    }
    return std::nullopt;
  }
  if (!v.is_object()) {
    error = "decision is " + describe_json(v) + ", expected an object";
    return std::nullopt;
  }
  const auto& o = v.get_object();
  const json::value* tag = o.if_contains("decision");
  if (!tag || !tag->is_string()) {
    error = "decision object has no \"decision\" tag";
    return std::nullopt;
  }
  std::string_view t = tag->get_string();
  if (t == "allow") return decision::Allow{};
  if (t == "abstain") return decision::Abstain{};
  if (t == "deny") {
    const json::value* reason = o.if_contains("reason");
    if (!reason || !reason->is_string() || is_blank(reason->get_string())) {
      error = "a deny needs a non-empty reason: it is the only part the model can act on";
      return std::nullopt;
    }
    return decision::Deny{std::string(reason->get_string())};
  }
  if (t == "replace") {
    const json::value* input = o.if_contains("input");
    if (!input) {
      error = "a replace needs the \"input\" to run instead";
      return std::nullopt;
    }
    return decision::Replace{*input};
  }
  error = "unknown decision \"" + excerpt(t, 40) + "\"; the vocabulary is allow, deny, replace, abstain";
  return std::nullopt;
}

void write_outcome(JsonWriter& w, const CommandOutcome& o) {
  w.begin_object();
  if (o.refusal) {
    w.field("result", "refused");
    w.key("refused");
    w.begin_object();
    w.field("code", to_string(o.refusal->code));
    w.field("reason", o.refusal->reason);
    w.end_object();
  } else {
    w.field("result", "ok");
    w.field("applies_at", o.applies_at);
  }
  w.end_object();
}

std::optional<CommandOutcome> read_outcome(const json::object& o, std::string& error) {
  FieldReader f(o, "outcome");
  std::string result = f.req_string("result");
  if (!f.ok()) {
    error = f.error();
    return std::nullopt;
  }
  if (result == "ok") {
    auto applies_at = f.opt_string("applies_at");
    if (!f.ok()) {
      error = f.error();
      return std::nullopt;
    }
    return CommandOutcome::ok(std::move(applies_at));
  }
  if (result == "refused") {
    const json::object* refused = f.req_object("refused");
    if (!refused) {
      error = f.error();
      return std::nullopt;
    }
    FieldReader r(*refused, "outcome.refused");
    std::string code = r.req_string("code");
    std::string reason = r.req_string("reason");
    if (!r.ok()) {
      error = r.error();
      return std::nullopt;
    }
    auto parsed = parse_enum<RefusalCode>(code);
    if (!parsed) {
      error = "unknown refusal code \"" + excerpt(code, 40) + "\"; the vocabulary is " + vocabulary<RefusalCode>();
      return std::nullopt;
    }
    return CommandOutcome::refused(*parsed, std::move(reason));
  }
  error = "outcome \"result\" is \"" + excerpt(result, 40) + "\", expected ok or refused";
  return std::nullopt;
}

void DecisionCensus::count(const Decision& d, Seam seam, DecidedBy by) {
  switch (d.index()) {
    case 0:
      ++allowed;
      break;
    case 1:
      ++denied;
      break;
    case 2:
      ++replaced;
      break;
    case 3:
      ++abstained;
      break;
  }
  ++by_seam[std::string(to_string(seam))];
  ++by_decider[std::string(to_string(by))];
}

// ---------------------------------------------------------------------------------------------
// Nested struct writers
// ---------------------------------------------------------------------------------------------

void write(JsonWriter& w, const StepOutcome& v) {
  w.begin_object();
  switch (v.kind) {
    case StepOutcome::Kind::completed:
      w.field("outcome", "completed");
      break;
    case StepOutcome::Kind::failed:
      w.field("outcome", "failed");
      w.field("reason", v.reason);
      break;
    case StepOutcome::Kind::no_verdict:
      w.field("outcome", "no_verdict");
      w.field("reason", v.reason);
      break;
  }
  w.end_object();
}

void write(JsonWriter& w, const HermeticAttestation& v) {
  wire::write_value(w, v);
}

void write(JsonWriter& w, const ProcessTermination& v) {
  w.begin_object();
  w.field("kind", to_string(v.kind));
  if (v.kind == ProcessKind::exited) {
    w.key("code");
    w.integer(v.code);
  } else if (v.kind == ProcessKind::signaled) {
    w.key("signal");
    w.integer(v.signal);
  }
  w.end_object();
}

// ---------------------------------------------------------------------------------------------
// Nested struct readers
// ---------------------------------------------------------------------------------------------

bool operator==(const StepRef& a, const StepRef& b) {
  return a.workflow == b.workflow && a.state == b.state && a.index == b.index && a.attempt == b.attempt;
}

std::optional<StepOutcome> read_step_outcome(const json::value& v, std::string& error) {
  if (!v.is_object()) {
    error = "a step outcome is " + describe_json(v) + ", expected an object";
    return std::nullopt;
  }
  FieldReader r(v.get_object(), "outcome");
  std::string kind = r.req_string("outcome");
  StepOutcome out;
  if (kind == "completed") {
    out.kind = StepOutcome::Kind::completed;
  } else if (kind == "failed" || kind == "no_verdict") {
    out.kind = kind == "failed" ? StepOutcome::Kind::failed : StepOutcome::Kind::no_verdict;
    out.reason = r.req_string("reason");
    if (r.ok() && is_blank(out.reason)) r.fail("a " + kind + " outcome needs a non-empty reason");
  } else if (r.ok()) {
    r.fail("field \"outcome\" is \"" + excerpt(kind, 40) + "\", expected completed, failed or no_verdict");
  }
  if (!r.ok()) {
    error = r.error();
    return std::nullopt;
  }
  return out;
}

std::optional<StepRef> read_step_ref(const json::value& v, std::string& error) {
  if (!v.is_object()) {
    error = "step is " + describe_json(v) + ", expected an object";
    return std::nullopt;
  }
  FieldReader f(v.get_object(), "step");
  StepRef s;
  wire::read_fields(f, s);
  if (!f.ok()) {
    error = f.error();
    return std::nullopt;
  }
  return s;
}

TokenUsage read_usage(FieldReader& f) {
  TokenUsage u;
  wire::read_fields(f, u);
  return u;
}

}  // namespace mh::protocol
