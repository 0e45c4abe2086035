// Value types shared by events, commands and frames: the wire's enums with their exact
// spellings, decisions, command outcomes and the structs nested inside event payloads.
#pragma once

#include <array>
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

enum class Seam { registration, hook, control_request, owned_tool, none };
enum class DecidedBy { embedder, frame, deadline, adapter, observe };
enum class RefusalCode { UNSUPPORTED_CONTROL, UNKNOWN_CALL, TOO_LATE, MALFORMED, SHADOWED };
enum class CloseReason { completed, budget, killed, error, steer_halt };
enum class HermeticMode { off, on, strict };
enum class DecisionMode { frame, ask, observe };
enum class Tier { registration, call, turn, kill };
enum class TierStatus { delivered, unverified, absent };
enum class AdapterClass { harness, direct_provider };
enum class HermeticRow { h1a, h1b, h2, h3, h4, h5, h6, h7, h8, h9, h10, h11 };
enum class ProcessKind { exited, signaled, unknown };

template <class E>
struct EnumNames;  // specialised by MH_ENUM_NAMES (here and beside other wire enums)

#define MH_ENUM_NAMES(E, ...)                          \
  template <>                                          \
  struct EnumNames<E> {                                \
    static constexpr std::array names = {__VA_ARGS__}; \
  }

MH_ENUM_NAMES(Seam, std::string_view("registration"), std::string_view("hook"), std::string_view("control_request"),
              std::string_view("owned_tool"), std::string_view("none"));
MH_ENUM_NAMES(DecidedBy, std::string_view("embedder"), std::string_view("frame"), std::string_view("deadline"),
              std::string_view("adapter"), std::string_view("observe"));
MH_ENUM_NAMES(RefusalCode, std::string_view("UNSUPPORTED_CONTROL"), std::string_view("UNKNOWN_CALL"),
              std::string_view("TOO_LATE"), std::string_view("MALFORMED"), std::string_view("SHADOWED"));
MH_ENUM_NAMES(CloseReason, std::string_view("completed"), std::string_view("budget"), std::string_view("killed"),
              std::string_view("error"), std::string_view("steer-halt"));
MH_ENUM_NAMES(HermeticMode, std::string_view("off"), std::string_view("on"), std::string_view("strict"));
MH_ENUM_NAMES(DecisionMode, std::string_view("frame"), std::string_view("ask"), std::string_view("observe"));
MH_ENUM_NAMES(Tier, std::string_view("registration"), std::string_view("call"), std::string_view("turn"),
              std::string_view("kill"));
MH_ENUM_NAMES(TierStatus, std::string_view("delivered"), std::string_view("unverified"), std::string_view("absent"));
MH_ENUM_NAMES(AdapterClass, std::string_view("harness"), std::string_view("direct_provider"));
MH_ENUM_NAMES(HermeticRow, std::string_view("h1a"), std::string_view("h1b"), std::string_view("h2"),
              std::string_view("h3"), std::string_view("h4"), std::string_view("h5"), std::string_view("h6"),
              std::string_view("h7"), std::string_view("h8"), std::string_view("h9"), std::string_view("h10"),
              std::string_view("h11"));
MH_ENUM_NAMES(ProcessKind, std::string_view("exited"), std::string_view("signaled"), std::string_view("unknown"));

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
};
BOOST_DESCRIBE_STRUCT(HermeticAttestation, (),
                      (mode, decisions, imposed, unavailable, ambient_inputs, installed_plugins, deny_only))
MH_WIRE_RULES(HermeticAttestation, WireFieldRule{"deny_only", kAdditive})

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
