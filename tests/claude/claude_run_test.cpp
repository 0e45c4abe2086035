// One governed Claude Code run, end to end, against the REAL CLI (2.1.197, installed by
// ./run setup) and the project's scripted model endpoint on loopback. The one-shot face is
// driven as a user drives it: `metaharness run claude ...`, events on stdout, commands on stdin.
#include "tests/claude/claude_run.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <set>

#include "protocol/completeness.hpp"
#include "protocol/digest.hpp"
#include "protocol/frame.hpp"

namespace mh::test {
namespace {

// 1. A frame that admits no shell meets a model step that asks for Bash.
TEST_F(ClaudeRun, FrameAdmittingNoShellDeniesBashAtTheSeamAndTheVendorsDenialsPassThrough) {
  start("bash_marker", {"--frame", write_frame({protocol::OpKind::file_read}).string()});
  process->close_stdin();
  auto decided = process->wait_for_event("tool.decided");
  ASSERT_TRUE(decided) << process->stderr_text();
  EXPECT_EQ(decided->str("decided_by"), "frame");
  EXPECT_EQ(decided->object.at("decision").as_object().at("decision"), "deny");
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt")) << "the denied command must not have run";

  auto ended = process->events_named("session.ended");
  ASSERT_EQ(ended.size(), 1u);
  const auto& denials = ended[0].object.at("permission_denials").as_array();
  ASSERT_EQ(denials.size(), 1u);
  EXPECT_EQ(denials[0].as_object().at("tool_name"), "Bash");
  EXPECT_EQ(denials[0].as_object().at("tool_use_id"), "toolu_marker");
  EXPECT_EQ(ended[0].object.at("census").as_object().at("denied").to_number<int>(), 1);
  EXPECT_EQ(process->events().back().event(), "stream.closed");
  EXPECT_EQ(process->events().back().str("reason"), "completed");
}

// 2a. Ask mode: allow runs the command.
TEST_F(ClaudeRun, AskModeAllowRunsTheCommand) {
  start("bash_marker", {"--decisions", "ask"});
  auto requested = process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << process->stderr_text();
  EXPECT_TRUE(requested->object.at("decision_required").as_bool());
  EXPECT_EQ(requested->object.at("deadline_ms").to_number<int>(), 55000);
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"allow"})"));
  auto result = result_for("c1");
  ASSERT_TRUE(result);
  EXPECT_EQ(outcome_code(*result), "ok");
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "marker.txt"));
  auto decided = process->events_named("tool.decided");
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_EQ(decided[0].str("decided_by"), "embedder");
}

