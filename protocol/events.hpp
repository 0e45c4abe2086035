// The 20 events of metaharness.event/1 as C++ types: one struct per event, fields in
// serialization order, nullable fields as std::optional (written as `null`, never omitted,
// except where the wire says a key is omitted: `at`, empty `operations`/`subjects`, null
// `available_operations`).
#pragma once

#include <boost/system/result.hpp>

#include "protocol/types.hpp"

namespace mh::protocol {

namespace ev {

struct SessionStarted {
  static constexpr std::string_view kName = "session.started";
  std::string adapter;
  AdapterClass adapter_class = AdapterClass::harness;
  std::optional<std::string> harness_version;
  std::optional<std::string> session_id;
  std::optional<std::string> model;
  std::optional<std::string> permission_mode;
  std::optional<std::string> credential_source;
  std::optional<std::string> output_style;
  std::optional<std::string> cwd;
  std::optional<std::vector<std::string>> offered_tools;
  std::optional<std::vector<std::string>> available_operations;  // key omitted when null
  std::optional<std::vector<WithheldTool>> withheld;
  std::optional<std::vector<std::string>> slash_commands;
  std::optional<std::vector<std::string>> skills;
  std::optional<std::vector<std::string>> agents;
  std::optional<std::vector<PluginRef>> plugins;
  std::optional<std::vector<McpServerRef>> mcp_servers;
  std::optional<std::string> inputs_digest;
  TranscriptRef transcript;
  HermeticAttestation hermetic;
};
BOOST_DESCRIBE_STRUCT(SessionStarted, (),
                      (adapter, adapter_class, harness_version, session_id, model, permission_mode, credential_source,
                       output_style, cwd, offered_tools, available_operations, withheld, slash_commands, skills, agents,
                       plugins, mcp_servers, inputs_digest, transcript, hermetic))
MH_WIRE_RULES(SessionStarted, WireFieldRule{"available_operations", kOmitNull}, WireFieldRule{"inputs_digest", kDigest})

struct SessionEnded {
  static constexpr std::string_view kName = "session.ended";
  std::optional<FinalAnswer> final_answer;
  std::optional<std::vector<ObservedModel>> observed_models;
  std::optional<bool> is_error;
  std::optional<std::string> subtype;
  std::optional<std::string> stop_reason;
  std::optional<std::string> terminal_reason;
  std::optional<std::string> api_error_status;
  std::optional<std::uint64_t> num_turns;
  std::optional<std::uint64_t> duration_ms;
  std::optional<std::uint64_t> duration_api_ms;
  std::optional<std::uint64_t> ttft_ms;
  std::optional<std::uint64_t> time_to_request_ms;
  std::optional<double> total_cost_usd;
  std::optional<std::vector<PermissionDenial>> permission_denials;
  std::optional<std::uint64_t> subagents_spawned;
  std::optional<TokenUsage> usage;
  std::optional<std::map<std::string, TokenUsage>> model_usage;
  DecisionCensus census;
};
BOOST_DESCRIBE_STRUCT(SessionEnded, (),
                      (final_answer, observed_models, is_error, subtype, stop_reason, terminal_reason, api_error_status,
                       num_turns, duration_ms, duration_api_ms, ttft_ms, time_to_request_ms, total_cost_usd,
                       permission_denials, subagents_spawned, usage, model_usage, census))

struct StepEntered {
  static constexpr std::string_view kName = "step.entered";
  StepRef step;
  std::optional<std::string> frame_digest;
};
BOOST_DESCRIBE_STRUCT(StepEntered, (), (step, frame_digest))
MH_WIRE_RULES(StepEntered, WireFieldRule{"frame_digest", kDigest})

struct StepLeft {
  static constexpr std::string_view kName = "step.left";
  StepRef step;
  StepOutcome outcome;
};
BOOST_DESCRIBE_STRUCT(StepLeft, (), (step, outcome))

struct TurnStarted {
  static constexpr std::string_view kName = "turn.started";
  std::uint32_t turn = 1;
  std::optional<std::string> frame_digest;
};
BOOST_DESCRIBE_STRUCT(TurnStarted, (), (turn, frame_digest))
MH_WIRE_RULES(TurnStarted, WireFieldRule{"frame_digest", kDigest})

struct TurnEnded {
  static constexpr std::string_view kName = "turn.ended";
  std::uint32_t turn = 1;
  std::optional<std::string> stop_reason;
};
BOOST_DESCRIBE_STRUCT(TurnEnded, (), (turn, stop_reason))

struct Text {
  static constexpr std::string_view kName = "text";
  std::string text;
  std::optional<std::string> request_id;
};
BOOST_DESCRIBE_STRUCT(Text, (), (text, request_id))

struct Thinking {
  static constexpr std::string_view kName = "thinking";
  std::string text;
  std::optional<std::string> request_id;
};
BOOST_DESCRIBE_STRUCT(Thinking, (), (text, request_id))

struct ThinkingEstimate {
  static constexpr std::string_view kName = "thinking.estimate";
  std::uint64_t estimate = 0;
  std::optional<std::int64_t> delta;
};
BOOST_DESCRIBE_STRUCT(ThinkingEstimate, (), (estimate, delta))

struct Injection {
  static constexpr std::string_view kName = "injection";
  std::string text;
  std::optional<std::string> origin;
};
BOOST_DESCRIBE_STRUCT(Injection, (), (text, origin))

struct ToolRequested {
  static constexpr std::string_view kName = "tool.requested";
  std::string call_id;
  std::string name;  // the vendor tool name
  json::value input;
  std::vector<std::string> operations;  // omitted when empty
  std::vector<std::string> subjects;    // omitted when empty
  bool decision_required = false;
  std::optional<std::uint64_t> deadline_ms;
  Seam seam = Seam::none;
  // Additive (issue 9): which agent made the call: null for the main agent, else the vendor's
  // own id for the sub-agent (Claude's parent_tool_use_id, Codex's child thread id).
  std::optional<std::string> agent;
  // Additive (issue 9): a request to re-run a call outside the vendor's sandbox after the
  // sandboxed attempt failed. It is its own call and is never answered by an earlier decision.
  bool escalation = false;
};
BOOST_DESCRIBE_STRUCT(ToolRequested, (),
                      (call_id, name, input, operations, subjects, decision_required, deadline_ms, seam, agent,
                       escalation))
MH_WIRE_RULES(ToolRequested, WireFieldRule{"input", kPresent}, WireFieldRule{"operations", kOmitEmpty},
              WireFieldRule{"subjects", kOmitEmpty}, WireFieldRule{"escalation", kAdditive})

struct ToolDecided {
  static constexpr std::string_view kName = "tool.decided";
  std::string call_id;
  Decision decision;
  DecidedBy decided_by = DecidedBy::adapter;
  Seam seam = Seam::none;
  std::optional<std::uint64_t> latency_ms;
  // Additive (issue 4): which socket peer answered, null when no peer did.
  std::optional<PeerIdentity> peer;
  // Additive (issue 9): the decision as the embedder or the frame gave it, when the run's
  // deny-only policy delivered something else (an allow delivered as abstain, so the vendor's own
  // rules still decide); null otherwise. `decision` is always what the vendor was given.
  std::optional<Decision> requested;
};
BOOST_DESCRIBE_STRUCT(ToolDecided, (), (call_id, decision, decided_by, seam, latency_ms, peer, requested))

struct ToolResult {
  static constexpr std::string_view kName = "tool.result";
  std::optional<std::int64_t> exit_code;
  std::optional<std::string> outcome_source;
  std::string call_id;
  std::optional<bool> is_error;
  json::value content;
  std::optional<std::uint64_t> bytes;
  json::value tool_use_result;
};
BOOST_DESCRIBE_STRUCT(ToolResult, (), (exit_code, outcome_source, call_id, is_error, content, bytes, tool_use_result))

struct Usage {
  static constexpr std::string_view kName = "usage";
  std::optional<std::string> request_id;
  std::optional<std::string> model;
  TokenUsage usage;
  // Additive (issue 9): what the figures cover. "request": one model request, as the vendor reported
  // it while the turn ran (provisional: Claude reports a request's usage as of its start); "turn":
  // the vendor's own totals for one turn (per model), which supersede that turn's request figures.
  // Null (the key omitted) where the adapter does not say, as every usage line before it.
  std::optional<std::string> scope = std::nullopt;
  // Additive (issue 25): who read the figures. "gateway": the run's model gateway, from the
  // upstream's own answer (scope "request"; these are what the budgets count once a run has a
  // gateway). Null (the key omitted): the vendor's own report, as every usage line before it.
  std::optional<std::string> source = std::nullopt;
};
BOOST_DESCRIBE_STRUCT(Usage, (), (request_id, model, usage, scope, source))
MH_WIRE_RULES(Usage, WireFieldRule{"scope", kOmitNull}, WireFieldRule{"source", kOmitNull})

struct RateLimit {
  static constexpr std::string_view kName = "rate_limit";
  RateLimitInfo info;
};
BOOST_DESCRIBE_STRUCT(RateLimit, (), (info))

struct CommandResult {
  static constexpr std::string_view kName = "command.result";
  std::string id;
  CommandOutcome outcome;
};
BOOST_DESCRIBE_STRUCT(CommandResult, (), (id, outcome))

// Additive (issue 27): what a RUN_STALLED warning says in figures, so a harness reads the stall
// without parsing its message.
struct StallReport {
  std::uint64_t silent_ms = 0;            // since the vendor's last output (or its spawn, when none yet)
  std::optional<std::string> last_event;  // the type of the last event the vendor's output made; null: none yet
  std::optional<std::string> last_tool;   // the tool of that event, when it was a tool.* event
  std::uint64_t stall_after_ms = 0;       // the run's stall_after
  OnStall on_stall = OnStall::warn;       // halt: the run is halted right after this warning
};
BOOST_DESCRIBE_STRUCT(StallReport, (), (silent_ms, last_event, last_tool, stall_after_ms, on_stall))

// Additive (issue 27 section 6): a permission posture in a POSTURE_DRIFT warning, each part in the
// vendor's own vocabulary; null: not said.
struct PostureParts {
  std::optional<std::string> permission_mode;
  std::optional<std::string> sandbox;
};
BOOST_DESCRIBE_STRUCT(PostureParts, (), (permission_mode, sandbox))

// What a POSTURE_DRIFT warning says in fields: when the vendor reported (start, resume), what the
// run asks (its launch posture and every permission.set the vendor applied), what the vendor
// reported, which parts differ, and the controls refused until permission.set sets them again.
struct PostureDrift {
  std::string occasion;
  PostureParts asked;
  PostureParts reported;
  std::vector<std::string> drifted;  // "permission_mode", "sandbox"
  std::vector<std::string> refused;  // the controls refused while it lasts
};
BOOST_DESCRIBE_STRUCT(PostureDrift, (), (occasion, asked, reported, drifted, refused))

struct Warning {
  static constexpr std::string_view kName = "warning";
  std::string code;
  std::string message;
  // Only on RUN_STALLED (absent from every other warning and from older lines).
  std::optional<StallReport> stall = std::nullopt;
  // Only on POSTURE_DRIFT (absent from every other warning and from older lines).
  std::optional<PostureDrift> posture = std::nullopt;
};
BOOST_DESCRIBE_STRUCT(Warning, (), (code, message, stall, posture))
MH_WIRE_RULES(Warning, WireFieldRule{"stall", kOmitNull}, WireFieldRule{"posture", kOmitNull})

struct Opaque {
  static constexpr std::string_view kName = "opaque";
  std::optional<std::string> vendor_type;
  std::optional<std::string> vendor_subtype;
  std::string digest;
  std::optional<std::uint64_t> source_line;
};
BOOST_DESCRIBE_STRUCT(Opaque, (), (vendor_type, vendor_subtype, digest, source_line))
MH_WIRE_RULES(Opaque, WireFieldRule{"digest", kDigest})

struct AuthExpired {
  static constexpr std::string_view kName = "auth.expired";
  std::optional<std::string> credential_source;
  std::optional<std::string> detail;
  std::optional<std::uint64_t> source_line;
};
BOOST_DESCRIBE_STRUCT(AuthExpired, (), (credential_source, detail, source_line))

// Additive (issue 11): what the run's own cgroup counted, read at its end. Each field is null
// where it is unknown here (its controller is not enabled for the run's group), never 0.
struct EgressCounts {
  std::map<std::string, std::uint64_t> allowed;  // destination ("host:port") -> attempts let through
  std::map<std::string, std::uint64_t> denied;   // destination -> attempts refused
};
BOOST_DESCRIBE_STRUCT(EgressCounts, (), (allowed, denied))

struct RunResources {
  std::optional<std::uint64_t> cpu_usec;           // cpu.stat usage_usec
  std::optional<std::uint64_t> memory_peak_bytes;  // memory.peak
  std::optional<std::uint64_t> tasks_peak;         // pids.peak
  std::optional<std::uint64_t> oom_kills;          // memory.events oom_kill
  std::optional<std::uint64_t> processes_killed;   // still alive in the group when the end killed it
  // Additive (issue 25): connection attempts through the run's egress proxy, per "host:port",
  // allowed and denied. Absent (the key omitted) for a run that had no egress proxy or made none.
  std::optional<EgressCounts> egress = std::nullopt;
};
BOOST_DESCRIBE_STRUCT(RunResources, (), (cpu_usec, memory_peak_bytes, tasks_peak, oom_kills, processes_killed, egress))
MH_WIRE_RULES(RunResources, WireFieldRule{"egress", kOmitNull})

// Additive (issue 27): why a run that did not complete failed, in a closed vocabulary
// (protocol/run_failure.hpp judges it from the run's own events).
struct RunFailure {
  std::string category;  // auth · rate_limit · budget · stalled · vendor_exit · launch · halted · daemon · upstream
  bool retryable = false;  // the same spec may simply be submitted again
  std::string detail;
};
BOOST_DESCRIBE_STRUCT(RunFailure, (), (category, retryable, detail))

struct StreamClosed {
  static constexpr std::string_view kName = "stream.closed";
  std::uint64_t events = 0;
  CloseReason reason = CloseReason::error;
  std::string run_id;
  ProcessTermination process;
  // Absent for a run that had no cgroup of its own (nothing counted it), and in older lines.
  std::optional<RunResources> resources;
  // Absent when the run completed (and in older lines).
  std::optional<RunFailure> failure = std::nullopt;
};
BOOST_DESCRIBE_STRUCT(StreamClosed, (), (events, reason, run_id, process, resources, failure))
MH_WIRE_RULES(StreamClosed, WireFieldRule{"process", kAdditive}, WireFieldRule{"resources", kOmitNull},
              WireFieldRule{"failure", kOmitNull})

}  // namespace ev

// Vocabulary order (the order the wire documents them in).
using EventPayload = std::variant<ev::SessionStarted, ev::SessionEnded, ev::StepEntered, ev::StepLeft, ev::TurnStarted,
                                  ev::TurnEnded, ev::Text, ev::Thinking, ev::ThinkingEstimate, ev::Injection,
                                  ev::ToolRequested, ev::ToolDecided, ev::ToolResult, ev::Usage, ev::RateLimit,
                                  ev::CommandResult, ev::Warning, ev::Opaque, ev::AuthExpired, ev::StreamClosed>;

inline constexpr std::size_t kEventCount = std::variant_size_v<EventPayload>;
static_assert(kEventCount == 20);

// Additive (issue 9): one piece of an event's content that the stream writer cut so that the line
// stays within the event line bound (protocol/line_cut.hpp). The whole content stays in the
// retained vendor transcript; this says exactly what the line no longer holds.
struct CutField {
  std::string field;    // the payload field it belongs to: text, input, content, tool_use_result, ...
  std::string pointer;  // RFC 6901 pointer into the line: the string that now holds the kept prefix
  // "text": that string was cut. "json": the field's value was not a string (or held too many
  // small ones); it was replaced by a string holding the cut canonical JSON text of the value.
  std::string form = "text";
  std::uint64_t bytes = 0;  // byte length of the whole: the UTF-8 string, or the canonical JSON text
  std::uint64_t kept = 0;   // bytes kept from its start (a UTF-8 character boundary)
  std::string digest;       // SHA-256 (lowercase hex) of the whole
};
BOOST_DESCRIBE_STRUCT(CutField, (), (field, pointer, form, bytes, kept, digest))

struct Event {
  std::uint64_t seq = 0;
  std::string run;
  std::optional<std::string> at;  // the vendor's own timestamp; omitted when absent
  EventPayload payload;
  // Additive (issue 9): when metaharness wrote the line (RFC 3339 UTC, milliseconds), on every
  // line a run's stream writer produces; omitted where nobody wrote it live (translate).
  std::optional<std::string> recorded_at;
  // Additive (issue 9): what was cut to fit the line bound; the key is omitted when nothing was.
  std::vector<CutField> cut;
};

std::string_view event_name(const EventPayload& payload);
// All 20 names, in vocabulary order.
const std::array<std::string_view, kEventCount>& event_names();

// One event line, compact, without the trailing newline.
std::string serialize(const Event& event);
void serialize_to(std::string& out, const Event& event);
// Reads the additive `cut` key of an event line (absent: nothing was cut). False, with a reason,
// when it is there but does not fit.
bool read_cut_fields(const json::object& line, std::vector<CutField>& out, std::string& error);
// Just the payload fields, appended to an already-open object (for callers that frame the
// envelope themselves, e.g. a stream writer that assigns seq).
void write_payload(JsonWriter& w, const EventPayload& payload);

}  // namespace mh::protocol
