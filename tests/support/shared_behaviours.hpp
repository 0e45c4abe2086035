// The behaviours every adapter's governed run shares, stated once and run against each vendor:
// the stand-in, the real Claude Code CLI and the real Codex CLI. Each vendor's run suite defines a
// Vendor class (its fixture, plus what differs: scenario names, call ids, the vendor's own words,
// and the checks only that vendor can make) and instantiates the pattern for it:
//
//   INSTANTIATE_TYPED_TEST_SUITE_P(Claude, SharedRun, ClaudeVendor);
//
// which ctest lists as Claude.AskModeAllowRunsTheCommand<0> (the vendor's suite discovers its
// tests with NO_PRETTY_TYPES: <0> is the one type; the vendor-only tests stay ClaudeRun.*).
//
// A Vendor derives from VendorBase<its fixture> (GovernedRun, or one built on it whose start() it
// uses) and provides `static inline const VendorFacts facts`, the member
// expect_deny_reason_delivered(reason, requests_before), and whichever extra checks it makes
// (VendorBase's make none). Every check a vendor's suite made before the suites were merged is
// made here or in that vendor's extras.
#pragma once

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

#include "protocol/completeness.hpp"
#include "protocol/frame.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {

// What a vendor's runs differ in. Scenario names are the same for every vendor (three_calls,
// sleep_then_more, auth_401) but for the one with a single shell call. A vendor names what it
// does not share with most: the defaults are the Anthropic wire's call ids, no argument needed
// to stop retrying a 401, call b denied, three processes marked while a tool runs (the vendor,
// its tool's shell and the setsid'd sleep), and a turn that outlasts the later commands.
struct VendorFacts {
  std::string adapter;                           // `metaharness run|translate <adapter>`
  std::string one_shell_call;                    // the scenario whose one shell call would leave marker.txt
  std::string call_prefix = "toolu_";            // call ids are <prefix>marker, <prefix>a, <prefix>b, <prefix>c
  std::vector<std::string> auth_failure_args;    // what stops the vendor retrying a 401
  std::string auth_expired_words;                // the vendor's own words in auth.expired's detail
  bool allows_every_one_of_three_calls = false;  // else call b is denied
  std::size_t marked_processes_while_a_tool_runs = 3;
  // A turn that ends within a millisecond of a decision (the stand-in): the deadline behaviour
  // holds the run open, or the later commands could arrive after the stream closed.
  bool ends_before_later_commands_arrive = false;
  // The vendor asks for the calls of one message one at a time, the next only once the last is
  // answered (Gemini CLI's ACP session runs them in turn; its capability table's notes say so):
  // they cannot all be delivered before an answer is due, so each is decided as it is asked.
  bool asks_one_call_at_a_time = false;
};

