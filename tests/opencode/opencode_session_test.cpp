// The opencode session (the generic ACP session, adapters/acp/acp_session, with opencode's profile) driven as the run
// loop drives it: the agent's ACP lines as opencode 1.18.33 sent them, and the seam plugin's requests as its
// tool.execute.before sends them (docs/reference/opencode-acp-wire.md, "The plugin seam"). No
// process, no clock: the outputs are recorded.
#include <gtest/gtest.h>

#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/opencode/opencode_plugin.hpp"
#include "adapters/opencode/opencode_profile.hpp"
#include "adapters/session.hpp"
#include "protocol/json.hpp"
#include "tests/opencode/opencode_wire_lines.hpp"
#include "tests/support/output_recorder.hpp"

namespace mh::adapters::opencode {
namespace {

namespace proto = mh::protocol;

// The shared recorder, and what these tests read from it.
struct Recorded : test::OutputRecorder {
  // A presented call's reply channel (empty: none).
  ReplyToken reply(std::size_t i) const { return calls.at(i).reply.value_or(ReplyToken{}); }
  template <class T>
  std::vector<T> all() const {
    return of<T>();
  }
  // One line of opencode's stdout through `session`, numbered in order.
  void feed(AdapterSession& session, std::string_view text) {
    proto::FramedLine line;
    line.text = text;
    line.number = ++lines_fed;
    line.length = text.size();
    session.on_vendor_line(line, in());
  }
  std::uint64_t lines_fed = 0;
  std::vector<std::string> opaque_subtypes() const {
    std::vector<std::string> out;
    for (const auto& o : of<proto::ev::Opaque>())
      out.push_back(o.vendor_subtype.value_or(""));
    return out;
  }
};

using namespace mh::test::opencode_wire;

std::string initialized() {
  return R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"OpenCode","version":"1.18.33"}}})";
}
std::string session_new() {
  return R"({"jsonrpc":"2.0","id":2,"result":{"sessionId":")" + std::string(kSession) + R"("}})";
}

class OpencodeSession : public ::testing::Test {
 protected:
  OpencodeSession() {
    plan.adapter = "opencode";
    plan.cwd = "/w";
    session = make_session(spec, plan);
    AdapterOutputs out;
    session->start(out);
    r.take(out);
    feed(initialized());
    feed(session_new());
    AdapterOutputs turn;
    session->send_user_turn({"Leave a marker."}, turn);
    r.take(turn);
  }
  void feed(const std::string& text) { r.feed(*session, text); }
  void hook(std::uint64_t connection, const json::value& request) {
    session->on_hook_request(connection, request, r.in());
  }
  void decide(std::size_t presented, const proto::Decision& d) {
    ASSERT_LT(presented, r.calls.size());
    // A copy: the answer's outputs are recorded into r.calls as it runs.
    const ToolCall call = r.calls[presented].call;
    session->answer(r.reply(presented), call, d, r.in());
  }
  // The seam plugin asks about `id` (connection 7) after opencode's first notice of it.
  void seam_asks(std::string_view id, std::string_view command) {
    feed(notice(id));
    hook(7, seam_request(id, command));
  }

  RunSpec spec;
  LaunchPlan plan;
  std::unique_ptr<AdapterSession> session;
  Recorded r;
};

TEST_F(OpencodeSession, TheSeamPresentsTheCallWithItsRealInputBeforeItRuns) {
  ASSERT_EQ(r.ready, 1);
  seam_asks("toolu_1", "touch marker.txt");
  ASSERT_EQ(r.calls.size(), 1u) << "opencode's first notice presents nothing: its rawInput is only the cwd";
  EXPECT_EQ(r.calls[0].call.call_id, "toolu_1");
  EXPECT_EQ(r.calls[0].call.name, "bash");
  EXPECT_EQ(r.calls[0].call.seam, proto::Seam::hook);
  EXPECT_EQ(r.calls[0].call.input.at("command"), "touch marker.txt");
  ASSERT_TRUE(r.reply(0).hook_connection);
  EXPECT_EQ(*r.reply(0).hook_connection, 7u);
  EXPECT_TRUE(r.hook_replies.empty()) << "the plugin waits for the decision";
}

