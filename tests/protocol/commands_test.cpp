// The 7 commands and the 4 decisions: exact bytes, read back and re-serialized identically;
// every refusal a command line can earn, with the `id` kept whenever one was readable; and
// command.result outcomes with each refusal code.
#include <gtest/gtest.h>

#include <set>

#include "golden_frame.hpp"
#include "protocol/events.hpp"
#include "protocol/reader.hpp"

namespace mh::protocol {
namespace {

constexpr std::string_view kHead = R"({"format":"metaharness.command/1","id":"c1","command":)";

std::string command_line(std::string_view rest) {
  return std::string(kHead) + std::string(rest);
}

Command read_ok(std::string_view line) {
  auto read = read_command_line(line);
  EXPECT_TRUE(read) << (read ? "" : read.error().message) << "\n" << line;
  return read ? *read : Command{};
}

LineRefusal read_refused(std::string_view line) {
  auto read = read_command_line(line);
  EXPECT_FALSE(read) << "accepted: " << line;
  return read ? LineRefusal{LineRefusalKind::TooLong, "(accepted)", std::nullopt} : read.error();
}

// ---------------------------------------------------------------------------------------------
// Round trip of every command in its exact wire form
// ---------------------------------------------------------------------------------------------

struct CommandCase {
  std::string label;
  std::string line;
};

class CommandRoundTrip : public testing::TestWithParam<CommandCase> {};

TEST_P(CommandRoundTrip, ReadsAndReserializesToTheSameBytes) {
  Command c = read_ok(GetParam().line);
  EXPECT_EQ(serialize(c), GetParam().line);
}

std::vector<CommandCase> command_cases() {
  return {
      {"tool_decide_allow", command_line(R"("tool.decide","call_id":"toolu_01","decision":{"decision":"allow"}})")},
      {"tool_decide_deny", command_line(R"("tool.decide","call_id":"toolu_01","decision":{"decision":"deny",)"
                                        R"("reason":"this step admits no shell"}})")},
      {"tool_decide_replace", command_line(R"("tool.decide","call_id":"toolu_01","decision":{"decision":"replace",)"
                                           R"("input":{"command":"ls","timeout":1.5}}})")},
      {"tool_decide_replace_null_input",
       command_line(R"("tool.decide","call_id":"toolu_01","decision":{"decision":"replace","input":null}})")},
      {"tool_decide_abstain", command_line(R"("tool.decide","call_id":"toolu_01","decision":{"decision":"abstain"}})")},
      {"frame_set", command_line(R"("frame.set","frame":)" + std::string(golden::kSealedFrameObject) + "}")},
      {"message_inject", command_line(R"("message.inject","text":"remember the tests\n"})")},
      {"steer", command_line(R"("steer","text":"stop editing"})")},
      {"permission_set", command_line(R"("permission.set","posture":"plan"})")},
      {"interrupt_with_reason", command_line(R"("interrupt","reason":"operator asked"})")},
      {"interrupt_null_reason", command_line(R"("interrupt","reason":null})")},
      {"halt_with_reason", command_line(R"("halt","reason":"budget"})")},
      {"halt_null_reason", command_line(R"("halt","reason":null})")},
  };
}

INSTANTIATE_TEST_SUITE_P(AllSeven, CommandRoundTrip, testing::ValuesIn(command_cases()),
                         [](const auto& info) { return info.param.label; });

TEST(CommandCases, CoverEveryCommandOfTheVocabulary) {
  std::set<CommandName> covered;
  for (const auto& c : command_cases())
    covered.insert(command_name(read_ok(c.line).payload));
  EXPECT_EQ(covered.size(), kCommandCount);
}

TEST(CommandRead, TypedFieldsAreWhatTheLineSaid) {
  Command c =
      read_ok(command_line(R"("tool.decide","call_id":"toolu_01","decision":{"decision":"deny","reason":"no"}})"));
  EXPECT_EQ(c.id, "c1");
  const auto& decide = std::get<cmd::ToolDecide>(c.payload);
  EXPECT_EQ(decide.call_id, "toolu_01");
  EXPECT_EQ(std::get<decision::Deny>(decide.decision).reason, "no");

  c = read_ok(command_line(R"("frame.set","frame":)" + std::string(golden::kSealedFrameObject) + "}"));
  EXPECT_EQ(std::get<cmd::FrameSet>(c.payload).frame.digest, golden::kFrameDigest);

  c = read_ok(command_line(R"("halt"})"));
  EXPECT_FALSE(std::get<cmd::Halt>(c.payload).reason.has_value());
}

TEST(CommandRead, UnknownExtraFieldsAreIgnored) {
  Command c = read_ok(command_line(R"("steer","text":"go","priority":"high","meta":{"a":1}})"));
  EXPECT_EQ(serialize(c), command_line(R"("steer","text":"go"})"));
}

TEST(CommandNames, AreTheSevenInVocabularyOrder) {
  const std::array<std::string_view, 7> expected = {
      "tool.decide", "frame.set", "message.inject", "steer", "permission.set", "interrupt", "halt"};
  EXPECT_EQ(EnumNames<CommandName>::names, expected);
}

// ---------------------------------------------------------------------------------------------
// Decisions
// ---------------------------------------------------------------------------------------------

TEST(Decision, BareAllowAndAbstainAreAcceptedAsTheSeedsWriteThemAndWrittenAsObjects) {
  Command allow = read_ok(command_line(R"("tool.decide","call_id":"x","decision":"allow"})"));
  EXPECT_TRUE(std::holds_alternative<decision::Allow>(std::get<cmd::ToolDecide>(allow.payload).decision));
  EXPECT_EQ(serialize(allow), command_line(R"("tool.decide","call_id":"x","decision":{"decision":"allow"}})"));
  Command abstain = read_ok(command_line(R"("tool.decide","call_id":"x","decision":"abstain"})"));
  EXPECT_TRUE(std::holds_alternative<decision::Abstain>(std::get<cmd::ToolDecide>(abstain.payload).decision));
}

TEST(Decision, BareDenyIsRefusedBecauseItCarriesNoReason) {
  LineRefusal r = read_refused(command_line(R"("tool.decide","call_id":"x","decision":"deny"})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_NE(r.message.find("reason"), std::string::npos) << r.message;
  EXPECT_EQ(r.id, "c1");
}

TEST(Decision, BareReplaceIsRefusedBecauseItCarriesNoInput) {
  LineRefusal r = read_refused(command_line(R"("tool.decide","call_id":"x","decision":"replace"})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_NE(r.message.find("input"), std::string::npos) << r.message;
}

TEST(Decision, UnknownDecisionIsRefusedNamingTheVocabulary) {
  for (std::string_view d : {R"("approve")", R"({"decision":"approve"})"}) {
    LineRefusal r = read_refused(command_line(R"("tool.decide","call_id":"x","decision":)" + std::string(d) + "}"));
    EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
    EXPECT_NE(r.message.find("approve"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find("allow, deny, replace, abstain"), std::string::npos) << r.message;
  }
}

TEST(Decision, DecisionOfTheWrongShapeIsMalformed) {
  for (std::string_view d : {"5", "null", "[]", R"({"reason":"x"})", R"({"decision":7})"}) {
    LineRefusal r = read_refused(command_line(R"("tool.decide","call_id":"x","decision":)" + std::string(d) + "}"));
    EXPECT_EQ(r.kind, LineRefusalKind::Malformed) << d;
  }
}

TEST(Decision, DenyWithAnEmptyOrBlankReasonIsMalformed) {
  for (std::string_view reason : {R"("")", R"("   ")", R"(" \t\n\r ")",
                                  // Unicode whitespace trims to nothing too: NBSP, em space, ideographic space
                                  R"("\u00a0\u2003\u3000")", R"(null)", R"(42)"}) {
    LineRefusal r = read_refused(command_line(R"("tool.decide","call_id":"x","decision":{"decision":"deny","reason":)" +
                                              std::string(reason) + "}}"));
    EXPECT_EQ(r.kind, LineRefusalKind::Malformed) << reason;
    EXPECT_NE(r.message.find("non-empty reason"), std::string::npos) << r.message;
    EXPECT_EQ(r.id, "c1");
  }
  LineRefusal missing = read_refused(command_line(R"("tool.decide","call_id":"x","decision":{"decision":"deny"}})"));
  EXPECT_EQ(missing.kind, LineRefusalKind::Malformed);
}

TEST(Decision, DenyWithAReasonThatHasTextAroundBlanksIsAccepted) {
  Command c =
      read_ok(command_line(R"("tool.decide","call_id":"x","decision":{"decision":"deny","reason":"\u00a0no\u00a0"}})"));
  EXPECT_EQ(std::get<decision::Deny>(std::get<cmd::ToolDecide>(c.payload).decision).reason, "\u00a0no\u00a0");
}

TEST(Decision, ReplaceWithoutInputIsMalformed) {
  LineRefusal r = read_refused(command_line(R"("tool.decide","call_id":"x","decision":{"decision":"replace"}})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_NE(r.message.find("\"input\""), std::string::npos) << r.message;
}

TEST(Decision, WriteDecisionNamesEachVariant) {
  for (auto [d, expected] : std::vector<std::pair<Decision, std::string_view>>{
           {decision::Allow{}, R"({"decision":"allow"})"},
           {decision::Deny{"why"}, R"({"decision":"deny","reason":"why"})"},
           {decision::Replace{json::object{{"b", 1}, {"a", 2}}}, R"({"decision":"replace","input":{"a":2,"b":1}})"},
           {decision::Abstain{}, R"({"decision":"abstain"})"}}) {
    std::string out;
    JsonWriter w(out);
    write_decision(w, d);
    EXPECT_EQ(out, expected);
    std::string error;
    auto back = read_decision(*parse_json(out), error);
    ASSERT_TRUE(back) << error;
    EXPECT_EQ(decision_name(*back), decision_name(d));
  }
}

// ---------------------------------------------------------------------------------------------
// Command refusals keep the id when one was readable
// ---------------------------------------------------------------------------------------------

TEST(CommandRefusal, MissingRequiredFieldIsMalformedAndKeepsTheId) {
  struct Case {
    std::string_view rest;
    std::string_view names;
  };
  for (auto [rest, names] : std::vector<Case>{{R"("tool.decide","decision":"allow"})", "call_id"},
                                              {R"("tool.decide","call_id":"x"})", "decision"},
                                              {R"("frame.set"})", "frame"},
                                              {R"("message.inject"})", "text"},
                                              {R"("steer","text":7})", "text"},
                                              {R"("permission.set"})", "posture"},
                                              {R"("permission.set","posture":""})", "posture"},
                                              {R"("interrupt","reason":false})", "reason"},
                                              {R"("halt","reason":[]})", "reason"}}) {
    LineRefusal r = read_refused(command_line(rest));
    EXPECT_EQ(r.kind, LineRefusalKind::Malformed) << rest;
    EXPECT_NE(r.message.find(names), std::string::npos) << r.message;
    EXPECT_EQ(r.id, "c1") << rest;
  }
}

TEST(CommandRefusal, MalformedNamesTheCommandRead) {
  LineRefusal r = read_refused(command_line(R"("message.inject","text":{"a":1}})"));
  EXPECT_EQ(r.message, R"(malformed message.inject: field "text" is an object, expected a string)");
}

TEST(CommandRefusal, UnknownCommandNamesTheVocabularyAndKeepsTheId) {
  LineRefusal r = read_refused(command_line(R"("tool.approve","call_id":"x"})"));
  EXPECT_EQ(r.kind, LineRefusalKind::UnknownName);
  EXPECT_EQ(r.id, "c1");
  EXPECT_EQ(r.message,
            "unknown command \"tool.approve\"; the vocabulary is tool.decide, frame.set, message.inject, "
            "steer, permission.set, interrupt, halt");
}

TEST(CommandRefusal, MissingCommandNameIsMalformedAndKeepsTheId) {
  LineRefusal r = read_refused(R"({"format":"metaharness.command/1","id":"c9"})");
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_EQ(r.id, "c9");
  EXPECT_NE(r.message.find("\"command\""), std::string::npos) << r.message;
}

TEST(CommandRefusal, UnknownOrMissingFormatKeepsTheId) {
  LineRefusal wrong = read_refused(R"({"format":"metaharness.command/2","id":"c7","command":"halt"})");
  EXPECT_EQ(wrong.kind, LineRefusalKind::UnknownFormat);
  EXPECT_EQ(wrong.id, "c7");
  EXPECT_NE(wrong.message.find("metaharness.command/2"), std::string::npos) << wrong.message;
  LineRefusal none = read_refused(R"({"id":"c8","command":"halt"})");
  EXPECT_EQ(none.kind, LineRefusalKind::UnknownFormat);
  EXPECT_EQ(none.id, "c8");
  EXPECT_EQ(none.message, "no format tag, expected \"metaharness.command/1\"");
}

TEST(CommandRefusal, AnEventLineOnTheCommandChannelIsAnUnknownFormat) {
  LineRefusal r = read_refused(R"({"format":"metaharness.event/1","seq":1,"run":"r","event":"text","text":"x"})");
  EXPECT_EQ(r.kind, LineRefusalKind::UnknownFormat);
  EXPECT_NE(r.message.find("metaharness.event/1"), std::string::npos) << r.message;
}

TEST(CommandRefusal, MissingOrNonStringIdIsMalformedWithNoId) {
  LineRefusal missing = read_refused(R"({"format":"metaharness.command/1","command":"halt"})");
  EXPECT_EQ(missing.kind, LineRefusalKind::Malformed);
  EXPECT_FALSE(missing.id.has_value());
  EXPECT_EQ(missing.message, R"(malformed halt: missing required field "id")");
  LineRefusal number = read_refused(R"({"format":"metaharness.command/1","id":5,"command":"halt"})");
  EXPECT_EQ(number.kind, LineRefusalKind::Malformed);
  EXPECT_FALSE(number.id.has_value());
  EXPECT_NE(number.message.find("the number 5"), std::string::npos) << number.message;
}

TEST(CommandRefusal, NotAnObjectHasNoId) {
  for (std::string_view line : {R"({"format":"metaharness.command/1","id":"c1")", R"(["c1"])", "7", ""}) {
    LineRefusal r = read_refused(line);
    EXPECT_EQ(r.kind, LineRefusalKind::NotAnObject) << line;
    EXPECT_FALSE(r.id.has_value());
    EXPECT_EQ(r.message.rfind("not a JSON object", 0), 0u) << r.message;
  }
}

// ---------------------------------------------------------------------------------------------
// frame.set: the embedded frame must be sealed and unedited
// ---------------------------------------------------------------------------------------------

TEST(FrameSet, AFrameEditedAfterSealingIsMalformed) {
  std::string edited(golden::kSealedFrameObject);
  edited.replace(edited.find(R"({"op":"dir.list"},)"), 18, "");  // drop an operation, keep the digest
  LineRefusal r = read_refused(command_line(R"("frame.set","frame":)" + edited + "}"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_EQ(r.id, "c1");
  EXPECT_NE(r.message.find("DigestMismatch"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find("edited after sealing"), std::string::npos) << r.message;
  EXPECT_NE(r.message.find(golden::kFrameDigest), std::string::npos) << r.message;
}

TEST(FrameSet, AnUnsealedFrameIsMalformed) {
  std::string unsealed = "{" + std::string(golden::kCanonicalFrame.substr(1));
  LineRefusal r = read_refused(command_line(R"("frame.set","frame":)" + unsealed + "}"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_NE(r.message.find("never sealed"), std::string::npos) << r.message;
}

TEST(FrameSet, AFrameThatIsNotAFrameIsMalformed) {
  for (std::string_view frame : {R"("frame.json")", R"({"format":"metaharness.frame/2"})", R"({"workflow":{}})"}) {
    LineRefusal r = read_refused(command_line(R"("frame.set","frame":)" + std::string(frame) + "}"));
    EXPECT_EQ(r.kind, LineRefusalKind::Malformed) << frame;
    EXPECT_EQ(r.id, "c1");
  }
}

// ---------------------------------------------------------------------------------------------
// command.result outcomes
// ---------------------------------------------------------------------------------------------

std::string result_line(std::string_view outcome) {
  return R"({"format":"metaharness.event/1","seq":3,"run":"r-1","event":"command.result","id":"c1","outcome":)" +
         std::string(outcome) + "}";
}

TEST(CommandOutcome, OkWithNullAndWithAStringAppliesAt) {
  for (std::string_view outcome :
       {R"({"result":"ok","applies_at":null})", R"({"result":"ok","applies_at":"the next turn or step boundary"})"}) {
    auto read = read_event_line(result_line(outcome));
    ASSERT_TRUE(read) << read.error().message;
    EXPECT_TRUE(std::get<ev::CommandResult>(read->payload).outcome.is_ok());
    EXPECT_EQ(serialize(*read), result_line(outcome));
  }
}

class RefusedOutcome : public testing::TestWithParam<RefusalCode> {};

TEST_P(RefusedOutcome, RoundTripsWithItsCodeAndReason) {
  ev::CommandResult result{"start/tool.decide",
                           CommandOutcome::refused(GetParam(), "the claude adapter cannot honour it")};
  Event e{3, "r-1", std::nullopt, result};
  std::string line = serialize(e);
  EXPECT_NE(line.find(R"("outcome":{"result":"refused","refused":{"code":")" + std::string(to_string(GetParam())) +
                      R"(","reason":"the claude adapter cannot honour it"}})"),
            std::string::npos)
      << line;
  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  const auto& outcome = std::get<ev::CommandResult>(read->payload).outcome;
  ASSERT_FALSE(outcome.is_ok());
  EXPECT_EQ(outcome.refusal->code, GetParam());
  EXPECT_EQ(serialize(*read), line);
}

INSTANTIATE_TEST_SUITE_P(AllFiveCodes, RefusedOutcome,
                         testing::Values(RefusalCode::UNSUPPORTED_CONTROL, RefusalCode::UNKNOWN_CALL,
                                         RefusalCode::TOO_LATE, RefusalCode::MALFORMED, RefusalCode::SHADOWED),
                         [](const auto& info) { return std::string(to_string(info.param)); });

TEST(CommandOutcome, UnknownCodeOrResultIsMalformed) {
  auto bad_code = read_event_line(result_line(R"({"result":"refused","refused":{"code":"NOPE","reason":"x"}})"));
  ASSERT_FALSE(bad_code);
  EXPECT_EQ(bad_code.error().kind, LineRefusalKind::Malformed);
  EXPECT_NE(bad_code.error().message.find("UNSUPPORTED_CONTROL, UNKNOWN_CALL, TOO_LATE, MALFORMED or SHADOWED"),
            std::string::npos)
      << bad_code.error().message;
  auto bad_result = read_event_line(result_line(R"({"result":"maybe"})"));
  ASSERT_FALSE(bad_result);
  EXPECT_EQ(bad_result.error().kind, LineRefusalKind::Malformed);
  // The human text key is `reason`, not `message`.
  auto message_key =
      read_event_line(result_line(R"({"result":"refused","refused":{"code":"TOO_LATE","message":"x"}})"));
  ASSERT_FALSE(message_key);
  EXPECT_NE(message_key.error().message.find("\"reason\""), std::string::npos);
}

TEST(CommandOutcome, AnUnreadableCommandIsAnsweredMalformedInTheRefusalsOwnWords) {
  LineRefusal r = read_refused(command_line(R"("tool.decide","call_id":"x","decision":"deny"})"));
  CommandOutcome outcome = outcome_for(r);
  ASSERT_FALSE(outcome.is_ok());
  EXPECT_EQ(outcome.refusal->code, RefusalCode::MALFORMED);
  EXPECT_EQ(outcome.refusal->reason, "Malformed: " + r.message);
}

TEST(CommandOutcome, AnswerToALineThatIsNotUtf8IsItselfAReadableLine) {
  // The refusal quotes the line it could not read; the answer must still be valid JSON.
  LineRefusal r = read_refused("{\"format\":\"metaharness.command/1\",\"id\":\"\xff\xfe\"}");
  EXPECT_EQ(r.kind, LineRefusalKind::NotAnObject);
  Event answer{1, "r-1", std::nullopt, ev::CommandResult{r.id.value_or("-"), outcome_for(r)}};
  std::string line = serialize(answer);
  auto back = read_event_line(line);
  ASSERT_TRUE(back) << back.error().message << "\n" << line;
  EXPECT_EQ(serialize(*back), line);
}

}  // namespace
}  // namespace mh::protocol
