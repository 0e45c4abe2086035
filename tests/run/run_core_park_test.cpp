// Parking (issue 27 §5) in the run core, driven through the Claude adapter with the CLI's own
// record shapes: the park timer is armed for the call the vendor blocks on; on its timeout the
// call is answered "defer"; the turn's end "tool_deferred" parks the run (stdin closed, RUN_PARKED,
// state parked, the call still pending); the decision (the embedder's or the deadline's) asks the
// host to start the vendor again; on_resumed states RUN_RESUMED and the resumed turn and installs
// the seam again; the vendor's new request for the call is answered with the decision made.
#include <fstream>

#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

namespace lines = mh::test::claude_lines;

class RunCorePark : public RunCoreTest {
 protected:
  void open_parking(std::uint64_t deadline_ms = 55'000) {
    spec.park_after_ms = 1'000;
    open_and_begin(proto::DecisionMode::ask);
    spec.decision_deadline_ms = deadline_ms;
    feed(lines::tool_use("toolu_1", "Bash", kBash));
    feed(lines::hook_callback("hc-1", "toolu_1", "Bash", kBash));
  }
  static std::string deferred_result() {
    auto o = parse_object(lines::result());
    o["stop_reason"] = "tool_deferred";
    o["terminal_reason"] = "tool_deferred";
    o["result"] = "";
    o["deferred_tool_use"] = json::object{{"id", "toolu_1"}, {"name", "Bash"}, {"input", kBash}};
    return proto::canonical_json(o);
  }
  // Parks the run on toolu_1: the timer runs out, the vendor defers and ends its turn.
  void park() {
    ASSERT_TRUE(fx.park);
    EXPECT_EQ(fx.park->first, "toolu_1");
    EXPECT_EQ(fx.park->second, now + 1000ms) << "park_after runs from the call's delivery";
    now += 1000ms;
    core->on_park_timeout("toolu_1", now);
    auto answer = decision_of(answer_for("hc-1")).as_object();
    EXPECT_EQ(answer.at("hookSpecificOutput").as_object().at("permissionDecision"), "defer");
    EXPECT_FALSE(fx.stdin_closed) << "the vendor ends its turn first";
    feed(deferred_result());
  }
  std::vector<std::string> warning_codes() const {
    std::vector<std::string> out;
    for (const auto& w : all<proto::ev::Warning>())
      out.push_back(w.code);
    return out;
  }
};

