// The 20 events: exact bytes of every event in two forms (every nullable field null, and every
// nullable field set), read back and re-serialized byte-identically. The minimal forms are
// golden lines written out by hand from the reference's field tables (§2.4, §3), so a field
// out of order, omitted instead of null, or spelled differently fails here.
#include "protocol/events.hpp"

#include <gtest/gtest.h>

#include <cctype>
#include <functional>
#include <set>

#include "protocol/digest.hpp"
#include "protocol/reader.hpp"
#include "wire_samples.hpp"

namespace mh::protocol {
namespace {

constexpr std::string_view kEnvelope = R"({"format":"metaharness.event/1","seq":1,"run":"r-1",)";
using samples::kDigestA;
using samples::kDigestB;
using samples::make_event;
using samples::sample_step;

std::string with_envelope(std::string_view rest) {
  return std::string(kEnvelope) + std::string(rest);
}

json::value parse_or_die(std::string_view text) {
  auto v = parse_json(text);
  EXPECT_TRUE(v.has_value()) << text;
  return v ? *v : json::value();
}

// ---------------------------------------------------------------------------------------------
// Every nullable field null (the minimal form)
// ---------------------------------------------------------------------------------------------

struct GoldenCase {
  std::string label;
  std::function<Event()> build;
  std::string expected;
};

std::vector<GoldenCase> minimal_cases() {
  std::vector<GoldenCase> cases;
  cases.push_back({"session_started",
                   [] {
                     ev::SessionStarted e;
                     e.adapter = "claude";
                     return make_event(e);
                   },
                   with_envelope(R"("event":"session.started","adapter":"claude","adapter_class":"harness",)"
                                 R"("harness_version":null,"session_id":null,"model":null,"permission_mode":null,)"
                                 R"("credential_source":null,"output_style":null,"cwd":null,"offered_tools":null,)"
                                 R"("withheld":null,"slash_commands":null,"skills":null,"agents":null,"plugins":null,)"
                                 R"("mcp_servers":null,"inputs_digest":null,)"
                                 R"("transcript":{"path":null,"digest":null,"bytes":null},)"
                                 R"("hermetic":{"mode":"off","decisions":"frame","imposed":[],"unavailable":[],)"
                                 R"("ambient_inputs":[],"installed_plugins":[],"deny_only":false}})")});
  cases.push_back({"session_ended", [] { return make_event(ev::SessionEnded{}); },
                   with_envelope(R"("event":"session.ended","final_answer":null,"observed_models":null,)"
                                 R"("is_error":null,"subtype":null,"stop_reason":null,"terminal_reason":null,)"
                                 R"("api_error_status":null,"num_turns":null,"duration_ms":null,)"
                                 R"("duration_api_ms":null,"ttft_ms":null,"time_to_request_ms":null,)"
                                 R"("total_cost_usd":null,"permission_denials":null,"subagents_spawned":null,)"
                                 R"("usage":null,"model_usage":null,"census":{"allowed":0,"denied":0,)"
                                 R"("replaced":0,"abstained":0,"by_seam":{},"by_decider":{}}})")});
  cases.push_back({"step_entered",
                   [] {
                     return make_event(ev::StepEntered{sample_step(), std::nullopt});
                   },
                   with_envelope(R"("event":"step.entered","step":{"workflow":"development/default",)"
                                 R"("state":"implement","index":2,"attempt":1},"frame_digest":null})")});
  cases.push_back({"step_left",
                   [] {
                     return make_event(ev::StepLeft{sample_step(), StepOutcome{}});
                   },
                   with_envelope(R"("event":"step.left","step":{"workflow":"development/default",)"
                                 R"("state":"implement","index":2,"attempt":1},)"
                                 R"("outcome":{"outcome":"completed"}})")});
  cases.push_back({"turn_started",
                   [] {
                     return make_event(ev::TurnStarted{1, std::nullopt});
                   },
                   with_envelope(R"("event":"turn.started","turn":1,"frame_digest":null})")});
  cases.push_back({"turn_ended",
                   [] {
                     return make_event(ev::TurnEnded{1, std::nullopt});
                   },
                   with_envelope(R"("event":"turn.ended","turn":1,"stop_reason":null})")});
  cases.push_back({"text",
                   [] {
                     return make_event(ev::Text{"I’ll run the tests.", std::nullopt});
                   },
                   with_envelope(R"("event":"text","text":"I’ll run the tests.","request_id":null})")});
  cases.push_back({"thinking",
                   [] {
                     return make_event(ev::Thinking{"hmm", std::nullopt});
                   },
                   with_envelope(R"("event":"thinking","text":"hmm","request_id":null})")});
  cases.push_back({"thinking_estimate",
                   [] {
                     return make_event(ev::ThinkingEstimate{120, std::nullopt});
                   },
                   with_envelope(R"("event":"thinking.estimate","estimate":120,"delta":null})")});
  cases.push_back({"injection",
                   [] {
                     return make_event(ev::Injection{"loaded skill", std::nullopt});
                   },
                   with_envelope(R"("event":"injection","text":"loaded skill","origin":null})")});
  cases.push_back({"tool_requested",
                   [] {
                     ev::ToolRequested e;
                     e.call_id = "toolu_01";
                     e.name = "Bash";
                     e.input = nullptr;
                     e.seam = Seam::hook;
                     return make_event(e);
                   },
                   // operations and subjects are omitted when empty; input is null, never omitted.
                   with_envelope(R"("event":"tool.requested","call_id":"toolu_01","name":"Bash",)"
                                 R"("input":null,"decision_required":false,"deadline_ms":null,)"
                                 R"("seam":"hook","agent":null,"escalation":false})")});
  cases.push_back({"tool_decided",
                   [] {
                     ev::ToolDecided e;
                     e.call_id = "toolu_01";
                     e.decision = decision::Allow{};
                     e.decided_by = DecidedBy::frame;
                     e.seam = Seam::hook;
                     return make_event(e);
                   },
                   with_envelope(R"("event":"tool.decided","call_id":"toolu_01",)"
                                 R"("decision":{"decision":"allow"},"decided_by":"frame",)"
                                 R"("seam":"hook","latency_ms":null,"peer":null,"requested":null})")});
  cases.push_back({"tool_result",
                   [] {
                     ev::ToolResult e;
                     e.call_id = "toolu_01";
                     return make_event(e);
                   },
                   with_envelope(R"("event":"tool.result","exit_code":null,"outcome_source":null,)"
                                 R"("call_id":"toolu_01","is_error":null,"content":null,"bytes":null,)"
                                 R"("tool_use_result":null})")});
  cases.push_back({"usage", [] { return make_event(ev::Usage{}); },
                   with_envelope(R"("event":"usage","request_id":null,"model":null,)"
                                 R"("usage":{"input_tokens":null,"output_tokens":null,)"
                                 R"("cache_read_input_tokens":null,"cache_creation_input_tokens":null,)"
                                 R"("service_tier":null,"thinking_tokens":null,"iterations":null,)"
                                 R"("speed":null,"cost_usd":null}})")});
  cases.push_back({"rate_limit", [] { return make_event(ev::RateLimit{}); },
                   with_envelope(R"("event":"rate_limit","info":{"status":null,"window":null,)"
                                 R"("resets_at":null,"utilization":null,"using_overage":null}})")});
  cases.push_back({"command_result",
                   [] {
                     return make_event(ev::CommandResult{"c1", CommandOutcome::ok()});
                   },
                   with_envelope(R"("event":"command.result","id":"c1",)"
                                 R"("outcome":{"result":"ok","applies_at":null}})")});
  cases.push_back({"warning",
                   [] {
                     return make_event(ev::Warning{"NO_FRAME_IN_FORCE", "no frame"});
                   },
                   with_envelope(R"("event":"warning","code":"NO_FRAME_IN_FORCE","message":"no frame"})")});
  cases.push_back({"opaque",
                   [] {
                     ev::Opaque e;
                     e.digest = kDigestA;
                     return make_event(e);
                   },
                   with_envelope(R"("event":"opaque","vendor_type":null,"vendor_subtype":null,"digest":")" + kDigestA +
                                 R"(","source_line":null})")});
  cases.push_back({"auth_expired", [] { return make_event(ev::AuthExpired{}); },
                   with_envelope(R"("event":"auth.expired","credential_source":null,"detail":null,)"
                                 R"("source_line":null})")});
  cases.push_back({"stream_closed",
                   [] {
                     ev::StreamClosed e;
                     e.events = 0;
                     e.reason = CloseReason::steer_halt;
                     e.run_id = "r-1";
                     return make_event(e);
                   },
                   with_envelope(R"("event":"stream.closed","events":0,"reason":"steer-halt",)"
                                 R"("run_id":"r-1","process":{"kind":"unknown"}})")});
  return cases;
}

// ---------------------------------------------------------------------------------------------
// Every nullable field set (the full form): no `null` anywhere in the line
// ---------------------------------------------------------------------------------------------

std::vector<GoldenCase> full_cases() {
  std::vector<GoldenCase> cases;
  for (auto& sample : samples::full_events())
    cases.push_back({std::move(sample.label), std::move(sample.build), ""});
  return cases;
}

std::string case_name(const testing::TestParamInfo<GoldenCase>& info) {
  return info.param.label;
}

class MinimalEvent : public testing::TestWithParam<GoldenCase> {};

TEST_P(MinimalEvent, WritesEveryNullableFieldAsNullInDeclarationOrder) {
  EXPECT_EQ(serialize(GetParam().build()), GetParam().expected);
}

TEST_P(MinimalEvent, ReadsBackAndReserializesToTheSameBytes) {
  auto read = read_event_line(GetParam().expected);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(serialize(*read), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(AllTwenty, MinimalEvent, testing::ValuesIn(minimal_cases()), case_name);

class FullEvent : public testing::TestWithParam<GoldenCase> {};

TEST_P(FullEvent, SetsEveryNullableFieldSoNoNullIsWritten) {
  std::string line = serialize(GetParam().build());
  EXPECT_EQ(line.find("null"), std::string::npos) << line;
}

TEST_P(FullEvent, ReadsBackAndReserializesToTheSameBytes) {
  std::string line = serialize(GetParam().build());
  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message << "\n" << line;
  EXPECT_EQ(serialize(*read), line);
}

INSTANTIATE_TEST_SUITE_P(AllTwenty, FullEvent, testing::ValuesIn(full_cases()), case_name);

TEST(EventCases, CoverEveryEventOfTheVocabularyInBothForms) {
  for (const auto& cases : {minimal_cases(), full_cases()}) {
    std::set<std::string_view> covered;
    for (const auto& c : cases)
      covered.insert(event_name(c.build().payload));
    EXPECT_EQ(covered.size(), kEventCount);
    for (auto name : event_names())
      EXPECT_TRUE(covered.count(name)) << name;
  }
}

TEST(EventNames, AreTheTwentyInVocabularyOrder) {
  const std::array<std::string_view, 20> expected = {
      "session.started", "session.ended",     "step.entered", "step.left",      "turn.started", "turn.ended",   "text",
      "thinking",        "thinking.estimate", "injection",    "tool.requested", "tool.decided", "tool.result",  "usage",
      "rate_limit",      "command.result",    "warning",      "opaque",         "auth.expired", "stream.closed"};
  EXPECT_EQ(event_names(), expected);
}

// ---------------------------------------------------------------------------------------------
// Exact bytes of full forms whose nested structs carry values
// ---------------------------------------------------------------------------------------------

TEST(EventBytes, SessionStartedFullFormMatchesTheReferenceFieldOrder) {
  Event e = full_cases()[0].build();
  EXPECT_EQ(
      serialize(e),
      with_envelope(R"("event":"session.started","adapter":"codex","adapter_class":"direct_provider",)"
                    R"("harness_version":"2.1.241","session_id":"s-1","model":"claude-opus",)"
                    R"("permission_mode":"default","credential_source":"none","output_style":"default",)"
                    R"("cwd":"/work","offered_tools":["Bash","Read"],"available_operations":["shell","file.read"],)"
                    R"("withheld":[{"tool":"WebFetch","reason":"denied by policy"}],"slash_commands":["/compact"],)"
                    R"("skills":["tdd"],"agents":["reviewer"],)"
                    R"("plugins":[{"name":"p","source":"repo@p","version":"1.0"}],)"
                    R"("mcp_servers":[{"name":"github","status":"connected"}],"inputs_digest":")" +
                    kDigestA + R"(","transcript":{"path":"/tmp/t.jsonl","digest":")" + kDigestB +
                    R"(","bytes":1234},"hermetic":{"mode":"strict","decisions":"ask",)"
                    R"("imposed":[{"row":"h1a","how":"empty plugin dir"},{"row":"h10","how":"copied tree"}],)"
                    R"("unavailable":[{"row":"h11","why":"no sandbox"}],)"
                    R"("ambient_inputs":["allow grants on this wire"],)"
                    R"("installed_plugins":[{"name":"p","source":"repo@p","installed_at":"/scratch/p",)"
                    R"("digest":")" +
                    kDigestB + R"(","loaded_by":"--plugin-dir"}],"deny_only":false}})"));
}

