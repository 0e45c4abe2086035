// Capability tables: what an adapter can deliver, per control tier, per command and per
// decision mode, and how neutral operations render into the vendor's tool names. The table is
// what run-start refusal is computed from, so a run that would fail on control fails before
// it spends anything.
#pragma once

#include "protocol/commands.hpp"
#include "protocol/frame.hpp"

namespace mh::protocol {

struct CommandSupport {
  bool honoured = false;
  RefusalCode code = RefusalCode::UNSUPPORTED_CONTROL;  // when refused
  std::string note;                                     // why, in a sentence (printed, and used as the refusal reason)
};

struct CapabilityTable {
  std::string adapter_id;
  AdapterClass adapter_class = AdapterClass::harness;
  std::vector<std::string> versions_pinned;
  std::map<Tier, TierStatus> tiers;
  std::map<CommandName, CommandSupport> commands;
  std::map<DecisionMode, TierStatus> decision_modes;
  // operation wire name -> vendor tool (nullopt: no vendor tool renders it)
  std::map<std::string, std::optional<std::string>> rendering;
  // Free-text notes for limits a table cannot express (e.g. a deny reason the wire cannot
  // carry to the model). Printed with the table; additive to the reference descriptor.
  std::vector<std::string> notes;
  // Parking a long-pending call (issue 27 §5: spec park_after_ms): the vendor told to defer the
  // call and exit, and a later process of the same session resuming it with the decision. Refused
  // unless an adapter has shown its wire carries a pending call over; a run that asks for it on an
  // adapter that refuses is refused at start (start/park), never run unparked.
  CommandSupport parking{false, RefusalCode::UNSUPPORTED_CONTROL,
                         "this adapter cannot park a pending call: no way to hand a call still awaiting its decision "
                         "to a later process of the same session is known to work on its wire"};

  TierStatus tier(Tier t) const;
  TierStatus decision_mode(DecisionMode m) const;
  // A command missing from the table is refused (UNSUPPORTED_CONTROL).
  CommandSupport command(CommandName c) const;
  // Tool name -> the neutral operations it renders, in vocabulary order. MCP tools
  // (`mcp__<server>__<tool>`) map to mcp.call.
  std::vector<Operation> operations_for_tool(std::string_view tool) const;
  // The refusal reason for a command this adapter does not honour.
  std::string refusal_reason(CommandName c) const;
};

// Descriptor JSON (field order: adapter{id,class}, versions_pinned, tiers, commands,
// decision_modes, rendering, notes), pretty-printed by the CLI.
json::value capabilities_to_json(const CapabilityTable& table);
// One line per operation: name padded to 16 columns, " -> ", tool or "(no vendor tool)".
std::string render_rendering_table(const CapabilityTable& table);

}  // namespace mh::protocol
