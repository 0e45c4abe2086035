// Governed Qwen Code runs end to end, against the REAL CLI (@qwen-code/qwen-code 0.24.4, `qwen
// --acp`, installed by ./run setup) and the project's scripted endpoint on the Anthropic wire. The
// behaviours every vendor shares run from tests/support/shared_behaviours.hpp (Qwen.*), each
// assertion Qwen Code cannot meet replaced by its named refusal; the tests here (QwenRun.*) are
// what only this adapter shows: every tool kind asks, replace and the deny's reason refused by
// name, ACP's turn per prompt, and the launch's evidence.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "protocol/digest.hpp"
#include "protocol/json.hpp"
#include "tests/support/governed_run.hpp"
#include "tests/support/run_sockets.hpp"
#include "tests/support/shared_behaviours.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;

class QwenRun : public GovernedRun {
 protected:
  QwenRun() : GovernedRun("qwen") {}

  // The tool_result the model was given for `call` in any request from the `after`-th on, as
  // canonical JSON; empty when none carries it.
  std::string tool_result(const std::string& call, std::size_t after = 0) const {
    auto bodies = logged_request_bodies(run_dir());
    for (std::size_t i = after; i < bodies.size(); ++i)
      if (const json::value* messages = bodies[i].if_contains("messages"); messages && messages->is_array())
        for (const auto& m : messages->as_array())
          if (m.at("content").is_array())
            for (const auto& block : m.at("content").as_array())
              if (block.as_object().contains("tool_use_id") && block.at("tool_use_id") == json::value(call))
                return protocol::canonical_json(block);
    return "";
  }
};

class QwenVendor : public VendorBase<QwenRun> {
 public:
  // A cancelled call ends Qwen Code's turn, so no call of three_calls is denied (the calls after a
  // denied one would never be asked), and the calls are asked one at a time.
  static inline const VendorFacts facts{.adapter = "qwen",
                                        .one_shell_call = "marker",
                                        .auth_expired_words = "OAuth token has expired.",
                                        .allows_every_one_of_three_calls = true,
                                        .asks_one_call_at_a_time = true};

 protected:
  // The seam is ACP's permission request (Qwen's PreToolUse hooks fire only after it), with the
  // model's own input.
  void expect_frame_denial_extras() {
    expect_first_call("control_request", "run_shell_command", "ACP's permission request is Qwen Code's seam");
  }
  // The permission was answered once, never with a standing "always" rule.
  void expect_allow_extras(const EventLine& requested) {
    EXPECT_EQ(requested.object.at("input").as_object().at("command"), "touch marker.txt");
    EXPECT_EQ(requested.str("name"), "run_shell_command") << "named by Qwen's own tool name (_meta.toolName)";
    std::string stdin_log = read_file(run_dir() / "vendor-stdin.jsonl");
    EXPECT_NE(stdin_log.find(R"("optionId":"proceed_once")"), std::string::npos);
    EXPECT_EQ(stdin_log.find(R"("optionId":"proceed_always)"), std::string::npos);
  }
  // The assertion Qwen Code cannot meet, replaced by its named refusal: its ACP permission answer
  // carries no reason (a cancel ends its turn; the model reads Qwen's own text in a later prompt),
  // so no request carries ours, and the run says so by name (DENY_REASON_NOT_DELIVERED, carrying
  // the reason it could not deliver).
  void expect_deny_reason_delivered(const std::string& reason, std::size_t requests_before) {
    EXPECT_FALSE(a_later_request_carries(reason, requests_before)) << "no seam of Qwen's ACP mode carries it";
    auto warnings = process->events_named("warning");
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].str("code"), "DENY_REASON_NOT_DELIVERED");
    EXPECT_NE(warnings[0].str("message").find(reason), std::string::npos) << warnings[0].raw;
  }
  void expect_interrupt_extras(const EventLine& turn_ended) { EXPECT_EQ(turn_ended.str("stop_reason"), "cancelled"); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Qwen, SharedRun, QwenVendor);
// Replace cannot ride a permission answer (QwenRun.ReplaceIsRefusedByName... shows the refusal).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReplaceRun);

// Every tool kind asks before it runs: one call of each (shell, read, glob, grep, write, edit, web
// fetch) is presented at ACP's permission request with its input, none runs unasked (no call
// recorded with seam none), and each is answered proceed_once.
TEST_F(QwenRun, EveryToolKindAsksBeforeItRuns) {
  // Qwen Code's file tools take only absolute paths (a relative one fails before it asks).
  std::string text = read_file(scenario("every_tool_kind"));
  for (auto at = text.find("@WORK@"); at != std::string::npos; at = text.find("@WORK@"))
    text.replace(at, 6, std::filesystem::absolute(work()).string());
  const auto scenario_file = dir.path() / "every_tool_kind.json";
  std::ofstream(scenario_file) << text;
  start_with(scenario_file, {"--decisions", "observe"});
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  std::set<std::string> asked;
  for (const auto& r : process->events_named("tool.requested")) {
    EXPECT_EQ(r.str("seam"), "control_request") << "a call ran unasked: " << r.raw;
    EXPECT_TRUE(r.object.at("input").is_object()) << r.raw;
    asked.insert(r.str("name"));
  }
  EXPECT_EQ(asked, (std::set<std::string>{"run_shell_command", "read_file", "glob", "grep_search", "write_file", "edit",
                                          "web_fetch"}));
  EXPECT_EQ(read_file(work() / "seed.txt"), "seed\n") << "the allowed shell call ran";
  EXPECT_EQ(read_file(work() / "w.txt"), "y") << "the allowed write, then the allowed edit, ran";
}