TEST(EventBytes, SessionEndedFullFormSortsMapsAndFreeFormKeys) {
  Event e = full_cases()[1].build();
  const std::string usage = [](std::string_view cost) {
    return R"({"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":3000,)"
           R"("cache_creation_input_tokens":400,"service_tier":"standard","thinking_tokens":7,)"
           R"("iterations":2,"speed":"fast","cost_usd":)" +
           std::string(cost) + "}";
  }("0.25");
  EXPECT_EQ(
      serialize(e),
      with_envelope(R"("event":"session.ended","final_answer":{"text":"done","turn_id":"turn-1"},)"
                    R"("observed_models":[{"turn":1,"turn_id":"turn-1","model":"gpt-5","scope":"turn_selection"}],)"
                    R"("is_error":false,"subtype":"success","stop_reason":"end_turn","terminal_reason":"completed",)"
                    R"("api_error_status":"529","num_turns":3,"duration_ms":1000,"duration_api_ms":900,)"
                    R"("ttft_ms":50,"time_to_request_ms":10,"total_cost_usd":0.0010919999999999999,)"
                    R"("permission_denials":[{"tool_name":"Bash","tool_use_id":"toolu_9",)"
                    R"("tool_input":{"b":[2,1],"command":"rm -rf /"}}],"subagents_spawned":0,"usage":)" +
                    usage + R"(,"model_usage":{"haiku":)" +
                    R"({"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":3000,)"
                    R"("cache_creation_input_tokens":400,"service_tier":"standard","thinking_tokens":7,)"
                    R"("iterations":2,"speed":"fast","cost_usd":3.0},"opus":)"
                    R"({"input_tokens":100,"output_tokens":20,"cache_read_input_tokens":3000,)"
                    R"("cache_creation_input_tokens":400,"service_tier":"standard","thinking_tokens":7,)"
                    R"("iterations":2,"speed":"fast","cost_usd":0.0}},)"
                    R"("census":{"allowed":1,"denied":2,"replaced":0,"abstained":0,)"
                    R"("by_seam":{"hook":3},"by_decider":{"embedder":1,"frame":2}}})"));
}

