// The event stream -> ATIF converter (cli/atif_trajectory.*), from hand-made streams: every row
// of the mapping in docs/atif.md, and every document it makes validated against our restated
// schema by python3-jsonschema.
#include "cli/atif_trajectory.hpp"

#include <gtest/gtest.h>

#include "tests/cli/atif_support.hpp"

namespace mh::test {
namespace {

using cli::atif::Context;

class AtifTrajectory : public ::testing::Test {
 protected:
  // The trajectory of a stream, which must be a valid ATIF document.
  json::object convert(const HandStream& s, json::value spec = nullptr) {
    Context ctx;
    ctx.spec = std::move(spec);
    ctx.source = "events_file";
    json::object doc = cli::atif::trajectory(s.events(), ctx);
    auto v = validate_atif({doc}, dir.path());
    EXPECT_EQ(v.status, 0) << v.output << protocol::pretty_json(doc, false);
    return doc;
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

const json::array& steps(const json::object& doc) {
  return doc.at("steps").as_array();
}
const json::object& step(const json::object& doc, std::size_t step_id) {
  return steps(doc).at(step_id - 1).as_object();
}
const json::object& mh(const json::object& with_extra) {
  return with_extra.at("extra").as_object().at("metaharness").as_object();
}
const json::object& mh(const json::value& with_extra) {
  return mh(with_extra.as_object());
}
const json::array& control(const json::object& doc) {
  return mh(doc).at("events").as_array();
}
const json::object& result_of(const json::object& s, std::size_t i = 0) {
  return s.at("observation").as_object().at("results").as_array().at(i).as_object();
}

json::value spec_with_prompt(const std::string& prompt) {
  return json::object{{"run_id", "r-hand"}, {"adapter", "claude"}, {"prompt", prompt}, {"model", nullptr}};
}

TEST_F(AtifTrajectory, ThePromptIsTheFirstUserStepAndEachInferenceIsOneAgentStep) {
  HandStream s;
  s.session_started("claude")
      .add(R"("event":"turn.started","turn":1)")
      .add(R"("event":"thinking","text":"I should look.","request_id":"req_1")")
      .add(R"("event":"text","text":"Looking.","request_id":"req_1")")
      .add(
          R"("event":"usage","request_id":"req_1","model":"model-a","usage":{"input_tokens":100,"output_tokens":7,"cache_read_input_tokens":40,"cache_creation_input_tokens":10})")
      .add(R"("event":"text","text":"Done.","request_id":"req_2")")
      .add(
          R"("event":"usage","request_id":"req_2","model":"model-a","usage":{"input_tokens":5,"output_tokens":2,"cache_read_input_tokens":0,"cache_creation_input_tokens":0})")
      .add(R"("event":"turn.ended","turn":1,"stop_reason":"end_turn")")
      .session_ended()
      .stream_closed();
  auto doc = convert(s, spec_with_prompt("list the files"));

  EXPECT_EQ(doc.at("schema_version"), "ATIF-v1.8");
  EXPECT_EQ(doc.at("session_id"), "sess-1");
  EXPECT_EQ(doc.at("trajectory_id"), "r-hand");
  const auto& agent = doc.at("agent").as_object();
  EXPECT_EQ(agent.at("name"), "claude-code");
  EXPECT_EQ(agent.at("version"), "9.9.9");
  EXPECT_EQ(agent.at("model_name"), "model-a");

  ASSERT_EQ(steps(doc).size(), 3u);
  EXPECT_EQ(step(doc, 1).at("source"), "user");
  EXPECT_EQ(step(doc, 1).at("message"), "list the files");
  EXPECT_EQ(mh(step(doc, 1)).at("from"), "spec.prompt");

  const auto& first = step(doc, 2);
  EXPECT_EQ(first.at("source"), "agent");
  EXPECT_EQ(first.at("message"), "Looking.");
  EXPECT_EQ(first.at("reasoning_content"), "I should look.");
  const auto& m = first.at("metrics").as_object();
  EXPECT_EQ(m.at("prompt_tokens"), 150) << "Anthropic's input leaves out cache reads and writes; ATIF's includes them";
  EXPECT_EQ(m.at("cached_tokens"), 40);
  EXPECT_EQ(m.at("completion_tokens"), 7);
  EXPECT_TRUE(m.at("cost_usd").is_null()) << "an unpriced request is unknown, not free";
  EXPECT_EQ(mh(first).at("turn"), 1);

  EXPECT_EQ(step(doc, 3).at("message"), "Done.");
  const auto& totals = doc.at("final_metrics").as_object();
  EXPECT_EQ(totals.at("total_prompt_tokens"), 155);
  EXPECT_EQ(totals.at("total_completion_tokens"), 9);
  EXPECT_EQ(totals.at("total_cached_tokens"), 40);
  EXPECT_TRUE(totals.at("total_cost_usd").is_null()) << "nobody priced anything: unknown, never 0";
  EXPECT_EQ(totals.at("total_steps"), 3);
}

TEST_F(AtifTrajectory, CodexCountsCachedTokensInsideItsInputTokens) {
  HandStream s;
  s.session_started("codex")
      .add(R"("event":"text","text":"Hi.")")
      .add(
          R"("event":"usage","model":"gpt-x","usage":{"input_tokens":100,"output_tokens":5,"cache_read_input_tokens":40,"thinking_tokens":3})")
      .stream_closed();
  auto doc = convert(s);
  EXPECT_EQ(doc.at("agent").at("name"), "codex");
  const auto& m = step(doc, 1).at("metrics").as_object();
  EXPECT_EQ(m.at("prompt_tokens"), 100);
  EXPECT_EQ(m.at("cached_tokens"), 40);
  EXPECT_EQ(m.at("extra").at("metaharness").at("usage").at("thinking_tokens"), 3) << "kept as the vendor said";
  EXPECT_EQ(step(doc, 1).at("model_name"), "gpt-x");
}

TEST_F(AtifTrajectory, AnAllowedCallIsAToolCallWithWhatItReturned) {
  HandStream s;
  s.session_started("claude")
      .add(R"("event":"text","text":"Running it.","request_id":"req_1")")
      .add(
          R"("event":"tool.requested","call_id":"toolu_1","name":"Bash","input":{"command":"ls"},"operations":["shell"],"decision_required":true,"deadline_ms":55000,"seam":"hook","agent":null)")
      .add(
          R"("event":"tool.decided","call_id":"toolu_1","decision":{"decision":"allow"},"decided_by":"embedder","seam":"hook","latency_ms":12,"peer":{"uid":1000,"pid":42})")
      .add(
          R"("event":"tool.result","call_id":"toolu_1","is_error":false,"content":"a.txt\nb.txt","bytes":11,"tool_use_result":{"stdout":"a.txt\nb.txt"})")
      .stream_closed();
  auto doc = convert(s);
  ASSERT_EQ(steps(doc).size(), 1u) << "the text and the call it came with are one inference";
  const auto& st = step(doc, 1);
  EXPECT_EQ(st.at("message"), "Running it.");
  const auto& call = st.at("tool_calls").as_array().at(0).as_object();
  EXPECT_EQ(call.at("tool_call_id"), "toolu_1");
  EXPECT_EQ(call.at("function_name"), "Bash");
  EXPECT_EQ(call.at("arguments"), (json::object{{"command", "ls"}}));
  const auto& decided = mh(call).at("decided").as_object();
  EXPECT_EQ(decided.at("decided_by"), "embedder");
  EXPECT_EQ(decided.at("latency_ms"), 12);
  EXPECT_EQ(decided.at("peer").at("uid"), 1000);
  EXPECT_EQ(mh(call).at("seam"), "hook");
  const auto& r = result_of(st);
  EXPECT_EQ(r.at("source_call_id"), "toolu_1");
  EXPECT_EQ(r.at("content"), "a.txt\nb.txt");
  EXPECT_EQ(mh(r).at("outcome"), "ran");
  EXPECT_EQ(mh(r).at("ran"), true);
  EXPECT_EQ(mh(r).at("tool_use_result").at("stdout"), "a.txt\nb.txt");
}

TEST_F(AtifTrajectory, ADeniedCallSaysWhoRefusedItAndWhyAndThatNothingRan) {
  HandStream s;
  s.session_started("claude")
      .add(
          R"("event":"tool.requested","call_id":"toolu_f","name":"Bash","input":{"command":"rm -rf /"},"decision_required":false,"seam":"hook")")
      .add(
          R"("event":"tool.decided","call_id":"toolu_f","decision":{"decision":"deny","reason":"no shell in this step"},"decided_by":"frame","seam":"hook")")
      .add(
          R"("event":"tool.result","call_id":"toolu_f","is_error":true,"content":"no shell in this step","tool_use_result":"Error: no shell in this step")")
      .add(
          R"("event":"tool.requested","call_id":"toolu_d","name":"Bash","input":{"command":"sleep 1"},"decision_required":true,"deadline_ms":1500,"seam":"hook")")
      .add(
          R"("event":"tool.decided","call_id":"toolu_d","decision":{"decision":"deny","reason":"no decision within 1500 ms"},"decided_by":"deadline","seam":"hook","latency_ms":1501)")
      .stream_closed();
  auto doc = convert(s);
  ASSERT_EQ(steps(doc).size(), 2u);
  const auto& framed = result_of(step(doc, 1));
  EXPECT_EQ(framed.at("content"),
            "Refused by metaharness: decided by the frame in force at the hook seam; the call did not run. Reason: no "
            "shell in this step");
  EXPECT_EQ(mh(framed).at("outcome"), "refused");
  EXPECT_EQ(mh(framed).at("ran"), false);
  EXPECT_EQ(mh(framed).at("vendor_result").at("content"), "no shell in this step")
      << "what the vendor then showed the model is kept";
  const auto& deadline = result_of(step(doc, 2));
  EXPECT_NE(deadline.at("content").as_string().find("decided by the decision deadline"), std::string::npos);
  EXPECT_TRUE(mh(deadline).at("vendor_result").is_null()) << "nothing ran and the vendor wrote nothing";
  EXPECT_EQ(mh(step(doc, 2).at("tool_calls").as_array().at(0)).at("decided").at("latency_ms"), 1501);
}

TEST_F(AtifTrajectory, AReplacedCallIsTheCallAsItRanWithTheOriginalKept) {
  HandStream s;
  s.session_started("claude")
      .add(
          R"("event":"tool.requested","call_id":"toolu_r","name":"Bash","input":{"command":"touch original.txt"},"decision_required":true,"seam":"hook")")
      .add(
          R"("event":"tool.decided","call_id":"toolu_r","decision":{"decision":"replace","input":{"command":"touch replaced.txt"}},"decided_by":"embedder","seam":"hook")")
      .add(
          R"x("event":"tool.result","call_id":"toolu_r","is_error":false,"content":"(Bash completed with no output)")x")
      .stream_closed();
  auto doc = convert(s);
  const auto& call = step(doc, 1).at("tool_calls").as_array().at(0).as_object();
  EXPECT_EQ(call.at("arguments"), (json::object{{"command", "touch replaced.txt"}}));
  EXPECT_EQ(mh(call).at("original_arguments"), (json::object{{"command", "touch original.txt"}}));
  EXPECT_EQ(mh(call).at("decided").at("decision").at("decision"), "replace");
  EXPECT_EQ(mh(result_of(step(doc, 1))).at("outcome"), "ran");
}

TEST_F(AtifTrajectory, AnAbstainedCallIsWhateverTheVendorDid) {
  HandStream s;
  s.session_started("claude")
      .add(
          R"("event":"tool.requested","call_id":"toolu_v","name":"Write","input":{"file_path":"x"},"decision_required":false,"seam":"hook")")
      .add(
          R"("event":"tool.decided","call_id":"toolu_v","decision":{"decision":"abstain"},"decided_by":"frame","seam":"hook","requested":{"decision":"allow"})")
      .add(
          R"("event":"tool.result","call_id":"toolu_v","is_error":true,"content":"Claude requested permissions to write to x")")
      .add(
          R"("event":"tool.requested","call_id":"toolu_w","name":"Read","input":{"file_path":"y"},"decision_required":false,"seam":"hook")")
      .add(
          R"("event":"tool.decided","call_id":"toolu_w","decision":{"decision":"abstain"},"decided_by":"frame","seam":"hook")")
      .add(R"("event":"tool.result","call_id":"toolu_w","is_error":false,"content":"contents of y")")
      .session_ended(
          R"("permission_denials":[{"tool_name":"Write","tool_use_id":"toolu_v","tool_input":{"file_path":"x"}}])")
      .stream_closed();
  auto doc = convert(s);
  const auto& refused = result_of(step(doc, 1));
  EXPECT_EQ(refused.at("content"), "Claude requested permissions to write to x") << "the vendor's own outcome";
  EXPECT_EQ(mh(refused).at("outcome"), "vendor");
  EXPECT_EQ(mh(refused).at("ran"), false) << "the vendor's own denial list names it";
  EXPECT_EQ(mh(refused).at("vendor_denied"), true);
  EXPECT_EQ(mh(step(doc, 1).at("tool_calls").as_array().at(0)).at("decided").at("requested").at("decision"), "allow")
      << "deny-only: what the frame said is kept beside what was delivered";
  const auto& ran = result_of(step(doc, 2));
  EXPECT_EQ(ran.at("content"), "contents of y");
  EXPECT_TRUE(mh(ran).at("ran").is_null()) << "whether the vendor ran it is the vendor's to say";
}

TEST_F(AtifTrajectory, OpaqueRecordsAreKeptWithTheirDigestAndLineWhereTheyCame) {
  const std::string digest(64, 'a');
  HandStream s;
  s.session_started("codex")
      .add(R"("event":"text","text":"Hi.")")
      .add(R"("event":"opaque","vendor_type":"item/started","vendor_subtype":"userMessage","digest":")" + digest +
           R"(","source_line":10)")
      .stream_closed();
  auto doc = convert(s);
  ASSERT_EQ(control(doc).size(), 1u);
  const auto& o = control(doc).at(0).as_object();
  EXPECT_EQ(o.at("event"), "opaque");
  EXPECT_EQ(o.at("seq"), 3);
  EXPECT_EQ(o.at("digest"), json::value(digest));
  EXPECT_EQ(o.at("source_line"), 10);
  EXPECT_EQ(o.at("vendor_type"), "item/started");
  EXPECT_EQ(o.at("after_step_id"), 1) << "it came after the first step";
}

TEST_F(AtifTrajectory, AClaudeSubAgentIsEmbeddedAndReferencedFromTheCallThatSpawnedIt) {
  HandStream s;
  s.session_started("claude")
      .add(
          R"("event":"tool.requested","call_id":"toolu_agent","name":"Agent","input":{"description":"d","prompt":"Run touch sub.txt"},"decision_required":true,"seam":"hook","agent":null)")
      .add(
          R"("event":"tool.decided","call_id":"toolu_agent","decision":{"decision":"allow"},"decided_by":"embedder","seam":"hook")")
      .add(R"("event":"injection","text":"Run touch sub.txt","origin":"subagent")")
      .add(
          R"("event":"tool.requested","call_id":"toolu_sub","name":"Bash","input":{"command":"touch sub.txt"},"decision_required":true,"seam":"hook","agent":"toolu_agent")")
      .add(
          R"("event":"tool.decided","call_id":"toolu_sub","decision":{"decision":"deny","reason":"not from sub-agents"},"decided_by":"embedder","seam":"hook")")
      .add(
          R"("event":"usage","request_id":"req_3","model":"model-a","usage":{"input_tokens":3,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0})")
      .add(R"("event":"tool.result","call_id":"toolu_sub","is_error":true,"content":"not from sub-agents")")
      .add(R"("event":"tool.result","call_id":"toolu_agent","content":[{"type":"text","text":"Sub-agent done."}])")
      .add(R"("event":"text","text":"Main done.","request_id":"req_5")")
      .stream_closed();
  auto doc = convert(s);
  ASSERT_EQ(steps(doc).size(), 2u) << "the sub-agent's task and call are not the main agent's steps";
  const auto& spawn = result_of(step(doc, 1));
  ASSERT_TRUE(spawn.contains("subagent_trajectory_ref"));
  EXPECT_EQ(spawn.at("subagent_trajectory_ref").at(0).at("trajectory_id"), "toolu_agent");
  EXPECT_EQ(spawn.at("content"), (json::array{json::object{{"type", "text"}, {"text", "Sub-agent done."}}}));

  const auto& subs = doc.at("subagent_trajectories").as_array();
  ASSERT_EQ(subs.size(), 1u);
  const auto& sub = subs.at(0).as_object();
  EXPECT_EQ(sub.at("trajectory_id"), "toolu_agent");
  EXPECT_EQ(sub.at("session_id"), "sess-1") << "one run: the parent's session";
  EXPECT_EQ(mh(sub.at("agent")).at("spawned_by_call"), "toolu_agent");
  ASSERT_EQ(sub.at("steps").as_array().size(), 2u);
  EXPECT_EQ(step(sub, 1).at("source"), "user") << "its task, given by the spawning call";
  EXPECT_EQ(step(sub, 1).at("message"), "Run touch sub.txt");
  const auto& sub_call = step(sub, 2);
  EXPECT_EQ(sub_call.at("tool_calls").at(0).at("tool_call_id"), "toolu_sub");
  EXPECT_EQ(mh(result_of(sub_call)).at("outcome"), "refused");
  EXPECT_EQ(sub_call.at("metrics").at("prompt_tokens"), 3) << "usage follows the content it paid for";
}

TEST_F(AtifTrajectory, ACodexSubAgentIsReferencedFromTheSpawnThatNamedItsThread) {
  HandStream s;
  s.session_started("codex")
      .add(
          R"("event":"tool.requested","call_id":"call_spawn","name":"spawn_agent","input":{"message":"SUB TASK"},"decision_required":true,"seam":"control_request","agent":null)")
      .add(
          R"("event":"tool.decided","call_id":"call_spawn","decision":{"decision":"allow"},"decided_by":"embedder","seam":"control_request")")
      .add(
          R"("event":"tool.result","outcome_source":"item/completed","call_id":"call_spawn","is_error":false,"content":{"tool":"spawnAgent","status":"completed","receiverThreadIds":["thread-7"],"agentsStates":{}})")
      .add(
          R"("event":"tool.requested","call_id":"call_sub","name":"Bash","input":{"command":"touch s"},"decision_required":true,"seam":"control_request","agent":"thread-7")")
      .add(
          R"("event":"tool.decided","call_id":"call_sub","decision":{"decision":"allow"},"decided_by":"embedder","seam":"control_request")")
      .add(
          R"("event":"tool.result","exit_code":0,"outcome_source":"item/completed","call_id":"call_sub","is_error":false,"content":"")")
      .stream_closed();
  auto doc = convert(s);
  const auto& spawn = result_of(step(doc, 1));
  EXPECT_EQ(spawn.at("subagent_trajectory_ref").at(0).at("trajectory_id"), "thread-7");
  EXPECT_EQ(mh(spawn).at("content_form"), "json") << "the structured result is its canonical JSON text";
  const auto& sub = doc.at("subagent_trajectories").at(0).as_object();
  EXPECT_EQ(sub.at("trajectory_id"), "thread-7");
  EXPECT_EQ(step(sub, 1).at("tool_calls").at(0).at("tool_call_id"), "call_sub");
  EXPECT_EQ(mh(result_of(step(sub, 1))).at("exit_code"), 0);
}

TEST_F(AtifTrajectory, ASubAgentNoCallSpawnedIsAnnouncedByASystemStep) {
  HandStream s;
  s.session_started("codex")
      .add(R"("event":"text","text":"Working.")")
      .add(
          R"("event":"tool.requested","call_id":"call_x","name":"Bash","input":{"command":"true"},"decision_required":false,"seam":"none","agent":"thread-9")")
      .stream_closed();
  auto doc = convert(s);
  ASSERT_EQ(steps(doc).size(), 2u);
  const auto& announce = step(doc, 2);
  EXPECT_EQ(announce.at("source"), "system");
  EXPECT_EQ(result_of(announce).at("subagent_trajectory_ref").at(0).at("trajectory_id"), "thread-9");
  EXPECT_FALSE(result_of(announce).contains("source_call_id"));
  const auto& sub = doc.at("subagent_trajectories").at(0).as_object();
  EXPECT_TRUE(mh(sub.at("agent")).at("spawned_by_call").is_null());
  EXPECT_EQ(mh(result_of(step(sub, 1))).at("outcome"), "undecided") << "no tool.decided: nobody adjudicated it";
}

TEST_F(AtifTrajectory, InjectionsAreUserOrSystemStepsByTheirOrigin) {
  HandStream s;
  s.session_started("claude")
      .add(R"("event":"injection","text":"You may read files only.","origin":"frame")")
      .add(R"("event":"injection","text":"now the tests","origin":"message.inject")")
      .add(R"("event":"injection","text":"<system-reminder>","origin":"synthetic")")
      .add(R"("event":"injection","text":"hello","origin":"user")")
      .stream_closed();
  auto doc = convert(s, spec_with_prompt("hello"));
  ASSERT_EQ(steps(doc).size(), 4u) << "the vendor echoed the prompt: no second prompt step";
  EXPECT_EQ(step(doc, 1).at("source"), "system");
  EXPECT_EQ(mh(step(doc, 1)).at("origin"), "frame");
  EXPECT_EQ(step(doc, 2).at("source"), "user");
  EXPECT_EQ(step(doc, 3).at("source"), "system");
  EXPECT_EQ(step(doc, 4).at("source"), "user");
  EXPECT_EQ(step(doc, 4).at("message"), "hello");
}

TEST_F(AtifTrajectory, ControlPlaneEventsAreKeptInOrderWithTheirSeqAndPlace) {
  HandStream s;
  s.add(R"("event":"command.result","id":"c0","outcome":{"result":"ok","applies_at":null})")
      .session_started("claude")
      .add(R"("event":"step.entered","step":{"workflow":"w","state":"plan","index":0,"attempt":1},"frame_digest":null)")
      .add(R"("event":"turn.started","turn":1)")
      .add(R"("event":"text","text":"Thinking about it.","request_id":"req_1")")
      .add(R"("event":"thinking.estimate","estimate":120,"delta":20)")
      .add(R"("event":"warning","code":"NO_FRAME_IN_FORCE","message":"no frame")")
      .add(
          R"("event":"rate_limit","info":{"status":"allowed","window":"five_hour","resets_at":1,"utilization":0.5,"using_overage":false})")
      .add(R"("event":"auth.expired","credential_source":"none","detail":"OAuth token has expired","source_line":9)")
      .add(R"("event":"turn.ended","turn":1,"stop_reason":"end_turn")")
      .add(
          R"("event":"step.left","step":{"workflow":"w","state":"plan","index":0,"attempt":1},"outcome":{"outcome":"completed"})")
      .stream_closed("error");
  auto doc = convert(s);
  std::vector<std::string> names;
  for (const auto& e : control(doc))
    names.push_back(std::string(e.at("event").as_string()));
  EXPECT_EQ(names, (std::vector<std::string>{"command.result", "step.entered", "turn.started", "thinking.estimate",
                                             "warning", "rate_limit", "auth.expired", "turn.ended", "step.left"}));
  EXPECT_EQ(control(doc).at(0).at("after_step_id"), 0) << "before any step";
  EXPECT_EQ(control(doc).at(4).at("code"), "NO_FRAME_IN_FORCE");
  EXPECT_EQ(control(doc).at(4).at("after_step_id"), 1);
  EXPECT_EQ(control(doc).at(6).at("detail"), "OAuth token has expired");
  EXPECT_EQ(control(doc).at(8).at("outcome").at("outcome"), "completed");
  const auto& stream = mh(doc).at("stream").as_object();
  EXPECT_EQ(stream.at("status"), "complete");
  EXPECT_EQ(stream.at("stream_closed").at("reason"), "error");
}

TEST_F(AtifTrajectory, TheVendorsCostIsTheTotalAndAnUnknownCostIsNullNeverZero) {
  HandStream priced;
  priced.session_started("claude")
      .add(R"("event":"text","text":"a","request_id":"r1")")
      .add(
          R"("event":"usage","request_id":"r1","usage":{"input_tokens":1,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0})")
      .session_ended(
          R"("total_cost_usd":0.25,"census":{"allowed":2,"denied":1,"replaced":0,"abstained":0,"by_seam":{"hook":3},"by_decider":{"embedder":3}})")
      .stream_closed();
  auto doc = convert(priced);
  const auto& totals = doc.at("final_metrics").as_object();
  EXPECT_EQ(totals.at("total_cost_usd"), 0.25);
  EXPECT_EQ(mh(totals).at("cost_source"), "session.ended.total_cost_usd");
  EXPECT_EQ(mh(totals).at("census").at("denied"), 1);
  EXPECT_EQ(mh(doc).at("session_ended").at("total_cost_usd"), 0.25);

  // Two requests, a text each; the first priced at $0.5, the second's usage as given.
  auto two_requests = [](const std::string& second_usage) {
    HandStream h;
    h.session_started("codex")
        .add(R"("event":"text","text":"a")")
        .add(R"("event":"usage","usage":{"input_tokens":1,"output_tokens":1,"cost_usd":0.5})")
        .add(R"("event":"text","text":"b")")
        .add(R"("event":"usage","usage":)" + second_usage)
        .stream_closed();
    return h;
  };
  EXPECT_EQ(convert(two_requests(R"({"input_tokens":1,"output_tokens":1,"cost_usd":0.25})"))
                .at("final_metrics")
                .at("total_cost_usd"),
            0.75);
  auto partial = convert(two_requests(R"({"input_tokens":1,"output_tokens":1})"));
  EXPECT_TRUE(partial.at("final_metrics").at("total_cost_usd").is_null()) << "one unpriced request: unknown";
  EXPECT_TRUE(step(partial, 2).at("metrics").at("cost_usd").is_null());

  HandStream nothing;
  nothing.session_started("codex").add(R"("event":"text","text":"a")").stream_closed();
  auto nothing_doc = convert(nothing);
  const auto& none = nothing_doc.at("final_metrics").as_object();
  EXPECT_TRUE(none.at("total_prompt_tokens").is_null()) << "no usage reported is unknown, not zero tokens";
  EXPECT_TRUE(none.at("total_cost_usd").is_null());
}

TEST_F(AtifTrajectory, ATruncatedStreamIsExportedAsFarAsItGoesAndSaysSo) {
  HandStream s;
  s.session_started("claude").add(R"("event":"text","text":"half","request_id":"r1")");
  auto doc = convert(s);
  EXPECT_EQ(mh(doc).at("stream").at("status"), "truncated");
  EXPECT_TRUE(mh(doc).at("stream").at("stream_closed").is_null());
  EXPECT_EQ(step(doc, 1).at("message"), "half");
}

TEST_F(AtifTrajectory, ARunRefusedAtStartIsStillOneValidTrajectoryThatSaysSo) {
  HandStream s;
  s.add(R"("event":"warning","code":"LAUNCH_REFUSED","message":"vendor_env would switch the seam off")")
      .stream_closed("error");
  auto doc = convert(s);
  ASSERT_EQ(steps(doc).size(), 1u) << "ATIF needs a step; this one says there was nothing";
  EXPECT_EQ(step(doc, 1).at("source"), "system");
  EXPECT_EQ(control(doc).at(0).at("code"), "LAUNCH_REFUSED");
  EXPECT_EQ(mh(doc).at("stream").at("stream_closed").at("reason"), "error");
  EXPECT_EQ(doc.at("agent").at("name"), "unknown") << "no session.started, no spec: nobody said which adapter";
  EXPECT_EQ(doc.at("agent").at("version"), "unknown");
}

TEST_F(AtifTrajectory, ResultsAndInputsOfEveryShapeAreKeptWhole) {
  HandStream s;
  s.session_started("codex")
      .add(R"("event":"text","text":"one","request_id":"r1")")
      .add(R"("event":"text","text":"two","request_id":"r1")")
      .add(
          R"("event":"tool.requested","call_id":"c1","name":"apply_patch","input":"*** Begin Patch","decision_required":false,"seam":"control_request")")
      .add(
          R"("event":"tool.decided","call_id":"c1","decision":{"decision":"allow"},"decided_by":"frame","seam":"control_request")")
      .add(R"("event":"tool.result","call_id":"c1","is_error":null,"content":"partial")")
      .add(
          R"("event":"tool.result","call_id":"c1","exit_code":0,"outcome_source":"item/completed","is_error":false,"content":"final")")
      .add(
          R"("event":"tool.requested","call_id":"c2","name":"Read","input":{"file_path":"big"},"decision_required":false,"seam":"control_request","cut":[{"field":"input","pointer":"/input/file_path","form":"text","bytes":9,"kept":3,"digest":")" +
          std::string(64, 'b') + R"("}])")
      .add(
          R"("event":"tool.decided","call_id":"c2","decision":{"decision":"allow"},"decided_by":"frame","seam":"control_request")")
      .stream_closed();
  auto doc = convert(s);
  const auto& st = step(doc, 1);
  EXPECT_EQ(st.at("message"), (json::array{json::object{{"type", "text"}, {"text", "one"}},
                                           json::object{{"type", "text"}, {"text", "two"}}}))
      << "two text blocks of one inference stay two";
  const auto& patch = st.at("tool_calls").at(0).as_object();
  EXPECT_EQ(patch.at("arguments"), json::object{}) << "ATIF arguments are an object";
  EXPECT_EQ(mh(patch).at("input"), "*** Begin Patch") << "the input itself is kept";
  const auto& r1 = result_of(st, 0);
  EXPECT_EQ(r1.at("content"), "final") << "the last result is the call's outcome";
  EXPECT_EQ(mh(r1).at("earlier_results").at(0).at("content"), "partial");
  const auto& next = step(doc, 2);
  EXPECT_EQ(next.at("message"), "") << "after the results, the next call is the next inference's";
  const auto& cut_call = next.at("tool_calls").at(0).as_object();
  EXPECT_EQ(mh(cut_call).at("cut").at(0).at("bytes"), 9);
  const auto& r2 = result_of(next);
  EXPECT_EQ(mh(r2).at("outcome"), "no_result") << "allowed, and the stream ended before any result";
  EXPECT_TRUE(r2.at("content").is_null());
}

