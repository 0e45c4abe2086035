// Value types shared by events, commands and frames: the wire's enums with their exact
// spellings, decisions, command outcomes and the structs nested inside event payloads.
#pragma once

#include <array>
#include <boost/preprocessor/seq/enum.hpp>
#include <boost/preprocessor/seq/transform.hpp>
#include <boost/preprocessor/stringize.hpp>
#include <boost/preprocessor/variadic/to_seq.hpp>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "protocol/json.hpp"
#include "protocol/wire_describe.hpp"

namespace mh::protocol {

inline constexpr std::string_view kEventFormat = "metaharness.event/1";
inline constexpr std::string_view kCommandFormat = "metaharness.command/1";
inline constexpr std::string_view kFrameFormat = "metaharness.frame/1";

// ---------------------------------------------------------------------------------------------
// Enums. Each has a names table in declaration order; to_string / parse_enum go through it.
// ---------------------------------------------------------------------------------------------

template <class E>
struct EnumNames;  // specialised by MH_ENUM_NAMES (here and beside other wire enums)

#define MH_ENUM_NAMES(E, ...)                          \
  template <>                                          \
  struct EnumNames<E> {                                \
    static constexpr std::array names = {__VA_ARGS__}; \
  }

// An enum whose wire names are its enumerators' own spellings, declared with them in one list
// so that the two cannot drift apart.
#define MH_ENUM_NAME_OF(s, data, enumerator) std::string_view(BOOST_PP_STRINGIZE(enumerator))
#define MH_NAMED_ENUM(E, ...)   \
  enum class E { __VA_ARGS__ }; \
  MH_ENUM_NAMES(E, BOOST_PP_SEQ_ENUM(BOOST_PP_SEQ_TRANSFORM(MH_ENUM_NAME_OF, _, BOOST_PP_VARIADIC_TO_SEQ(__VA_ARGS__))))

MH_NAMED_ENUM(Seam, registration, hook, control_request, owned_tool, none);
MH_NAMED_ENUM(DecidedBy, embedder, frame, deadline, adapter, observe);
MH_NAMED_ENUM(RefusalCode, UNSUPPORTED_CONTROL, UNKNOWN_CALL, TOO_LATE, MALFORMED, SHADOWED);
MH_NAMED_ENUM(HermeticMode, off, on, strict);
MH_NAMED_ENUM(DecisionMode, frame, ask, observe);
MH_NAMED_ENUM(Tier, registration, call, turn, kill);
MH_NAMED_ENUM(TierStatus, delivered, unverified, absent);
MH_NAMED_ENUM(AdapterClass, harness, direct_provider);
MH_NAMED_ENUM(HermeticRow, h1a, h1b, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11);
MH_NAMED_ENUM(ProcessKind, exited, signaled, unknown);
// What a run that makes no progress for its stall_after gets (issue 27): a warning RUN_STALLED, and
// with `halt` the run is then halted (its stream.closed's failure says `stalled`).
MH_NAMED_ENUM(OnStall, warn, halt);

// The one wire name that is no identifier.
enum class CloseReason { completed, budget, killed, error, steer_halt };
MH_ENUM_NAMES(CloseReason, std::string_view("completed"), std::string_view("budget"), std::string_view("killed"),
              std::string_view("error"), std::string_view("steer-halt"));

template <class E>
constexpr std::string_view to_string(E e) {
  return EnumNames<E>::names[static_cast<std::size_t>(e)];
}

template <class E>
constexpr std::optional<E> parse_enum(std::string_view text) {
  const auto& names = EnumNames<E>::names;
  for (std::size_t i = 0; i < names.size(); ++i)
    if (names[i] == text) return static_cast<E>(i);
  return std::nullopt;
}

// "a, b or c" — for refusals that name the vocabulary.
template <class E>
std::string vocabulary() {
  std::string out;
  const auto& names = EnumNames<E>::names;
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += (i + 1 == names.size()) ? " or " : ", ";
    out += names[i];
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Decisions and command outcomes
// ---------------------------------------------------------------------------------------------

namespace decision {
struct Allow {};
struct Deny {
  std::string reason;
};
struct Replace {
  json::value input;
};
struct Abstain {};
}  // namespace decision

using Decision = std::variant<decision::Allow, decision::Deny, decision::Replace, decision::Abstain>;

std::string_view decision_name(const Decision& d);  // allow / deny / replace / abstain
void write_decision(JsonWriter& w, const Decision& d);
// Object form ({"decision":"deny","reason":"…"}); the bare strings "allow" and "abstain" are
// accepted too, as the seeds' own example writes them. A deny with a blank reason, a replace
// without input, or anything else yields nullopt and an error naming the problem.
std::optional<Decision> read_decision(const json::value& v, std::string& error);

struct Refusal {
  RefusalCode code;
  std::string reason;
};

struct CommandOutcome {
  // ok: refusal is empty; applies_at says when a deferred control takes effect (or null).
  std::optional<Refusal> refusal;
  std::optional<std::string> applies_at;

  static CommandOutcome ok(std::optional<std::string> applies_at = std::nullopt) {
    return CommandOutcome{std::nullopt, std::move(applies_at)};
  }
  static CommandOutcome refused(RefusalCode code, std::string reason) {
    return CommandOutcome{Refusal{code, std::move(reason)}, std::nullopt};
  }
  bool is_ok() const { return !refusal.has_value(); }
};

void write_outcome(JsonWriter& w, const CommandOutcome& o);
std::optional<CommandOutcome> read_outcome(const json::object& o, std::string& error);

// ---------------------------------------------------------------------------------------------
// Structs nested in event payloads (field order = serialization order)
// ---------------------------------------------------------------------------------------------

struct StepRef {
  std::string workflow;
  std::string state;
  std::uint32_t index = 0;
  std::uint32_t attempt = 1;
};
BOOST_DESCRIBE_STRUCT(StepRef, (), (workflow, state, index, attempt))

struct StepOutcome {
  enum class Kind { completed, failed, no_verdict } kind = Kind::completed;
  std::string reason;  // failed / no_verdict only
};

struct PluginRef {
  std::optional<std::string> name, source, version;
};
BOOST_DESCRIBE_STRUCT(PluginRef, (), (name, source, version))

struct McpServerRef {
  std::optional<std::string> name, status;
};
BOOST_DESCRIBE_STRUCT(McpServerRef, (), (name, status))

struct TranscriptRef {
  std::optional<std::string> path;
  std::optional<std::string> digest;
  std::optional<std::uint64_t> bytes;
};
BOOST_DESCRIBE_STRUCT(TranscriptRef, (), (path, digest, bytes))
MH_WIRE_RULES(TranscriptRef, WireFieldRule{"digest", kDigest})

struct WithheldTool {
  std::string tool;
  std::string reason;
};
BOOST_DESCRIBE_STRUCT(WithheldTool, (), (tool, reason))

struct TokenUsage {
  std::optional<std::uint64_t> input_tokens;
  std::optional<std::uint64_t> output_tokens;
  std::optional<std::uint64_t> cache_read_input_tokens;
  std::optional<std::uint64_t> cache_creation_input_tokens;
  std::optional<std::string> service_tier;
  std::optional<std::uint64_t> thinking_tokens;
  std::optional<std::uint64_t> iterations;
  std::optional<std::string> speed;
  std::optional<double> cost_usd;
};
BOOST_DESCRIBE_STRUCT(TokenUsage, (),
                      (input_tokens, output_tokens, cache_read_input_tokens, cache_creation_input_tokens, service_tier,
                       thinking_tokens, iterations, speed, cost_usd))

struct PermissionDenial {
  std::string tool_name;
  std::optional<std::string> tool_use_id;
  json::value tool_input;  // null when the vendor gave none
};
BOOST_DESCRIBE_STRUCT(PermissionDenial, (), (tool_name, tool_use_id, tool_input))

struct DecisionCensus {
  std::uint32_t allowed = 0;
  std::uint32_t denied = 0;
  std::uint32_t replaced = 0;
  std::uint32_t abstained = 0;
  std::map<std::string, std::uint32_t> by_seam;
  std::map<std::string, std::uint32_t> by_decider;

  void count(const Decision& d, Seam seam, DecidedBy by);
  std::uint32_t total() const { return allowed + denied + replaced + abstained; }
};
BOOST_DESCRIBE_STRUCT(DecisionCensus, (), (allowed, denied, replaced, abstained, by_seam, by_decider))

struct RateLimitInfo {
  std::optional<std::string> status;
  std::optional<std::string> window;
  std::optional<std::int64_t> resets_at;
  std::optional<double> utilization;
  std::optional<bool> using_overage;
};
BOOST_DESCRIBE_STRUCT(RateLimitInfo, (), (status, window, resets_at, utilization, using_overage))

struct ImposedRow {
  HermeticRow row;
  std::string how;
};
BOOST_DESCRIBE_STRUCT(ImposedRow, (), (row, how))
struct UnavailableRow {
  HermeticRow row;
  std::string why;
};
BOOST_DESCRIBE_STRUCT(UnavailableRow, (), (row, why))
struct InstalledPlugin {
  std::string name, source, installed_at, digest, loaded_by;
};
BOOST_DESCRIBE_STRUCT(InstalledPlugin, (), (name, source, installed_at, digest, loaded_by))

// Additive (issue 27 section 6, docs/hermetic.md): the vendor binary the run executes, as the
// daemon found it at launch: its resolved path (links followed), its SHA-256, and the npm package
// that holds it (name and version from that package's own package.json; null when the binary is
// not inside an npm package or its manifest says none). `sha256` null: the file could not be read,
// and `refused` says why (never a digest guessed).
struct VendorBinary {
  std::string path;
  std::optional<std::string> sha256;
  std::optional<std::string> package;
  std::optional<std::string> version;
  std::optional<std::string> refused;
};
BOOST_DESCRIBE_STRUCT(VendorBinary, (), (path, sha256, package, version, refused))
MH_WIRE_RULES(VendorBinary, WireFieldRule{"sha256", kDigest}, WireFieldRule{"refused", kOmitNull})

struct HermeticAttestation {
  HermeticMode mode = HermeticMode::off;
  DecisionMode decisions = DecisionMode::frame;
  std::vector<ImposedRow> imposed;
  std::vector<UnavailableRow> unavailable;
  std::vector<std::string> ambient_inputs;
  std::vector<InstalledPlugin> installed_plugins;
  // Additive (issue 9): the run's policy is deny-only: every allow is delivered as abstain, so the
  // vendor's own permission rules still decide what runs.
  bool deny_only = false;
  // Additive (issue 25, docs/hermetic.md): the run's network, "gateway" (a network namespace of its
  // own, its model gateway the only door) or "host" (the host's network, unconfined); and how the
  // vendor is credentialed to its model: "gateway" (a per-run placeholder; the upstream's key is
  // held by the gateway), "scenario" (a scripted endpoint's per-run token) or "raw-token" (a
  // model_endpoint with its own token, as given). Omitted when not said (older runs).
  std::optional<std::string> network;
  std::optional<std::string> model_credential;
  // Additive (issue 27 section 6): the binary executed. Omitted when not said (older runs).
  std::optional<VendorBinary> vendor_binary;
};
BOOST_DESCRIBE_STRUCT(HermeticAttestation, (),
                      (mode, decisions, imposed, unavailable, ambient_inputs, installed_plugins, deny_only, network,
                       model_credential, vendor_binary))
MH_WIRE_RULES(HermeticAttestation, WireFieldRule{"deny_only", kAdditive}, WireFieldRule{"network", kOmitNull},
              WireFieldRule{"model_credential", kOmitNull}, WireFieldRule{"vendor_binary", kOmitNull})

struct FinalAnswer {
  std::string text;
  std::optional<std::string> turn_id;
};
BOOST_DESCRIBE_STRUCT(FinalAnswer, (), (text, turn_id))

struct ObservedModel {
  std::uint64_t turn = 0;
  std::optional<std::string> turn_id;
  std::optional<std::string> model;
  std::string scope = "turn_selection";
};
BOOST_DESCRIBE_STRUCT(ObservedModel, (), (turn, turn_id, model, scope))

struct ProcessTermination {
  ProcessKind kind = ProcessKind::unknown;
  int code = 0;    // exited
  int signal = 0;  // signaled
};

// Who answered a tool.decide over a socket (an additive field of tool.decided).
struct PeerIdentity {
  std::uint32_t uid = 0;
  std::int32_t pid = 0;
  // How the answer came when not over the socket itself: "viewer" for the browser page, where
  // uid is the user who asked for the page's token and pid the process that asked (`metaharness
  // viewer`). Absent: the socket peer answered.
  std::optional<std::string> via;
};
BOOST_DESCRIBE_STRUCT(PeerIdentity, (), (uid, pid, via))
MH_WIRE_RULES(PeerIdentity, WireFieldRule{"via", kOmitNull})

// Writers for the nested structs used outside the wire codec (which writes every described struct
// from its description).
void write(JsonWriter& w, const StepOutcome& v);
void write(JsonWriter& w, const HermeticAttestation& v);
void write(JsonWriter& w, const ProcessTermination& v);

// Readers for the nested structs; they report through the FieldReader's error.
std::optional<StepRef> read_step_ref(const json::value& v, std::string& error);
// {"outcome":"completed"} | {"outcome":"failed"|"no_verdict","reason":"…"} (a reason is required there).
std::optional<StepOutcome> read_step_outcome(const json::value& v, std::string& error);
bool operator==(const StepRef& a, const StepRef& b);
TokenUsage read_usage(FieldReader& f);

}  // namespace mh::protocol