// A Vendor's base: its fixture, and no extra checks until the Vendor names some.
template <typename Fixture>
class VendorBase : public Fixture {
 protected:
  // session.ended carries the vendor's own one denial (the Claude wire's permission_denials).
  void expect_one_vendor_denial(const char* tool_name, const char* tool_use_id) {
    auto ended = this->process->events_named("session.ended");
    ASSERT_EQ(ended.size(), 1u);
    const auto& denials = ended[0].object.at("permission_denials").as_array();
    ASSERT_EQ(denials.size(), 1u);
    EXPECT_EQ(denials[0].as_object().at("tool_name"), tool_name);
    EXPECT_EQ(denials[0].as_object().at("tool_use_id"), tool_use_id);
  }
  // The run's first call was presented at `seam` under the vendor's tool `name`.
  void expect_first_call(const char* seam, const char* name, const char* why) {
    auto requested = this->process->events_named("tool.requested");
    ASSERT_FALSE(requested.empty());
    EXPECT_EQ(requested[0].str("seam"), seam) << why;
    EXPECT_EQ(requested[0].str("name"), name);
  }
  void expect_frame_denial_extras() {}
  void expect_allow_extras(const EventLine& /*requested*/) {}
  void expect_interrupt_extras(const EventLine& /*turn_ended*/) {}
  void expect_before_halt(const std::string& /*run_id*/, const std::vector<int>& /*marked*/) {}
  void expect_auth_failure_extras() {}
  // For a vendor that asks one call at a time (VendorFacts::asks_one_call_at_a_time): each of
  // three_calls' calls is asked only after the last is answered, and each decision is honoured;
  // what SeveralCallsInOneMessage... checks after its decisions, checked the same.
  void expect_three_calls_decided_as_asked(const std::string& prefix, bool b_allowed) {
    for (const char* call : {"a", "b", "c"}) {
      std::optional<EventLine> r = this->process->wait_for(
          [&](const EventLine& e) { return e.event() == "tool.requested" && e.str("call_id") == prefix + call; });
      ASSERT_TRUE(r) << "call " << call << " was never asked; " << this->process->stderr_text();
      EXPECT_EQ(this->process->events_named("tool.requested").size(),
                this->process->events_named("tool.decided").size() + 1)
          << "one call asked at a time";
      const bool allow = std::string(call) != "b" || b_allowed;
      this->send(std::string("d") + call,
                 decide_line(std::string("d") + call, prefix + call,
                             allow ? R"({"decision":"allow"})" : R"({"decision":"deny","reason":"not b"})"));
      ASSERT_TRUE(this->result_for(std::string("d") + call));
    }
    ASSERT_EQ(this->finish(), 0) << this->process->stderr_text();
    EXPECT_TRUE(std::filesystem::exists(this->work() / "a.txt"));
    EXPECT_EQ(std::filesystem::exists(this->work() / "b.txt"), b_allowed);
    EXPECT_TRUE(std::filesystem::exists(this->work() / "c.txt"));
    for (auto id : {"da", "db", "dc"})
      EXPECT_EQ(outcome_code(*this->result_for(id)), "ok");
    std::vector<EventLine> ended = this->process->events_named("session.ended");
    ASSERT_EQ(ended.size(), 1u);
    const auto& census = ended[0].object.at("census").as_object();
    EXPECT_EQ(census.at("allowed").to_number<int>(), b_allowed ? 3 : 2);
    EXPECT_EQ(census.at("denied").to_number<int>(), b_allowed ? 0 : 1);
  }
  void expect_translation_extras(const CliProcess& /*translate*/) {}
};

template <typename V>
class SharedRun : public V {};
TYPED_TEST_SUITE_P(SharedRun);

// A frame that admits no shell meets a model step that asks for one: the seam denies it, nothing
// runs, and the run still completes.
TYPED_TEST_P(SharedRun, FrameAdmittingNoShellDeniesTheCommandAndNothingRuns) {
  using V = TypeParam;
  this->start(V::facts.one_shell_call, {"--frame", this->write_frame({protocol::OpKind::file_read}).string()});
  this->process->close_stdin();
  std::optional<EventLine> decided = this->process->wait_for_event("tool.decided");
  ASSERT_TRUE(decided) << this->process->stderr_text();
  EXPECT_EQ(decided->str("decided_by"), "frame");
  EXPECT_EQ(decided->object.at("decision").as_object().at("decision"), "deny");
  ASSERT_EQ(this->finish(), 0) << this->process->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(this->work() / "marker.txt")) << "the denied command must not have run";

  std::vector<EventLine> ended = this->process->events_named("session.ended");
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].object.at("census").as_object().at("denied").to_number<int>(), 1);
  EXPECT_EQ(this->process->events().back().event(), "stream.closed");
  EXPECT_EQ(this->process->events().back().str("reason"), "completed");
  this->expect_frame_denial_extras();
}

// Ask mode: the call waits for a decision; allow runs the command.
TYPED_TEST_P(SharedRun, AskModeAllowRunsTheCommand) {
  using V = TypeParam;
  this->start(V::facts.one_shell_call, {"--decisions", "ask"});
  std::optional<EventLine> requested = this->process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << this->process->stderr_text();
  EXPECT_TRUE(requested->object.at("decision_required").as_bool());
  EXPECT_EQ(requested->str("call_id"), V::facts.call_prefix + "marker");
  this->send("c1", decide_line("c1", V::facts.call_prefix + "marker", R"({"decision":"allow"})"));
  std::optional<EventLine> result = this->result_for("c1");
  ASSERT_TRUE(result);
  EXPECT_EQ(outcome_code(*result), "ok");
  ASSERT_EQ(this->finish(), 0) << this->process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(this->work() / "marker.txt"));
  std::vector<EventLine> decided = this->process->events_named("tool.decided");
  ASSERT_EQ(decided.size(), 1u);
  EXPECT_EQ(decided[0].str("decided_by"), "embedder");
  this->expect_allow_extras(*requested);
}

