// The run core, driven through the real Claude adapter session with the CLI's own record
// shapes: deterministic, no process, no clock.
#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

TEST_F(RunCoreTest, InitializeRegistersOneHookForEveryToolBeforeAnyTurn) {
  open(proto::DecisionMode::ask);
  ASSERT_EQ(fx.vendor.size(), 1u) << "nothing but initialize before the seam is confirmed";
  auto init = parse_object(fx.vendor[0]);
  auto& pre = init["request"].as_object()["hooks"].as_object()["PreToolUse"].as_array();
  ASSERT_EQ(pre.size(), 1u);
  EXPECT_EQ(pre[0].as_object().at("matcher"), "*");
  // The vendor's callback timeout is above the decision deadline: silence is denied by us.
  EXPECT_GT(pre[0].as_object().at("timeout").to_number<std::uint64_t>() * 1000, spec.decision_deadline_ms);
  feed(lines::initialize_ok());
  ASSERT_EQ(fx.vendor.size(), 2u);
  EXPECT_EQ(last_vendor()["type"], "user");
  EXPECT_EQ(core->phase(), RunCore::Phase::turn);
}

TEST_F(RunCoreTest, RefusedInitializeFailsTheRunRatherThanRunningUngoverned) {
  open(proto::DecisionMode::ask);
  feed(lines::control_error("mh-init", "nope"));
  EXPECT_TRUE(fx.terminated);
  EXPECT_EQ(only<proto::ev::Warning>().code, "RUN_FAILED");
  EXPECT_EQ(core->wind_up({}, now), proto::CloseReason::error);
}

TEST_F(RunCoreTest, FrameWithoutShellDeniesBashAtTheSeamAndPassesVendorDenialsThrough) {
  auto frame = frame_admitting({proto::OpKind::file_read});
  open_and_begin(proto::DecisionMode::frame, frame);
  auto started = only<proto::ev::SessionStarted>();
  EXPECT_EQ(started.harness_version, "2.1.197");
  EXPECT_EQ(started.transcript.path, "/runs/r-1/vendor-stdout.jsonl");
  EXPECT_EQ(only<proto::ev::TurnStarted>().frame_digest, frame.digest);

  feed(lines::tool_use("toolu_1", "Bash", kBash));
  auto requested = only<proto::ev::ToolRequested>();
  EXPECT_FALSE(requested.decision_required);
  EXPECT_EQ(requested.operations, std::vector<std::string>{"shell"});
  auto decided = only<proto::ev::ToolDecided>();
  EXPECT_EQ(decided.decided_by, proto::DecidedBy::frame);
  ASSERT_TRUE(std::holds_alternative<proto::decision::Deny>(decided.decision));
  EXPECT_NE(std::get<proto::decision::Deny>(decided.decision).reason.find("this step admits [\"file.read\"]"),
            std::string::npos);

  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", kBash));
  auto answer = decision_of(answer_for("hk-1")).as_object().at("hookSpecificOutput").as_object();
  EXPECT_EQ(answer.at("permissionDecision"), "deny");
  EXPECT_FALSE(answer.at("permissionDecisionReason").as_string().empty());

  feed(lines::tool_result("toolu_1", "denied", true));
  feed(lines::result(json::array{lines::denial("toolu_1", "Bash", kBash)}));
  EXPECT_TRUE(fx.stdin_closed) << "a run that is not held open ends at its first idle boundary";
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 0, 0}, now), proto::CloseReason::completed);
  auto ended = only<proto::ev::SessionEnded>();
  ASSERT_TRUE(ended.permission_denials);
  ASSERT_EQ(ended.permission_denials->size(), 1u);
  EXPECT_EQ((*ended.permission_denials)[0].tool_name, "Bash");
  EXPECT_EQ(ended.census.denied, 1u);
  EXPECT_EQ(ended.census.by_decider.at("frame"), 1u);
  EXPECT_EQ(names().back(), "session.ended");
}

