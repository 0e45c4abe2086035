// The hermetic contract's floor (protocol reference §10): one verdict per row H1a…H11, judged
// from what a run's stream says (session.started's evidence and metaharness's attestation) and
// the launch facts the judge knows (the planned working directory, the declared plugin and MCP
// sets, whether an API key was declared, the adapter's pinned versions).
//
// Pure: no I/O, no clock. The callers (`metaharness audit`, `run --hermetic`, the daemon's `get`)
// read the files; everything that decides a verdict is here, once. A fact the judge was not given
// is unknown, and an unknown fact makes a row `unk`, never `ok`: null is unknown, never none.
#pragma once

#include "protocol/completeness.hpp"
#include "protocol/events.hpp"

namespace mh::protocol {

MH_NAMED_ENUM(Verdict, ok, gap, unk);
MH_NAMED_ENUM(Severity, gating, advisory);
MH_NAMED_ENUM(Assertion, record, launch, effect);

// One row of the contract as the reference's table states it.
struct HermeticRowInfo {
  HermeticRow row;
  std::string_view label;  // "H1a", as reports print it (the wire spells it "h1a")
  Severity severity;
  Assertion assertion;
  std::string_view control;
};

// The twelve rows in order H1a, H1b, H2 … H11.
const std::array<HermeticRowInfo, 12>& hermetic_rows();
const HermeticRowInfo& row_info(HermeticRow row);

// The working directory metaharness planned for the vendor.
struct PlannedCwd {
  std::string planned;
  // The same path with its symbolic links resolved, when the caller could resolve it: a vendor
  // that reports getcwd() (Claude) reports this spelling of the same directory.
  std::optional<std::string> resolved;
  // The operator named it (`--cwd`): then it is not metaharness's working directory (H7 gap).
  bool operator_named = false;
};

// One vendor binary as `metaharness vendor install` recorded it (<vendor dir>/installed.json,
// daemon/process/vendor_install_record.hpp): the pinned package, the version its manifest said,
// the binary the adapter runs (resolved) and its SHA-256.
struct InstalledBinary {
  std::string adapter;
  std::string package;
  std::string version;
  std::string path;
  std::string sha256;
};

// What the judge found of the host's install record for the run's adapter.
struct InstallRecordFact {
  std::string where;                     // the record's file, for the details
  std::optional<InstalledBinary> entry;  // nullopt: no record there, or none for this adapter
  std::string why_none;                  // said when entry is nullopt
};

// What the judge knows about the launch. Every nullopt is "not known", and makes the rows that
// need it unk; an empty list is a known "none declared".
struct LaunchFacts {
  std::optional<std::string> adapter;  // the adapter the spec names (the pins are its)
  std::optional<PlannedCwd> cwd;
  std::optional<std::vector<std::string>> plugins;      // declared plugin names
  std::optional<std::vector<std::string>> mcp_servers;  // MCP server names the launch configured
  std::optional<bool> api_key;                          // an API key was declared for the vendor
  std::optional<std::vector<std::string>> pins;         // the adapter's pinned vendor versions
  // The install record H9 holds the attested binary's digest to. nullopt: the caller consulted
  // none, and H9 judges the version alone. `metaharness audit`, `run --hermetic` and the daemon's
  // `get` consult the host's record, where no record is an unknown, never a pass.
  std::optional<InstallRecordFact> install_record;
  // Where the facts came from, for the details of the rows they leave unknown
  // ("the run directory", "the stream alone").
  std::string source;
};

struct RowVerdict {
  HermeticRow row = HermeticRow::h1a;
  Verdict verdict = Verdict::unk;
  Severity severity = Severity::gating;
  Assertion assertion = Assertion::record;
  std::string control;
  std::string detail;
};

// One verdict per row, in row order. `started` null: nothing was observed, every row unk.
std::vector<RowVerdict> judge_floor(const ev::SessionStarted* started, const LaunchFacts& facts);
// The gating rows' verdict: gap if any gating row is gap (gap outranks unk), else unk if any is
// unk, else ok. Advisory rows never move it.
Verdict gating_verdict(const std::vector<RowVerdict>& rows);

// ---------------------------------------------------------------------------------------------
// What the floor reads from a stream
// ---------------------------------------------------------------------------------------------

struct StreamRecord {
  std::optional<ev::SessionStarted> started;  // the first one
  std::optional<ev::SessionEnded> ended;
  // Counted from the stream's own tool.decided lines (every decision written, wind-up included);
  // session.ended's census stops at the terminal record.
  DecisionCensus census;
  StreamVerdict stream;
};

// Streaming: bounded memory whatever the stream's length. Only session.started, session.ended
// and tool.decided lines are parsed beyond what the completeness check reads.
class StreamRecordReader {
 public:
  void feed(std::string_view bytes);
  StreamRecord finish();
  bool saw_session_started() const { return record_.started.has_value(); }

 private:
  void on_line(const FramedLine& line);
  StreamChecker checker_;
  LineFramer framer_{kDefaultMaxLineBytes};
  StreamRecord record_;
};

StreamRecord read_stream_record(std::string_view text);

// The session.started one event line holds, if it is one (for readers that stop at it).
std::optional<ev::SessionStarted> session_started_in(std::string_view line);

// ---------------------------------------------------------------------------------------------
// Launch facts
// ---------------------------------------------------------------------------------------------

// From a run directory's spec.json and plan.json, parsed (null when absent or unreadable: the
// facts they carry are then unknown). Pins are not in either: the caller adds the adapter's.
LaunchFacts launch_facts_from_run_files(const json::value& spec, const json::value& plan);
// A bare events.jsonl: the stream names no planned cwd and no declared sets.
LaunchFacts launch_facts_from_stream_alone();

// The mode a spec asks for: its "hermetic" key (a spec written before the key existed: nullopt).
std::optional<HermeticMode> spec_mode(const json::value& spec);

// ---------------------------------------------------------------------------------------------
// The audit (§10.4)
// ---------------------------------------------------------------------------------------------

struct AuditReport {
  std::optional<std::string> run_id;
  std::optional<std::string> adapter;
  std::optional<HermeticMode> mode;  // the spec's, else the attestation's; nullopt: nobody said
  std::vector<RowVerdict> rows;
  Verdict gating = Verdict::unk;
  StreamRecord record;
  LaunchFacts facts;
};

AuditReport audit(StreamRecord record, LaunchFacts facts, std::optional<HermeticMode> spec_mode = std::nullopt);

// The report for people: header, one line per row
// `  <id> <ok|gap|unk> <gating|advisory> <record|launch|effect> <control> — <detail>`, the decision
// census with its by-seam / by-decider lines, withheld, the stream's completeness. Ends in '\n'.
std::string audit_report_text(const AuditReport& report);
// The same for programs.
json::object audit_report_json(const AuditReport& report);
// The rows alone: [{id, verdict, severity, assertion, control, detail}…].
json::array rows_to_json(const std::vector<RowVerdict>& rows);

// The daemon's `get` view: {mode, gating, rows}. Mode off: gating and rows null (nothing is
// judged). A run still open with no session.started yet: null too (not yet observed; the rows are
// decided by session.started and do not change after it). Closed without one: every row unk.
json::object hermetic_view_json(std::optional<HermeticMode> mode, const ev::SessionStarted* started,
                                const LaunchFacts& facts, bool closed);

// `metaharness audit`'s status: 1 a gating gap; 3 a gating unk, or a stream that is not complete
// and well-formed (it cannot vouch for what it holds); else 0.
int audit_exit_status(const AuditReport& report);

}  // namespace mh::protocol
