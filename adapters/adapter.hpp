// What every adapter is: a launch plan computed as a value before anything spawns, a reader
// (vendor record -> events), a controller (command -> vendor control line) and a capability
// table. Adapters spawn nothing, read no clock and do no I/O: the run loop feeds them lines and
// folds the outputs each input returns as values (AdapterOutputs), in order. That is what lets the same run machinery
// host every vendor, and lets the governing logic be tested without processes.
#pragma once

#include <boost/system/result.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <variant>

#include "protocol/capabilities.hpp"
#include "protocol/events.hpp"
#include "protocol/line_framer.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

// ---------------------------------------------------------------------------------------------
// The run as the embedder asked for it (a value; serialised into the run directory as spec.json)
// ---------------------------------------------------------------------------------------------

struct ModelEndpoint {
  std::string base_url;  // e.g. http://127.0.0.1:41234
  std::string token;     // the per-run credential the endpoint checks
};

// Per-run budgets (`--budget KEY=VALUE`, `budget: {…}` in the run spec): each unset one is
// unlimited. Crossing one ends the run with reason `budget`.
struct Budgets {
  std::optional<std::uint64_t> turns;
  std::optional<std::uint64_t> tool_calls;
  std::optional<std::uint64_t> input_tokens;
  std::optional<std::uint64_t> output_tokens;
  std::optional<std::uint64_t> wall_ms;
  std::optional<double> usd;  // needs a price for the run's model (an unknown cost is not zero)

  bool any() const { return turns || tool_calls || input_tokens || output_tokens || wall_ms || usd; }
};

// The budget keys, in the order they are documented and reported.
inline constexpr std::array<std::string_view, 6> kBudgetKeys = {"turns",         "tool_calls", "input_tokens",
                                                                "output_tokens", "wall_ms",    "usd"};
// Sets one budget from its key and textual value ("usd" a non-negative decimal, the others
// non-negative integers); false with a reason naming the key otherwise.
bool set_budget(Budgets& budgets, std::string_view key, std::string_view value, std::string& error);
json::object budgets_to_json(const Budgets& budgets);
// Each budget `budgets` leaves unset takes the value of `defaults` (the host's [budgets]).
void fill_unset_budgets(Budgets& budgets, const Budgets& defaults);

// The run's own resource limits (its cgroup's memory.max, pids.max, cpu.max); each one set
// overrides the daemon's default (runs.*), an unset one leaves it. A limit whose controller the
// host does not offer refuses the run at its start, by name.
struct RunLimits {
  static constexpr std::uint64_t kMemoryMin = 1u << 20;                // 1 MiB: less cannot start a vendor
  static constexpr std::uint64_t kMemoryMax = std::uint64_t(1) << 50;  // 1 PiB
  static constexpr std::uint64_t kPidsMax = 1u << 22;                  // the kernel's PID_MAX_LIMIT
  static constexpr std::uint32_t kCpuPercentMax = 100'000;             // a thousand CPUs
  std::optional<std::uint64_t> memory_max_bytes;
  std::optional<std::uint64_t> pids_max;
  std::optional<std::uint32_t> cpu_max_percent;  // 100 = one CPU
};

// A limit's bounds, both inclusive: one rule for a run spec's limits, the command line's and the
// daemon's runs.* defaults, each of which words its own refusal around them.
struct LimitBounds {
  std::uint64_t low = 1, high = 0;
  bool holds(std::uint64_t n) const { return n >= low && n <= high; }
  std::string text() const { return std::to_string(low) + " to " + std::to_string(high); }  // "L to H"
};
// memory_max_bytes, pids_max and cpu_max_percent have bounds; any other key has none.
std::optional<LimitBounds> limit_bounds(std::string_view key);
// Sets one limit by its key, which must have bounds that hold n (the caller checked both).
void store_limit(RunLimits& limits, std::string_view key, std::uint64_t n);
// The same from text (a command line's KEY=VALUE): false with a reason naming the key.
bool set_limit(RunLimits& limits, std::string_view key, std::string_view value, std::string& error);
json::object limits_to_json(const RunLimits& limits);  // the set ones only
inline bool any_limit(const RunLimits& l) {
  return l.memory_max_bytes || l.pids_max || l.cpu_max_percent;
}