TEST(EventBytes, ToolRequestedWritesOperationsAndSubjectsWhenPresent) {
  Event e = full_cases()[10].build();
  EXPECT_EQ(serialize(e), with_envelope(R"("event":"tool.requested","call_id":"toolu_01","name":"apply_patch",)"
                                        R"("input":{"patch":"*** Begin Patch","path":"src/lib.rs"},)"
                                        R"("operations":["file.write","file.edit"],"subjects":["file:src/lib.rs"],)"
                                        R"("decision_required":true,"deadline_ms":55000,"seam":"hook",)"
                                        R"("agent":"toolu_parent","escalation":true})"));
}

TEST(EventBytes, ToolRequestedOmitsOperationsWhenEmptyButKeepsSubjects) {
  ev::ToolRequested e;
  e.call_id = "c";
  e.name = "Read";
  e.input = parse_or_die(R"({"file_path":"a.txt"})");
  e.subjects = {"file:a.txt"};
  std::string line = serialize(make_event(e));
  EXPECT_EQ(line.find("\"operations\""), std::string::npos) << line;
  EXPECT_NE(line.find(R"("subjects":["file:a.txt"])"), std::string::npos) << line;
}

TEST(EventBytes, AgentEscalationRequestedAndRecordedAtAreAdditiveAndRoundTrip) {
  ev::ToolRequested r;
  r.call_id = "call_2";
  r.name = "Bash";
  r.input = nullptr;
  r.seam = Seam::control_request;
  r.agent = "thread-child-1";
  r.escalation = true;
  Event requested = make_event(r);
  requested.recorded_at = "2026-12-01T09:13:31.042Z";
  std::string line = serialize(requested);
  EXPECT_EQ(line, R"({"format":"metaharness.event/1","seq":1,"run":"r-1","recorded_at":"2026-12-01T09:13:31.042Z",)"
                  R"("event":"tool.requested","call_id":"call_2","name":"Bash","input":null,)"
                  R"("decision_required":false,"deadline_ms":null,"seam":"control_request",)"
                  R"("agent":"thread-child-1","escalation":true})");
  auto back = read_event_line(line);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->recorded_at, "2026-12-01T09:13:31.042Z");
  EXPECT_EQ(std::get<ev::ToolRequested>(back->payload).agent, "thread-child-1");
  EXPECT_TRUE(std::get<ev::ToolRequested>(back->payload).escalation);
  EXPECT_EQ(serialize(*back), line);

  ev::ToolDecided d;
  d.call_id = "call_2";
  d.decision = decision::Abstain{};
  d.decided_by = DecidedBy::embedder;
  d.seam = Seam::hook;
  d.requested = decision::Allow{};
  std::string decided = serialize(make_event(d));
  EXPECT_NE(decided.find(R"("decision":{"decision":"abstain"})"), std::string::npos) << decided;
  EXPECT_NE(decided.find(R"("requested":{"decision":"allow"}})"), std::string::npos) << decided;
  auto decided_back = read_event_line(decided);
  ASSERT_TRUE(decided_back) << decided_back.error().message;
  EXPECT_EQ(serialize(*decided_back), decided);
}