// 2b. Replace runs the replaced input, and only it.
TEST_F(ClaudeRun, AskModeReplaceRunsTheReplacedInputInstead) {
  start("bash_marker", {"--decisions", "ask"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  send("c1",
       decide_line("c1", "toolu_marker",
                   R"({"decision":"replace","input":{"command":"touch replaced.txt","description":"replaced"}})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "replaced.txt"));
  EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt"));
}

// 2c. A deny carries its reason to the model: the endpoint sees it in the next request.
TEST_F(ClaudeRun, AskModeDenyCarriesTheReasonToTheModel) {
  start("bash_marker", {"--decisions", "ask"});
  ASSERT_TRUE(process->wait_for_event("tool.requested")) << process->stderr_text();
  send("c1", decide_line("c1", "toolu_marker", R"({"decision":"deny","reason":"SUPERVISOR: not on my watch"})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(work() / "marker.txt"));
  bool reached_model = false;
  for (const auto& line : read_lines(run_dir() / "model-requests.jsonl")) {
    auto v = protocol::parse_json(line);
    if (!v || v->as_object().at("kind") != "request" || !v->as_object().at("body").is_object()) continue;
    for (const auto& message : v->as_object().at("body").as_object().at("messages").as_array())
      if (message.as_object().at("content").is_array())
        for (const auto& block : message.as_object().at("content").as_array())
          if (block.as_object().at("type") == "tool_result" &&
              protocol::canonical_json(block).find("SUPERVISOR: not on my watch") != std::string::npos)
            reached_model = true;
  }
  EXPECT_TRUE(reached_model) << "the next model request must carry the deny reason in a tool_result";
}

// 3. Deadline: silence is denied by the deadline; then late, unknown and malformed commands.
TEST_F(ClaudeRun, DeadlineDeniesSilenceAndEveryLaterCommandIsAnsweredOnceByName) {
  start("bash_marker", {"--decisions", "ask", "--decision-deadline-ms", "1500"});
  expect_deadline_denial_then_named_refusals("toolu_marker", "marker.txt");
}

// 4. Several calls in one assistant message: all delivered before any answer is due, decided
//    in any order.
TEST_F(ClaudeRun, SeveralCallsInOneMessageAreAllDeliveredThenDecidedInAnyOrder) {
  start("three_calls", {"--decisions", "ask"});
  std::set<std::string> seen;
  while (seen.size() < 3) {
    auto r = process->wait_for_event("tool.requested");
    ASSERT_TRUE(r) << "only " << seen.size() << " calls were delivered before an answer; " << process->stderr_text();
    seen.insert(r->str("call_id"));
  }
  EXPECT_TRUE(process->events_named("tool.decided").empty()) << "nothing was decided before we answered";
  send("dc", decide_line("dc", "toolu_c", R"({"decision":"allow"})"));
  send("db", decide_line("db", "toolu_b", R"({"decision":"allow"})"));
  send("da", decide_line("da", "toolu_a", R"({"decision":"allow"})"));
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  for (auto f : {"a.txt", "b.txt", "c.txt"})
    EXPECT_TRUE(std::filesystem::exists(work() / f)) << f;
  for (auto id : {"da", "db", "dc"})
    EXPECT_EQ(outcome_code(*result_for(id)), "ok");
}

// 5. Interrupt during a running tool: the turn ends, the session stays usable, and a following
//    message.inject starts a new turn.
TEST_F(ClaudeRun, InterruptDuringARunningToolEndsTheTurnAndTheNextMessageStartsANewOne) {
  start("sleep_then_more", {"--decisions", "observe"});
  std::string id = run_id();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(work() / "started.txt"); }))
      << "the tool never started; " << process->stderr_text();
  send("i1", command_line("i1", "interrupt", R"("reason":"enough")"));
  auto interrupted = result_for("i1");
  ASSERT_TRUE(interrupted);
  EXPECT_EQ(outcome_code(*interrupted), "ok");
  ASSERT_TRUE(process->wait_for_event("turn.ended"));

  send("m1", command_line("m1", "message.inject", R"("text":"carry on")"));
  auto next = process->wait_for(
      [](const EventLine& e) { return e.event() == "turn.started" && e.object.at("turn").to_number<int>() == 2; });
  ASSERT_TRUE(next) << "the injected message must start a new turn";
  auto text = process->wait_for_event("text");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->str("text"), "Picking up again.");
  EXPECT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_EQ(outcome_code(*result_for("m1")), "ok");
  EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "no process of the run outlives it";
}

// 6. Halt: stream.closed steer-halt is the last line and no process of the run remains, not
//    even a tool process that escaped with setsid.
TEST_F(ClaudeRun, HaltClosesSteerHaltAndLeavesNoProcessOfTheRunBehind) {
  start("sleep_then_more", {"--decisions", "observe", "--halt-grace-ms", "1000"});
  std::string id = run_id();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(work() / "started.txt"); })) << process->stderr_text();
  ASSERT_TRUE(eventually([&] { return processes_with_env("METAHARNESS_RUN=" + id).size() >= 3; }))
      << "claude, its tool shell and the setsid'd sleep should all carry the run marker";
  send("h", command_line("h", "halt", R"("reason":"stop now")"));
  EXPECT_EQ(finish(), 4) << process->stderr_text();
  EXPECT_EQ(outcome_code(*result_for("h")), "ok");
  ASSERT_FALSE(process->events().empty());
  EXPECT_EQ(process->events().back().event(), "stream.closed");
  EXPECT_EQ(process->events().back().str("reason"), "steer-halt");
  EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "the whole tree must be gone";
}