struct RunSpec {
  std::string run_id;
  std::string adapter;  // "claude" | "codex" | "opencode"
  std::string prompt;
  proto::DecisionMode decisions = proto::DecisionMode::frame;
  std::optional<proto::Frame> frame;  // launch-time frame (already loaded and verified)
  std::uint64_t decision_deadline_ms = 55'000;
  std::optional<std::string> cwd;  // operator-named working directory (else scratch/work)
  std::optional<ModelEndpoint> model_endpoint;
  // The configured upstream ([upstreams.NAME]) the run's model gateway forwards to (issue 25,
  // docs/gateway.md). The daemon then points model_endpoint at the run's gateway, with the run's
  // placeholder token; the real key never reaches the run.
  std::optional<std::string> upstream;
  // Destinations ("host:port") an allowed tool call may reach through the run's egress proxy;
  // nothing else is reachable from a run whose network is "gateway".
  std::vector<std::string> egress;
  std::optional<std::string> model;  // vendor model name, passed through
  // Declared extra environment for the vendor (e.g. CLAUDE_CODE_MAX_RETRIES). Checked
  // against the adapter's denylist: a declared variable that would disable the seam is refused.
  std::map<std::string, std::string> vendor_env;
  // The vendor_env names whose values the spec marks secret (`{"value":…, "secret":true}`): their
  // values are replaced by [redacted:NAME] in everything the run writes.
  std::set<std::string> secret_vendor_env;
  // Declared vendor settings that are not environment (e.g. Codex's provider retry counts),
  // checked against the adapter's own list: an unknown key refuses the run.
  std::map<std::string, std::string> vendor_options;
  // Commands the embedder declares it will send. Any the adapter cannot honour refuses the run
  // at start, before anything spawns (interrupt and halt are always needed; tool.decide is
  // needed by ask / observe / a frame).
  std::vector<proto::CommandName> requires_commands;
  // Stay open between turns for message.inject until halted (or until the command source
  // closes); otherwise the run ends at its first idle turn boundary.
  bool keep_open = false;
  std::map<std::string, std::string> labels;
  // Deny-only policy: every allow (the embedder's or the frame's) is delivered to the vendor as
  // abstain, so the vendor's own permission rules still decide; denials are delivered as they are.
  bool deny_only = false;
  // The hermetic floor: off (no verdicts), on (verdicts reported), strict (the gating verdicts
  // decide `metaharness run`'s exit status). What is imposed at launch is the same in every mode.
  proto::HermeticMode hermetic = proto::HermeticMode::on;
  Budgets budget;
  RunLimits limits;
};

// What a secret is replaced with wherever a spec or a plan is shown or stored.
inline constexpr std::string_view kRedacted = "(redacted)";

// The spec as shown and stored (spec.json, `get`): the model endpoint's token and every
// vendor_env value are redacted (their names stay). Nothing reads a value back: a run adopted
// after a restart has its vendor running already (docs/socket-api.md).
json::value spec_to_json(const RunSpec& spec);
// A stored spec (spec.json of any build) with the same redactions: what `get` replies.
json::value redacted_spec_json(json::value spec);
// The spec as a client submits it (docs/socket-api.md): checks names, types and the frame's
// seal. run_id is not read (it is the host's to assign); model_scenario is the caller's business.
boost::system::result<RunSpec, std::string> spec_from_json(const json::object& o);

// Where a run's files live. The run loop creates the directories; the adapter only names paths.
struct RunPaths {
  std::filesystem::path run_dir;  // events.jsonl, vendor transcript, stderr, spec, plan
  std::filesystem::path scratch;  // the vendor's private world: home, tmp, work
};

// ---------------------------------------------------------------------------------------------
// Launch plan: everything needed to spawn, computed before anything spawns
// ---------------------------------------------------------------------------------------------

