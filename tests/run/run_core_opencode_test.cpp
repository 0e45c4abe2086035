// The run core driven through the opencode session (the generic ACP session with opencode's profile:
// its seam plugin's hook requests and its ACP lines as opencode 1.18.33 sends them,
// tests/opencode/opencode_session_test.cpp), where what a test asserts is the run's own record
// (tool.requested, tool.decided, warnings) rather than the session's outputs. No process, no clock.
#include "tests/opencode/opencode_wire_lines.hpp"
#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

using namespace mh::test::opencode_wire;

std::string failed(std::string_view id) {
  return ended(id, "failed", R"({"error":"The user rejected permission to use this specific tool call."})");
}

class RunCoreOpencode : public RunCoreTest {
 protected:
  void open_opencode(proto::DecisionMode mode, std::optional<proto::Frame> frame = std::nullopt) {
    spec.run_id = "r-1";
    spec.adapter = "opencode";
    spec.prompt = "Leave a marker.";
    spec.decisions = mode;
    spec.frame = std::move(frame);
    spec.decision_deadline_ms = 55'000;
    adapters::LaunchPlan plan;
    plan.adapter = "opencode";
    plan.transcript_path = "/runs/r-1/vendor-stdout.jsonl";
    plan.cwd = "/w";
    const adapters::Adapter* adapter = registry.find("opencode");
    ASSERT_NE(adapter, nullptr);
    core = std::make_unique<RunCore>(spec, *adapter, adapter->open_session(spec, plan), fx, options);
    core->start(now);
    feed(
        R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"OpenCode","version":"1.18.33"}}})");
    feed(R"({"jsonrpc":"2.0","id":2,"result":{"sessionId":")" + std::string(kSession) + R"("}})");
    ASSERT_EQ(last_vendor()["method"], "session/prompt");
  }

  // The plugin presents `id` and is answered; opencode then reports the call failed, and only then
  // sends its second-gate permission request (soak finding 5's order).
  void second_gate_after_failure(const std::string& id, const std::string& command) {
    feed(notice(id));
    core->on_hook_request(7, seam_request(id, command), now);
    ASSERT_EQ(fx.hook_replies.count(7), 1u) << "the plugin was answered";
    feed(failed(id));
    feed(permission("12", id, command));
  }

  std::size_t requested_for(const std::string& id) const {
    std::size_t n = 0;
    for (const auto& e : all<proto::ev::ToolRequested>())
      n += e.call_id == id;
    return n;
  }
  std::vector<proto::ev::ToolDecided> decided_for(const std::string& id) const {
    std::vector<proto::ev::ToolDecided> out;
    for (const auto& e : all<proto::ev::ToolDecided>())
      if (e.call_id == id) out.push_back(e);
    return out;
  }
  bool warned(std::string_view code) const {
    for (const auto& w : all<proto::ev::Warning>())
      if (w.code == code) return true;
    return false;
  }
};

// Soak finding 5 (seed 103, run 20261206T224738Z-66f0b5758225): in `frame` mode with no frame every
// call is abstained; opencode reported toolu_s103_2 failed before its second gate. That late request
// was presented as a new call: a second tool.requested, REQUEST_MUTATED and a second tool.decided.
TEST_F(RunCoreOpencode, ASecondGateAfterTheCallsFailureIsAnsweredAsDecidedNotDecidedTwice) {
  open_opencode(proto::DecisionMode::frame);
  second_gate_after_failure("toolu_s103_2", "touch m_toolu_s103_2.txt");
  EXPECT_EQ(requested_for("toolu_s103_2"), 1u);
  auto decided = decided_for("toolu_s103_2");
  ASSERT_EQ(decided.size(), 1u) << "call_decided_once";
  EXPECT_TRUE(std::holds_alternative<proto::decision::Abstain>(decided[0].decision));
  EXPECT_FALSE(warned("REQUEST_MUTATED"));
  auto answer = last_vendor();
  EXPECT_EQ(answer["id"], 12);
  EXPECT_EQ(answer["result"].as_object()["outcome"].as_object()["optionId"], "reject")
      << "abstained under ask: nobody granted it";
}

// A call the frame denied whose second gate comes after its failure: rejected, never allowed.
TEST_F(RunCoreOpencode, ADeniedCallsLateSecondGateIsRejected) {
  open_opencode(proto::DecisionMode::frame, frame_admitting({proto::OpKind::file_read}));
  second_gate_after_failure("toolu_1", "touch marker.txt");
  EXPECT_EQ(requested_for("toolu_1"), 1u);
  auto decided = decided_for("toolu_1");
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<proto::decision::Deny>(decided[0].decision));
  EXPECT_EQ(parse_object(fx.hook_replies.at(7))["decision"], "deny") << "the plugin throws the reason";
  EXPECT_FALSE(warned("REQUEST_MUTATED"));
  auto answer = last_vendor();
  EXPECT_EQ(answer["id"], 12);
  EXPECT_EQ(answer["result"].as_object()["outcome"].as_object()["optionId"], "reject");
}

}  // namespace
}  // namespace mh::daemon