// Issue 27 §2: a RUN_STALLED warning's figures are additive (absent from every other warning).
TEST(EventBytes, AStallReportIsAdditiveOnAWarningAndRoundTrips) {
  ev::Warning w{"RUN_STALLED", "silent"};
  w.stall = ev::StallReport{12000, std::string("tool.result"), std::string("Bash"), 10000, OnStall::halt};
  std::string line = serialize(make_event(w));
  EXPECT_NE(line.find(R"("code":"RUN_STALLED","message":"silent","stall":{"silent_ms":12000,)"
                      R"("last_event":"tool.result","last_tool":"Bash","stall_after_ms":10000,"on_stall":"halt"}})"),
            std::string::npos)
      << line;
  auto back = read_event_line(line);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE(std::get<ev::Warning>(back->payload).stall);
  EXPECT_EQ(std::get<ev::Warning>(back->payload).stall->on_stall, OnStall::halt);
  EXPECT_EQ(serialize(*back), line);
  std::string plain = serialize(make_event(ev::Warning{"W", "m"}));
  EXPECT_EQ(plain.find("stall"), std::string::npos) << plain;
  auto bad = read_event_line(with_envelope(R"("event":"warning","code":"RUN_STALLED","message":"m",)"
                                           R"("stall":{"silent_ms":1,"last_event":null,"last_tool":null,)"
                                           R"("stall_after_ms":1,"on_stall":"kill"}})"));
  EXPECT_FALSE(bad) << "an on_stall outside warn and halt is refused";
}