struct ScratchFile {
  std::filesystem::path path;
  std::string contents;
  unsigned mode = 0600;
};

// A symbolic link made before spawning, after the directories and files (e.g. opencode's
// pre-installed plugin package: a read-only tree on the host, linked into the run's config dir
// rather than copied for every run).
struct ScratchLink {
  std::filesystem::path path;
  std::filesystem::path target;
};

// A side channel for vendor hook programs (Codex runs its PreToolUse hook as a separate
// process): the run listens on an abstract Unix socket and the hook program, which inherits the
// vendor's environment, finds it through `env_var`. Every request is one JSON line (the hook's
// stdin), answered with one line (the hook's stdout; empty for no opinion).
struct HookChannel {
  std::string env_var;  // e.g. METAHARNESS_HOOK_SOCKET
  std::string address;  // as the vendor reaches it: an abstract name with a leading '@', or a path
  // Where the listener binds it when that differs from `address`: a path socket in the run
  // directory bound into the run's view at `address` (a run with a network namespace of its own,
  // where abstract sockets of the host are out of reach). Empty: `address` itself.
  std::filesystem::path bound_at;
};

struct LaunchPlan {
  std::string adapter;
  std::filesystem::path program;                         // absolute path of the vendor binary
  std::vector<std::string> args;                         // after argv[0]
  std::vector<std::pair<std::string, std::string>> env;  // constructed, never inherited
  // Set when `program` is a privileged hop before the drop to the run's user (the sandbox's bwrap
  // and setpriv, which end in mh-exec): `env` is then the hops' own fixed environment, and this
  // the vendor's, handed to mh-exec through a sealed memfd (ChildProcess::spawn) and applied only
  // there, after the drop.
  std::optional<std::vector<std::pair<std::string, std::string>>> handed_env;
  std::filesystem::path cwd;
  std::vector<std::filesystem::path> directories;  // created before spawning
  std::vector<ScratchFile> files;                  // written before spawning
  std::vector<ScratchLink> links;                  // made before spawning, after the files
  std::filesystem::path transcript_path;           // retained raw vendor stdout
  std::filesystem::path stdin_log_path;            // what metaharness wrote to the vendor
  proto::HermeticAttestation attestation;
  // The environment variable (name=value) every process of this run inherits, so leftovers can
  // be found and killed even after they escape the process tree.
  std::pair<std::string, std::string> run_marker;
  std::optional<HookChannel> hook_channel;
  std::vector<std::string> notes;  // human remarks printed with the plan
};

// The plan as printed and stored (plan.json): an environment entry's value is redacted when its
// name says it is a credential (…TOKEN…, …KEY…) or the run's vendor_env declares it.
json::value plan_to_json(const LaunchPlan& plan, const RunSpec& spec);

// Launch refusal: before anything spawns. Either a set of command results (one per needed
// command the adapter cannot honour, ids "start/<command>") or a plain launch error.
struct LaunchRefusal {
  std::vector<proto::ev::CommandResult> command_results;
  std::string message;  // for stderr / the socket client
};

// ---------------------------------------------------------------------------------------------
// Run-loop side of the conversation
// ---------------------------------------------------------------------------------------------

// A tool call as the vendor presented it.
struct ToolCall {
  std::string call_id;
  std::string name;
  json::value input;
  // The seam that will carry this call's decision; `none` marks a record of a call nothing can
  // gate (delivered, never decided, never counted).
  proto::Seam seam = proto::Seam::hook;
  // Which agent made the call: unset for the main agent, else the vendor's id of the sub-agent.
  std::optional<std::string> agent;
  // A request to re-run a call outside the vendor's sandbox: its own call, decided on its own.
  bool escalation = false;
};

// The reply channel for one vendor decision request: the vendor's own request id (Claude: the
// control request_id of a hook_callback; Codex: the JSON-RPC id of an approval request), or the
// hook channel's connection that is waiting (Codex's PreToolUse hook). Typed, so an adapter
// never parses its own token back out of a string. No id and no connection: no reply channel.
struct ReplyToken {
  std::string id;
  std::optional<std::uint64_t> hook_connection;
  proto::Seam seam = proto::Seam::hook;