TEST_F(RunCoreTest, NoFrameInForceAbstainsAndWarnsOnce) {
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::tool_use("toolu_2", "Read", json::object{{"file_path", "a.txt"}}));
  EXPECT_EQ(all<proto::ev::Warning>().size(), 1u);
  EXPECT_EQ(all<proto::ev::Warning>()[0].code, "NO_FRAME_IN_FORCE");
  for (const auto& d : all<proto::ev::ToolDecided>()) {
    EXPECT_TRUE(std::holds_alternative<proto::decision::Abstain>(d.decision));
    EXPECT_EQ(d.decided_by, proto::DecidedBy::adapter);
  }
  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", kBash));
  EXPECT_TRUE(decision_of(answer_for("hk-1")).as_object().empty()) << "abstain is an empty hook output";
  // The warning comes before the first call it concerns.
  auto n = names();
  EXPECT_LT(std::find(n.begin(), n.end(), "warning"), std::find(n.begin(), n.end(), "tool.requested"));
}

TEST_F(RunCoreTest, UncoveredToolIsDeniedByTheFrameWithAWarning) {
  open_and_begin(proto::DecisionMode::frame, frame_admitting({proto::OpKind::shell}));
  feed(lines::tool_use("toolu_1", "CronCreate", json::object{}));
  EXPECT_EQ(only<proto::ev::Warning>().code, "UNCOVERED_TOOL");
  EXPECT_TRUE(std::holds_alternative<proto::decision::Deny>(only<proto::ev::ToolDecided>().decision));
}

TEST_F(RunCoreTest, AskModeDeliversBeforeAnswersAreDueAndDecidesInAnyOrder) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::tool_use("toolu_2", "Write", json::object{{"file_path", "b.txt"}, {"content", "x"}}));
  feed(lines::tool_use("toolu_3", "Read", json::object{{"file_path", "c.txt"}}));
  auto requested = all<proto::ev::ToolRequested>();
  ASSERT_EQ(requested.size(), 3u);
  for (const auto& r : requested) {
    EXPECT_TRUE(r.decision_required);
    EXPECT_EQ(r.deadline_ms, 55'000u);
    EXPECT_EQ(r.seam, proto::Seam::hook);
  }
  EXPECT_EQ(requested[1].subjects, std::vector<std::string>{"file:b.txt"});
  EXPECT_EQ(fx.deadlines.size(), 3u);
  EXPECT_EQ(core->pending_count(), 3u);

  // Answers out of order; the first hook has not even asked yet (the decision is parked).
  now += 5ms;
  command(
      R"({"format":"metaharness.command/1","id":"c3","command":"tool.decide","call_id":"toolu_3","decision":{"decision":"allow"}})");
  command(
      R"({"format":"metaharness.command/1","id":"c1","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"deny","reason":"not now"}})",
      proto::PeerIdentity{1000, 4242});
  EXPECT_TRUE(result_for("c3").outcome.is_ok());
  EXPECT_TRUE(result_for("c1").outcome.is_ok());
  auto decided = all<proto::ev::ToolDecided>();
  ASSERT_EQ(decided.size(), 2u);
  EXPECT_EQ(decided[0].call_id, "toolu_3");
  EXPECT_EQ(decided[0].latency_ms, 5u);
  ASSERT_TRUE(decided[1].peer);
  EXPECT_EQ(decided[1].peer->pid, 4242);
  // tool.decided comes before the command.result of the tool.decide.
  auto n = names();
  EXPECT_EQ(n[n.size() - 2], "tool.decided");
  EXPECT_EQ(n.back(), "command.result");

  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", kBash));
  auto deny = decision_of(answer_for("hk-1")).as_object().at("hookSpecificOutput").as_object();
  EXPECT_EQ(deny.at("permissionDecision"), "deny");
  EXPECT_EQ(deny.at("permissionDecisionReason"), "not now");
  EXPECT_EQ(core->pending_count(), 1u);
  EXPECT_EQ(fx.deadlines.count("toolu_1"), 0u) << "a decided call's deadline is disarmed";
}