// Issue 27 section 6: a POSTURE_DRIFT warning's fields are additive (absent from every other warning).
TEST(EventBytes, APostureDriftIsAdditiveOnAWarningAndRoundTrips) {
  ev::Warning w{"POSTURE_DRIFT", "drifted"};
  w.posture = ev::PostureDrift{"resume",
                               ev::PostureParts{std::string("acceptEdits"), std::nullopt},
                               ev::PostureParts{std::string("default"), std::nullopt},
                               {"permission_mode"},
                               {"tool.decide abstain"}};
  std::string line = serialize(make_event(w));
  EXPECT_NE(line.find(R"("code":"POSTURE_DRIFT","message":"drifted","posture":{"occasion":"resume",)"
                      R"("asked":{"permission_mode":"acceptEdits","sandbox":null},)"
                      R"("reported":{"permission_mode":"default","sandbox":null},)"
                      R"("drifted":["permission_mode"],"refused":["tool.decide abstain"]}})"),
            std::string::npos)
      << line;
  auto back = read_event_line(line);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE(std::get<ev::Warning>(back->payload).posture);
  EXPECT_EQ(std::get<ev::Warning>(back->payload).posture->reported.permission_mode, "default");
  EXPECT_EQ(serialize(*back), line);
  std::string plain = serialize(make_event(ev::Warning{"W", "m"}));
  EXPECT_EQ(plain.find("posture"), std::string::npos) << plain;
}

TEST(EventReader, LinesWithoutTheAdditiveFieldsStillRead) {
  auto read = read_event_line(with_envelope(R"("event":"tool.requested","call_id":"c","name":"Bash","input":{},)"
                                            R"("decision_required":false,"deadline_ms":null,"seam":"none"})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_FALSE(read->recorded_at);
  EXPECT_FALSE(std::get<ev::ToolRequested>(read->payload).agent);
  EXPECT_FALSE(std::get<ev::ToolRequested>(read->payload).escalation);
}

TEST(EventBytes, ToolDecidedCarriesTheDecisionObjectAndPeer) {
  Event e = full_cases()[11].build();
  EXPECT_EQ(serialize(e), with_envelope(R"("event":"tool.decided","call_id":"toolu_01",)"
                                        R"("decision":{"decision":"replace","input":{"command":"ls -la"}},)"
                                        R"("decided_by":"embedder","seam":"control_request","latency_ms":12,)"
                                        R"("peer":{"uid":1000,"pid":4242},"requested":{"decision":"allow"}})"));
}

TEST(EventBytes, ToolResultFullFormFieldOrder) {
  Event e = full_cases()[12].build();
  EXPECT_EQ(serialize(e), with_envelope(R"("event":"tool.result","exit_code":-1,)"
                                        R"("outcome_source":"retained_tool_completion","call_id":"toolu_01",)"
                                        R"("is_error":true,"content":"exit 1","bytes":6,)"
                                        R"("tool_use_result":{"interrupted":false,"stderr":"boom","stdout":""}})"));
}

TEST(EventBytes, RateLimitCarriesUtilizationAsShortestFloat) {
  Event e = full_cases()[14].build();
  EXPECT_EQ(serialize(e), with_envelope(R"("event":"rate_limit","info":{"status":"allowed","window":"five_hour",)"
                                        R"("resets_at":1767225600,"utilization":0.238876,"using_overage":false}})"));
}

TEST(EventBytes, CommandResultOkWithAppliesAt) {
  Event e = full_cases()[15].build();
  EXPECT_EQ(serialize(e), with_envelope(R"("event":"command.result","id":"c2","outcome":{"result":"ok",)"
                                        R"("applies_at":"the next turn or step boundary"}})"));
}

TEST(EventBytes, StreamClosedWritesProcessStatusByKind) {
  ev::StreamClosed closed;
  closed.events = 3;
  closed.reason = CloseReason::error;
  closed.run_id = "r-1";
  closed.process = ProcessTermination{ProcessKind::signaled, 0, 9};
  EXPECT_NE(serialize(make_event(closed)).find(R"("process":{"kind":"signaled","signal":9})"), std::string::npos);
  closed.process = ProcessTermination{ProcessKind::exited, 3, 0};
  EXPECT_NE(serialize(make_event(closed)).find(R"("process":{"kind":"exited","code":3})"), std::string::npos);
}

TEST(EventBytes, StreamClosedWithoutProcessReadsAsUnknown) {
  auto read = read_event_line(with_envelope(R"("event":"stream.closed","events":0,"reason":"budget","run_id":"r-1"})"));
  ASSERT_TRUE(read) << read.error().message;
  const auto& closed = std::get<ev::StreamClosed>(read->payload);
  EXPECT_EQ(closed.process.kind, ProcessKind::unknown);
  EXPECT_EQ(closed.reason, CloseReason::budget);
}

TEST(EventBytes, StepLeftOutcomesCarryTheirReason) {
  ev::StepLeft left{sample_step(), StepOutcome{StepOutcome::Kind::no_verdict, "judge absent"}};
  std::string line = serialize(make_event(left));
  EXPECT_NE(line.find(R"("outcome":{"outcome":"no_verdict","reason":"judge absent"})"), std::string::npos);
  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(serialize(*read), line);
}

// ---------------------------------------------------------------------------------------------
// Envelope: `at` is the one key omitted when absent
// ---------------------------------------------------------------------------------------------

TEST(EventEnvelope, AtIsOmittedWhenAbsentAndWrittenAfterRunWhenPresent) {
  Event e = make_event(ev::Text{"x", std::nullopt});
  EXPECT_EQ(serialize(e).find("\"at\""), std::string::npos);
  e.at = "2026-08-22T10:00:00.000Z";
  std::string line = serialize(e);
  EXPECT_EQ(line, R"({"format":"metaharness.event/1","seq":1,"run":"r-1","at":"2026-08-22T10:00:00.000Z",)"
                  R"("event":"text","text":"x","request_id":null})");
  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->at, "2026-08-22T10:00:00.000Z");
  EXPECT_EQ(serialize(*read), line);
}

TEST(EventEnvelope, SerializeToAppendsAfterAPreviousLine) {
  std::string out = "previous\n";
  serialize_to(out, make_event(ev::Text{"x", std::nullopt}));
  EXPECT_EQ(out, "previous\n" + serialize(make_event(ev::Text{"x", std::nullopt})));
}

TEST(EventEnvelope, SeqRunAndPayloadAreReadBack) {
  Event e = make_event(ev::Warning{"W", "m"});
  e.seq = 987654321012ull;
  e.run = "golden";
  auto read = read_event_line(serialize(e));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->seq, 987654321012ull);
  EXPECT_EQ(read->run, "golden");
  EXPECT_EQ(std::get<ev::Warning>(read->payload).code, "W");
}