  bool empty() const { return id.empty() && !hook_connection; }
  // The same channel (the seam says where the request came from, not which one it is).
  bool same_channel(const ReplyToken& other) const {
    return id == other.id && hook_connection == other.hook_connection;
  }
};

// The vendor's answer to a control request metaharness sent.
struct ControlReply {
  std::string control_id;
  bool ok = true;
  std::string vendor_error;  // the vendor's own words when !ok
  // The refusal code a vendor error maps to (e.g. Codex's "no active turn" is TOO_LATE).
  proto::RefusalCode refusal_code = proto::RefusalCode::UNSUPPORTED_CONTROL;
  json::value response;
};

// How a controller handled a command right away.
struct ControlAck {
  enum class Kind { done, pending_vendor, refused } kind = Kind::done;
  proto::CommandOutcome outcome;  // for done / refused; for pending_vendor, the ok it becomes
  std::string control_id;         // pending_vendor: resolve when the vendor answers this id

  static ControlAck done(std::optional<std::string> applies_at = std::nullopt) {
    return {Kind::done, proto::CommandOutcome::ok(std::move(applies_at)), {}};
  }
  static ControlAck pending(std::string control_id, std::optional<std::string> applies_at = std::nullopt) {
    return {Kind::pending_vendor, proto::CommandOutcome::ok(std::move(applies_at)), std::move(control_id)};
  }
  static ControlAck refused(proto::RefusalCode code, std::string reason) {
    return {Kind::refused, proto::CommandOutcome::refused(code, std::move(reason)), {}};
  }
};

// What an adapter session produces for one input, as values: the session fills an ordered list
// while it handles the input, and the run loop folds the list in order once the session has
// returned (RunCore::fold; offline, OfflineSink::fold). Nothing calls back into the run loop
// mid-parse. Events appear in the stream in list order.
namespace out {
// A mapped event (text, thinking, usage, tool.result, opaque, ...). `at` is the vendor's own
// timestamp on the source record, passed through.
struct Event {
  proto::EventPayload payload;
  std::optional<std::string> at;
};
// A mapped event whose content the adapter holds only cut (a vendor line over the line bound,
// read as a skeleton): `cut` says what each field no longer holds, as the stream writer's own
// cuts do (protocol/line_cut.hpp).
struct EventCut {
  proto::EventPayload payload;
  std::optional<std::string> at;
  std::vector<proto::CutField> cut;
};
// The model asked for a tool call (the run loop emits tool.requested and decides per mode).
struct CallPresented {
  ToolCall call;
  std::optional<std::string> at;
};
// The vendor is blocked until this call is answered through `reply`.
struct CallAwaitsAnswer {
  ToolCall call;
  ReplyToken reply;
};
// The vendor withdrew a decision request (e.g. its own timeout, or an interrupt).
struct CallWithdrawn {
  ReplyToken reply;
};
// The vendor answered a control request metaharness sent.
struct ControlAnswered {
  ControlReply reply;
};
// Turn boundaries as the vendor reports them. The run loop numbers turns and emits turn.started /
// turn.ended (it knows which frame is in force); a turn end closes the decision window and is
// where queued messages are delivered or the run winds up.
struct TurnStarted {
  std::optional<std::string> at;
};
struct TurnEnded {
  std::optional<std::string> stop_reason;
  std::optional<std::string> at;
};
// A line to write to the vendor's stdin (newline added by the run loop).
struct WriteVendor {
  std::string line;
};
// The answer to one hook-channel request (see HookChannel); the run loop writes it to that
// hook's connection and closes it. An empty line means "no opinion".
struct ReplyHook {
  std::uint64_t connection = 0;
  std::string line;
};
// The adapter's control channel is established (e.g. Claude answered initialize, so the call
// seam is installed): the run loop may now start the first turn.
struct SessionReady {};
// Something makes it unsafe to go on (e.g. the vendor refused to install the call seam): the run
// loop ends the run with reason error, saying why.
struct FailRun {
  std::string reason;
};
}  // namespace out