TEST_F(RunCoreTest, ReplaceCarriesTheNewInputAndANonObjectReplaceIsMalformed) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", kBash));
  command(
      R"({"format":"metaharness.command/1","id":"bad","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"replace","input":"echo hi"}})");
  EXPECT_EQ(result_for("bad").outcome.refusal->code, proto::RefusalCode::MALFORMED);
  command(
      R"({"format":"metaharness.command/1","id":"ok","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"replace","input":{"command":"touch other"}}})");
  EXPECT_TRUE(result_for("ok").outcome.is_ok());
  auto out = decision_of(answer_for("hk-1")).as_object().at("hookSpecificOutput").as_object();
  EXPECT_EQ(out.at("permissionDecision"), "allow");
  EXPECT_EQ(out.at("updatedInput").as_object().at("command"), "touch other");
  EXPECT_EQ(core->census().replaced, 1u);
}

TEST_F(RunCoreTest, DeadlineDeniesThenLateUnknownAndMalformedCommandsAreEachAnsweredOnce) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", kBash));
  ASSERT_EQ(fx.deadlines.count("toolu_1"), 1u);
  EXPECT_EQ(fx.deadlines["toolu_1"], now + 55'000ms);
  now += 55'000ms;
  core->on_deadline("toolu_1", now);
  auto decided = only<proto::ev::ToolDecided>();
  EXPECT_EQ(decided.decided_by, proto::DecidedBy::deadline);
  EXPECT_EQ(decided.latency_ms, 55'000u);
  EXPECT_EQ(decision_of(answer_for("hk-1")).as_object().at("hookSpecificOutput").as_object().at("permissionDecision"),
            "deny");
  EXPECT_TRUE(all<proto::ev::Warning>().empty()) << "a deadline deny is not a warning";

  command(
      R"({"format":"metaharness.command/1","id":"late","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"allow"}})");
  command(
      R"({"format":"metaharness.command/1","id":"who","command":"tool.decide","call_id":"toolu_nope","decision":{"decision":"allow"}})");
  command(
      R"({"format":"metaharness.command/1","id":"blank","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"deny","reason":"  "}})");
  command(R"(this is not json)");
  command(R"({"format":"metaharness.command/1","id":"huh","command":"tool.explode"})");
  EXPECT_EQ(result_for("late").outcome.refusal->code, proto::RefusalCode::TOO_LATE);
  EXPECT_EQ(result_for("who").outcome.refusal->code, proto::RefusalCode::UNKNOWN_CALL);
  EXPECT_EQ(result_for("blank").outcome.refusal->code, proto::RefusalCode::MALFORMED);
  EXPECT_EQ(result_for("-").outcome.refusal->code, proto::RefusalCode::MALFORMED);
  EXPECT_EQ(result_for("huh").outcome.refusal->code, proto::RefusalCode::MALFORMED);
  EXPECT_EQ(all<proto::ev::CommandResult>().size(), 5u) << "exactly one result per command";
}

TEST_F(RunCoreTest, InterruptAbandonsPendingCallsThenHoldsTheSessionForTheNextMessage) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", kBash));
  command(R"({"format":"metaharness.command/1","id":"i1","command":"interrupt","reason":"stop"})");
  auto decided = only<proto::ev::ToolDecided>();
  EXPECT_EQ(decided.decided_by, proto::DecidedBy::adapter);
  EXPECT_EQ(only<proto::ev::Warning>().code, "PENDING_CALL_ABANDONED");
  // The deny reached the hook before the interrupt did.
  auto deny_at = fx.vendor.size() - 2;
  EXPECT_EQ(parse_object(fx.vendor[deny_at])["type"], "control_response");
  auto interrupt = last_vendor();
  EXPECT_EQ(interrupt["request"].as_object()["subtype"], "interrupt");
  std::string control_id(interrupt["request_id"].as_string());
  feed(lines::control_ok(control_id));
  EXPECT_TRUE(result_for("i1").outcome.is_ok());
  feed(lines::result(json::array{}, true, "error_during_execution", "aborted_tools"));
  EXPECT_FALSE(fx.stdin_closed) << "an interrupted session stays usable";
  EXPECT_EQ(core->phase(), RunCore::Phase::idle);

  command(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"try again"})");
  EXPECT_TRUE(result_for("m1").outcome.is_ok());
  EXPECT_FALSE(result_for("m1").outcome.applies_at) << "between turns it applies at once";
  EXPECT_EQ(last_vendor()["type"], "user");
  EXPECT_EQ(core->phase(), RunCore::Phase::turn);
  EXPECT_EQ(only<proto::ev::Injection>().origin, "message.inject");
}

