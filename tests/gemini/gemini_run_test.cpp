// Governed Gemini CLI runs end to end, against the REAL CLI (@google/gemini-cli 0.61.0, `gemini
// --acp`, installed by ./run setup) and the project's scripted endpoint on the Gemini wire. The
// behaviours every vendor shares run from tests/support/shared_behaviours.hpp (Gemini.*), each
// assertion Gemini CLI cannot meet replaced by its named refusal; the tests here (GeminiRun.*) are
// what only this adapter shows: every tool kind asks, replace and the deny's reason refused by
// name, ACP's turn per prompt, and the hermetic launch.
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

class GeminiRun : public GovernedRun {
 protected:
  GeminiRun() : GovernedRun("gemini") {}

  // The text Gemini CLI gives the model for a call it was told to cancel (its ACP session's own).
  static std::string canceled_text(const std::string& tool) {
    return "Tool \\\"" + tool + "\\\" was canceled by the user.";
  }
  // The functionResponse the model was given for `call` in any request from the `after`-th on,
  // as canonical JSON; empty when none carries it.
  std::string function_response(const std::string& call, std::size_t after = 0) const {
    auto bodies = logged_request_bodies(run_dir());
    for (std::size_t i = after; i < bodies.size(); ++i) {
      const json::value* contents = bodies[i].if_contains("contents");
      if (!contents || !contents->is_array()) continue;
      for (const auto& c : contents->as_array())
        if (const json::value* parts = c.as_object().if_contains("parts"); parts && parts->is_array())
          for (const auto& part : parts->as_array())
            if (const json::value* r = part.as_object().if_contains("functionResponse"))
              if (r->is_object() && r->as_object().contains("id") && r->at("id") == json::value(call))
                return protocol::canonical_json(*r);
    }
    return "";
  }
};

class GeminiVendor : public VendorBase<GeminiRun> {
 public:
  static inline const VendorFacts facts{.adapter = "gemini",
                                        .one_shell_call = "marker",
                                        .call_prefix = "run_shell_command__toolu_",
                                        .auth_expired_words = "invalid authentication credentials",
                                        .asks_one_call_at_a_time = true};

 protected:
  // The seam is ACP's permission request (no hook fires in Gemini CLI's ACP mode), and the model
  // reads Gemini's own text for the call the frame denied.
  void expect_frame_denial_extras() {
    expect_first_call("control_request", "run_shell_command", "ACP's permission request is Gemini CLI's only seam");
    EXPECT_NE(function_response("toolu_marker").find(canceled_text("run_shell_command")), std::string::npos)
        << function_response("toolu_marker");
  }
  // Gemini CLI reports no input; the permission was answered once, never "for this session".
  void expect_allow_extras(const EventLine& requested) {
    EXPECT_TRUE(requested.object.at("input").is_null()) << "Gemini CLI reports no tool input over ACP";
    EXPECT_EQ(requested.str("name"), "run_shell_command") << "named by the tool its call id names";
    std::string stdin_log = read_file(run_dir() / "vendor-stdin.jsonl");
    EXPECT_NE(stdin_log.find(R"("optionId":"proceed_once")"), std::string::npos);
    EXPECT_EQ(stdin_log.find(R"("optionId":"proceed_always")"), std::string::npos);
  }
  // The assertion Gemini CLI cannot meet, replaced by its named refusal: its ACP permission answer
  // carries no reason, so the model reads Gemini's own text, never ours, and the run says so by
  // name (DENY_REASON_NOT_DELIVERED, carrying the reason it could not deliver).
  void expect_deny_reason_delivered(const std::string& reason, std::size_t requests_before) {
    std::string told = function_response("toolu_marker", requests_before);
    EXPECT_NE(told.find(canceled_text("run_shell_command")), std::string::npos) << told;
    EXPECT_EQ(told.find(reason), std::string::npos) << "no seam of Gemini CLI's ACP mode carries a reason";
    auto warnings = process->events_named("warning");
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0].str("code"), "DENY_REASON_NOT_DELIVERED");
    EXPECT_NE(warnings[0].str("message").find(reason), std::string::npos) << warnings[0].raw;
  }
  void expect_interrupt_extras(const EventLine& turn_ended) { EXPECT_EQ(turn_ended.str("stop_reason"), "cancelled"); }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Gemini, SharedRun, GeminiVendor);