using AdapterOutput = std::variant<out::Event, out::EventCut, out::CallPresented, out::CallAwaitsAnswer,
                                   out::CallWithdrawn, out::ControlAnswered, out::TurnStarted, out::TurnEnded,
                                   out::WriteVendor, out::ReplyHook, out::SessionReady, out::FailRun>;

// The ordered list a session fills for one input, with one short verb per kind of output.
class AdapterOutputs {
 public:
  void event(proto::EventPayload payload, std::optional<std::string> at) {
    list_.emplace_back(out::Event{std::move(payload), std::move(at)});
  }
  void event_cut(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut) {
    list_.emplace_back(out::EventCut{std::move(payload), std::move(at), std::move(cut)});
  }
  void call_presented(ToolCall call, std::optional<std::string> at) {
    list_.emplace_back(out::CallPresented{std::move(call), std::move(at)});
  }
  void call_awaits_answer(ToolCall call, ReplyToken reply) {
    list_.emplace_back(out::CallAwaitsAnswer{std::move(call), std::move(reply)});
  }
  void call_withdrawn(ReplyToken reply) { list_.emplace_back(out::CallWithdrawn{std::move(reply)}); }
  void control_answered(ControlReply reply) { list_.emplace_back(out::ControlAnswered{std::move(reply)}); }
  void turn_started(std::optional<std::string> at) { list_.emplace_back(out::TurnStarted{std::move(at)}); }
  void turn_ended(std::optional<std::string> stop_reason, std::optional<std::string> at) {
    list_.emplace_back(out::TurnEnded{std::move(stop_reason), std::move(at)});
  }
  void write_vendor(std::string line) { list_.emplace_back(out::WriteVendor{std::move(line)}); }
  void reply_hook(std::uint64_t connection, std::string line) {
    list_.emplace_back(out::ReplyHook{connection, std::move(line)});
  }
  void session_ready() { list_.emplace_back(out::SessionReady{}); }
  void fail_run(std::string reason) { list_.emplace_back(out::FailRun{std::move(reason)}); }

  std::size_t size() const { return list_.size(); }
  bool empty() const { return list_.empty(); }
  // How many outputs from index `from` on are records of the vendor's (events, calls, controls
  // answered, turns) rather than effects (writes, hook replies, readiness, failure): a vendor
  // record that produced none of these becomes opaque.
  std::size_t records_since(std::size_t from) const;
  const std::vector<AdapterOutput>& list() const { return list_; }
  // Hands the list over (for folding) and leaves this one empty.
  std::vector<AdapterOutput> take() { return std::exchange(list_, {}); }

 private:
  std::vector<AdapterOutput> list_;
};

// Per-run adapter state: reader + controller for one vendor process.
class AdapterSession {
 public:
  virtual ~AdapterSession() = default;

  // The first lines to the vendor (e.g. initialize, then the prompt as the first user turn).
  virtual void start(AdapterOutputs& sink) = 0;
  // One line of the vendor's stdout (line.number is its 1-based line in the transcript).
  virtual void on_vendor_line(const proto::FramedLine& line, AdapterOutputs& sink) = 0;
  // The vendor's stdout ended. Adapters that synthesise a terminal record do it here, and what
  // they held for a later line (Codex: notifications before its thread exists) is released here,
  // never dropped. Called once, after the last line: live by RunCore::on_vendor_end, before the
  // run's wind-up records; offline by translate.
  virtual void on_vendor_end(AdapterOutputs& sink) = 0;
  // One request from a hook program over the plan's HookChannel (`input` is the hook's stdin
  // JSON). Adapters without a hook channel never get one.
  virtual void on_hook_request(std::uint64_t connection, const json::value& input, AdapterOutputs& sink) {
    (void)input;
    sink.reply_hook(connection, "");
  }
  // A hook program went away before it was answered (the vendor's own hook timeout killed it).
  virtual void on_hook_gone(std::uint64_t connection, AdapterOutputs& sink) {
    (void)connection;
    (void)sink;
  }