// A deny carries its reason to where the vendor shows it (the model's next request; the stand-in's
// tool result), and nothing runs.
TYPED_TEST_P(SharedRun, AskModeDenyCarriesTheReasonOnAndNothingRuns) {
  using V = TypeParam;
  this->start(V::facts.one_shell_call, {"--decisions", "ask"});
  ASSERT_TRUE(this->process->wait_for_event("tool.requested")) << this->process->stderr_text();
  std::size_t before = logged_request_bodies(this->run_dir()).size();
  const std::string reason = "SUPERVISOR: not on my watch";
  this->send("c1",
             decide_line("c1", V::facts.call_prefix + "marker", R"({"decision":"deny","reason":")" + reason + "\"}"));
  ASSERT_EQ(this->finish(), 0) << this->process->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(this->work() / "marker.txt"));
  EXPECT_EQ(outcome_code(*this->result_for("c1")), "ok");
  this->expect_deny_reason_delivered(reason, before);
}

// Deadline: silence is denied by the deadline; then late, unknown and malformed commands are each
// answered once, by name.
TYPED_TEST_P(SharedRun, DeadlineDeniesSilenceAndEveryLaterCommandIsAnsweredOnceByName) {
  using V = TypeParam;
  std::vector<std::string> args = {"--decisions", "ask", "--decision-deadline-ms", "1500"};
  if (V::facts.ends_before_later_commands_arrive) args.push_back("--keep-open");
  this->start(V::facts.one_shell_call, args);
  this->expect_deadline_denial_then_named_refusals(V::facts.call_prefix + "marker", "marker.txt");
}

// Several calls in one model message: all delivered before any answer is due, decided out of
// order, each decision honoured.
TYPED_TEST_P(SharedRun, SeveralCallsInOneMessageAreAllDeliveredThenDecidedInAnyOrder) {
  using V = TypeParam;
  this->start("three_calls", {"--decisions", "ask"});
  const bool b_allowed = V::facts.allows_every_one_of_three_calls;
  if (V::facts.asks_one_call_at_a_time) {
    this->expect_three_calls_decided_as_asked(V::facts.call_prefix, b_allowed);
    return;
  }
  std::set<std::string> seen;
  while (seen.size() < 3) {
    std::optional<EventLine> r = this->process->wait_for(
        [&](const EventLine& e) { return e.event() == "tool.requested" && !seen.count(e.str("call_id")); });
    ASSERT_TRUE(r) << "only " << seen.size() << " calls were delivered before an answer; "
                   << this->process->stderr_text();
    seen.insert(r->str("call_id"));
  }
  EXPECT_EQ(seen, (std::set<std::string>{V::facts.call_prefix + "a", V::facts.call_prefix + "b",
                                         V::facts.call_prefix + "c"}));
  EXPECT_TRUE(this->process->events_named("tool.decided").empty()) << "nothing was decided before we answered";
  this->send("dc", decide_line("dc", V::facts.call_prefix + "c", R"({"decision":"allow"})"));
  this->send("db", decide_line("db", V::facts.call_prefix + "b",
                               b_allowed ? R"({"decision":"allow"})" : R"({"decision":"deny","reason":"not b"})"));
  this->send("da", decide_line("da", V::facts.call_prefix + "a", R"({"decision":"allow"})"));
  ASSERT_EQ(this->finish(), 0) << this->process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(this->work() / "a.txt"));
  EXPECT_EQ(std::filesystem::exists(this->work() / "b.txt"), b_allowed) << "b was allowed: " << b_allowed;
  EXPECT_TRUE(std::filesystem::exists(this->work() / "c.txt"));
  for (auto id : {"da", "db", "dc"})
    EXPECT_EQ(outcome_code(*this->result_for(id)), "ok");
  std::vector<EventLine> ended = this->process->events_named("session.ended");
  ASSERT_EQ(ended.size(), 1u);
  const auto& census = ended[0].object.at("census").as_object();
  EXPECT_EQ(census.at("allowed").to_number<int>(), b_allowed ? 3 : 2);
  EXPECT_EQ(census.at("denied").to_number<int>(), b_allowed ? 0 : 1);
}