TEST_F(RunCorePark, AParkedCallIsDeferredTheRunParksAndItsDecisionResumesTheSession) {
  open_parking();
  park();
  EXPECT_EQ(core->phase(), RunCore::Phase::parked);
  EXPECT_EQ(core->public_phase(), RunPhase::parked);
  EXPECT_TRUE(fx.stdin_closed) << "the parked vendor is let go";
  EXPECT_EQ(core->pending_count(), 1u) << "the call still waits on its decision";
  EXPECT_TRUE(fx.deadlines.count("toolu_1")) << "its deadline runs on while parked";
  EXPECT_EQ(all<proto::ev::TurnEnded>().back().stop_reason, std::optional<std::string>("tool_deferred"));
  EXPECT_EQ(warning_codes(), (std::vector<std::string>{"RUN_PARKED"}));
  EXPECT_FALSE(core->resume_wanted());
  core->on_vendor_end(now);  // the vendor exits: the run stays parked
  EXPECT_EQ(core->phase(), RunCore::Phase::parked);

  command(R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_1",)"
          R"("decision":{"decision":"allow"}})");
  EXPECT_FALSE(result_for("d1").outcome.refusal.has_value());
  EXPECT_EQ(only<proto::ev::ToolDecided>().decided_by, proto::DecidedBy::embedder);
  EXPECT_EQ(fx.resumes, 1u);
  ASSERT_TRUE(core->resume_wanted());
  auto args = core->resume_args();
  ASSERT_EQ(args.size(), 4u);
  EXPECT_EQ(args[0], "--resume");
  EXPECT_EQ(args[1], "sess-1");
  EXPECT_EQ(args[2], "--settings") << "the decision travels with the resumed process";

  const std::size_t written = fx.vendor.size();
  core->on_resumed(now);
  EXPECT_EQ(core->phase(), RunCore::Phase::turn);
  EXPECT_EQ(warning_codes(), (std::vector<std::string>{"RUN_PARKED", "RUN_RESUMED"}));
  ASSERT_EQ(all<proto::ev::TurnStarted>().size(), 2u);
  EXPECT_EQ(all<proto::ev::TurnStarted>().back().turn, 2u);
  ASSERT_GT(fx.vendor.size(), written);
  EXPECT_EQ(parse_object(fx.vendor[written]).at("request").as_object().at("subtype"), "initialize");

  // The resumed vendor asks for the call again: answered with the decision made, not presented anew.
  feed(lines::initialize_ok());
  feed(lines::hook_callback("hc-2", "toolu_1", "Bash", kBash));
  auto answer = decision_of(answer_for("hc-2")).as_object();
  EXPECT_EQ(answer.at("hookSpecificOutput").as_object().at("permissionDecision"), "allow");
  EXPECT_EQ(all<proto::ev::ToolRequested>().size(), 1u);
  feed(lines::tool_result("toolu_1", "", false));
  feed(lines::init());  // the resumed process's init: no third turn, no second session
  feed(lines::text("Done."));
  feed(lines::result());
  EXPECT_EQ(all<proto::ev::TurnStarted>().size(), 2u);
  EXPECT_EQ(all<proto::ev::SessionStarted>().size(), 1u);
  EXPECT_EQ(all<proto::ev::TurnEnded>().size(), 2u);
}

// The deadline still applies while parked: nobody decides, the deadline denies, and the run
// resumes to deliver that deny.
TEST_F(RunCorePark, AParkedCallNobodyDecidesIsDeniedByItsDeadlineAndResumes) {
  open_parking();
  park();
  core->on_deadline("toolu_1", now + 55s);
  EXPECT_EQ(only<proto::ev::ToolDecided>().decided_by, proto::DecidedBy::deadline);
  EXPECT_TRUE(core->resume_wanted());
  core->on_resumed(now + 55s);
  feed(lines::initialize_ok());
  feed(lines::hook_callback("hc-2", "toolu_1", "Bash", kBash));
  auto answer = decision_of(answer_for("hc-2")).as_object();
  EXPECT_EQ(answer.at("hookSpecificOutput").as_object().at("permissionDecision"), "deny");
}

// A halt while parked ends the run: the call is abandoned, nothing is started again.
TEST_F(RunCorePark, AHaltWhileParkedEndsTheRunWithoutResuming) {
  open_parking();
  park();
  command(R"({"format":"metaharness.command/1","id":"h1","command":"halt"})");
  EXPECT_EQ(core->phase(), RunCore::Phase::ending);
  EXPECT_TRUE(fx.terminated);
  EXPECT_FALSE(core->resume_wanted());
  EXPECT_EQ(fx.resumes, 0u);
  EXPECT_EQ(only<proto::ev::ToolDecided>().decided_by, proto::DecidedBy::adapter);
}

// A call decided before park_after never parks: the timer is disarmed, no defer is written.
TEST_F(RunCorePark, ACallDecidedBeforeParkAfterDisarmsTheTimer) {
  open_parking();
  ASSERT_TRUE(fx.park);
  command(R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_1",)"
          R"("decision":{"decision":"allow"}})");
  EXPECT_FALSE(fx.park) << "nothing left to park on";
  core->on_park_timeout("toolu_1", now + 1s);  // a timeout already moved past
  for (const auto& w : fx.vendor)
    EXPECT_EQ(w.find("\"defer\""), std::string::npos) << w;
  EXPECT_EQ(core->phase(), RunCore::Phase::turn);
}