// Replace cannot ride a permission answer (GeminiRun.ReplaceIsRefusedByName... shows the refusal).
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(ReplaceRun);

// Every tool kind asks before it runs: one call of each (shell, read, glob, grep, list, write,
// replace, web fetch, todos) is presented at ACP's permission request, none runs unasked (no call
// recorded with seam none), and each is answered proceed_once.
TEST_F(GeminiRun, EveryToolKindAsksBeforeItRuns) {
  start("every_tool_kind", {"--decisions", "observe"});
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  std::set<std::string> asked;
  for (const auto& r : process->events_named("tool.requested")) {
    EXPECT_EQ(r.str("seam"), "control_request") << "a call ran unasked: " << r.raw;
    EXPECT_EQ(r.str("call_id"), r.str("name") + "__toolu_" + r.str("call_id").substr(r.str("call_id").rfind('_') + 1));
    asked.insert(r.str("name"));
  }
  EXPECT_EQ(asked, (std::set<std::string>{"run_shell_command", "read_file", "glob", "grep_search", "list_directory",
                                          "write_file", "replace", "web_fetch", "write_todos"}));
  EXPECT_TRUE(fs::exists(work() / "sh.txt")) << "the allowed shell call ran";
  EXPECT_EQ(read_file(work() / "w.txt"), "y") << "the allowed write, then the allowed replace, ran";
}