// Interrupt during a running tool: the turn ends, the session stays usable, the next message
// starts a new turn, and no process of the run outlives it.
TYPED_TEST_P(SharedRun, InterruptDuringARunningToolEndsTheTurnAndTheNextMessageStartsANewOne) {
  this->start("sleep_then_more", {"--decisions", "observe"});
  std::string id = this->run_id();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(this->work() / "started.txt"); }))
      << "the tool never started; " << this->process->stderr_text();
  this->send("i1", command_line("i1", "interrupt", R"("reason":"enough")"));
  std::optional<EventLine> ended = this->process->wait_for_event("turn.ended");
  ASSERT_TRUE(ended) << this->process->stderr_text();
  EXPECT_EQ(ended->object.at("turn").to_number<int>(), 1);
  std::optional<EventLine> interrupted = this->result_for("i1");
  ASSERT_TRUE(interrupted);
  EXPECT_EQ(outcome_code(*interrupted), "ok");
  this->expect_interrupt_extras(*ended);

  this->send("m1", command_line("m1", "message.inject", R"("text":"carry on")"));
  std::optional<EventLine> next = this->process->wait_for(
      [](const EventLine& e) { return e.event() == "turn.started" && e.object.at("turn").to_number<int>() == 2; });
  ASSERT_TRUE(next) << "the injected message must start a new turn";
  std::optional<EventLine> text = this->process->wait_for_event("text");
  ASSERT_TRUE(text);
  EXPECT_EQ(text->str("text"), "Picking up again.");
  EXPECT_EQ(this->finish(), 0) << this->process->stderr_text();
  EXPECT_EQ(outcome_code(*this->result_for("m1")), "ok");
  EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "no process of the run outlives it";
}

// Halt: stream.closed steer-halt is the last line and no process of the run remains, not even a
// tool process that escaped with setsid.
TYPED_TEST_P(SharedRun, HaltClosesSteerHaltAndLeavesNoProcessOfTheRunBehind) {
  using V = TypeParam;
  this->start("sleep_then_more", {"--decisions", "observe", "--halt-grace-ms", "1000"});
  std::string id = this->run_id();
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(this->work() / "started.txt"); }))
      << this->process->stderr_text();
  std::vector<int> marked;
  ASSERT_TRUE(eventually([&] {
    marked = processes_with_env("METAHARNESS_RUN=" + id);
    return marked.size() >= V::facts.marked_processes_while_a_tool_runs;
  })) << "the vendor, its tool's processes and the setsid'd sleep should all carry the run marker";
  this->expect_before_halt(id, marked);
  this->send("h", command_line("h", "halt", R"("reason":"stop now")"));
  EXPECT_EQ(this->finish(), 4) << this->process->stderr_text();
  EXPECT_EQ(outcome_code(*this->result_for("h")), "ok");
  ASSERT_FALSE(this->process->events().empty());
  EXPECT_EQ(this->process->events().back().event(), "stream.closed");
  EXPECT_EQ(this->process->events().back().str("reason"), "steer-halt");
  EXPECT_TRUE(processes_with_env("METAHARNESS_RUN=" + id).empty()) << "the whole run must be gone";
}

// A persistent 401: auth.expired in the vendor's words, then session.ended, then the marker.
TYPED_TEST_P(SharedRun, PersistentAuthFailureIsAuthExpiredThenSessionEndedThenStreamClosed) {
  using V = TypeParam;
  this->start("auth_401", V::facts.auth_failure_args);
  this->process->close_stdin();
  EXPECT_EQ(this->finish(), 3) << this->process->stderr_text();
  std::vector<std::string_view> order;
  for (const auto& e : this->process->events())
    if (e.event() == "auth.expired" || e.event() == "session.ended" || e.event() == "stream.closed")
      order.push_back(e.event());
  EXPECT_EQ(order, (std::vector<std::string_view>{"auth.expired", "session.ended", "stream.closed"}));
  std::vector<EventLine> expired = this->process->events_named("auth.expired");
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_NE(expired[0].str("detail").find(V::facts.auth_expired_words), std::string::npos) << expired[0].raw;
  EXPECT_EQ(this->process->events().back().str("reason"), "error");
  this->expect_auth_failure_extras();
}