TEST_F(OpencodeSession, AnAllowGoesToThePluginAndTheSecondGateIsAnsweredOnceWithoutAskingAgain) {
  seam_asks("toolu_1", "touch marker.txt");
  decide(0, proto::decision::Allow{});
  ASSERT_EQ(r.hook_replies.size(), 1u);
  EXPECT_EQ(r.hook_replies[0], (std::pair<std::uint64_t, std::string>{7, R"({"decision":"allow"})"}));
  std::size_t written = r.written.size();
  feed(permission("0", "toolu_1", "touch marker.txt"));
  EXPECT_EQ(r.calls.size(), 1u) << "the second gate is not a second decision";
  ASSERT_EQ(r.written.size(), written + 1);
  EXPECT_EQ(r.written.back().at("id"), 0);
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), "once") << "never always";
  EXPECT_EQ(r.opaque_subtypes().back(), "the second gate of a call granted at the seam: allow_once");
  feed(ended("toolu_1", "completed", R"({"output":"","metadata":{"exit":0}})"));
  auto results = r.all<proto::ev::ToolResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].call_id, "toolu_1");
  EXPECT_EQ(results[0].exit_code, 0);
  EXPECT_EQ(r.calls.size(), 1u) << "its end is not recorded as a call nothing gated";
}

TEST_F(OpencodeSession, ADenyCarriesTheReasonToThePluginAndTheEndSaysWhatTheModelWasTold) {
  seam_asks("toolu_1", "touch marker.txt");
  decide(0, proto::decision::Deny{"MH-REASON: no markers here"});
  ASSERT_EQ(r.hook_replies.size(), 1u);
  auto answer = proto::parse_json(r.hook_replies[0].second);
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->at("decision"), "deny");
  EXPECT_EQ(answer->at("reason"), "MH-REASON: no markers here");
  feed(ended("toolu_1", "failed", R"({"error":"MH-REASON: no markers here"})"));
  auto results = r.all<proto::ev::ToolResult>();
  ASSERT_EQ(results.size(), 1u) << "what the model was told, as on Claude and Codex";
  EXPECT_TRUE(results[0].is_error.value_or(false));
  EXPECT_EQ(r.calls.size(), 1u) << "its end is not a second presentation";
}

TEST_F(OpencodeSession, AReplaceCarriesTheNewInputAndNeedsAnObject) {
  seam_asks("toolu_1", "touch marker.txt");
  json::value replaced = json::object{{"command", "touch replaced.txt"}, {"description", "r"}};
  EXPECT_FALSE(session->check_decision(r.calls[0].call, proto::decision::Replace{replaced}));
  auto refused = session->check_decision(r.calls[0].call, proto::decision::Replace{json::value("touch x")});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, proto::RefusalCode::MALFORMED);
  decide(0, proto::decision::Replace{replaced});
  auto answer = proto::parse_json(r.hook_replies.at(0).second);
  EXPECT_EQ(answer->at("decision"), "replace");
  EXPECT_EQ(answer->at("input"), replaced);
  feed(permission("0", "toolu_1", "touch replaced.txt"));
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), "once") << "the replaced input was granted";
}

TEST_F(OpencodeSession, AnAbstainedCallsSecondGateIsRejectedForNobodyGrantedIt) {
  seam_asks("toolu_1", "touch marker.txt");
  decide(0, proto::decision::Abstain{});
  EXPECT_EQ(proto::parse_json(r.hook_replies.at(0).second)->at("decision"), "abstain");
  feed(permission("0", "toolu_1", "touch marker.txt"));
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), "reject");
  EXPECT_EQ(r.calls.size(), 1u);
}

