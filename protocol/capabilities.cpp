#include "protocol/capabilities.hpp"

namespace mh::protocol {

TierStatus CapabilityTable::tier(Tier t) const {
  auto it = tiers.find(t);
  return it == tiers.end() ? TierStatus::absent : it->second;
}

TierStatus CapabilityTable::decision_mode(DecisionMode m) const {
  auto it = decision_modes.find(m);
  return it == decision_modes.end() ? TierStatus::absent : it->second;
}

CommandSupport CapabilityTable::command(CommandName c) const {
  auto it = commands.find(c);
  if (it == commands.end())
    return CommandSupport{false, RefusalCode::UNSUPPORTED_CONTROL, "not in the capability table"};
  return it->second;
}

std::string CapabilityTable::refusal_reason(CommandName c) const {
  CommandSupport s = command(c);
  std::string reason = "the " + adapter_id + " adapter cannot honour " + std::string(to_string(c));
  if (!s.note.empty()) reason += ": " + s.note;
  return reason;
}

std::vector<Operation> CapabilityTable::operations_for_tool(std::string_view tool) const {
  std::vector<Operation> out;
  constexpr std::string_view kMcpPrefix = "mcp__";
  if (tool.substr(0, kMcpPrefix.size()) == kMcpPrefix) {
    std::string_view rest = tool.substr(kMcpPrefix.size());
    auto sep = rest.find("__");
    if (sep != std::string_view::npos && sep > 0 && sep + 2 < rest.size())
      out.push_back(Operation{OpKind::mcp_call, std::string(rest.substr(0, sep)), std::string(rest.substr(sep + 2))});
    return out;
  }
  for (std::size_t i = 0; i < EnumNames<OpKind>::names.size(); ++i) {
    auto kind = static_cast<OpKind>(i);
    auto it = rendering.find(std::string(to_string(kind)));
    if (it != rendering.end() && it->second && *it->second == tool) out.push_back(Operation{kind, {}, {}});
  }
  return out;
}

json::value capabilities_to_json(const CapabilityTable& t) {
  // Built with an insertion-ordered object on purpose: this descriptor's field order is
  // documented (adapter, versions_pinned, tiers, commands, decision_modes, rendering).
  json::object o;
  o["adapter"] = json::object{{"id", t.adapter_id}, {"class", to_string(t.adapter_class)}};
  json::array versions;
  for (const auto& v : t.versions_pinned)
    versions.emplace_back(v);
  o["versions_pinned"] = std::move(versions);
  json::object tiers;
  for (auto tier : {Tier::registration, Tier::call, Tier::turn, Tier::kill})
    tiers[to_string(tier)] = to_string(t.tier(tier));
  o["tiers"] = std::move(tiers);
  // `commands` is sorted by name (the reference keeps it in an ordered map), which is not the
  // vocabulary order: frame.set, halt, interrupt, message.inject, permission.set, steer,
  // tool.decide.
  std::map<std::string_view, CommandName> by_name;
  for (std::size_t i = 0; i < EnumNames<CommandName>::names.size(); ++i)
    by_name.emplace(EnumNames<CommandName>::names[i], static_cast<CommandName>(i));
  json::object commands;
  for (const auto& [text, name] : by_name) {
    CommandSupport s = t.command(name);
    if (s.honoured)
      commands[text] = "honoured";
    else
      commands[text] = json::object{{"refused", to_string(s.code)}};
  }
  o["commands"] = std::move(commands);
  json::object modes;
  for (auto m : {DecisionMode::frame, DecisionMode::ask, DecisionMode::observe})
    modes[to_string(m)] = to_string(t.decision_mode(m));
  o["decision_modes"] = std::move(modes);
  json::object rendering;
  for (const auto& [op, tool] : t.rendering) {
    if (tool)
      rendering[op] = *tool;
    else
      rendering[op] = nullptr;
  }
  o["rendering"] = std::move(rendering);
  json::array notes;
  for (const auto& n : t.notes)
    notes.emplace_back(n);
  o["notes"] = std::move(notes);
  // Additive (issue 27 §5): whether park_after_ms is honoured.
  if (t.parking.honoured)
    o["parking"] = "honoured";
  else
    o["parking"] = json::object{{"refused", to_string(t.parking.code)}, {"why", t.parking.note}};
  return o;
}

std::string render_rendering_table(const CapabilityTable& t) {
  std::string out;
  for (const auto& [op, tool] : t.rendering) {
    std::string name = op;
    if (name.size() < 16) name.append(16 - name.size(), ' ');
    out += name + " -> " + (tool ? *tool : std::string("(no vendor tool)")) + "\n";
  }
  return out;
}

}  // namespace mh::protocol