// Every event lands in exactly one place: a step, a tool call, its decision, its observation, a
// metrics block, the root's records, or extra.metaharness.events.
TEST_F(AtifTrajectory, EveryEventOfTheStreamLandsInExactlyOnePlace) {
  const std::string digest(64, 'c');
  HandStream s;
  s.add(R"("event":"command.result","id":"early","outcome":{"result":"ok","applies_at":null})")
      .session_started("claude")
      .add(R"("event":"step.entered","step":{"workflow":"w","state":"s","index":0,"attempt":1},"frame_digest":null)")
      .add(R"("event":"turn.started","turn":1)")
      .add(R"("event":"injection","text":"frame text","origin":"frame")")
      .add(R"("event":"thinking","text":"hmm","request_id":"r1")")
      .add(R"("event":"thinking.estimate","estimate":10)")
      .add(R"("event":"text","text":"ok","request_id":"r1")")
      .add(R"("event":"warning","code":"UNCOVERED_TOOL","message":"x")")
      .add(R"("event":"tool.requested","call_id":"t1","name":"Bash","input":{},"decision_required":true,"seam":"hook")")
      .add(
          R"("event":"usage","request_id":"r1","usage":{"input_tokens":1,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0})")
      .add(
          R"("event":"tool.decided","call_id":"t1","decision":{"decision":"deny","reason":"no"},"decided_by":"embedder","seam":"hook")")
      .add(R"("event":"tool.result","call_id":"t1","is_error":true,"content":"no")")
      .add(
          R"("event":"tool.decided","call_id":"ghost","decision":{"decision":"allow"},"decided_by":"embedder","seam":"hook")")
      .add(R"("event":"tool.result","call_id":"ghost2","content":"?")")
      .add(
          R"("event":"usage","request_id":"r9","usage":{"input_tokens":1,"output_tokens":1,"cache_read_input_tokens":0,"cache_creation_input_tokens":0})")
      .add(R"("event":"rate_limit","info":{"status":"allowed"})")
      .add(R"("event":"opaque","vendor_type":"system","vendor_subtype":"task_started","digest":")" + digest +
           R"(","source_line":5)")
      .add(R"("event":"auth.expired","credential_source":null,"detail":"expired","source_line":6)")
      .add(R"("event":"turn.ended","turn":1)")
      .add(
          R"("event":"step.left","step":{"workflow":"w","state":"s","index":0,"attempt":1},"outcome":{"outcome":"failed","reason":"r"})")
      .session_ended()
      .stream_closed();
  auto events = s.events();
  std::set<std::string> kinds;
  for (const auto& e : events)
    kinds.insert(std::string(protocol::event_name(e.payload)));
  ASSERT_EQ(kinds.size(), protocol::kEventCount) << "the stream holds every kind of event";

  auto doc = convert(s);
  std::multiset<std::uint64_t> expected;
  for (std::uint64_t seq = 1; seq <= s.last_seq(); ++seq)
    expected.insert(seq);
  EXPECT_EQ(seqs_in(doc), expected) << protocol::pretty_json(doc, false);
}