// 7. A persistent 401: auth.expired in the vendor's words, then session.ended, then the marker.
TEST_F(ClaudeRun, PersistentAuthFailureIsAuthExpiredThenSessionEndedThenStreamClosed) {
  start("auth_401", {"--vendor-env", "CLAUDE_CODE_MAX_RETRIES=0"});
  process->close_stdin();
  EXPECT_EQ(finish(), 3) << process->stderr_text();
  std::vector<std::string_view> order;
  for (const auto& e : process->events())
    if (e.event() == "auth.expired" || e.event() == "session.ended" || e.event() == "stream.closed")
      order.push_back(e.event());
  EXPECT_EQ(order, (std::vector<std::string_view>{"auth.expired", "session.ended", "stream.closed"}));
  auto expired = process->events_named("auth.expired");
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_NE(expired[0].str("detail").find("OAuth token has expired"), std::string::npos) << expired[0].raw;
  EXPECT_EQ(process->events().back().str("reason"), "error");
}

// 8. A record the reader does not know becomes opaque, citing the exact line it came from.
TEST_F(ClaudeRun, AnUnmappedVendorRecordBecomesOpaqueWithItsDigestAndLine) {
  start("retry_once", {"--vendor-env", "CLAUDE_CODE_MAX_RETRIES=1"});
  process->close_stdin();
  EXPECT_EQ(finish(), 0) << process->stderr_text();
  auto transcript = read_lines(run_dir() / "vendor-stdout.jsonl");
  bool found = false;
  for (const auto& e : process->events_named("opaque")) {
    if (e.str("vendor_subtype") != "api_retry") continue;
    found = true;
    EXPECT_EQ(e.str("vendor_type"), "system");
    auto line = e.object.at("source_line").to_number<std::size_t>();
    ASSERT_GE(line, 1u);
    ASSERT_LE(line, transcript.size());
    EXPECT_EQ(e.str("digest"), protocol::sha256_hex(transcript[line - 1]));
    EXPECT_NE(transcript[line - 1].find("api_retry"), std::string::npos);
  }
  EXPECT_TRUE(found) << "the api_retry record must appear as opaque";
}

// Run-start refusal: a control the run needs and the adapter cannot honour refuses the run
// before anything spawns, one command.result per command.
TEST_F(ClaudeRun, ARunThatNeedsSteerIsRefusedBeforeAnythingSpawns) {
  start("bash_marker", {"--require", "steer"});
  process->close_stdin();
  EXPECT_EQ(finish(), 2);
  auto refused = process->events_named("command.result");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].str("id"), "start/steer");
  EXPECT_EQ(outcome_code(refused[0]), "UNSUPPORTED_CONTROL");
  EXPECT_EQ(process->events().back().event(), "stream.closed");
  EXPECT_FALSE(std::filesystem::exists(run_dir() / "vendor-stdout.jsonl")) << "nothing was spawned";
}

TEST_F(ClaudeRun, ObserveModeWithAFrameIsRefusedAtStart) {
  start("bash_marker", {"--decisions", "observe", "--frame", write_frame({protocol::OpKind::shell}).string()});
  process->close_stdin();
  EXPECT_EQ(finish(), 2);
  auto refused = process->events_named("command.result");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(outcome_code(refused[0]), "UNSUPPORTED_CONTROL");
}

// The reader alone, offline, over the retained transcript of a real run.
TEST_F(ClaudeRun, TranslateReadsARetainedTranscriptWithNoDecisions) {
  start("bash_marker", {"--frame", write_frame({protocol::OpKind::file_read}).string()});
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  CliProcess translate({metaharness_binary().string(), "translate", "claude",
                        (run_dir() / "vendor-stdout.jsonl").string(), "--run", "audit-1"});
  translate.close_stdin();
  ASSERT_EQ(translate.finish(), 0);
  std::string stream;
  for (const auto& e : translate.events())
    stream += e.raw + "\n";
  auto verdict = protocol::check_stream(stream);
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary();
  auto requested = translate.events_named("tool.requested");
  ASSERT_EQ(requested.size(), 1u);
  EXPECT_EQ(requested[0].str("seam"), "none");
  EXPECT_TRUE(translate.events_named("tool.decided").empty()) << "translation decides nothing";
  EXPECT_EQ(translate.events_named("session.ended").size(), 1u);
}

}  // namespace
}  // namespace mh::test