// ---------------------------------------------------------------------------------------------
// Nullable-vs-empty distinctions the wire keeps
// ---------------------------------------------------------------------------------------------

TEST(EventNullability, WithheldNullAndEmptyListStayDistinct) {
  ev::SessionStarted e;
  e.adapter = "claude";
  EXPECT_NE(serialize(make_event(e)).find(R"("withheld":null)"), std::string::npos);
  e.withheld = std::vector<WithheldTool>{};
  e.mcp_servers = std::vector<McpServerRef>{};
  std::string line = serialize(make_event(e));
  EXPECT_NE(line.find(R"("withheld":[])"), std::string::npos);
  EXPECT_NE(line.find(R"("mcp_servers":[])"), std::string::npos);
  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  const auto& started = std::get<ev::SessionStarted>(read->payload);
  ASSERT_TRUE(started.withheld.has_value());
  EXPECT_TRUE(started.withheld->empty());
  ASSERT_TRUE(started.mcp_servers.has_value());
  EXPECT_FALSE(started.available_operations.has_value());
}

TEST(EventNullability, AvailableOperationsIsOmittedWhenNullAndWrittenWhenEmpty) {
  ev::SessionStarted e;
  e.adapter = "b10x";
  EXPECT_EQ(serialize(make_event(e)).find("available_operations"), std::string::npos);
  e.available_operations = std::vector<std::string>{};
  EXPECT_NE(serialize(make_event(e)).find(R"("offered_tools":null,"available_operations":[],"withheld")"),
            std::string::npos);
}