TEST_F(RunCoreTest, InterruptWithNoTurnRunningIsTooLate) {
  open_and_begin(proto::DecisionMode::ask, std::nullopt, /*keep_open=*/true);
  feed(lines::result());
  ASSERT_EQ(core->phase(), RunCore::Phase::idle);
  command(R"({"format":"metaharness.command/1","id":"i1","command":"interrupt"})");
  EXPECT_EQ(result_for("i1").outcome.refusal->code, proto::RefusalCode::TOO_LATE);
}

TEST_F(RunCoreTest, MessageInjectedMidTurnWaitsForTheBoundaryAndSaysSo) {
  open_and_begin(proto::DecisionMode::observe);
  command(R"({"format":"metaharness.command/1","id":"m1","command":"message.inject","text":"and then this"})");
  EXPECT_EQ(result_for("m1").outcome.applies_at, "the next turn boundary");
  std::size_t writes = fx.vendor.size();
  feed(lines::result());
  ASSERT_EQ(fx.vendor.size(), writes + 1);
  EXPECT_EQ(last_vendor()["message"].as_object()["content"].as_array()[0].as_object()["text"], "and then this");
  EXPECT_FALSE(fx.stdin_closed);
}

TEST_F(RunCoreTest, HaltAbandonsPendingThenEndsTheSessionAndClosesSteerHalt) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  command(R"({"format":"metaharness.command/1","id":"h","command":"halt","reason":"enough"})");
  EXPECT_TRUE(fx.terminated);
  auto n = names();
  // deny, warning, then the halt's own result.
  ASSERT_GE(n.size(), 3u);
  EXPECT_EQ(n[n.size() - 3], "tool.decided");
  EXPECT_EQ(n[n.size() - 2], "warning");
  EXPECT_EQ(n.back(), "command.result");
  bool ended_session = false;
  for (const auto& w : fx.vendor)
    if (parse_object(w)["request"].is_object() && parse_object(w)["request"].as_object()["subtype"] == "end_session")
      ended_session = true;
  EXPECT_TRUE(ended_session);
  EXPECT_EQ(core->wind_up({proto::ProcessKind::signaled, 0, 9}, now), proto::CloseReason::steer_halt);
}

TEST_F(RunCoreTest, SteerIsRefusedByNameOnClaude) {
  open_and_begin(proto::DecisionMode::ask);
  command(R"({"format":"metaharness.command/1","id":"s","command":"steer","text":"faster"})");
  auto r = result_for("s");
  EXPECT_EQ(r.outcome.refusal->code, proto::RefusalCode::UNSUPPORTED_CONTROL);
  EXPECT_NE(r.outcome.refusal->reason.find("steer"), std::string::npos);
}

TEST_F(RunCoreTest, PermissionSetCarriesTheVendorsRefusalInItsOwnWords) {
  spec.deny_only = true;  // without it, plan is refused SHADOWED before it reaches the vendor
  open_and_begin(proto::DecisionMode::ask);
  command(R"({"format":"metaharness.command/1","id":"p0","command":"permission.set","posture":"yolo"})");
  EXPECT_EQ(result_for("p0").outcome.refusal->code, proto::RefusalCode::MALFORMED);
  command(R"({"format":"metaharness.command/1","id":"p1","command":"permission.set","posture":"bypassPermissions"})");
  std::string id(last_vendor()["request_id"].as_string());
  feed(lines::control_error(id,
                            "Cannot set permission mode to bypassPermissions because the session was not launched with "
                            "--dangerously-skip-permissions"));
  auto refused = result_for("p1").outcome.refusal;
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->reason.find("--dangerously-skip-permissions"), std::string::npos);
  command(R"({"format":"metaharness.command/1","id":"p2","command":"permission.set","posture":"plan"})");
  feed(lines::control_ok(std::string(last_vendor()["request_id"].as_string()), json::object{{"mode", "plan"}}));
  EXPECT_TRUE(result_for("p2").outcome.is_ok());
}

