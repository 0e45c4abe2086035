// The run as the embedder asked for it: a value, serialised into the run directory as spec.json
// (RunSpec), with its budgets and resource limits, and where its files live (RunPaths). Read by
// the daemon, the CLI and every adapter's plan; holds no behaviour beyond (de)serialising.
#pragma once

#include <array>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/system/result.hpp>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/commands.hpp"
#include "protocol/events.hpp"
#include "protocol/frame.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

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

// The longest stall_after a spec may name (30 days): a run silent that long is stalled by any
// measure, and the bound keeps every deadline within the clock's range.
inline constexpr std::uint64_t kMaxStallAfterMs = 30ull * 24 * 3600 * 1000;

struct RunSpec {
  std::string run_id;
  std::string adapter;  // a registered vendor's id (adapters/registry.cpp)
  std::string prompt;
  proto::DecisionMode decisions = proto::DecisionMode::frame;
  std::optional<proto::Frame> frame;  // launch-time frame (already loaded and verified)
  std::uint64_t decision_deadline_ms = 55'000;
  // Stalls (issue 27, docs/policies.md): a run whose vendor makes no output for this long while no
  // decision is pending gets a warning RUN_STALLED; on_stall = halt then halts it. 0: never named
  // stalled. Unset: the host's default ([runs] stall_after_s, on_stall), filled before the run
  // starts; a run whose spec leaves it unset is never named stalled.
  std::optional<std::uint64_t> stall_after_ms;
  std::optional<proto::OnStall> on_stall;
  // Parking (issue 27 §5, docs/policies.md): a call pending a decision for this long parks the run
  // (the vendor is answered "defer" and exits; a decision arriving later resumes it). Unset or 0:
  // never parked. Only an adapter whose capability table honours parking takes it; any other
  // refuses the run at start (UNSUPPORTED_CONTROL, start/park).
  std::optional<std::uint64_t> park_after_ms;
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
  // Declared vendor settings that are not environment (e.g. a provider's retry counts),
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

}  // namespace mh::adapters
