// Reader rules for event lines (§1.1): every refusal kind, each with a reason that names what
// was read, and the line-length refusal.
#include "protocol/reader.hpp"

#include <gtest/gtest.h>

namespace mh::protocol {
namespace {

constexpr std::string_view kEnvelope = R"({"format":"metaharness.event/1","seq":1,"run":"r-1",)";

std::string event_line(std::string_view rest) {
  return std::string(kEnvelope) + std::string(rest);
}

LineRefusal refused(std::string_view line) {
  auto read = read_event_line(line);
  EXPECT_FALSE(read) << "accepted: " << line;
  return read ? LineRefusal{LineRefusalKind::TooLong, "(accepted)", std::nullopt} : read.error();
}

// ---------------------------------------------------------------------------------------------
// Rule 1: a JSON object
// ---------------------------------------------------------------------------------------------

TEST(EventRefusal, InvalidJsonIsNotAnObjectQuotingTheLine) {
  LineRefusal r = refused(R"({"format":"metaharness.event/1","seq":1,)");
  EXPECT_EQ(r.kind, LineRefusalKind::NotAnObject);
  EXPECT_EQ(r.message.rfind("not a JSON object: ", 0), 0u) << r.message;
  EXPECT_NE(r.message.find(R"(in "{"format":"metaharness.event/1","seq":1,")"), std::string::npos) << r.message;
}

TEST(EventRefusal, AJsonArrayOrNumberOrStringIsNotAnObjectNamingWhatWasRead) {
  EXPECT_EQ(refused(R"([{"format":"metaharness.event/1"}])").message, "not a JSON object: read an array");
  EXPECT_EQ(refused("42").message, "not a JSON object: read the number 42");
  EXPECT_EQ(refused(R"("text")").message, R"(not a JSON object: read the string "text")");
  EXPECT_EQ(refused("null").kind, LineRefusalKind::NotAnObject);
}

TEST(EventRefusal, EmptyAndBlankLinesAreNotObjects) {
  EXPECT_EQ(refused("").kind, LineRefusalKind::NotAnObject);
  EXPECT_EQ(refused("   ").kind, LineRefusalKind::NotAnObject);
}

TEST(EventRefusal, ALongUnparsableLineIsQuotedOnlyInPart) {
  std::string line = "{" + std::string(10000, 'x');
  LineRefusal r = refused(line);
  EXPECT_LT(r.message.size(), 200u) << r.message;
}

// ---------------------------------------------------------------------------------------------
// Rule 2: the format tag
// ---------------------------------------------------------------------------------------------

TEST(EventRefusal, MissingFormatTagSaysThereIsNone) {
  LineRefusal r = refused(R"({"seq":1,"run":"r-1","event":"text","text":"x"})");
  EXPECT_EQ(r.kind, LineRefusalKind::UnknownFormat);
  EXPECT_EQ(r.message, "no format tag, expected \"metaharness.event/1\"");
}

TEST(EventRefusal, UnknownFormatTagNamesTheTagRead) {
  LineRefusal r = refused(R"({"format":"metaharness.event/2","seq":1,"run":"r-1","event":"text","text":"x"})");
  EXPECT_EQ(r.kind, LineRefusalKind::UnknownFormat);
  EXPECT_EQ(r.message, R"(unknown format tag the string "metaharness.event/2", expected "metaharness.event/1")");
  LineRefusal number = refused(R"({"format":1,"event":"text"})");
  EXPECT_EQ(number.kind, LineRefusalKind::UnknownFormat);
  EXPECT_NE(number.message.find("the number 1"), std::string::npos) << number.message;
}

TEST(EventRefusal, TheTagMustMatchExactly) {
  EXPECT_EQ(refused(R"({"format":"Metaharness.event/1","seq":1,"run":"r","event":"text","text":"x"})").kind,
            LineRefusalKind::UnknownFormat);
  EXPECT_EQ(refused(R"({"format":"metaharness.event/1 ","seq":1,"run":"r","event":"text","text":"x"})").kind,
            LineRefusalKind::UnknownFormat);
}

TEST(EventRefusal, ACommandLineOnTheEventChannelIsAnUnknownFormat) {
  LineRefusal r = refused(R"({"format":"metaharness.command/1","id":"c1","command":"halt"})");
  EXPECT_EQ(r.kind, LineRefusalKind::UnknownFormat);
  EXPECT_NE(r.message.find("metaharness.command/1"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Rule 3: the event name
// ---------------------------------------------------------------------------------------------

TEST(EventRefusal, UnknownEventNameIsRefusedNamingTheNameAndTheVocabulary) {
  LineRefusal r = refused(event_line(R"("event":"tool.requsted","call_id":"c"})"));
  EXPECT_EQ(r.kind, LineRefusalKind::UnknownName);
  EXPECT_EQ(r.message,
            "unknown event \"tool.requsted\"; the vocabulary is session.started, session.ended, "
            "step.entered, step.left, turn.started, turn.ended, text, thinking, thinking.estimate, "
            "injection, tool.requested, tool.decided, tool.result, usage, rate_limit, command.result, "
            "warning, opaque, auth.expired, stream.closed");
}

TEST(EventRefusal, EventNameIsCaseSensitive) {
  EXPECT_EQ(refused(event_line(R"("event":"Text","text":"x"})")).kind, LineRefusalKind::UnknownName);
}

// ---------------------------------------------------------------------------------------------
// Rule 4: known name, payload that does not fit
// ---------------------------------------------------------------------------------------------

TEST(EventRefusal, MissingRequiredFieldIsMalformedNamingEventAndField) {
  LineRefusal r = refused(event_line(R"("event":"tool.requested","name":"Bash","input":{},)"
                                     R"("decision_required":false,"seam":"hook"})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_EQ(r.message, R"(malformed tool.requested: missing required field "call_id")");
}

TEST(EventRefusal, ToolRequestedInputMustBePresentEvenIfNull) {
  LineRefusal r = refused(event_line(R"("event":"tool.requested","call_id":"c","name":"Bash",)"
                                     R"("decision_required":false,"seam":"hook"})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_NE(r.message.find(R"("input")"), std::string::npos) << r.message;
}

TEST(EventRefusal, WrongTypeIsMalformedNamingFoundAndExpected) {
  LineRefusal r = refused(event_line(R"("event":"turn.started","turn":"one","frame_digest":null})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_EQ(r.message, R"(malformed turn.started: field "turn" is the string "one", expected a non-negative integer)");
}

TEST(EventRefusal, NestedFieldsAreNamedWithTheirContext) {
  LineRefusal r = refused(event_line(R"("event":"usage","request_id":null,"model":null,"usage":{"input_tokens":-1}})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_EQ(
      r.message,
      R"(malformed usage: usage: field "input_tokens" is the number -1, expected a non-negative integer or null)");
}

TEST(EventRefusal, AnEnumOutsideItsVocabularyIsMalformedNamingTheVocabulary) {
  LineRefusal r = refused(event_line(R"("event":"tool.decided","call_id":"c","decision":{"decision":"allow"},)"
                                     R"("decided_by":"policy","seam":"hook","latency_ms":null})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_NE(r.message.find(R"("decided_by" is "policy", expected embedder, frame, deadline, adapter or observe)"),
            std::string::npos)
      << r.message;
  LineRefusal reason =
      refused(event_line(R"("event":"stream.closed","events":0,"reason":"steer_halt","run_id":"r-1"})"));
  EXPECT_NE(reason.message.find("completed, budget, killed, error or steer-halt"), std::string::npos) << reason.message;
}

TEST(EventRefusal, ADigestThatIsNotLowercaseHexSha256IsMalformed) {
  for (std::string_view digest : {"abc", "43A6F845A21F3475569323950A9D276BFED3DF11979ADC3EDF18878DA6963A12"}) {
    LineRefusal r = refused(event_line(R"("event":"opaque","digest":")" + std::string(digest) + R"("})"));
    EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
    EXPECT_NE(r.message.find("lowercase hex SHA-256"), std::string::npos) << r.message;
  }
}

TEST(EventRefusal, EnvelopeFieldsAreRequired) {
  EXPECT_EQ(refused(R"({"format":"metaharness.event/1","run":"r-1","event":"text","text":"x"})").message,
            R"(malformed event line: envelope: missing required field "seq")");
  EXPECT_EQ(refused(R"({"format":"metaharness.event/1","seq":1,"event":"text","text":"x"})").kind,
            LineRefusalKind::Malformed);
  EXPECT_EQ(refused(R"({"format":"metaharness.event/1","seq":1,"run":"r-1","text":"x"})").kind,
            LineRefusalKind::Malformed);
  EXPECT_EQ(refused(R"({"format":"metaharness.event/1","seq":1,"run":"r-1","at":5,"event":"text","text":"x"})").kind,
            LineRefusalKind::Malformed);
}

TEST(EventRefusal, SeqCountsFromOne) {
  LineRefusal r = refused(R"({"format":"metaharness.event/1","seq":0,"run":"r-1","event":"text","text":"x"})");
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_NE(r.message.find("seq counts from 1"), std::string::npos);
}

TEST(EventRefusal, StepAttemptCountsFromOne) {
  LineRefusal r =
      refused(event_line(R"("event":"step.entered","step":{"workflow":"w","state":"s","index":0,"attempt":0}})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
  EXPECT_NE(r.message.find("attempt"), std::string::npos);
}

TEST(EventRefusal, IntegersThatDoNotFitTheirFieldAreRefusedNotTruncated) {
  EXPECT_EQ(refused(event_line(R"("event":"turn.ended","turn":4294967296})")).kind, LineRefusalKind::Malformed);
  LineRefusal code = refused(event_line(R"("event":"stream.closed","events":0,"reason":"error","run_id":"r-1",)"
                                        R"("process":{"kind":"exited","code":4294967297}})"));
  EXPECT_EQ(code.kind, LineRefusalKind::Malformed);
  EXPECT_NE(code.message.find(R"("code" does not fit 32 bits)"), std::string::npos) << code.message;
  LineRefusal pid =
      refused(event_line(R"("event":"tool.decided","call_id":"c","decision":"allow","decided_by":"embedder",)"
                         R"("seam":"hook","peer":{"uid":1,"pid":-3000000000}})"));
  EXPECT_EQ(pid.kind, LineRefusalKind::Malformed);
}

TEST(EventRefusal, ADecisionInsideAnEventFollowsTheDecisionRules) {
  LineRefusal r =
      refused(event_line(R"("event":"tool.decided","call_id":"c","decision":{"decision":"deny","reason":" "},)"
                         R"("decided_by":"frame","seam":"hook"})"));
  EXPECT_EQ(r.kind, LineRefusalKind::Malformed);
}

TEST(EventRefusal, ReadEventPayloadAppliesRulesThreeAndFourAlone) {
  json::object payload{{"text", "hi"}};
  auto ok = read_event_payload("text", payload);
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_EQ(std::get<ev::Text>(*ok).text, "hi");
  EXPECT_EQ(read_event_payload("texts", payload).error().kind, LineRefusalKind::UnknownName);
  EXPECT_EQ(read_event_payload("thinking.estimate", payload).error().kind, LineRefusalKind::Malformed);
}

// ---------------------------------------------------------------------------------------------
// Rule 5: unknown fields are ignored
// ---------------------------------------------------------------------------------------------

TEST(EventReader, UnknownFieldsOnAKnownEventAreIgnoredEvenWithOddValues) {
  auto read =
      read_event_line(event_line(R"("event":"warning","code":"W","message":"m","severity":[{"x":null}],"seq2":-1})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(std::get<ev::Warning>(read->payload).message, "m");
}

TEST(EventReader, ValueThrowsTheRefusalMessage) {
  auto read = read_event_line("[]");
  try {
    (void)read.value();
    FAIL() << "value() of a refusal must throw";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "not a JSON object: read an array");
  }
}

// ---------------------------------------------------------------------------------------------
// Line length
// ---------------------------------------------------------------------------------------------

TEST(TooLong, RefusalNamesLineLengthBoundAndHowTheLineBegan) {
  FramedLine line;
  line.number = 7;
  line.too_long = true;
  line.length = 5000000;
  std::string head =
      R"({"format":"metaharness.event/1","seq":7,"run":"r-1","event":"tool.result","content":"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx)";
  line.head = head;
  LineRefusal r = too_long_refusal(line, 1048576);
  EXPECT_EQ(r.kind, LineRefusalKind::TooLong);
  EXPECT_EQ(r.message, R"(line 7 is 5000000 bytes, over the 1048576-byte bound; it was discarded unread (it began ")" +
                           head.substr(0, 60) + R"(…"))");
}

TEST(RefusalKinds, HaveTheirWireNames) {
  EXPECT_EQ(to_string(LineRefusalKind::TooLong), "TooLong");
  EXPECT_EQ(to_string(LineRefusalKind::NotAnObject), "NotAnObject");
  EXPECT_EQ(to_string(LineRefusalKind::UnknownFormat), "UnknownFormat");
  EXPECT_EQ(to_string(LineRefusalKind::UnknownName), "UnknownName");
  EXPECT_EQ(to_string(LineRefusalKind::Malformed), "Malformed");
}

}  // namespace
}  // namespace mh::protocol