  // Answer a vendor decision request.
  virtual void answer(const ReplyToken& reply, const ToolCall& call, const proto::Decision& decision,
                      AdapterOutputs& sink) = 0;
  // Is the request the vendor blocks on (`asked`) the same request as the one it presented
  // (`presented`)? A decision is bound to what was presented; the vendor may restate it in its
  // own normal form (Claude resolves a relative file_path against its cwd) without changing what
  // runs. Anything else is a different request, denied as mutated. Default: byte equality of the
  // canonical JSON.
  virtual bool same_request(const ToolCall& presented, const ToolCall& asked) const {
    return presented.name == asked.name && proto::canonical_json(presented.input) == proto::canonical_json(asked.input);
  }
  // Can this adapter carry this decision for this call? (e.g. a replace whose input the wire
  // cannot express is refused by name, never downgraded.)
  virtual std::optional<proto::Refusal> check_decision(const ToolCall& call, const proto::Decision& decision) const = 0;
  // Would an allow at the call seam override this permission posture (the vendor honours the
  // allow and skips the posture's own refusal)? Such a posture, asked for without the deny-only
  // policy, is refused SHADOWED: it would appear to work and would not.
  virtual bool allow_overrides_posture(const std::string& posture) const {
    (void)posture;
    return false;
  }

  // Start a new turn with one user message made of these texts, in order (a frame that comes
  // into force at this boundary is delivered as the first text).
  virtual void send_user_turn(const std::vector<std::string>& texts, AdapterOutputs& sink) = 0;
  virtual ControlAck interrupt(AdapterOutputs& sink) = 0;
  virtual ControlAck steer(const std::string& text, AdapterOutputs& sink) = 0;
  virtual ControlAck set_permission(const std::string& posture, AdapterOutputs& sink) = 0;
  // Halt, step by step: the adapter's graceful end (e.g. end_session), before stdin is closed
  // and the process tree is killed by the run loop.
  virtual void end_session(AdapterOutputs& sink) = 0;
  // After the vendor's stdin is closed, does the vendor finish on its own? (Claude: yes, it
  // exits after the current turn.)
  virtual bool exits_on_stdin_close() const { return true; }
  // The session's terminal record, if the vendor produced terminal evidence (built from the
  // turns seen; vendor-specific accumulation, e.g. Claude reports permission_denials per turn).
  // The run loop fills in the census and emits it once, at wind-up.
  virtual std::optional<proto::ev::SessionEnded> session_ended() const = 0;
};

class Adapter {
 public:
  virtual ~Adapter() = default;
  virtual std::string_view id() const = 0;
  virtual const proto::CapabilityTable& capabilities() const = 0;
  // The model wire the vendor speaks to its model ("anthropic" | "openai-responses"): an upstream
  // serving another wire is refused at submit, by name (docs/gateway.md).
  virtual std::string_view model_wire() const = 0;
  // Computes the launch plan, or refuses the run with named reasons. Reads the filesystem only
  // to locate the vendor binary; writes nothing.
  virtual std::variant<LaunchPlan, LaunchRefusal> plan(const RunSpec& spec, const RunPaths& paths) const = 0;
  virtual std::unique_ptr<AdapterSession> open_session(const RunSpec& spec, const LaunchPlan& plan) const = 0;
  // The reader alone, offline (`metaharness translate`): no decisions; tool calls carry seam none.
  virtual std::vector<proto::Event> translate(std::string_view transcript, const std::string& run_id) const = 0;
  // Installed vendor version, compared with the pin by `metaharness doctor`.
  virtual std::optional<std::string> installed_version(std::string& error) const = 0;
  // The neutral operations a call is (tool.requested.operations), from the capability table's
  // rendering plus vendor aliases (e.g. Claude's NotebookEdit is also file.edit).
  virtual std::vector<proto::Operation> operations_for(const ToolCall& call) const {
    return capabilities().operations_for_tool(call.name);
  }
  // What a call touches, scheme-prefixed, verbatim (tool.requested.subjects).
  virtual std::vector<std::string> subjects_for(const ToolCall& call) const;
  // The longest decision deadline this adapter's seam can hold: the vendor's own timeout for a
  // pending decision sits above the deadline and must not overflow. A longer deadline is refused
  // at submit and at run start, by name.
  virtual std::uint64_t max_decision_deadline_ms() const = 0;
  // The model a run gets when its spec names none, where the adapter decides it at launch (e.g.
  // the model its config file names); nullopt when only the vendor knows, once it starts.
  virtual std::optional<std::string> default_model() const { return std::nullopt; }
};