// Replace cannot ride a permission answer: refused by name, and the call stays pending for a
// decision that can.
TEST_F(QwenRun, ReplaceIsRefusedByNameAndTheCallStaysOpenForAnotherDecision) {
  start("marker", {"--decisions", "ask"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  send("r1", decide_line("r1", "toolu_marker",
                         R"({"decision":"replace","input":{"command":"touch replaced.txt","description":"r"}})"));
  auto refused = result_for("r1");
  ASSERT_TRUE(refused);
  EXPECT_EQ(outcome_code(*refused), "UNSUPPORTED_CONTROL");
  EXPECT_TRUE(process->events_named("tool.decided").empty());
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"allow"})"));
  EXPECT_EQ(outcome_code(*result_for("c1")), "ok");
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(fs::exists(work() / "marker.txt"));
  EXPECT_FALSE(fs::exists(work() / "replaced.txt"));
}

// Inject between turns: with the run held open, a message is the next session/prompt, a turn of
// its own, and the model sees it.
TEST_F(QwenRun, InjectBetweenTurnsIsTheNextPromptAndTheModelSeesIt) {
  start("two_turns", {"--keep-open"});
  expect_injected_message_is_the_next_turn("end_turn", [](const std::vector<EventLine>& events) {
    std::vector<std::string> texts;
    for (const auto& t : events)
      texts.push_back(t.str("text"));
    EXPECT_EQ(texts, (std::vector<std::string>{"First answer.", "Second answer."}));
  });
}

// A frame.set sent mid-run judges the next call by the new frame, at the permission request.
TEST_F(QwenRun, AFrameSetMidRunJudgesTheNextCallByTheNewFrame) {
  protocol::Frame launch = sealed_test_frame({protocol::OpKind::shell}, protocol::StepRef{"tests", "implement", 1, 1});
  protocol::Frame no_shell =
      sealed_test_frame({protocol::OpKind::file_read}, protocol::StepRef{"tests", "verify", 2, 1});
  const fs::path launch_file = dir.path() / "launch-frame.json";
  std::ofstream(launch_file) << protocol::frame_document(launch);
  start("call_per_turn", {"--frame", launch_file.string(), "--keep-open"});

  auto first = process->wait_for_event("tool.decided");
  ASSERT_TRUE(first) << process->stderr_text();
  EXPECT_EQ(first->str("call_id"), "toolu_first");
  EXPECT_EQ(first->object.at("decision").as_object().at("decision"), "allow");
  send("f1", R"({"format":"metaharness.command/1","id":"f1","command":"frame.set","frame":)" +
                 protocol::canonical_json(protocol::frame_to_json(no_shell, true)) +
                 R"(,"step_outcome":{"outcome":"completed"}})");
  EXPECT_EQ(result_code("f1"), "ok");
  ASSERT_TRUE(process->wait_for_event("turn.ended")) << process->stderr_text();
  send("m1", command_line("m1", "message.inject", R"("text":"go on")"));
  auto second = process->wait_for(
      [](const EventLine& e) { return e.event() == "tool.decided" && e.str("call_id") == "toolu_second"; });
  ASSERT_TRUE(second) << process->stderr_text();
  EXPECT_EQ(second->str("decided_by"), "frame");
  EXPECT_EQ(second->str("seam"), "control_request");
  EXPECT_EQ(second->object.at("decision").as_object().at("decision"), "deny");
  ASSERT_TRUE(process->wait_for([](const EventLine& e) {
    return e.event() == "turn.ended" && e.object.at("turn").to_number<int>() == 2;
  })) << process->stderr_text();
  EXPECT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(fs::exists(work() / "first.txt")) << "the call the launch frame admitted ran";
  EXPECT_FALSE(fs::exists(work() / "second.txt")) << "the call the new frame refuses never ran";
}