// Claude 2.1.197 under load may resume the deferred call before it reads the initialize that
// installs the in-band seam again. The resumed process is started with the decision already
// (a PreToolUse command hook in --settings), so a result before the seam's request is governed:
// no RESUME_UNGOVERNED.
TEST_F(RunCorePark, ADeferredCallTheVendorResumesBeforeAskingTheSeamIsGovernedByTheDecisionItCarries) {
  open_parking();
  park();
  command(R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_1",)"
          R"("decision":{"decision":"deny","reason":"no"}})");
  ASSERT_EQ(core->resume_args().size(), 4u);
  core->on_resumed(now);
  feed(lines::tool_result("toolu_1", "no", true));
  EXPECT_EQ(warning_codes(), (std::vector<std::string>{"RUN_PARKED", "RUN_RESUMED"}));
}

// The settings hook the resume carries, run by a shell as Claude runs it: for the parked call's
// request it prints the decision's hook output (a reason with quotes and shell syntax stays data),
// for any other call nothing (the in-band seam decides those).
TEST_F(RunCorePark, TheResumesSettingsHookAnswersOnlyTheParkedCallAndItsReasonIsData) {
  open_parking();
  park();
  const std::string reason = "it's $(touch pwned) `touch pwned2` \\' \"quoted\"";
  json::object cmd{{"format", "metaharness.command/1"},
                   {"id", "d1"},
                   {"command", "tool.decide"},
                   {"call_id", "toolu_1"},
                   {"decision", json::object{{"decision", "deny"}, {"reason", reason}}}};
  command(proto::canonical_json(cmd));
  auto args = core->resume_args();
  ASSERT_EQ(args.size(), 4u);
  auto settings = parse_object(args[3]);
  ASSERT_TRUE(settings.contains("hooks")) << args[3];
  const auto& hook = settings.at("hooks")
                         .as_object()
                         .at("PreToolUse")
                         .as_array()
                         .at(0)
                         .as_object()
                         .at("hooks")
                         .as_array()
                         .at(0)
                         .as_object();
  EXPECT_EQ(hook.at("type"), "command");
  const std::string command_text(hook.at("command").as_string());
  mh::test::TempDir dir{"park-hook"};
  auto run_hook = [&](const std::string& input) {
    const auto in = dir.path() / "in.json";
    std::ofstream(in) << input;
    // The hook prints no newline (Claude reads its whole stdout); run_to_end reads lines, so the
    // wrapper ends what the hook printed with one.
    return mh::test::run_to_end({"/bin/sh", "-c", "cd \"$1\" && /bin/sh -c \"$2\" < \"$3\"; printf '\\n'", "sh",
                                 dir.path().string(), command_text, in.string()});
  };
  auto parked = run_hook(R"({"session_id":"sess-1","hook_event_name":"PreToolUse","tool_name":"Bash",)"
                         R"("tool_input":{"command":"ls"},"tool_use_id":"toolu_1"})");
  EXPECT_EQ(parked.status, 0) << parked.err;
  auto out = parse_object(parked.out);
  ASSERT_TRUE(out.contains("hookSpecificOutput")) << parked.out;
  const auto& specific = out.at("hookSpecificOutput").as_object();
  EXPECT_EQ(specific.at("permissionDecision"), "deny");
  EXPECT_EQ(std::string(specific.at("permissionDecisionReason").as_string()), reason);
  // Another call, even one whose input quotes the parked call's id, gets nothing.
  auto other = run_hook(R"({"tool_name":"Bash","tool_input":{"command":"echo \"tool_use_id\":\"toolu_1\""},)"
                        R"("tool_use_id":"toolu_2"})");
  EXPECT_EQ(other.status, 0) << other.err;
  EXPECT_EQ(other.out, "\n") << "the hook printed nothing (the newline is the wrapper's)";
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "pwned") || std::filesystem::exists(dir.path() / "pwned2"));
}