// The run-start refusal of a deadline the adapter's seam cannot hold (nullopt when it can).
std::optional<std::string> refuse_deadline(const Adapter& adapter, std::uint64_t deadline_ms);

// Collects what an adapter's reader produces offline (`metaharness translate`): no decisions are
// made, so every tool call is a record nobody adjudicates (seam none); turns are numbered here.
class OfflineSink final {
 public:
  OfflineSink(const Adapter& adapter, std::string run_id);
  // Folds one input's outputs, in order (effects for a live vendor are ignored: there is none).
  void fold(AdapterOutputs& outputs);
  // The stream: what was read, the session's terminal record (census empty: nothing was
  // decided) if any, and stream.closed.
  std::vector<proto::Event> finish(std::optional<proto::ev::SessionEnded> ended);

 private:
  void call_presented(ToolCall call, std::optional<std::string> at);
  void push(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut = {});
  const Adapter& adapter_;
  std::string run_id_;
  std::uint32_t turn_ = 0;
  std::set<std::string> presented_;
  std::vector<proto::Event> events_;
};

// Host-side configuration for adapters: where the pinned vendor CLIs live. This is the host's
// choice (config file / environment), never the submitting client's.
struct HostConfig {
  std::filesystem::path vendor_dir;                       // holds node_modules/ from ./run setup
  std::map<std::string, std::filesystem::path> binaries;  // per-adapter override
};

// The default host configuration: vendor_dir from $METAHARNESS_VENDOR_DIR, else build_info::default_vendor_dir;
// a binary override from $METAHARNESS_<ADAPTER>_BIN (e.g. METAHARNESS_CLAUDE_BIN).
HostConfig host_config_from_environment();

// The adapters compiled into this binary.
class AdapterRegistry {
 public:
  explicit AdapterRegistry(HostConfig config);
  ~AdapterRegistry();
  const Adapter* find(std::string_view id) const;
  std::vector<std::string_view> ids() const;
  const HostConfig& config() const { return config_; }

 private:
  HostConfig config_;
  std::vector<std::unique_ptr<Adapter>> adapters_;
};

// Close-reason classification (reference §4.3) from what the run knows at its end.
proto::CloseReason classify_close(bool halted, const std::optional<proto::ev::SessionEnded>& terminal);

// The start of a harness adapter's capability table: its id, the versions pinned for it
// (vendor/pins), and every tier and decision mode delivered. Commands, rendering and notes are
// the adapter's own.
proto::CapabilityTable harness_capabilities(std::string_view adapter_id);

// The operations a call of `tool` is: the table's rendering plus `also` (the vendor's aliases),
// in vocabulary order.
std::vector<proto::Operation> operations_with(const proto::CapabilityTable& table, std::string_view tool,
                                              const std::vector<proto::OpKind>& also);

// Frames a retained transcript (`metaharness translate`) as the live run frames the vendor's
// stdout: the same line bound, an oversized line digested whole.
void read_transcript(std::string_view transcript, const std::function<void(const proto::FramedLine&)>& on_line);

// Run-start refusal shared by every adapter: the commands this run's configuration needs
// (interrupt, halt; tool.decide for ask / observe / a frame; whatever the spec declares), each
// checked against the capability table. Empty when the run may start.
std::vector<proto::ev::CommandResult> refuse_unhonoured_commands(const RunSpec& spec,
                                                                 const proto::CapabilityTable& table);

}  // namespace mh::adapters