// Replace cannot ride a permission answer: refused by name, and the call stays pending for a
// decision that can.
TEST_F(GeminiRun, ReplaceIsRefusedByNameAndTheCallStaysOpenForAnotherDecision) {
  start("marker", {"--decisions", "ask"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  send("r1", decide_line("r1", "run_shell_command__toolu_marker",
                         R"({"decision":"replace","input":{"command":"touch replaced.txt","description":"r"}})"));
  auto refused = result_for("r1");
  ASSERT_TRUE(refused);
  EXPECT_EQ(outcome_code(*refused), "UNSUPPORTED_CONTROL");
  EXPECT_TRUE(process->events_named("tool.decided").empty());
  send("c1", decide_line("c1", "run_shell_command__toolu_marker", R"({"decision":"allow"})"));
  EXPECT_EQ(outcome_code(*result_for("c1")), "ok");
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(fs::exists(work() / "marker.txt"));
  EXPECT_FALSE(fs::exists(work() / "replaced.txt"));
}

// Inject between turns: with the run held open, a message is the next session/prompt, a turn of
// its own, and the model sees it.
TEST_F(GeminiRun, InjectBetweenTurnsIsTheNextPromptAndTheModelSeesIt) {
  start("two_turns", {"--keep-open"});
  expect_injected_message_is_the_next_turn("end_turn", [](const std::vector<EventLine>& events) {
    std::vector<std::string> texts;
    for (const auto& t : events)
      texts.push_back(t.str("text"));
    EXPECT_EQ(texts, (std::vector<std::string>{"First answer.", "Second answer."}));
  });
}

// A frame.set sent mid-run judges the next call by the new frame, at the permission request.
TEST_F(GeminiRun, AFrameSetMidRunJudgesTheNextCallByTheNewFrame) {
  protocol::Frame launch = sealed_test_frame({protocol::OpKind::shell}, protocol::StepRef{"tests", "implement", 1, 1});
  protocol::Frame no_shell =
      sealed_test_frame({protocol::OpKind::file_read}, protocol::StepRef{"tests", "verify", 2, 1});
  const fs::path launch_file = dir.path() / "launch-frame.json";
  std::ofstream(launch_file) << protocol::frame_document(launch);
  start("call_per_turn", {"--frame", launch_file.string(), "--keep-open"});

  auto first = process->wait_for_event("tool.decided");
  ASSERT_TRUE(first) << process->stderr_text();
  EXPECT_EQ(first->str("call_id"), "run_shell_command__toolu_first");
  EXPECT_EQ(first->object.at("decision").as_object().at("decision"), "allow");
  send("f1", R"({"format":"metaharness.command/1","id":"f1","command":"frame.set","frame":)" +
                 protocol::canonical_json(protocol::frame_to_json(no_shell, true)) +
                 R"(,"step_outcome":{"outcome":"completed"}})");
  EXPECT_EQ(result_code("f1"), "ok");
  ASSERT_TRUE(process->wait_for_event("turn.ended")) << process->stderr_text();
  send("m1", command_line("m1", "message.inject", R"("text":"go on")"));
  auto second = process->wait_for([](const EventLine& e) {
    return e.event() == "tool.decided" && e.str("call_id") == "run_shell_command__toolu_second";
  });
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
TEST_F(GeminiRun, ARunThatNeedsSteerOrPermissionSetIsRefusedBeforeAnythingSpawns) {
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

// session.started says what Gemini CLI reports and the plan knows, null where neither says: the
// pinned version from initialize, the model session/new reports, no plugin / MCP / output-style
// claim (ACP reports none).
TEST_F(GeminiRun, SessionStartedCarriesWhatGeminiReportsAndNullWhereItSaysNothing) {
  start("two_turns");
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  auto started = process->events_named("session.started");
  ASSERT_EQ(started.size(), 1u);
  const auto& s = started[0].object;
  EXPECT_EQ(s.at("adapter"), "gemini");
  EXPECT_EQ(s.at("harness_version"), "0.61.0");
  EXPECT_EQ(s.at("model"), "gemini-2.5-flash");
  EXPECT_TRUE(s.at("plugins").is_null());
  EXPECT_TRUE(s.at("mcp_servers").is_null());
  EXPECT_TRUE(s.at("output_style").is_null());
  // The hermetic launch: no side request reached the endpoint (no countTokens, no model list),
  // and the generated settings switch usage statistics off.
  auto headers = logged_request_headers(run_dir());
  ASSERT_EQ(headers.size(), 1u) << "one model request for one turn, nothing else";
  std::string settings = read_file(run_dir() / "scratch/home/.gemini/settings.json");
  EXPECT_NE(settings.find(R"("usageStatisticsEnabled":false)"), std::string::npos) << settings;
}

// A throttled run fails as rate_limit (issue 27's categories), as the other vendors' do: Gemini CLI sends a throttled
// request general.maxAttempts times (max_attempts=2: two), then answers the prompt with the 429 as its error's code.
// session.ended says the status, and stream.closed's failure is rate_limit, not a vendor exit.
TEST_F(GeminiRun, AnEndpointThatKeepsThrottlingFailsTheRunAsRateLimit) {
  start("rate_limit_429", {"--vendor-option", "max_attempts=2"});
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
  EXPECT_EQ(statuses, (std::vector<int>{429, 429})) << "max_attempts=2: the request and one retry";
}

// No path to the network but the model endpoint (the hermetic side requests cut: usage statistics,
// telemetry, update checks, model lists): once Gemini CLI has started and asked for its call, every
// socket any process of the run holds is connected to loopback (or to nothing), and every request
// the endpoint logged is a model request of the run's own (:streamGenerateContent).
TEST_F(GeminiRun, NoSocketOfTheRunReachesBeyondLoopback) {
  start("marker", {"--decisions", "ask"});
  auto requested = process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << process->stderr_text();
  std::vector<int> marked = processes_with_env("METAHARNESS_RUN=" + run_id());
  ASSERT_FALSE(marked.empty());
  std::set<std::string> remotes;
  for (int pid : marked)
    for (const auto& r : remote_addresses(pid))
      remotes.insert(r);
  EXPECT_FALSE(remotes.empty()) << "Gemini CLI holds its connection to the endpoint";
  for (const auto& r : remotes)
    EXPECT_TRUE(is_loopback_or_unconnected(r)) << "a socket reaches " << r;
  send("c1", decide_line("c1", "run_shell_command__toolu_marker", R"({"decision":"allow"})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  std::vector<std::string> targets;
  for (const auto& line : read_lines(run_dir() / "model-requests.jsonl")) {
    auto entry = protocol::parse_json(line);
    if (entry && entry->is_object() && entry->at("kind") == "request")
      targets.push_back(std::string(entry->at("target").as_string()));
  }
  EXPECT_EQ(targets.size(), 2u) << "the call's turn: the request asking for it, the one after its result";
  for (const auto& t : targets)
    EXPECT_NE(t.find(":streamGenerateContent"), std::string::npos)
        << "a request that is not the run's model request: " << t;
}

}  // namespace
}  // namespace mh::test