// A decision too large for one argument (a replace with a big input; the kernel bounds an argument
// at 128 KiB) is not carried: the resume is the plain one, and if the vendor then runs the call
// before asking the seam, the stream names it ungoverned rather than the exec failing.
TEST_F(RunCorePark, ADecisionTooLargeForAnArgumentIsNotCarriedAndALostRaceIsNamed) {
  open_parking();
  park();
  json::object cmd{
      {"format", "metaharness.command/1"},
      {"id", "d1"},
      {"command", "tool.decide"},
      {"call_id", "toolu_1"},
      {"decision", json::object{{"decision", "replace"},
                                {"input", json::object{{"command", "echo " + std::string(200'000, 'x')}}}}}};
  command(proto::canonical_json(cmd));
  EXPECT_EQ(core->resume_args(), (std::vector<std::string>{"--resume", "sess-1"}));
  core->on_resumed(now);
  feed(lines::tool_result("toolu_1", "ran as the vendor decided", false));
  EXPECT_EQ(warning_codes(), (std::vector<std::string>{"RUN_PARKED", "RUN_RESUMED", "RESUME_UNGOVERNED"}));
  EXPECT_NE(all<proto::ev::Warning>().back().message.find("(replace) was not delivered"), std::string::npos)
      << all<proto::ev::Warning>().back().message;
}

// Claude does not keep the permission mode in its session (a bare --resume starts in "default"):
// the resumed process is started in the mode the run last set, and the mode it then reports is
// compared with the run's, a difference named POSTURE_DRIFT (occasion "resume").
TEST_F(RunCorePark, TheResumedProcessStartsInTheModeTheRunSetAndTheModeItReportsIsCompared) {
  spec.park_after_ms = 1'000;
  spec.deny_only = true;  // a posture other than bypassPermissions is set only on a deny-only run
  open_and_begin(proto::DecisionMode::ask);
  command(R"({"format":"metaharness.command/1","id":"p1","command":"permission.set","posture":"acceptEdits"})");
  feed(lines::control_ok(std::string(last_vendor().at("request_id").as_string())));
  ASSERT_TRUE(result_for("p1").outcome.is_ok());
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::hook_callback("hc-1", "toolu_1", "Bash", kBash));
  park();
  command(R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_1",)"
          R"("decision":{"decision":"deny","reason":"no"}})");
  auto args = core->resume_args();
  ASSERT_GE(args.size(), 4u);
  EXPECT_EQ((std::vector<std::string>{args[0], args[1], args[2], args[3]}),
            (std::vector<std::string>{"--resume", "sess-1", "--permission-mode", "acceptEdits"}));
  core->on_resumed(now);
  auto init = parse_object(lines::init());
  init["permissionMode"] = "default";
  feed(lines::line(init));
  std::vector<proto::ev::Warning> drifts;
  for (const auto& w : all<proto::ev::Warning>())
    if (w.code == "POSTURE_DRIFT") drifts.push_back(w);
  ASSERT_EQ(drifts.size(), 1u) << "the resumed process's mode is compared with the run's";
  ASSERT_TRUE(drifts[0].posture);
  EXPECT_EQ(drifts[0].posture->occasion, "resume");
  EXPECT_EQ(drifts[0].posture->asked.permission_mode, "acceptEdits");
  EXPECT_EQ(drifts[0].posture->reported.permission_mode, "default");
}

// Asked through the seam first: no such warning.
TEST_F(RunCorePark, AResumedCallAskedThroughTheSeamIsNotNamedUngoverned) {
  open_parking();
  park();
  command(R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_1",)"
          R"("decision":{"decision":"allow"}})");
  core->on_resumed(now);
  feed(lines::initialize_ok());
  feed(lines::hook_callback("hc-2", "toolu_1", "Bash", kBash));
  feed(lines::tool_result("toolu_1", "", false));
  EXPECT_EQ(warning_codes(), (std::vector<std::string>{"RUN_PARKED", "RUN_RESUMED"}));
}

// Without park_after_ms no park timer is ever set.
TEST_F(RunCorePark, WithoutParkAfterNoTimerIsSet) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::hook_callback("hc-1", "toolu_1", "Bash", kBash));
  EXPECT_FALSE(fx.park);
}

}  // namespace
}  // namespace mh::daemon
