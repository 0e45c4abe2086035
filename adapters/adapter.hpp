// What every adapter is: a launch plan computed as a value before anything spawns, a reader
// (vendor record -> events), a controller (command -> vendor control line) and a capability
// table. Adapters spawn nothing, read no clock and do no I/O: the run loop feeds them lines and
// folds the outputs each input returns as values (AdapterOutputs), in order. That is what lets the same run machinery
// host every vendor, and lets the governing logic be tested without processes.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "adapters/launch_plan.hpp"
#include "adapters/run_spec.hpp"
#include "adapters/tool_call.hpp"
#include "protocol/capabilities.hpp"
#include "protocol/events.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;
namespace json = boost::json;

class AdapterSession;  // adapters/session.hpp: only the run loop and the adapters' own sessions need it

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
  // rendering plus vendor aliases (e.g. a notebook edit tool is also file.edit).
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

// Run-start refusal shared by every adapter: the commands this run's configuration needs
// (interrupt, halt; tool.decide for ask / observe / a frame; whatever the spec declares), each
// checked against the capability table. Empty when the run may start.
std::vector<proto::ev::CommandResult> refuse_unhonoured_commands(const RunSpec& spec,
                                                                 const proto::CapabilityTable& table);

}  // namespace mh::adapters