TEST_F(RunCoreTest, FrameSetTakesEffectAtTheNextTurnAndIsShownFirst) {
  open_and_begin(proto::DecisionMode::frame, frame_admitting({proto::OpKind::shell}), /*keep_open=*/true);
  auto narrower = frame_admitting({proto::OpKind::file_read});
  std::string cmd = R"({"format":"metaharness.command/1","id":"f","command":"frame.set","frame":)" +
                    proto::canonical_json(proto::frame_to_json(narrower, true)) + "}";
  command(cmd);
  EXPECT_EQ(result_for("f").outcome.applies_at, "the next turn boundary");
  // Still this turn: the old frame (shell admitted) decides.
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  EXPECT_TRUE(std::holds_alternative<proto::decision::Allow>(all<proto::ev::ToolDecided>().back().decision));
  feed(lines::result());
  command(R"({"format":"metaharness.command/1","id":"m","command":"message.inject","text":"next"})");
  auto injections = all<proto::ev::Injection>();
  ASSERT_EQ(injections.size(), 2u);
  EXPECT_EQ(injections[0].origin, "message.inject");
  EXPECT_EQ(injections[1].origin, "frame");
  EXPECT_NE(injections[1].text.find("Strictly only these operations are admitted here:"), std::string::npos);
  auto content = last_vendor()["message"].as_object()["content"].as_array();
  ASSERT_EQ(content.size(), 2u);
  EXPECT_NE(std::string(content[0].as_object().at("text").as_string()).find("Frame " + narrower.digest),
            std::string::npos);
  feed(lines::init());
  EXPECT_EQ(all<proto::ev::TurnStarted>().back().frame_digest, narrower.digest);
  feed(lines::tool_use("toolu_2", "Bash", kBash));
  EXPECT_TRUE(std::holds_alternative<proto::decision::Deny>(all<proto::ev::ToolDecided>().back().decision));
}

TEST_F(RunCoreTest, AHookAskingAboutADifferentInputIsDeniedAsMutated) {
  open_and_begin(proto::DecisionMode::observe);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", json::object{{"command", "rm -rf /"}}));
  EXPECT_EQ(all<proto::ev::Warning>().back().code, "REQUEST_MUTATED");
  EXPECT_TRUE(std::holds_alternative<proto::decision::Deny>(all<proto::ev::ToolDecided>().back().decision));
  EXPECT_EQ(decision_of(answer_for("hk-1")).as_object().at("hookSpecificOutput").as_object().at("permissionDecision"),
            "deny");
}

TEST_F(RunCoreTest, ClaudeResolvingARelativePathInTheHookIsTheSameRequestNotAMutation) {
  open_and_begin(proto::DecisionMode::observe);
  feed(lines::tool_use("toolu_1", "Read", json::object{{"file_path", "src/../README.txt"}}));
  feed(lines::hook_callback("hk-1", "toolu_1", "Read", json::object{{"file_path", "/scratch/work/README.txt"}}));
  EXPECT_TRUE(all<proto::ev::Warning>().empty()) << "the vendor's own normal form is not a mutation";
  EXPECT_EQ(decision_of(answer_for("hk-1")).as_object().at("hookSpecificOutput").as_object().at("permissionDecision"),
            "allow");
  // But a different file is a different request.
  feed(lines::tool_use("toolu_2", "Read", json::object{{"file_path", "notes.txt"}}));
  feed(lines::hook_callback("hk-2", "toolu_2", "Read", json::object{{"file_path", "/etc/shadow"}}));
  EXPECT_EQ(all<proto::ev::Warning>().back().code, "REQUEST_MUTATED");
}

TEST_F(RunCoreTest, ObserveAllowsAndRecordsEverything) {
  open_and_begin(proto::DecisionMode::observe);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  auto d = only<proto::ev::ToolDecided>();
  EXPECT_EQ(d.decided_by, proto::DecidedBy::observe);
  EXPECT_FALSE(d.latency_ms);
  EXPECT_TRUE(std::holds_alternative<proto::decision::Allow>(d.decision));
}