// Soak finding 5: opencode reported a call the plugin presented `failed` ("The user rejected permission
// to use this specific tool call.") before it sent that call's second-gate permission request. The
// late request is the same call's second gate: answered as the seam decided and recorded opaque,
// never presented as a new call (the run would record a second tool.requested, REQUEST_MUTATED
// and a second tool.decided).
TEST_F(OpencodeSession, ASecondGateAfterTheCallsFailedEndIsAnsweredAsDecidedNotPresentedAgain) {
  struct Case {
    proto::Decision decision;
    std::string option;
    std::string subtype;
  };
  const std::vector<Case> cases = {
      {proto::decision::Abstain{}, "reject", "the second gate of a call the seam did not grant: reject_once"},
      {proto::decision::Deny{"MH-REASON: no markers here"}, "reject",
       "the second gate of a call the seam did not grant: reject_once"},
      {proto::decision::Allow{}, "once", "the second gate of a call granted at the seam: allow_once"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    const std::string id = "toolu_s103_" + std::to_string(i);
    const std::string command = "touch m_" + id + ".txt";
    const std::size_t presented = r.calls.size();
    seam_asks(id, command);
    ASSERT_EQ(r.calls.size(), presented + 1) << id;
    decide(presented, cases[i].decision);
    feed(ended(id, "failed", R"({"error":"The user rejected permission to use this specific tool call."})"));
    const std::size_t written = r.written.size();
    const std::string agent_id = std::to_string(10 + i);
    feed(permission(agent_id, id, command));
    EXPECT_EQ(r.calls.size(), presented + 1) << id << ": the late second gate is not a second presentation";
    ASSERT_EQ(r.written.size(), written + 1) << id << ": the request is answered at once";
    EXPECT_EQ(r.written.back().at("id"), std::stoi(agent_id)) << id;
    EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), cases[i].option.c_str())
        << id << ": the seam's decision, never allow for a call it did not grant";
    EXPECT_EQ(r.opaque_subtypes().back(), cases[i].subtype) << id;
  }
  EXPECT_EQ(r.all<proto::ev::ToolResult>().size(), cases.size()) << "each call's end is its one tool.result";
}

// The late second gate may trail even the prompt's answer: a call the seam decided in one turn is
// still that call in the next.
TEST_F(OpencodeSession, ASecondGateArrivingInTheNextTurnIsStillAnsweredAsTheSeamDecided) {
  seam_asks("toolu_1", "touch marker.txt");
  decide(0, proto::decision::Deny{"MH-REASON: no markers here"});
  feed(ended("toolu_1", "failed", R"({"error":"MH-REASON: no markers here"})"));
  feed(R"({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}})");
  AdapterOutputs turn;
  session->send_user_turn({"Go on."}, turn);
  r.take(turn);
  ASSERT_EQ(r.turns, (std::vector<std::string>{"started", "ended:end_turn", "started"}));
  feed(permission("7", "toolu_1", "touch marker.txt"));
  EXPECT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.written.back().at("id"), 7);
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), "reject");
}

TEST_F(OpencodeSession, APermissionThePluginNeverSawIsPresentedOnItsOwnAndCannotCarryAReplace) {
  feed(permission("4", "toolu_other", "ls /"));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].call.seam, proto::Seam::control_request);
  EXPECT_FALSE(r.reply(0).hook_connection);
  auto refused = session->check_decision(r.calls[0].call, proto::decision::Replace{json::object{}});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->code, proto::RefusalCode::UNSUPPORTED_CONTROL);
  decide(0, proto::decision::Deny{"no"});
  EXPECT_EQ(r.written.back().at("id"), 4);
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), "reject");
}

TEST_F(OpencodeSession, ARequestThatNamesNoCallIsDeniedAtOnceNamingWhy) {
  hook(9, json::object{{"hook", "tool.execute.before"}, {"tool", "bash"}});
  hook(10, json::value("garbage"));
  EXPECT_TRUE(r.calls.empty());
  ASSERT_EQ(r.hook_replies.size(), 2u);
  for (const auto& [connection, line] : r.hook_replies) {
    auto answer = proto::parse_json(line);
    ASSERT_TRUE(answer) << line;
    EXPECT_EQ(answer->at("decision"), "deny") << connection;
    EXPECT_FALSE(answer->at("reason").as_string().empty());
  }
}