// A run that needs a tier the adapter lacks for its configuration is refused before anything
// spawns: observe mode with a frame would enforce nothing.
TYPED_TEST_P(SharedRun, ObserveModeWithAFrameIsRefusedAtStart) {
  using V = TypeParam;
  this->start(V::facts.one_shell_call,
              {"--decisions", "observe", "--frame", this->write_frame({protocol::OpKind::shell}).string()});
  this->process->close_stdin();
  EXPECT_EQ(this->finish(), 2);
  std::vector<EventLine> refused = this->process->events_named("command.result");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(outcome_code(refused[0]), "UNSUPPORTED_CONTROL");
  EXPECT_FALSE(std::filesystem::exists(this->run_dir() / "vendor-stdout.jsonl")) << "nothing was spawned";
}

// The reader alone, offline, over the retained transcript of a real run: a complete stream that
// decides nothing.
TYPED_TEST_P(SharedRun, TranslateReadsARetainedTranscriptWithNoDecisions) {
  using V = TypeParam;
  this->start(V::facts.one_shell_call, {"--frame", this->write_frame({protocol::OpKind::file_read}).string()});
  this->process->close_stdin();
  ASSERT_EQ(this->finish(), 0) << this->process->stderr_text();
  CliProcess translate({metaharness_binary().string(), "translate", V::facts.adapter,
                        (this->run_dir() / "vendor-stdout.jsonl").string(), "--run", "audit-1"});
  translate.close_stdin();
  ASSERT_EQ(translate.finish(), 0) << translate.stderr_text();
  std::string stream;
  for (const auto& e : translate.events())
    stream += e.raw + "\n";
  auto verdict = protocol::check_stream(stream);
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary();
  EXPECT_EQ(translate.events_named("session.started").size(), 1u);
  EXPECT_FALSE(translate.events_named("tool.requested").empty());
  EXPECT_TRUE(translate.events_named("tool.decided").empty()) << "translation decides nothing";
  EXPECT_EQ(translate.events_named("session.ended").size(), 1u);
  this->expect_translation_extras(translate);
}

REGISTER_TYPED_TEST_SUITE_P(SharedRun, FrameAdmittingNoShellDeniesTheCommandAndNothingRuns, AskModeAllowRunsTheCommand,
                            AskModeDenyCarriesTheReasonOnAndNothingRuns,
                            DeadlineDeniesSilenceAndEveryLaterCommandIsAnsweredOnceByName,
                            SeveralCallsInOneMessageAreAllDeliveredThenDecidedInAnyOrder,
                            InterruptDuringARunningToolEndsTheTurnAndTheNextMessageStartsANewOne,
                            HaltClosesSteerHaltAndLeavesNoProcessOfTheRunBehind,
                            PersistentAuthFailureIsAuthExpiredThenSessionEndedThenStreamClosed,
                            ObserveModeWithAFrameIsRefusedAtStart, TranslateReadsARetainedTranscriptWithNoDecisions);

// Replace runs the replaced input, and only it: the vendors whose seam can carry a new input
// (Codex's approval answer cannot: its suite shows the refusal by name).
template <typename V>
class ReplaceRun : public V {};
TYPED_TEST_SUITE_P(ReplaceRun);

TYPED_TEST_P(ReplaceRun, AskModeReplaceRunsTheReplacedInputInstead) {
  using V = TypeParam;
  this->start(V::facts.one_shell_call, {"--decisions", "ask"});
  ASSERT_TRUE(this->process->wait_for_event("tool.requested")) << this->process->stderr_text();
  this->send(
      "c1", decide_line("c1", V::facts.call_prefix + "marker",
                        R"({"decision":"replace","input":{"command":"touch replaced.txt","description":"replaced"}})"));
  ASSERT_EQ(this->finish(), 0) << this->process->stderr_text();
  EXPECT_EQ(outcome_code(*this->result_for("c1")), "ok");
  EXPECT_TRUE(std::filesystem::exists(this->work() / "replaced.txt"));
  EXPECT_FALSE(std::filesystem::exists(this->work() / "marker.txt"));
}

REGISTER_TYPED_TEST_SUITE_P(ReplaceRun, AskModeReplaceRunsTheReplacedInputInstead);

}  // namespace mh::test