TEST_F(RunCoreTest, AuthExpiredPrecedesTheRecordsOwnEventsInTheVendorsWords) {
  open_and_begin(proto::DecisionMode::frame);
  json::object synthetic{
      {"type", "assistant"},
      {"message",
       json::object{{"id", "x"},
                    {"model", "<synthetic>"},
                    {"role", "assistant"},
                    {"content", json::array{json::object{
                                    {"type", "text"}, {"text", "Failed to authenticate. API Error: 401 bad token"}}}}}},
      {"error", "authentication_failed"}};
  feed(lines::line(synthetic));
  auto n = names();
  auto expired = only<proto::ev::AuthExpired>();
  EXPECT_EQ(expired.detail, "Failed to authenticate. API Error: 401 bad token");
  EXPECT_EQ(expired.source_line, line_no);
  EXPECT_EQ(n[n.size() - 2], "auth.expired");
  EXPECT_EQ(n.back(), "text");
  feed(lines::result(json::array{}, true));
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 1, 0}, now), proto::CloseReason::error);
  EXPECT_EQ(names().back(), "session.ended");
}

TEST_F(RunCoreTest, AnUnknownRecordBecomesOpaqueWithItsDigestAndLine) {
  open_and_begin(proto::DecisionMode::frame);
  std::string record = R"({"type":"hologram","subtype":"shimmer","payload":[1,2,3]})";
  feed(record);
  auto opaque = only<proto::ev::Opaque>();
  EXPECT_EQ(opaque.vendor_type, "hologram");
  EXPECT_EQ(opaque.vendor_subtype, "shimmer");
  EXPECT_EQ(opaque.digest, proto::sha256_hex(record));
  EXPECT_EQ(opaque.source_line, line_no);
  feed("not json at all");
  EXPECT_EQ(all<proto::ev::Opaque>().back().digest, proto::sha256_hex("not json at all"));
  EXPECT_FALSE(all<proto::ev::Opaque>().back().vendor_type);
}

TEST_F(RunCoreTest, AVendorThatDiesMidTurnAbandonsPendingCallsAndClosesError) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  EXPECT_EQ(core->wind_up({proto::ProcessKind::signaled, 0, 9}, now), proto::CloseReason::error);
  auto d = only<proto::ev::ToolDecided>();
  EXPECT_NE(std::get<proto::decision::Deny>(d.decision).reason.find("the stream ended"), std::string::npos);
  auto warnings = all<proto::ev::Warning>();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].code, "VENDOR_EXITED") << "first why the run is ending, then what that abandons";
  EXPECT_EQ(warnings[1].code, "PENDING_CALL_ABANDONED");
}

TEST_F(RunCoreTest, TheVendorWithdrawingAHookAbandonsTheCall) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  feed(lines::hook_callback("hk-1", "toolu_1", "Bash", kBash));
  feed(lines::cancel("hk-1"));
  EXPECT_EQ(only<proto::ev::ToolDecided>().decided_by, proto::DecidedBy::adapter);
  std::size_t writes = fx.vendor.size();
  command(
      R"({"format":"metaharness.command/1","id":"late","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"allow"}})");
  EXPECT_EQ(result_for("late").outcome.refusal->code, proto::RefusalCode::TOO_LATE);
  EXPECT_EQ(fx.vendor.size(), writes) << "nothing is written to a hook the vendor withdrew";
}

TEST_F(RunCoreTest, RunStartRefusalNamesEveryNeededCommandTheAdapterCannotHonour) {
  spec.decisions = proto::DecisionMode::ask;
  spec.requires_commands = {proto::CommandName::steer, proto::CommandName::message_inject};
  auto refused = adapters::refuse_unhonoured_commands(spec, adapters::claude::capabilities());
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].id, "start/steer");
  EXPECT_EQ(refused[0].outcome.refusal->code, proto::RefusalCode::UNSUPPORTED_CONTROL);
}

TEST_F(RunCoreTest, SubjectGlobsKeepStarWithinASegment) {
  EXPECT_TRUE(subject_glob_matches("file:src/*.rs", "file:src/lib.rs"));
  EXPECT_FALSE(subject_glob_matches("file:src/*.rs", "file:src/a/lib.rs"));
  EXPECT_TRUE(subject_glob_matches("file:src/**", "file:src/a/b/lib.rs"));
  EXPECT_TRUE(subject_glob_matches("**", "proc:/usr/bin/python3"));
  EXPECT_FALSE(subject_glob_matches("file:docs/**", "file:src/lib.rs"));
}

}  // namespace
}  // namespace mh::daemon
