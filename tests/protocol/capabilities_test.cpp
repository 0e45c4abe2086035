// Capability tables: the inverse rendering (tool -> operations), command refusal, and the
// descriptor's documented layout (§5.4).
#include "protocol/capabilities.hpp"

#include <gtest/gtest.h>

namespace mh::protocol {
namespace {

// The Claude table as the reference documents it (§5.4, §7.2).
CapabilityTable claude_table() {
  CapabilityTable t;
  t.adapter_id = "claude";
  t.versions_pinned = {"2.1.241"};
  t.tiers = {{Tier::registration, TierStatus::delivered},
             {Tier::call, TierStatus::delivered},
             {Tier::turn, TierStatus::unverified},
             {Tier::kill, TierStatus::delivered}};
  t.commands = {
      {CommandName::tool_decide, {true, RefusalCode::UNSUPPORTED_CONTROL, ""}},
      {CommandName::interrupt, {true, RefusalCode::UNSUPPORTED_CONTROL, ""}},
      {CommandName::halt, {true, RefusalCode::UNSUPPORTED_CONTROL, ""}},
      {CommandName::frame_set, {false, RefusalCode::UNSUPPORTED_CONTROL, "frame text cannot be enforced mid-run"}},
      {CommandName::message_inject, {false, RefusalCode::UNSUPPORTED_CONTROL, ""}},
      {CommandName::steer, {false, RefusalCode::UNSUPPORTED_CONTROL, "headless has no mid-turn tier"}}};
  // permission.set deliberately missing: an unmentioned command is refused.
  t.decision_modes = {{DecisionMode::frame, TierStatus::delivered},
                      {DecisionMode::ask, TierStatus::delivered},
                      {DecisionMode::observe, TierStatus::delivered}};
  t.rendering = {{"file.read", "Read"},      {"file.write", "Write"},   {"file.edit", "Edit"},
                 {"dir.list", "Glob"},       {"search", "Grep"},        {"shell", "Bash"},
                 {"web.read", "WebFetch"},   {"skill.load", "Skill"},   {"subagent.spawn", "Task"},
                 {"task.todo", "TodoWrite"}, {"mcp.call", std::nullopt}};
  return t;
}

CapabilityTable codex_table() {
  CapabilityTable t;
  t.adapter_id = "codex";
  t.rendering = {
      {"file.write", "apply_patch"}, {"file.edit", "apply_patch"}, {"shell", "Bash"}, {"file.read", std::nullopt}};
  return t;
}

std::vector<std::string> names(const std::vector<Operation>& ops) {
  std::vector<std::string> out;
  for (const auto& op : ops)
    out.push_back(std::string(op.wire_name()) + (op.op == OpKind::mcp_call ? " " + op.server + "/" + op.tool : ""));
  return out;
}

TEST(OperationsForTool, InvertsTheRenderingTable) {
  auto t = claude_table();
  EXPECT_EQ(names(t.operations_for_tool("Bash")), std::vector<std::string>{"shell"});
  EXPECT_EQ(names(t.operations_for_tool("Glob")), std::vector<std::string>{"dir.list"});
  EXPECT_EQ(names(t.operations_for_tool("Task")), std::vector<std::string>{"subagent.spawn"});
}

TEST(OperationsForTool, ListsEveryOperationInVocabularyOrderNotNameOrder) {
  // apply_patch renders file.write and file.edit; the vocabulary puts write first, the
  // alphabet would not.
  EXPECT_EQ(names(codex_table().operations_for_tool("apply_patch")),
            (std::vector<std::string>{"file.write", "file.edit"}));
}

TEST(OperationsForTool, AnUnrenderedToolHasNoOperations) {
  EXPECT_TRUE(claude_table().operations_for_tool("NotebookEdit").empty());
  EXPECT_TRUE(claude_table().operations_for_tool("bash").empty());  // names are exact
  EXPECT_TRUE(codex_table().operations_for_tool("Read").empty());   // file.read has no Codex tool
  EXPECT_TRUE(claude_table().operations_for_tool("").empty());
}

TEST(OperationsForTool, McpToolsMapToMcpCallWithServerAndTool) {
  auto t = claude_table();
  EXPECT_EQ(names(t.operations_for_tool("mcp__github__create_issue")),
            std::vector<std::string>{"mcp.call github/create_issue"});
  EXPECT_EQ(names(t.operations_for_tool("mcp__srv__tool__with__underscores")),
            std::vector<std::string>{"mcp.call srv/tool__with__underscores"});
  auto ops = t.operations_for_tool("mcp__github__create_issue");
  ASSERT_EQ(ops.size(), 1u);
  EXPECT_EQ(ops[0], (Operation{OpKind::mcp_call, "github", "create_issue"}));
}

TEST(OperationsForTool, MalformedMcpNamesHaveNoOperations) {
  auto t = claude_table();
  for (std::string_view tool : {"mcp__", "mcp__github", "mcp__github__", "mcp____tool", "mcp__metaharness"})
    EXPECT_TRUE(t.operations_for_tool(tool).empty()) << tool;
}

TEST(CommandSupport, HonouredAndRefusedCommandsAreWhatTheTableSays) {
  auto t = claude_table();
  EXPECT_TRUE(t.command(CommandName::tool_decide).honoured);
  EXPECT_TRUE(t.command(CommandName::halt).honoured);
  CommandSupport steer = t.command(CommandName::steer);
  EXPECT_FALSE(steer.honoured);
  EXPECT_EQ(steer.code, RefusalCode::UNSUPPORTED_CONTROL);
  EXPECT_EQ(t.refusal_reason(CommandName::steer),
            "the claude adapter cannot honour steer: headless has no mid-turn tier");
  EXPECT_EQ(t.refusal_reason(CommandName::message_inject), "the claude adapter cannot honour message.inject");
}

TEST(CommandSupport, ACommandMissingFromTheTableIsRefusedUnsupportedControl) {
  auto t = claude_table();
  CommandSupport missing = t.command(CommandName::permission_set);
  EXPECT_FALSE(missing.honoured);
  EXPECT_EQ(missing.code, RefusalCode::UNSUPPORTED_CONTROL);
  EXPECT_EQ(t.refusal_reason(CommandName::permission_set),
            "the claude adapter cannot honour permission.set: not in the capability table");
  EXPECT_FALSE(CapabilityTable{}.command(CommandName::halt).honoured);
}

TEST(CommandSupport, TiersAndModesMissingFromTheTableAreAbsent) {
  CapabilityTable empty;
  EXPECT_EQ(empty.tier(Tier::call), TierStatus::absent);
  EXPECT_EQ(empty.decision_mode(DecisionMode::ask), TierStatus::absent);
  EXPECT_EQ(claude_table().tier(Tier::turn), TierStatus::unverified);
  EXPECT_EQ(claude_table().decision_mode(DecisionMode::observe), TierStatus::delivered);
}

TEST(Descriptor, FieldOrderIsTheDocumentedOne) {
  auto t = claude_table();
  t.notes = {"a deny reason reaches the model verbatim"};
  EXPECT_EQ(pretty_json(capabilities_to_json(t), /*sort_keys=*/false),
            R"({
  "adapter": {
    "id": "claude",
    "class": "harness"
  },
  "versions_pinned": [
    "2.1.241"
  ],
  "tiers": {
    "registration": "delivered",
    "call": "delivered",
    "turn": "unverified",
    "kill": "delivered"
  },
  "commands": {
    "frame.set": {
      "refused": "UNSUPPORTED_CONTROL"
    },
    "halt": "honoured",
    "interrupt": "honoured",
    "message.inject": {
      "refused": "UNSUPPORTED_CONTROL"
    },
    "permission.set": {
      "refused": "UNSUPPORTED_CONTROL"
    },
    "steer": {
      "refused": "UNSUPPORTED_CONTROL"
    },
    "tool.decide": "honoured"
  },
  "decision_modes": {
    "frame": "delivered",
    "ask": "delivered",
    "observe": "delivered"
  },
  "rendering": {
    "dir.list": "Glob",
    "file.edit": "Edit",
    "file.read": "Read",
    "file.write": "Write",
    "mcp.call": null,
    "search": "Grep",
    "shell": "Bash",
    "skill.load": "Skill",
    "subagent.spawn": "Task",
    "task.todo": "TodoWrite",
    "web.read": "WebFetch"
  },
  "notes": [
    "a deny reason reaches the model verbatim"
  ],
  "parking": {
    "refused": "UNSUPPORTED_CONTROL",
    "why": "this adapter cannot park a pending call: no way to hand a call still awaiting its decision to a later process of the same session is known to work on its wire"
  }
}
)");
}

TEST(Descriptor, RenderingTablePadsOperationNamesToSixteenColumns) {
  EXPECT_EQ(render_rendering_table(codex_table()),
            "file.edit        -> apply_patch\n"
            "file.read        -> (no vendor tool)\n"
            "file.write       -> apply_patch\n"
            "shell            -> Bash\n");
}

}  // namespace
}  // namespace mh::protocol
