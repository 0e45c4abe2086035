// A sub-agent's calls, on the real CLI: each tool.requested says which agent made it (null for
// the main agent, the spawning Agent call's id for a sub-agent), and deciding a sub-agent's
// call reaches the sub-agent.
#include <gtest/gtest.h>

#include "protocol/json.hpp"
#include "tests/claude/claude_run.hpp"

namespace mh::test {
namespace {

constexpr const char* kReason = "SUPERVISOR: no markers from sub-agents";

// The scripted endpoint's request log records, kind "request" only.
std::vector<json::object> logged_requests(const std::filesystem::path& run_dir) {
  std::vector<json::object> out;
  for (const auto& line : read_lines(run_dir / "model-requests.jsonl")) {
    auto v = protocol::parse_json(line);
    if (v && v->is_object() && v->as_object().at("kind") == "request") out.push_back(v->as_object());
  }
  return out;
}

// Does a request body carry a block of this type whose canonical JSON contains `needle`?
bool carries(const json::object& body, std::string_view block_type, std::string_view needle) {
  if (!body.contains("messages")) return false;
  for (const auto& message : body.at("messages").as_array()) {
    const auto& content = message.as_object().at("content");
    if (!content.is_array()) continue;
    for (const auto& block : content.as_array())
      if (block.as_object().at("type") == json::string_view(block_type) &&
          protocol::canonical_json(block).find(needle) != std::string::npos)
        return true;
  }
  return false;
}

TEST_F(ClaudeRun, ASubAgentsCallNamesTheAgentCallThatSpawnedItAndItsDenyReachesTheSubAgent) {
  start("subagent_bash", {"--decisions", "ask"});
  auto spawn = process->wait_for_event("tool.requested");
  ASSERT_TRUE(spawn) << process->stderr_text();
  EXPECT_EQ(spawn->str("call_id"), "toolu_agent");
  EXPECT_EQ(spawn->str("name"), "Agent");
  ASSERT_TRUE(spawn->object.contains("agent"));
  EXPECT_TRUE(spawn->object.at("agent").is_null()) << "the main agent's call: " << spawn->raw;
  send("a", decide_line("a", "toolu_agent", R"({"decision":"allow"})"));

  auto sub = process->wait_for(
      [](const EventLine& e) { return e.event() == "tool.requested" && e.str("call_id") == "toolu_sub_bash"; });
  ASSERT_TRUE(sub) << process->stderr_text();
  EXPECT_EQ(sub->str("agent"), "toolu_agent") << sub->raw;
  EXPECT_TRUE(sub->object.at("decision_required").as_bool());
  send("d", decide_line("d", "toolu_sub_bash", std::string(R"({"decision":"deny","reason":")") + kReason + "\"}"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_EQ(outcome_code(*result_for("a")), "ok");
  EXPECT_EQ(outcome_code(*result_for("d")), "ok");
  EXPECT_FALSE(std::filesystem::exists(work() / "sub_marker.txt")) << "the denied sub-agent call must not have run";

  int presented = 0;
  for (const auto& e : process->events_named("tool.requested"))
    if (e.str("call_id") == "toolu_sub_bash") ++presented;
  EXPECT_EQ(presented, 1) << "presented once, whether Claude asked or showed it first";

  // The deny's reason reached the sub-agent: its next request (the one after its Bash call)
  // carries it in a tool_result, and that conversation is the sub-agent's, not the parent's.
  bool reached_sub_agent = false;
  for (const auto& request : logged_requests(run_dir())) {
    if (!request.at("body").is_object()) continue;
    const auto& body = request.at("body").as_object();
    if (!carries(body, "tool_result", kReason)) continue;
    reached_sub_agent = true;
    EXPECT_EQ(request.at("step_name"), "sub-agent answers");
    EXPECT_FALSE(carries(body, "tool_use", "toolu_agent")) << "the parent's conversation holds the Agent call";
  }
  EXPECT_TRUE(reached_sub_agent) << "the sub-agent's next request must carry the deny reason";

  // Offline the attribution comes from the records alone (parent_tool_use_id).
  CliProcess translate({metaharness_binary().string(), "translate", "claude",
                        (run_dir() / "vendor-stdout.jsonl").string(), "--run", "audit-sub"});
  translate.close_stdin();
  ASSERT_EQ(translate.finish(), 0);
  for (const auto& e : translate.events_named("tool.requested")) {
    if (e.str("call_id") == "toolu_agent") {
      EXPECT_TRUE(e.object.at("agent").is_null()) << e.raw;
    } else {
      EXPECT_EQ(e.str("agent"), "toolu_agent") << e.raw;
    }
  }
  EXPECT_EQ(translate.events_named("tool.requested").size(), 2u);
}

}  // namespace
}  // namespace mh::test