TEST_F(OpencodeSession, SteerAndPermissionSetAreRefusedByNameAndInterruptIsSessionCancel) {
  AdapterOutputs out;
  EXPECT_EQ(session->steer("x", out).kind, ControlAck::Kind::refused);
  EXPECT_EQ(session->set_permission("allow", out).kind, ControlAck::Kind::refused);
  ControlAck cancel = session->interrupt(out);
  EXPECT_EQ(cancel.kind, ControlAck::Kind::pending_vendor);
  r.take(out);
  EXPECT_EQ(r.written.back().at("method"), "session/cancel");
}

// A session whose model is not the generated config's (opencode fell back to a hosted default:
// the config was not read) fails the run before its first prompt.
TEST(OpencodeSessionStart, ASessionOnAnotherModelThanTheConfiguredOneFailsTheRun) {
  RunSpec spec;
  spec.model_endpoint = ModelEndpoint{"http://127.0.0.1:1", "t"};
  spec.model = "scripted";
  LaunchPlan plan;
  plan.adapter = "opencode";
  for (const auto& [current, fails] :
       std::vector<std::pair<std::string, bool>>{{"opencode/big-pickle", true}, {"metaharness/scripted", false}}) {
    auto session = make_session(spec, plan);
    Recorded r;
    session->start(r.in());
    r.feed(*session, initialized());
    r.feed(
        *session,
        R"({"jsonrpc":"2.0","id":2,"result":{"sessionId":"ses_1","configOptions":[{"id":"model","category":"model","currentValue":")" +
            current + R"("}]}})");
    EXPECT_EQ(r.failures.size(), fails ? 1u : 0u) << current;
    EXPECT_EQ(r.ready, fails ? 0 : 1) << current;
    if (fails) {
      EXPECT_NE(r.failures[0].find("opencode/big-pickle"), std::string::npos) << r.failures[0];
    }
  }
}

// Offline (translate): the transcript holds only opencode's side, so its answers are known by their
// shape, and the prompt's turn begins at its first update.
TEST(OpencodeTranslate, AnswersAreKnownByTheirShapeAndAPromptIsATurn) {
  RunSpec spec;
  LaunchPlan plan;
  auto session = make_session(spec, plan, /*offline=*/true);
  Recorded r;
  auto feed = [&](const std::string& text) { r.feed(*session, text); };
  feed(initialized());
  feed(session_new());
  feed(notice("toolu_1"));
  feed(ended("toolu_1", "completed", R"({"output":"","metadata":{"exit":0}})"));
  feed(R"({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5}}})");
  ASSERT_EQ(r.all<proto::ev::SessionStarted>().size(), 1u);
  EXPECT_EQ(r.all<proto::ev::SessionStarted>()[0].harness_version, "1.18.33");
  EXPECT_EQ(r.turns, (std::vector<std::string>{"started", "ended:end_turn"}));
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].call.seam, proto::Seam::none) << "offline, nobody adjudicated the call";
  EXPECT_EQ(r.all<proto::ev::ToolResult>().size(), 1u);
  EXPECT_TRUE(r.all<proto::ev::Opaque>().empty());
  ASSERT_TRUE(session->session_ended());
  EXPECT_EQ(session->session_ended()->num_turns, 1u);
}

TEST(OpencodeSeamAnswer, EveryDecisionHasItsLine) {
  EXPECT_EQ(seam_answer(proto::decision::Allow{}), R"({"decision":"allow"})");
  EXPECT_EQ(seam_answer(proto::decision::Abstain{}), R"({"decision":"abstain"})");
  EXPECT_EQ(seam_answer(proto::decision::Deny{"why"}), R"({"decision":"deny","reason":"why"})");
  EXPECT_EQ(seam_answer(proto::decision::Replace{json::object{{"command", "ls"}}}),
            R"({"decision":"replace","input":{"command":"ls"}})");
}

}  // namespace
}  // namespace mh::adapters::opencode