// Steer has no ACP tier and no posture maps truthfully: a run that needs either is refused
// before anything spawns, by name.
TEST_F(QwenRun, ARunThatNeedsSteerOrPermissionSetIsRefusedBeforeAnythingSpawns) {
  start("marker", {"--require", "steer", "--require", "permission.set"});
  process->close_stdin();
  EXPECT_EQ(finish(), 2);
  std::set<std::string> refused;
  for (const auto& r : process->events_named("command.result")) {
    EXPECT_EQ(outcome_code(r), "UNSUPPORTED_CONTROL") << r.raw;
    refused.insert(r.str("id"));
  }
  EXPECT_EQ(refused, (std::set<std::string>{"start/steer", "start/permission.set"}));
  EXPECT_FALSE(fs::exists(run_dir() / "vendor-stdout.jsonl")) << "nothing was spawned";
}

// session.started says what Qwen Code reports and the plan knows, null where neither says: the
// pinned version from initialize, the launch's model, no plugin / MCP / output-style claim (ACP
// reports none); the generated settings switch off the side requests that carry tools, so the one
// turn makes no request but its own.
TEST_F(QwenRun, SessionStartedCarriesWhatQwenReportsAndNullWhereItSaysNothing) {
  start("two_turns");
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  auto started = process->events_named("session.started");
  ASSERT_EQ(started.size(), 1u);
  const auto& s = started[0].object;
  EXPECT_EQ(s.at("adapter"), "qwen");
  EXPECT_EQ(s.at("harness_version"), "0.24.4");
  EXPECT_EQ(s.at("model"), "claude-sonnet-4-5");
  EXPECT_TRUE(s.at("plugins").is_null());
  EXPECT_TRUE(s.at("mcp_servers").is_null());
  EXPECT_TRUE(s.at("output_style").is_null());
  auto bodies = logged_request_bodies(run_dir());
  ASSERT_EQ(bodies.size(), 1u) << "one model request for one turn: no memory extraction, no suggestion";
  EXPECT_EQ(bodies[0].at("model"), "claude-sonnet-4-5");
}

// A throttled run fails as rate_limit (issue 27's categories), as the other vendors' do: Qwen Code retries a throttled
// request (max_retries=0 turns its rate-limit retries off; its request retries still make 7 attempts with a backoff,
// ~75 s), then answers the prompt with the 429 as its error's code. session.ended says the status, and stream.closed's
// failure is rate_limit, not a vendor exit.
TEST_F(QwenRun, AnEndpointThatKeepsThrottlingFailsTheRunAsRateLimit) {
  start("rate_limit_429", {"--vendor-option", "max_retries=0"});
  process->close_stdin();
  EXPECT_EQ(finish(), 3) << process->stderr_text();
  auto ended = process->events_named("session.ended");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].str("api_error_status"), "429") << ended[0].raw;
  const auto& closed = process->events().back();
  ASSERT_EQ(closed.event(), "stream.closed");
  EXPECT_EQ(closed.str("reason"), "error");
  ASSERT_TRUE(closed.object.at("failure").is_object()) << closed.raw;
  EXPECT_EQ(closed.object.at("failure").at("category"), "rate_limit") << closed.raw;
  EXPECT_EQ(closed.object.at("failure").at("retryable"), true);
  std::vector<int> statuses;
  for (const auto& line : read_lines(run_dir() / "model-requests.jsonl")) {
    auto entry = protocol::parse_json(line);
    if (entry && entry->is_object() && entry->at("kind") == "request")
      statuses.push_back(entry->at("status").to_number<int>());
  }
  EXPECT_GE(statuses.size(), 1u);
  for (int status : statuses)
    EXPECT_EQ(status, 429);
}

// No path to the network but the model endpoint (the hermetic side requests cut: usage statistics,
// telemetry, update checks, model lists): once Qwen Code has started and asked for its call, every
// socket any process of the run holds is connected to loopback (or to nothing), and every request
// the endpoint logged is a model request of the run's own (/v1/messages).
TEST_F(QwenRun, NoSocketOfTheRunReachesBeyondLoopback) {
  start("marker", {"--decisions", "ask"});
  auto requested = process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << process->stderr_text();
  std::vector<int> marked = processes_with_env("METAHARNESS_RUN=" + run_id());
  ASSERT_FALSE(marked.empty());
  std::set<std::string> remotes;
  for (int pid : marked)
    for (const auto& r : remote_addresses(pid))
      remotes.insert(r);
  EXPECT_FALSE(remotes.empty()) << "Qwen Code holds its connection to the endpoint";
  for (const auto& r : remotes)
    EXPECT_TRUE(is_loopback_or_unconnected(r)) << "a socket reaches " << r;
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"allow"})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  std::vector<std::string> targets;
  for (const auto& line : read_lines(run_dir() / "model-requests.jsonl")) {
    auto entry = protocol::parse_json(line);
    if (entry && entry->is_object() && entry->at("kind") == "request")
      targets.push_back(std::string(entry->at("target").as_string()));
  }
  EXPECT_EQ(targets.size(), 2u) << "the call's turn: the request asking for it, the one after its result";
  for (const auto& t : targets)
    EXPECT_NE(t.find("/v1/messages"), std::string::npos) << "a request that is not the run's model request: " << t;
}

}  // namespace
}  // namespace mh::test
