#include "adapters/adapter.hpp"

#include <algorithm>

#include "metaharness/build_info.hpp"

namespace mh::adapters {

std::optional<std::string> refuse_deadline(const Adapter& adapter, std::uint64_t deadline_ms) {
  std::uint64_t max = adapter.max_decision_deadline_ms();
  if (deadline_ms <= max) return std::nullopt;
  return "decision_deadline_ms " + std::to_string(deadline_ms) + " is longer than the " + std::string(adapter.id()) +
         " adapter's seam can hold (at most " + std::to_string(max) +
         " ms: the seam's own timer for a pending decision — the vendor's hook timeout, or the hook program's wait — "
         "sits above the deadline and would overflow)";
}

std::vector<proto::ev::CommandResult> refuse_unhonoured_commands(const RunSpec& spec,
                                                                 const proto::CapabilityTable& table) {
  std::vector<proto::CommandName> needed = {proto::CommandName::interrupt, proto::CommandName::halt};
  if (spec.decisions == proto::DecisionMode::ask || spec.decisions == proto::DecisionMode::observe || spec.frame)
    needed.push_back(proto::CommandName::tool_decide);
  for (auto c : spec.requires_commands)
    if (std::find(needed.begin(), needed.end(), c) == needed.end()) needed.push_back(c);

  std::vector<proto::ev::CommandResult> refused;
  for (auto c : needed) {
    proto::CommandSupport support = table.command(c);
    if (support.honoured) continue;
    refused.push_back(proto::ev::CommandResult{"start/" + std::string(proto::to_string(c)),
                                               proto::CommandOutcome::refused(support.code, table.refusal_reason(c))});
  }
  // Parking (issue 27 §5) is asked for by park_after_ms, and refused by name where not honoured.
  if (spec.park_after_ms.value_or(0) > 0 && !table.parking.honoured)
    refused.push_back(proto::ev::CommandResult{
        "start/park", proto::CommandOutcome::refused(
                          table.parking.code,
                          "the " + table.adapter_id + " adapter cannot honour park_after_ms: " + table.parking.note)});
  return refused;
}

proto::CapabilityTable harness_capabilities(std::string_view adapter_id) {
  proto::CapabilityTable t;
  t.adapter_id = std::string(adapter_id);
  t.adapter_class = proto::AdapterClass::harness;
  for (const auto& pin : build_info::vendor_pins)
    if (pin.adapter == adapter_id) t.versions_pinned.emplace_back(pin.version);
  t.tiers = {{proto::Tier::registration, proto::TierStatus::delivered},
             {proto::Tier::call, proto::TierStatus::delivered},
             {proto::Tier::turn, proto::TierStatus::delivered},
             {proto::Tier::kill, proto::TierStatus::delivered}};
  t.decision_modes = {{proto::DecisionMode::frame, proto::TierStatus::delivered},
                      {proto::DecisionMode::ask, proto::TierStatus::delivered},
                      {proto::DecisionMode::observe, proto::TierStatus::delivered}};
  return t;
}

std::vector<proto::Operation> operations_with(const proto::CapabilityTable& table, std::string_view tool,
                                              const std::vector<proto::OpKind>& also) {
  auto ops = table.operations_for_tool(tool);
  for (auto op : also)
    ops.push_back(proto::Operation{op, {}, {}});
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.op < b.op; });
  return ops;
}

proto::CloseReason classify_close(bool halted, const std::optional<proto::ev::SessionEnded>& terminal) {
  if (halted) return proto::CloseReason::steer_halt;
  if (!terminal) return proto::CloseReason::error;
  for (const auto* word : {&terminal->subtype, &terminal->stop_reason, &terminal->terminal_reason})
    if (*word && **word == "budget-exhausted") return proto::CloseReason::budget;
  if (terminal->is_error != true && (terminal->is_error == false || terminal->subtype == "success"))
    return proto::CloseReason::completed;
  return proto::CloseReason::error;
}

std::vector<std::string> Adapter::subjects_for(const ToolCall& call) const {
  // Paths exactly as the caller wrote them: never canonicalised, so a frame's subject globs
  // match what the model asked for.
  std::vector<std::string> out;
  if (!call.input.is_object()) return out;
  for (std::string_view key : {"file_path", "notebook_path", "path"}) {
    const json::value* v = call.input.get_object().if_contains(key);
    if (v && v->is_string() && !v->get_string().empty()) out.push_back("file:" + std::string(v->get_string()));
  }
  return out;
}

}  // namespace mh::adapters
