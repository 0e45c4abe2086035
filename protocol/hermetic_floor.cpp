#include "protocol/hermetic_floor.hpp"

#include <algorithm>
#include <filesystem>

#include "protocol/reader.hpp"

namespace mh::protocol {

namespace {

using R = HermeticRow;
using S = Severity;
using A = Assertion;

constexpr std::array<HermeticRowInfo, 12> kRows = {{
    {R::h1a, "H1a", S::gating, A::record, "plugins are exactly the declared set"},
    {R::h1b, "H1b", S::gating, A::record, "output style is default"},
    {R::h2, "H2", S::advisory, A::launch, "settings sources excluded"},
    {R::h3, "H3", S::gating, A::launch, "environment constructed"},
    {R::h4, "H4", S::gating, A::record, "no API key unless declared"},
    {R::h5, "H5", S::gating, A::record, "MCP surface exactly the launch's"},
    {R::h6, "H6", S::advisory, A::effect, "credential carriage exactly declared"},
    {R::h7, "H7", S::gating, A::record, "working directory is ours"},
    {R::h8, "H8", S::gating, A::launch, "hooks/customizations not skipped"},
    {R::h9, "H9", S::gating, A::record, "vendor version pinned"},
    {R::h10, "H10", S::gating, A::record, "governing documents can't move"},
    {R::h11, "H11", S::gating, A::launch, "no memory file outside copied tree"},
}};

std::string in_quotes(std::string_view s) {
  return "\"" + excerpt(s, 200) + "\"";
}

// "[a, b]" or "none".
std::string listed(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  std::string out = "[";
  for (std::size_t i = 0; i < names.size(); ++i)
    out += (i ? ", " : "") + excerpt(names[i], 120);
  return out + "]";
}

std::vector<std::string> sorted(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  return v;
}

std::string unknown_fact(const LaunchFacts& facts, std::string_view what) {
  return std::string(what) + " is not known from " + (facts.source.empty() ? "what the audit was given" : facts.source);
}

std::string normal_path(std::string_view p) {
  std::string s = std::filesystem::path(p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/')
    s.pop_back();
  return s;
}

const ImposedRow* imposed(const HermeticAttestation& a, R row) {
  for (const auto& r : a.imposed)
    if (r.row == row) return &r;
  return nullptr;
}

const UnavailableRow* unavailable(const HermeticAttestation& a, R row) {
  for (const auto& r : a.unavailable)
    if (r.row == row) return &r;
  return nullptr;
}

struct Judged {
  Verdict verdict;
  std::string detail;
};

// Launch- and effect-asserted rows read metaharness's own claim: imposed -> ok, unavailable -> gap,
// neither -> unk. A claim that says both is no claim that the control held: gap.
Judged from_attestation(const HermeticAttestation& a, R row) {
  const ImposedRow* in = imposed(a, row);
  const UnavailableRow* out = unavailable(a, row);
  if (in && out)
    return {Verdict::gap,
            "the attestation both imposes it (" + in->how + ") and marks it unavailable (" + out->why + ")"};
  if (in) return {Verdict::ok, "imposed: " + in->how};
  if (out) return {Verdict::gap, "unavailable: " + out->why};
  return {Verdict::unk, "the attestation neither imposes it nor marks it unavailable"};
}

// The names a record lists (plugins, MCP servers), sorted; one the vendor left unnamed still counts.
template <class Ref>
std::vector<std::string> sorted_names(const std::vector<Ref>& refs) {
  std::vector<std::string> names;
  for (const auto& r : refs)
    names.push_back(r.name.value_or("<unnamed>"));
  return sorted(std::move(names));
}

Judged h1a(const ev::SessionStarted& s, const LaunchFacts& f) {
  if (!s.plugins) return {Verdict::unk, "session.started.plugins is null: the vendor did not say which plugins loaded"};
  if (!f.plugins) return {Verdict::unk, unknown_fact(f, "the declared plugin set")};
  auto loaded = sorted_names(*s.plugins);
  auto declared = sorted(*f.plugins);
  if (loaded == declared) return {Verdict::ok, "loaded " + listed(loaded) + ", as declared"};
  return {Verdict::gap, "loaded " + listed(loaded) + " where " + listed(declared) + " was declared"};
}

Judged h1b(const ev::SessionStarted& s) {
  if (!s.output_style) return {Verdict::unk, "session.started.output_style is null: the vendor did not say"};
  const std::string& style = *s.output_style;
  if (style == "default" || style == "null" || style.empty()) return {Verdict::ok, "output style " + in_quotes(style)};
  return {Verdict::gap, "output style " + in_quotes(style) + ", not the default"};
}

Judged h4(const ev::SessionStarted& s, const LaunchFacts& f) {
  if (!s.credential_source)
    return {Verdict::unk,
            "session.started.credential_source is null: the vendor did not say what it authenticates with"};
  if (!f.api_key) return {Verdict::unk, unknown_fact(f, "whether an API key was declared")};
  std::string normal;
  for (char c : *s.credential_source)
    normal.push_back(c == '_' || c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  bool names_a_key = normal.find("api") != std::string::npos || normal.find("key") != std::string::npos;
  std::string said = "credential source " + in_quotes(*s.credential_source);
  if (*f.api_key && !names_a_key) return {Verdict::gap, "an API key was declared but the vendor reports " + said};
  if (!*f.api_key && names_a_key) return {Verdict::gap, said + " names a key, and none was declared"};
  return {Verdict::ok, said + (*f.api_key ? ", an API key as declared" : ", no API key declared")};
}

Judged h5(const ev::SessionStarted& s, const LaunchFacts& f) {
  if (!s.mcp_servers)
    return {Verdict::unk, "session.started.mcp_servers is null: the vendor did not say (unknown, never zero)"};
  if (!f.mcp_servers) return {Verdict::unk, unknown_fact(f, "the MCP servers the launch configured")};
  auto seen = sorted_names(*s.mcp_servers);
  auto configured = sorted(*f.mcp_servers);
  if (seen == configured) return {Verdict::ok, "MCP servers " + listed(seen) + ", as the launch configured"};
  return {Verdict::gap, "MCP servers " + listed(seen) + " where the launch configured " + listed(configured)};
}

// The working directory must be the one metaharness made. The reference's rule reads the record
// against the plan; an operator-named --cwd is not ours whatever the record says, and the
// attestation saying so (H7 unavailable) is a gap too.
Judged h7(const ev::SessionStarted& s, const LaunchFacts& f) {
  std::string seen = s.cwd ? "the vendor reports " + in_quotes(*s.cwd) : "the vendor reports no cwd";
  if (const UnavailableRow* out = unavailable(s.hermetic, R::h7))
    return {Verdict::gap, "unavailable: " + out->why + "; " + seen};
  if (!f.cwd) return {Verdict::unk, unknown_fact(f, "the planned working directory")};
  if (f.cwd->operator_named)
    return {Verdict::gap, "the operator named the working directory " + in_quotes(f.cwd->planned) + "; " + seen};
  if (!s.cwd) return {Verdict::unk, "session.started.cwd is null: the vendor did not say where it runs"};
  std::string evidence = normal_path(*s.cwd);
  if (evidence == normal_path(f.cwd->planned)) return {Verdict::ok, "cwd " + in_quotes(*s.cwd) + ", as planned"};
  if (f.cwd->resolved && evidence == normal_path(*f.cwd->resolved))
    return {Verdict::ok,
            "cwd " + in_quotes(*s.cwd) + ", the planned " + in_quotes(f.cwd->planned) + " with links resolved"};
  return {Verdict::gap, "cwd " + in_quotes(*s.cwd) + " where " + in_quotes(f.cwd->planned) + " was planned"};
}

Judged h9_version(const ev::SessionStarted& s, const LaunchFacts& f) {
  if (!s.harness_version) return {Verdict::unk, "session.started.harness_version is null: the vendor did not say"};
  if (!f.pins || f.pins->empty())
    return {Verdict::unk, "no pinned version is known for adapter " + in_quotes(s.adapter) + " to check " +
                              in_quotes(*s.harness_version) + " against"};
  if (std::find(f.pins->begin(), f.pins->end(), *s.harness_version) != f.pins->end())
    return {Verdict::ok, "version " + *s.harness_version + ", on the pin"};
  return {Verdict::gap, "version " + excerpt(*s.harness_version, 60) + ", off the pin " + listed(*f.pins)};
}

std::string short_digest(const std::string& d) {
  return d.substr(0, 12) + "…";
}

// The binary the attestation says ran, against the one `vendor install` recorded for the
// adapter: the same digest is the installed binary; another is a gap (whatever its path); no
// record, or an attestation without a digest, leaves it unknown.
Judged h9_digest(const ev::SessionStarted& s, const InstallRecordFact& record) {
  const auto& binary = s.hermetic.vendor_binary;
  if (!binary) return {Verdict::unk, "the attestation names no vendor binary digest (a run made before they were)"};
  if (!binary->sha256)
    return {Verdict::unk, "the binary " + in_quotes(binary->path) +
                              " was not digested at launch: " + binary->refused.value_or("no reason given")};
  if (!record.entry) return {Verdict::unk, record.why_none};
  const InstalledBinary& e = *record.entry;
  if (*binary->sha256 != e.sha256)
    return {Verdict::gap, "binary " + in_quotes(binary->path) + " sha256 " + short_digest(*binary->sha256) +
                              " is not the " + e.package + " " + e.version + " binary `vendor install` recorded (" +
                              in_quotes(e.path) + ", sha256 " + short_digest(e.sha256) + ", in " + record.where + ")"};
  return {Verdict::ok, "binary " + in_quotes(binary->path) + " sha256 " + short_digest(*binary->sha256) +
                           ", as `vendor install` recorded for " + e.package + " " + e.version};
}

// The version against the pins and, when the caller consulted an install record, the binary
// against it: a gap in either is a gap (it outranks an unknown), an unknown in either unknown.
Judged h9(const ev::SessionStarted& s, const LaunchFacts& f) {
  Judged version = h9_version(s, f);
  if (!f.install_record) return version;
  Judged digest = h9_digest(s, *f.install_record);
  auto rank = [](Verdict v) { return v == Verdict::gap ? 2 : v == Verdict::unk ? 1 : 0; };
  Verdict worst = rank(digest.verdict) > rank(version.verdict) ? digest.verdict : version.verdict;
  return {worst, version.detail + "; " + digest.detail};
}

Judged h10(const ev::SessionStarted& s) {
  if (s.inputs_digest) return {Verdict::ok, "inputs digest " + *s.inputs_digest + " recorded"};
  return {Verdict::ok, "no input tree was pinned: nothing pinned, nothing can move"};
}

Judged judge_row(R row, const ev::SessionStarted& s, const LaunchFacts& f) {
  switch (row) {
    case R::h1a:
      return h1a(s, f);
    case R::h1b:
      return h1b(s);
    case R::h4:
      return h4(s, f);
    case R::h5:
      return h5(s, f);
    case R::h7:
      return h7(s, f);
    case R::h9:
      return h9(s, f);
    case R::h10:
      return h10(s);
    case R::h2:
    case R::h3:
    case R::h6:
    case R::h8:
    case R::h11:
      return from_attestation(s.hermetic, row);
  }
  return {Verdict::unk, "no rule"};
}

json::value optional_strings(const std::optional<std::vector<std::string>>& v) {
  if (!v) return nullptr;
  json::array a;
  for (const auto& s : *v)
    a.emplace_back(s);
  return a;
}

json::value optional_string(const std::optional<std::string>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::object census_json(const DecisionCensus& c) {
  json::object o;
  o["allowed"] = c.allowed;
  o["denied"] = c.denied;
  o["replaced"] = c.replaced;
  o["abstained"] = c.abstained;
  json::object seams, deciders;
  for (const auto& [k, n] : c.by_seam)
    seams[k] = n;
  for (const auto& [k, n] : c.by_decider)
    deciders[k] = n;
  o["by_seam"] = std::move(seams);
  o["by_decider"] = std::move(deciders);
  return o;
}

bool census_equal(const DecisionCensus& a, const DecisionCensus& b) {
  return a.allowed == b.allowed && a.denied == b.denied && a.replaced == b.replaced && a.abstained == b.abstained &&
         a.by_seam == b.by_seam && a.by_decider == b.by_decider;
}

// The event name of a line, cheaply, to decide whether it is worth a full parse. A false match
// (the text inside a payload) only costs a parse; the parse decides.
bool may_be(std::string_view line, std::string_view name) {
  std::string needle = "\"event\":\"" + std::string(name) + "\"";
  return line.find(needle) != std::string_view::npos;
}

// The names in a plan's attestation's installed_plugins: none when the plan carries no
// attestation or no list, nullopt when the list is there but not a list of named plugins.
std::optional<std::vector<std::string>> installed_plugin_names(const json::object& plan) {
  std::vector<std::string> names;
  const json::value* hermetic = plan.if_contains("hermetic");
  if (!hermetic || hermetic->is_null()) return names;
  if (!hermetic->is_object()) return std::nullopt;
  const json::value* installed = hermetic->get_object().if_contains("installed_plugins");
  if (!installed) return names;
  if (!installed->is_array()) return std::nullopt;
  for (const auto& plugin : installed->get_array()) {
    const json::value* name = plugin.is_object() ? plugin.get_object().if_contains("name") : nullptr;
    if (!name || !name->is_string()) return std::nullopt;
    names.emplace_back(name->get_string());
  }
  return names;
}

}  // namespace

const std::array<HermeticRowInfo, 12>& hermetic_rows() {
  return kRows;
}

const HermeticRowInfo& row_info(HermeticRow row) {
  return kRows[static_cast<std::size_t>(row)];
}

std::vector<RowVerdict> judge_floor(const ev::SessionStarted* started, const LaunchFacts& facts) {
  std::vector<RowVerdict> out;
  for (const auto& info : kRows) {
    RowVerdict v{info.row, Verdict::unk, info.severity, info.assertion, std::string(info.control), {}};
    if (!started) {
      v.detail = "nothing was observed: the stream has no session.started";
    } else {
      auto judged = judge_row(info.row, *started, facts);
      v.verdict = judged.verdict;
      v.detail = std::move(judged.detail);
    }
    out.push_back(std::move(v));
  }
  return out;
}

Verdict gating_verdict(const std::vector<RowVerdict>& rows) {
  bool unknown = false;
  for (const auto& r : rows) {
    if (r.severity != Severity::gating) continue;
    if (r.verdict == Verdict::gap) return Verdict::gap;
    if (r.verdict == Verdict::unk) unknown = true;
  }
  return unknown ? Verdict::unk : Verdict::ok;
}

// ---------------------------------------------------------------------------------------------
// StreamRecordReader
// ---------------------------------------------------------------------------------------------

void StreamRecordReader::feed(std::string_view bytes) {
  checker_.feed(bytes);
  framer_.feed(bytes, [this](const FramedLine& line) { on_line(line); });
}

void StreamRecordReader::on_line(const FramedLine& line) {
  if (line.too_long) return;  // the completeness check reports it
  bool started = !record_.started && may_be(line.text, ev::SessionStarted::kName);
  bool ended = !record_.ended && may_be(line.text, ev::SessionEnded::kName);
  bool decided = may_be(line.text, ev::ToolDecided::kName);
  if (!started && !ended && !decided) return;
  auto event = read_event_line(line.text);
  if (!event) return;  // the completeness check names the line
  if (auto* s = std::get_if<ev::SessionStarted>(&event->payload); s && !record_.started)
    record_.started = std::move(*s);
  else if (auto* e = std::get_if<ev::SessionEnded>(&event->payload); e && !record_.ended)
    record_.ended = std::move(*e);
  else if (auto* d = std::get_if<ev::ToolDecided>(&event->payload))
    record_.census.count(d->decision, d->seam, d->decided_by);
}

StreamRecord StreamRecordReader::finish() {
  framer_.finish([this](const FramedLine& line) { on_line(line); });
  record_.stream = checker_.finish();
  return std::move(record_);
}

StreamRecord read_stream_record(std::string_view text) {
  StreamRecordReader reader;
  reader.feed(text);
  return reader.finish();
}

std::optional<ev::SessionStarted> session_started_in(std::string_view line) {
  if (!may_be(line, ev::SessionStarted::kName)) return std::nullopt;
  auto event = read_event_line(line);
  if (!event) return std::nullopt;
  if (auto* s = std::get_if<ev::SessionStarted>(&event->payload)) return std::move(*s);
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Launch facts
// ---------------------------------------------------------------------------------------------

LaunchFacts launch_facts_from_run_files(const json::value& spec, const json::value& plan) {
  LaunchFacts f;
  f.source = "the run directory";
  const json::object* s = spec.if_object();
  const json::object* p = plan.if_object();
  if (s) {
    if (const json::value* a = s->if_contains("adapter"); a && a->is_string()) f.adapter = std::string(a->get_string());
    // This build's run spec cannot declare a plugin, an MCP server or a credential: a readable
    // spec declares none. A spec that carries such a key was written by a build that can, and
    // this judge cannot read it: those facts stay unknown rather than be guessed.
    if (!s->contains("plugins") && !s->contains("plugin_dirs")) f.plugins = std::vector<std::string>{};
    if (!s->contains("mcp_servers") && !s->contains("mcp_config")) f.mcp_servers = std::vector<std::string>{};
    if (!s->contains("credentials")) {
      // The only way to hand the vendor an API key is the declared vendor environment (the
      // adapters refuse their own key variables there; Codex's OPENAI_API_KEY is declarable).
      if (const json::value* env = s->if_contains("vendor_env"); env && env->is_object()) {
        bool key = false;
        for (const auto& kv : env->get_object()) {
          std::string name(kv.key());
          std::transform(name.begin(), name.end(), name.begin(),
                         [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
          if (name.size() >= 7 && name.compare(name.size() - 7, 7, "API_KEY") == 0) key = true;
        }
        f.api_key = key;
      }
    }
  }
  // The plugins metaharness installs itself (opencode's seam plugin) are declared by the launch:
  // the plan's attestation lists them (installed_plugins), and the vendor loading them is what
  // was declared. A plan that lists none installed none; one whose list cannot be read leaves
  // the declared set unknown.
  if (f.plugins && p) {
    if (auto installed = installed_plugin_names(*p))
      f.plugins->insert(f.plugins->end(), installed->begin(), installed->end());
    else
      f.plugins.reset();
  }
  if (s && p) {
    const json::value* planned = p->if_contains("cwd");
    const json::value* named = s->if_contains("cwd");
    if (planned && planned->is_string() && named && (named->is_null() || named->is_string()))
      f.cwd = PlannedCwd{std::string(planned->get_string()), std::nullopt, named->is_string()};
  }
  return f;
}

LaunchFacts launch_facts_from_stream_alone() {
  LaunchFacts f;
  f.source = "the stream alone (audit the run directory for the launch's facts)";
  return f;
}

std::optional<HermeticMode> spec_mode(const json::value& spec) {
  const json::object* s = spec.if_object();
  if (!s) return std::nullopt;
  const json::value* m = s->if_contains("hermetic");
  if (!m || !m->is_string()) return std::nullopt;
  return parse_enum<HermeticMode>(m->get_string());
}

// ---------------------------------------------------------------------------------------------
// The audit
// ---------------------------------------------------------------------------------------------

AuditReport audit(StreamRecord record, LaunchFacts facts, std::optional<HermeticMode> mode_of_spec) {
  AuditReport r;
  r.rows = judge_floor(record.started ? &*record.started : nullptr, facts);
  r.gating = gating_verdict(r.rows);
  r.run_id = record.stream.run_id;
  r.adapter = record.started ? std::optional<std::string>(record.started->adapter) : facts.adapter;
  // The spec says what was asked for, and the attestation follows it; a stream alone has only the
  // attestation. The daemon's view reads them in the same order.
  r.mode = mode_of_spec;
  if (!r.mode && record.started) r.mode = record.started->hermetic.mode;
  r.record = std::move(record);
  r.facts = std::move(facts);
  return r;
}

std::string audit_report_text(const AuditReport& r) {
  std::string out = "hermetic audit: run " + r.run_id.value_or("(unknown)");
  out += " (" + (r.adapter ? *r.adapter : std::string("adapter unknown"));
  if (r.record.started && r.record.started->harness_version) out += " " + *r.record.started->harness_version;
  out += "), mode " + (r.mode ? std::string(to_string(*r.mode)) : std::string("unknown"));
  if (r.record.started) out += ", decisions " + std::string(to_string(r.record.started->hermetic.decisions));
  out += ": gating " + std::string(to_string(r.gating));
  if (r.mode == HermeticMode::off) out += " (mode off asks for no verdicts; judged because the audit was asked for)";
  out += "\n";
  for (const auto& row : r.rows) {
    out += "  " + std::string(row_info(row.row).label) + " " + std::string(to_string(row.verdict)) + " " +
           std::string(to_string(row.severity)) + " " + std::string(to_string(row.assertion)) + " " + row.control +
           " — " + row.detail + "\n";
  }
  const DecisionCensus& c = r.record.census;
  out += "decision census: allowed=" + std::to_string(c.allowed) + " denied=" + std::to_string(c.denied) +
         " replaced=" + std::to_string(c.replaced) + " abstained=" + std::to_string(c.abstained) + "\n";
  for (const auto& [k, n] : c.by_seam)
    out += "  by seam    " + k + ": " + std::to_string(n) + "\n";
  for (const auto& [k, n] : c.by_decider)
    out += "  by decider " + k + ": " + std::to_string(n) + "\n";
  if (c.total() == 0) out += "  no tool call was adjudicated: metaharness decided nothing in this run\n";
  if (!r.record.ended)
    out += "  (no session.ended: counted from the stream's tool.decided lines alone)\n";
  else if (!census_equal(r.record.ended->census, c))
    out +=
        "  (session.ended counted " + std::to_string(r.record.ended->census.total()) + " decision(s); " +
        std::to_string(c.total() >= r.record.ended->census.total() ? c.total() - r.record.ended->census.total() : 0) +
        " more came after the terminal record)\n";
  if (!r.record.started || !r.record.started->withheld) {
    out += "withheld: not stated by the harness\n";
  } else if (r.record.started->withheld->empty()) {
    out += "withheld: none declared\n";
  } else {
    out += "withheld: ";
    bool first = true;
    for (const auto& w : *r.record.started->withheld) {
      out += (first ? "" : "; ") + w.tool + " (" + w.reason + ")";
      first = false;
    }
    out += "\n";
  }
  const StreamVerdict& v = r.record.stream;
  switch (v.kind) {
    case Completeness::Complete:
      out += "stream: complete — " + std::to_string(v.events_before_marker) + " event(s) before the marker, reason " +
             std::string(v.close_reason ? to_string(*v.close_reason) : "unknown");
      break;
    case Completeness::Inconsistent:
      out += "stream: INCONSISTENT — " + v.reason;
      break;
    case Completeness::Truncated:
      out += "stream: TRUNCATED — " + v.reason;
      break;
  }
  if (v.first_bad_line)
    out += "; line " + std::to_string(*v.first_bad_line) +
           " is not a well-formed event in sequence: " + v.first_bad_reason;
  out += "\n";
  return out;
}

json::array rows_to_json(const std::vector<RowVerdict>& rows) {
  json::array a;
  for (const auto& row : rows) {
    json::object o;
    o["id"] = to_string(row.row);
    o["verdict"] = to_string(row.verdict);
    o["severity"] = to_string(row.severity);
    o["assertion"] = to_string(row.assertion);
    o["control"] = row.control;
    o["detail"] = row.detail;
    a.push_back(std::move(o));
  }
  return a;
}

json::object audit_report_json(const AuditReport& r) {
  json::object o;
  o["run_id"] = optional_string(r.run_id);
  o["adapter"] = optional_string(r.adapter);
  o["mode"] = r.mode ? json::value(to_string(*r.mode)) : json::value(nullptr);
  o["gating"] = to_string(r.gating);
  o["rows"] = rows_to_json(r.rows);
  o["census"] = census_json(r.record.census);
  o["census_at_session_ended"] = r.record.ended ? json::value(census_json(r.record.ended->census)) : nullptr;
  if (r.record.started && r.record.started->withheld) {
    json::array w;
    for (const auto& t : *r.record.started->withheld)
      w.push_back(json::object{{"tool", t.tool}, {"reason", t.reason}});
    o["withheld"] = std::move(w);
  } else {
    o["withheld"] = nullptr;  // not stated by the harness
  }
  const StreamVerdict& v = r.record.stream;
  json::object stream;
  stream["completeness"] = to_string(v.kind);
  stream["reason"] = v.reason;
  stream["lines"] = v.lines;
  stream["events_before_marker"] =
      v.kind == Completeness::Complete ? json::value(v.events_before_marker) : json::value(nullptr);
  stream["close_reason"] = v.close_reason ? json::value(to_string(*v.close_reason)) : json::value(nullptr);
  stream["first_bad_line"] = v.first_bad_line ? json::value(*v.first_bad_line) : json::value(nullptr);
  stream["first_bad_reason"] = v.first_bad_line ? json::value(v.first_bad_reason) : json::value(nullptr);
  o["stream"] = std::move(stream);
  json::object facts;
  facts["source"] = r.facts.source;
  facts["planned_cwd"] = r.facts.cwd ? json::value(r.facts.cwd->planned) : json::value(nullptr);
  facts["planned_cwd_resolved"] =
      r.facts.cwd && r.facts.cwd->resolved ? json::value(*r.facts.cwd->resolved) : json::value(nullptr);
  facts["cwd_named_by_operator"] = r.facts.cwd ? json::value(r.facts.cwd->operator_named) : json::value(nullptr);
  facts["plugins"] = optional_strings(r.facts.plugins);
  facts["mcp_servers"] = optional_strings(r.facts.mcp_servers);
  facts["api_key_declared"] = r.facts.api_key ? json::value(*r.facts.api_key) : json::value(nullptr);
  facts["pins"] = optional_strings(r.facts.pins);
  if (r.facts.install_record) {
    const InstallRecordFact& rec = *r.facts.install_record;
    json::object record;
    record["where"] = rec.where;
    if (rec.entry) {
      record["entry"] = json::object{{"adapter", rec.entry->adapter},
                                     {"package", rec.entry->package},
                                     {"version", rec.entry->version},
                                     {"path", rec.entry->path},
                                     {"sha256", rec.entry->sha256}};
    } else {
      record["entry"] = nullptr;
      record["why_none"] = rec.why_none;
    }
    facts["install_record"] = std::move(record);
  } else {
    facts["install_record"] = nullptr;  // not consulted
  }
  o["facts"] = std::move(facts);
  o["exit_status"] = audit_exit_status(r);
  return o;
}

json::object hermetic_view_json(std::optional<HermeticMode> mode, const ev::SessionStarted* started,
                                const LaunchFacts& facts, bool closed) {
  if (!mode && started) mode = started->hermetic.mode;
  json::object o;
  o["mode"] = mode ? json::value(to_string(*mode)) : json::value(nullptr);
  if (mode == HermeticMode::off || (!started && !closed)) {
    o["gating"] = nullptr;
    o["rows"] = nullptr;
    return o;
  }
  auto rows = judge_floor(started, facts);
  o["gating"] = to_string(gating_verdict(rows));
  o["rows"] = rows_to_json(rows);
  return o;
}

int audit_exit_status(const AuditReport& r) {
  if (r.gating == Verdict::gap) return 1;
  if (r.gating == Verdict::unk) return 3;
  if (!r.record.stream.complete_and_well_formed()) return 3;
  return 0;
}

}  // namespace mh::protocol