// The validator is not a rubber stamp: documents that break the format, each in one way, fail.
TEST_F(AtifTrajectory, TheSchemaAndItsRulesRejectWhatHarborsModelsReject) {
  auto ok = [] {
    return json::object{
        {"schema_version", "ATIF-v1.8"},
        {"agent", json::object{{"name", "a"}, {"version", "1"}}},
        {"steps", json::array{json::object{{"step_id", 1}, {"source", "user"}, {"message", "hi"}},
                              json::object{{"step_id", 2},
                                           {"source", "agent"},
                                           {"message", ""},
                                           {"tool_calls", json::array{json::object{{"tool_call_id", "c"},
                                                                                   {"function_name", "f"},
                                                                                   {"arguments", json::object{}}}}},
                                           {"observation",
                                            json::object{{"results", json::array{json::object{{"source_call_id", "c"},
                                                                                              {"content", "r"}}}}}}}}}};
  };
  ASSERT_EQ(validate_atif({ok()}, dir.path()).status, 0) << validate_atif({ok()}, dir.path()).output;

  std::vector<std::pair<std::string, json::object>> broken;
  auto edit = [&](std::string what, auto change) {
    json::object d = ok();
    change(d);
    broken.emplace_back(std::move(what), std::move(d));
  };
  auto step2 = [](json::object& d) -> json::object& { return d["steps"].as_array()[1].as_object(); };
  edit("an unknown version", [](json::object& d) { d["schema_version"] = "ATIF-v2.0"; });
  edit("no agent version", [](json::object& d) { d["agent"].as_object().erase("version"); });
  edit("an unknown root key", [](json::object& d) { d["metadata"] = json::object{}; });
  edit("no steps", [](json::object& d) { d["steps"] = json::array{}; });
  edit("a tool call on a user step", [&](json::object& d) { step2(d)["source"] = "user"; });
  edit("step ids out of order", [&](json::object& d) { step2(d)["step_id"] = 3; });
  edit("a result for a call of no step", [&](json::object& d) {
    step2(d)["observation"].as_object()["results"].as_array()[0].as_object()["source_call_id"] = "other";
  });
  edit("arguments that are not an object",
       [&](json::object& d) { step2(d)["tool_calls"].as_array()[0].as_object()["arguments"] = "x"; });
  edit("a cost that is text", [&](json::object& d) { step2(d)["metrics"] = json::object{{"cost_usd", "free"}}; });
  edit("a timestamp that is no date", [&](json::object& d) { step2(d)["timestamp"] = "yesterday"; });
  edit("a reference to an embedded sub-agent that is not there", [&](json::object& d) {
    step2(d)["observation"].as_object()["results"].as_array()[0].as_object()["subagent_trajectory_ref"] =
        json::array{json::object{{"trajectory_id", "nobody"}}};
  });
  edit("an embedded sub-agent with no trajectory_id", [&](json::object& d) {
    json::object sub = ok();
    d["subagent_trajectories"] = json::array{sub};
  });
  edit("an image part with no source", [&](json::object& d) {
    step2(d)["message"] = json::array{json::object{{"type", "image"}}};
  });
  for (const auto& [what, doc] : broken) {
    auto v = validate_atif({doc}, dir.path());
    EXPECT_EQ(v.status, 1) << what << " must be rejected:\n" << v.output;
  }
}

}  // namespace
}  // namespace mh::test