TEST(EventNullability, ToolResultIsErrorNullIsNotFalse) {
  auto read = read_event_line(with_envelope(R"("event":"tool.result","call_id":"c","is_error":null})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_FALSE(std::get<ev::ToolResult>(read->payload).is_error.has_value());
  read = read_event_line(with_envelope(R"("event":"tool.result","call_id":"c","is_error":false})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(std::get<ev::ToolResult>(read->payload).is_error, false);
}

// ---------------------------------------------------------------------------------------------
// Floats (§1.4): shortest round-trip, integral values with ".0"
// ---------------------------------------------------------------------------------------------

struct FloatCase {
  double value;
  std::string_view text;
};

class CostFloat : public testing::TestWithParam<FloatCase> {};

TEST_P(CostFloat, PrintsShortestRoundTripAndReadsBackExactly) {
  ev::Usage u;
  u.usage.cost_usd = GetParam().value;
  std::string line = serialize(make_event(u));
  std::string expected = R"("cost_usd":)" + std::string(GetParam().text) + "}}";
  EXPECT_NE(line.find(expected), std::string::npos) << line;
  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  auto cost = std::get<ev::Usage>(read->payload).usage.cost_usd;
  ASSERT_TRUE(cost.has_value());
  EXPECT_EQ(*cost, GetParam().value);
  EXPECT_EQ(serialize(*read), line);
}

INSTANTIATE_TEST_SUITE_P(Reference, CostFloat,
                         testing::Values(FloatCase{0.0, "0.0"}, FloatCase{0.25, "0.25"}, FloatCase{0.0123, "0.0123"},
                                         FloatCase{0.0010919999999999999, "0.0010919999999999999"},
                                         FloatCase{0.238876, "0.238876"}, FloatCase{3.0, "3.0"},
                                         FloatCase{1234.5, "1234.5"}, FloatCase{-0.5, "-0.5"},
                                         // ryu's layout, not std::to_chars's shortest-of-two: small and large values
                                         FloatCase{0.0001, "0.0001"}, FloatCase{0.00003, "0.00003"},
                                         FloatCase{1e-7, "1e-7"}, FloatCase{1.5e-7, "1.5e-7"},
                                         FloatCase{1000000.0, "1000000.0"}, FloatCase{1e15, "1000000000000000.0"},
                                         FloatCase{1e16, "1e16"}, FloatCase{1.2345e20, "1.2345e20"},
                                         FloatCase{949.3012028926441, "949.3012028926441"},
                                         FloatCase{0.0075574503474009685, "0.0075574503474009685"}),
                         [](const testing::TestParamInfo<FloatCase>& info) {
                           std::string name = "v";
                           for (char c : info.param.text)
                             name += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

TEST(EventFloats, IntegerWrittenInAFloatFieldReadsAsFloat) {
  auto read = read_event_line(with_envelope(R"("event":"session.ended","total_cost_usd":2,"census":)"
                                            R"({"allowed":0,"denied":0,"replaced":0,"abstained":0,)"
                                            R"("by_seam":{},"by_decider":{}}})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_NE(serialize(*read).find(R"("total_cost_usd":2.0,)"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// Free-form JSON is re-serialized: keys sorted byte-wise at every depth, numbers normalized
// ---------------------------------------------------------------------------------------------

TEST(EventFreeForm, ToolInputIsReserializedWithSortedKeysAtEveryDepth) {
  std::string vendor_line =
      with_envelope(R"("event":"tool.requested","call_id":"c","name":"X","input": { "zeta" : 1, "Zeta": 2,)"
                    R"( "é": [ {"b": 1, "a": {"d": true, "c": null}} ], "alpha": {"y": 1.0, "x": 1e2, "w": -0,)"
                    R"( "v": 12345678901234567890, "u": -9223372036854775808 }, "": 0 },)"
                    R"("decision_required":false,"deadline_ms":null,"seam":"none"})");
  auto read = read_event_line(vendor_line);
  ASSERT_TRUE(read) << read.error().message;
  // Byte-wise order: "" < "Zeta" < "alpha" < "zeta" < "é" (0xC3 sorts after every ASCII byte).
  EXPECT_EQ(canonical_json(std::get<ev::ToolRequested>(read->payload).input),
            R"({"":0,"Zeta":2,"alpha":{"u":-9223372036854775808,"v":12345678901234567890,)"
            R"("w":-0.0,"x":100.0,"y":1.0},"zeta":1,"é":[{"a":{"c":null,"d":true},"b":1}]})");
  std::string once = serialize(*read);
  auto again = read_event_line(once);
  ASSERT_TRUE(again) << again.error().message;
  EXPECT_EQ(serialize(*again), once);
}

TEST(EventFreeForm, ContentAndToolUseResultAreSortedToo) {
  auto read =
      read_event_line(with_envelope(R"("event":"tool.result","call_id":"c","content":[{"type":"text","text":"hi"}],)"
                                    R"("tool_use_result":{"z":[3,2,1],"a":{"c":1,"b":2}}})"));
  ASSERT_TRUE(read) << read.error().message;
  std::string line = serialize(*read);
  EXPECT_NE(line.find(R"("content":[{"text":"hi","type":"text"}])"), std::string::npos) << line;
  EXPECT_NE(line.find(R"("tool_use_result":{"a":{"b":2,"c":1},"z":[3,2,1]})"), std::string::npos) << line;
}

TEST(EventFreeForm, ReplaceDecisionInputIsSorted) {
  auto read = read_event_line(
      with_envelope(R"("event":"tool.decided","call_id":"c","decision":{"input":{"b":1,"a":2},"decision":"replace"},)"
                    R"("decided_by":"embedder","seam":"hook"})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_NE(serialize(*read).find(R"("decision":{"decision":"replace","input":{"a":2,"b":1}})"), std::string::npos);
}

// ---------------------------------------------------------------------------------------------
// String escapes (§1.4)
// ---------------------------------------------------------------------------------------------

TEST(EventEscapes, ShortFormsLowercaseUnicodeEscapesAndRawSlashAndUtf8) {
  std::string text = "q\" b\\ n\n r\r t\t b\b f\f nul";
  text.push_back('\0');
  text += " one\x01 us\x1f del\x7f / ’ é 😀";
  std::string line = serialize(make_event(ev::Text{text, std::nullopt}));
  EXPECT_EQ(line, with_envelope(R"("event":"text","text":"q\" b\\ n\n r\r t\t b\b f\f nul\u0000 one\u0001)"
                                R"( us\u001f del)"
                                "\x7f"
                                R"( / ’ é 😀","request_id":null})"));
  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(std::get<ev::Text>(read->payload).text, text);
  EXPECT_EQ(serialize(*read), line);
}

TEST(EventEscapes, EscapedInputIsWrittenInTheCanonicalForm) {
  auto read = read_event_line(
      with_envelope(R"("event":"text","text":"\u00e9\/\u0041\u001F\u000a\ud83d\ude00","request_id":null})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(serialize(*read), with_envelope(R"("event":"text","text":"é/A\u001f\n😀","request_id":null})"));
}

TEST(EventEscapes, BytesThatAreNotUtf8AreWrittenAsReplacementCharacters) {
  std::string text = "ok \xff\xfe bad \xc3 cut";
  std::string line = serialize(make_event(ev::Text{text, std::nullopt}));
  EXPECT_EQ(line, with_envelope(R"("event":"text","text":"ok �� bad � cut","request_id":null})"));
  EXPECT_TRUE(read_event_line(line)) << "the writer must never emit a line the reader refuses";
}

// ---------------------------------------------------------------------------------------------
// Unknown fields on a known event are ignored
// ---------------------------------------------------------------------------------------------

TEST(EventUnknownFields, AreIgnoredInSilence) {
  auto read = read_event_line(
      with_envelope(R"("event":"text","text":"x","request_id":null,"future_field":{"nested":[1]},"zzz":1})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(serialize(*read), with_envelope(R"("event":"text","text":"x","request_id":null})"));
}

TEST(EventUnknownFields, MissingNullableFieldsReadAsNull) {
  auto read = read_event_line(with_envelope(R"("event":"turn.ended","turn":2})"));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(serialize(*read), with_envelope(R"("event":"turn.ended","turn":2,"stop_reason":null})"));
}

}  // namespace
}  // namespace mh::protocol

namespace mh::protocol {
namespace {

// Issue 25: a usage read by the run's gateway says so (`source`, additive); a vendor's usage line
// is unchanged (no key). stream.closed's resources may carry the egress counts (omitted when none).
TEST(AdditiveGatewayFields, AUsagesSourceIsWrittenOnlyWhenSetAndReadsBack) {
  ev::Usage gateway{std::string("gateway-3"), std::string("opus"), TokenUsage{}, std::string("request"),
                    std::string("gateway")};
  gateway.usage.input_tokens = 12;
  std::string line = serialize(Event{1, "r", std::nullopt, gateway});
  EXPECT_NE(line.find(R"("scope":"request","source":"gateway")"), std::string::npos) << line;
  auto read = read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(std::get<ev::Usage>(read->payload).source, "gateway");
  EXPECT_EQ(serialize(*read), line);

  ev::Usage vendor{std::string("req_1"), std::string("opus"), TokenUsage{}};
  std::string plain = serialize(Event{1, "r", std::nullopt, vendor});
  EXPECT_EQ(plain.find("source"), std::string::npos) << plain;
  auto plain_read = read_event_line(plain);
  ASSERT_TRUE(plain_read);
  EXPECT_FALSE(std::get<ev::Usage>(plain_read->payload).source);
}

TEST(AdditiveGatewayFields, ResourcesWithoutEgressKeepTheirBytesAndWithItRoundTrip) {
  ev::RunResources counted;
  counted.cpu_usec = 5;
  std::string before =
      serialize(Event{2, "r", std::nullopt, ev::StreamClosed{1, CloseReason::completed, "r", {}, counted}});
  EXPECT_EQ(before.find("egress"), std::string::npos) << before;
  counted.egress = ev::EgressCounts{{{"pypi.org:443", 3}}, {{"10.0.0.1:22", 1}}};
  std::string with =
      serialize(Event{2, "r", std::nullopt, ev::StreamClosed{1, CloseReason::completed, "r", {}, counted}});
  EXPECT_NE(with.find(R"("egress":{"allowed":{"pypi.org:443":3},"denied":{"10.0.0.1:22":1}})"), std::string::npos)
      << with;
  auto read = read_event_line(with);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(serialize(*read), with);
}

}  // namespace
}  // namespace mh::protocol
