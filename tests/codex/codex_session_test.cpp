// The Codex adapter's session (reader + controller) driven line by line with app-server's own
// record shapes (captured from codex 0.171.0, see ../shared/reference/codex-wire.md §5); the
// outputs it returns for each input are recorded by kind. No process, no clock: the run-loop side
// is the recording sink.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "adapters/codex/codex_adapter.hpp"
#include "adapters/codex/codex_evidence.hpp"
#include "adapters/registry.hpp"
#include "adapters/session.hpp"
#include "app_server_answers.hpp"
#include "protocol/digest.hpp"
#include "protocol/line_framer.hpp"
#include "tests/support/output_recorder.hpp"

namespace mh::adapters {
namespace {

namespace json = boost::json;

using test::OutputRecorder;

using codex_answers::default_config;
using codex_answers::no_account;
using codex_answers::no_mcp_servers;
using codex_answers::no_plugins;

class CodexSession : public ::testing::Test {
 protected:
  CodexSession() : adapter(make_codex_adapter(HostConfig{})) {
    spec.run_id = "r1";
    spec.adapter = "codex";
    spec.prompt = "go";
    plan.cwd = "/work";
    plan.transcript_path = "/runs/r1/vendor-stdout.jsonl";
    session = adapter->open_session(spec, plan);
  }

  void feed(const std::string& line) {
    proto::FramedLine framed;
    framed.text = line;
    framed.number = ++line_no;
    framed.length = line.size();
    session->on_vendor_line(framed, sink.in());
  }
  void feed(const json::object& o) { feed(proto::canonical_json(o)); }

  // The last request the session wrote with this method (null if none).
  const json::object* request_of(std::string_view method) const {
    return codex_answers::last_request(sink.written, method);
  }
  // Answers the last request with this method.
  void answer(std::string_view method, json::object result) {
    const json::object* r = request_of(method);
    ASSERT_TRUE(r) << "no " << method << " request was sent";
    feed(json::object{{"id", r->at("id")}, {"result", std::move(result)}});
  }
  void refuse(std::string_view method, std::string message) {
    const json::object* r = request_of(method);
    ASSERT_TRUE(r) << "no " << method << " request was sent";
    feed(json::object{{"id", r->at("id")}, {"error", json::object{{"code", -32603}, {"message", std::move(message)}}}});
  }

  // initialize → initialized → thread/start (and the evidence requests beside it).
  void start_thread(json::object thread_result = {}) {
    session->start(sink.in());
    ASSERT_EQ(sink.written.at(0).at("method"), "initialize");
    feed(json::object{{"id", sink.written.at(0).at("id")}, {"result", codex_answers::initialize()}});
    ASSERT_EQ(sink.written.at(1).at("method"), "initialized");
    ASSERT_EQ(sink.written.at(2).at("method"), "thread/start");
    if (thread_result.empty()) thread_result = codex_answers::thread_start();
    answer("thread/start", std::move(thread_result));
  }

  void answer_evidence() {
    answer("account/read", no_account());
    answer("plugin/installed", no_plugins());
    answer("config/read", default_config());
    answer("mcpServerStatus/list", no_mcp_servers());
  }

  // The whole start, as app-server answers it: session.started follows the last answer.
  void open() {
    start_thread();
    answer_evidence();
  }

  void turn_started(const std::string& turn_id) {
    feed(json::object{{"method", "turn/started"},
                      {"params", json::object{{"threadId", "thr_1"}, {"turn", json::object{{"id", turn_id}}}}}});
  }

  std::unique_ptr<Adapter> adapter;
  RunSpec spec;
  LaunchPlan plan;
  std::unique_ptr<AdapterSession> session;
  OutputRecorder sink;
  std::uint64_t line_no = 0;
};

TEST_F(CodexSession, StartsTheThreadUntrustedWithHookTrustBypassedAndOpensWithSessionStarted) {
  open();
  const auto& start = sink.written.at(2).at("params").as_object();
  EXPECT_EQ(start.at("approvalPolicy"), "untrusted") << "the only policy under which every command asks";
  EXPECT_EQ(start.at("config").as_object().at("bypass_hook_trust"), true);
  EXPECT_EQ(start.at("cwd"), "/work");
  auto started = sink.of<proto::ev::SessionStarted>();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].harness_version, "0.171.0");
  EXPECT_EQ(started[0].session_id, "thr_1");
  EXPECT_EQ(started[0].model, "gpt-5.5");
  EXPECT_EQ(started[0].permission_mode, "untrusted");
  EXPECT_EQ(sink.ready, 1);
  // The initialize asks Codex not to send deltas the stream does not carry.
  const auto& caps = sink.written.at(0).at("params").as_object().at("capabilities").as_object();
  EXPECT_EQ(caps.at("experimentalApi"), true);
  EXPECT_FALSE(caps.at("optOutNotificationMethods").as_array().empty());
}

// Issue 27 section 6: the posture thread/start's answer reports (approvalPolicy, sandbox as
// captured from 0.171.0) is reported once, after session.started, for the run to hold against
// the one it asked (untrusted, workspace-write).
TEST_F(CodexSession, ReportsThePostureThreadStartAnswersAfterSessionStarted) {
  json::object result = codex_answers::thread_start();
  result["sandbox"] = json::object{{"type", "workspaceWrite"},
                                   {"writableRoots", json::array{}},
                                   {"networkAccess", false},
                                   {"excludeTmpdirEnvVar", false},
                                   {"excludeSlashTmp", false}};
  start_thread(std::move(result));
  EXPECT_TRUE(sink.postures.empty()) << "reported with session.started, which waits for the evidence";
  answer_evidence();
  ASSERT_EQ(sink.postures.size(), 1u);
  EXPECT_EQ(sink.postures[0].occasion, "start");
  EXPECT_EQ(sink.postures[0].posture, (Posture{"untrusted", "workspace-write"}));
  EXPECT_TRUE(session->reports_posture()) << "the run reads the report, not session.started alone";
  EXPECT_EQ(session->asked_posture(), (Posture{"untrusted", "workspace-write"}));
  EXPECT_EQ(session->posture_of_set("read-only"), (Posture{std::nullopt, "read-only"}));
  EXPECT_EQ(session->posture_of_set("danger-full-access"), (Posture{std::nullopt, "danger-full-access"}));
  EXPECT_EQ(session->posture_of_set("untrusted"), (Posture{"untrusted", std::nullopt}));
}

TEST_F(CodexSession, AnAnswerThatNamesNoSandboxReportsItUnknown) {
  open();  // the captured answer without its sandbox
  ASSERT_EQ(sink.postures.size(), 1u);
  EXPECT_EQ(sink.postures[0].posture.permission_mode, "untrusted");
  EXPECT_FALSE(sink.postures[0].posture.sandbox) << "null, never a guess";
  spec.deny_only = true;
  EXPECT_EQ(adapter->open_session(spec, plan)->asked_posture(), (Posture{"never", "workspace-write"}));
}

TEST_F(CodexSession, NotificationsBeforeTheThreadExistsFollowSessionStartedWithTheirOwnLines) {
  session->start(sink.in());
  feed(json::object{{"id", sink.written.at(0).at("id")},
                    {"result", json::object{{"userAgent", "metaharness/0.171.0"}}}});
  std::string warning = R"({"method":"configWarning","params":{"summary":"bubblewrap"}})";
  feed(warning);  // line 2
  ASSERT_TRUE(sink.events.empty()) << "held until the session opens";
  feed(json::object{{"id", sink.written.at(2).at("id")},
                    {"result", json::object{{"thread", json::object{{"id", "thr_1"}}}, {"model", "m"}}}});
  ASSERT_TRUE(sink.events.empty()) << "session.started waits for the evidence";
  answer_evidence();
  ASSERT_EQ(sink.events.size(), 2u);
  EXPECT_TRUE(std::holds_alternative<proto::ev::SessionStarted>(sink.events[0]));
  auto opaque = sink.of<proto::ev::Opaque>();
  ASSERT_EQ(opaque.size(), 1u);
  EXPECT_EQ(opaque[0].vendor_type, "configWarning");
  EXPECT_EQ(opaque[0].source_line, 2u);
  EXPECT_EQ(opaque[0].digest, proto::sha256_hex(warning));
}

TEST_F(CodexSession, HeldNotificationsAreReleasedWhenTheThreadNeverStarts) {
  session->start(sink.in());
  feed(json::object{{"id", sink.written.at(0).at("id")},
                    {"result", json::object{{"userAgent", "metaharness/0.171.0"}}}});
  feed(R"({"method":"configWarning","params":{"summary":"x"}})");
  feed(json::object{{"id", sink.written.at(2).at("id")}, {"error", json::object{{"code", -32600}, {"message", "no"}}}});
  ASSERT_EQ(sink.failures.size(), 1u);
  EXPECT_NE(sink.failures[0].find("thread/start"), std::string::npos);
  EXPECT_EQ(sink.of<proto::ev::Opaque>().size(), 1u) << "a record never vanishes";
}

TEST_F(CodexSession, AnApprovalIsACallAwaitingItsAnswerAndAllowIsAcceptNeverForSession) {
  open();
  turn_started("turn_1");
  feed(json::object{
      {"method", "item/commandExecution/requestApproval"},
      {"id", 7},
      {"params", json::object{{"threadId", "thr_1"},
                              {"turnId", "turn_1"},
                              {"itemId", "call_a"},
                              {"command", "/bin/bash -lc ls"},
                              {"cwd", "/work"},
                              {"availableDecisions", json::array{"accept", "acceptForSession", "cancel"}}}}});
  ASSERT_EQ(sink.calls.size(), 1u);
  const auto& asked = sink.calls[0];
  ASSERT_TRUE(asked.reply);
  EXPECT_EQ(asked.call.call_id, "call_a");
  EXPECT_EQ(asked.call.name, "Bash");
  EXPECT_EQ(asked.call.seam, proto::Seam::control_request);
  EXPECT_EQ(asked.call.input.at("command"), "/bin/bash -lc ls");
  session->answer(*asked.reply, asked.call, proto::decision::Allow{}, sink.in());
  EXPECT_EQ(sink.last_written().at("id"), 7);
  EXPECT_EQ(sink.last_written().at("result").at("decision"), "accept");
}

TEST_F(CodexSession, DenyPutsTheReasonBeforeTheDecline) {
  open();
  turn_started("turn_1");
  feed(json::object{{"method", "item/fileChange/requestApproval"},
                    {"id", 8},
                    {"params", json::object{{"threadId", "thr_1"}, {"itemId", "call_p"}}}});
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_EQ(sink.calls[0].call.name, "apply_patch");
  std::size_t before = sink.written.size();
  session->answer(*sink.calls[0].reply, sink.calls[0].call, proto::decision::Deny{"SUPERVISOR: no patches"}, sink.in());
  ASSERT_EQ(sink.written.size(), before + 2);
  const auto& inject = sink.written[before];
  EXPECT_EQ(inject.at("method"), "thread/inject_items");
  EXPECT_NE(proto::canonical_json(inject).find("SUPERVISOR: no patches"), std::string::npos);
  EXPECT_EQ(inject.at("params").at("items").at(0).at("role"), "developer");
  EXPECT_EQ(sink.written[before + 1].at("result").at("decision"), "decline");
}

TEST_F(CodexSession, AbstainDeclinesUnderUntrustedBecauseNobodyElseApproves) {
  open();
  feed(json::object{{"method", "item/commandExecution/requestApproval"},
                    {"id", 9},
                    {"params", json::object{{"itemId", "call_x"}, {"command", "ls"}}}});
  session->answer(*sink.calls[0].reply, sink.calls[0].call, proto::decision::Abstain{}, sink.in());
  EXPECT_EQ(sink.last_written().at("result").at("decision"), "decline");
}

TEST_F(CodexSession, ReplaceIsRefusedByNameForThisWire) {
  open();
  ToolCall call{"call_a", "Bash", json::object{{"command", "ls"}}, proto::Seam::control_request};
  auto refusal = session->check_decision(call, proto::decision::Replace{json::object{{"command", "pwd"}}});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, proto::RefusalCode::UNSUPPORTED_CONTROL);
  EXPECT_FALSE(session->check_decision(call, proto::decision::Allow{}));
}

// The model's own function_call, as app-server reports it under experimentalRawEvents (captured on
// 0.171.0): Codex sends it before it runs the hook, starts the item or asks for an approval.
json::object raw_call(const std::string& call_id, const json::object& arguments) {
  return json::object{
      {"method", "rawResponseItem/completed"},
      {"params", json::object{{"threadId", "thr_1"},
                              {"turnId", "t1"},
                              {"item", json::object{{"type", "function_call"},
                                                    {"status", "completed"},
                                                    {"id", "fc_mh_0001_0"},
                                                    {"name", "exec_command"},
                                                    {"arguments", proto::canonical_json(json::value(arguments))},
                                                    {"call_id", call_id}}}}}};
}

TEST_F(CodexSession, TheHookAnnouncesShellCallsAndWaitsForEveryOtherKind) {
  open();
  feed(raw_call("call_a", json::object{{"cmd", "ls"}}));
  session->on_hook_request(
      1,
      json::object{{"tool_name", "Bash"}, {"tool_use_id", "call_a"}, {"tool_input", json::object{{"command", "ls"}}}},
      sink.in());
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_FALSE(sink.calls[0].reply) << "the approval that follows decides a shell call";
  EXPECT_EQ(sink.calls[0].call.seam, proto::Seam::control_request);
  ASSERT_EQ(sink.hook_replies.size(), 1u);
  EXPECT_EQ(sink.hook_replies[0].second, "") << "no opinion at the hook";

  session->on_hook_request(
      2,
      json::object{
          {"tool_name", "view_image"}, {"tool_use_id", "call_i"}, {"tool_input", json::object{{"path", "p.png"}}}},
      sink.in());
  ASSERT_EQ(sink.calls.size(), 2u);
  ASSERT_TRUE(sink.calls[1].reply);
  EXPECT_EQ(sink.calls[1].call.seam, proto::Seam::hook);
  session->answer(*sink.calls[1].reply, sink.calls[1].call, proto::decision::Deny{"no images"}, sink.in());
  ASSERT_EQ(sink.hook_replies.size(), 2u);
  EXPECT_EQ(sink.hook_replies[1].first, 2u);
  auto out = proto::parse_json(sink.hook_replies[1].second);
  ASSERT_TRUE(out);
  EXPECT_EQ(out->at("hookSpecificOutput").at("permissionDecision"), "deny");
  EXPECT_EQ(out->at("hookSpecificOutput").at("permissionDecisionReason"), "no images");

  session->on_hook_request(3, json::object{{"tool_input", json::object{}}}, sink.in());
  ASSERT_EQ(sink.hook_replies.size(), 3u);
  EXPECT_NE(sink.hook_replies[2].second.find("\"deny\""), std::string::npos)
      << "a hook input naming no tool is denied, never let through";
}

TEST_F(CodexSession, SteerAndInterruptNeedARunningTurn) {
  open();
  EXPECT_EQ(session->steer("x", sink.in()).outcome.refusal->code, proto::RefusalCode::TOO_LATE);
  EXPECT_EQ(session->interrupt(sink.in()).outcome.refusal->code, proto::RefusalCode::TOO_LATE);
  turn_started("turn_1");
  auto steer = session->steer("prefer short", sink.in());
  EXPECT_EQ(steer.kind, ControlAck::Kind::pending_vendor);
  EXPECT_EQ(sink.last_written().at("method"), "turn/steer");
  EXPECT_EQ(sink.last_written().at("params").at("expectedTurnId"), "turn_1");
  // The turn ended before Codex took the steer: the window closed, TOO_LATE.
  feed(json::object{{"id", sink.last_written().at("id")},
                    {"error", json::object{{"code", -32600}, {"message", "no active turn to steer"}}}});
  ASSERT_EQ(sink.controls.size(), 1u);
  EXPECT_FALSE(sink.controls[0].ok);
  EXPECT_EQ(sink.controls[0].refusal_code, proto::RefusalCode::TOO_LATE);

  auto interrupt = session->interrupt(sink.in());
  EXPECT_EQ(interrupt.kind, ControlAck::Kind::pending_vendor);
  EXPECT_EQ(sink.written[sink.written.size() - 2].at("method"), "turn/interrupt");
  EXPECT_EQ(sink.last_written().at("method"), "thread/backgroundTerminals/clean")
      << "turn/interrupt leaves a running command running";
}

TEST_F(CodexSession, APostureThatWouldSwitchTheSeamOffIsShadowed) {
  open();
  for (auto posture : {"never", "on-request", "on-failure"})
    EXPECT_EQ(session->set_permission(posture, sink.in()).outcome.refusal->code, proto::RefusalCode::SHADOWED)
        << posture;
  EXPECT_EQ(session->set_permission("bogus", sink.in()).outcome.refusal->code, proto::RefusalCode::MALFORMED);
  auto ok = session->set_permission("read-only", sink.in());
  EXPECT_EQ(ok.kind, ControlAck::Kind::pending_vendor);
  EXPECT_EQ(ok.outcome.applies_at, "the next turn boundary");
  EXPECT_EQ(sink.last_written().at("method"), "thread/settings/update");
  EXPECT_EQ(sink.last_written().at("params").at("sandboxPolicy").at("type"), "readOnly");
}

TEST_F(CodexSession, NotificationsMapToEventsAndTheRestIsOpaque) {
  open();
  turn_started("turn_1");
  feed(R"({"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m1","text":"Hello."}}})");
  feed(
      R"({"method":"item/completed","params":{"item":{"type":"reasoning","id":"r1","summary":["Think."],"content":[]}}})");
  feed(
      R"({"method":"item/started","params":{"item":{"type":"commandExecution","id":"call_a","command":"ls","cwd":"/work"}}})");
  feed(
      R"({"method":"item/completed","params":{"item":{"type":"commandExecution","id":"call_a","status":"completed","exitCode":2,"aggregatedOutput":"no"}}})");
  feed(
      R"({"method":"thread/tokenUsage/updated","params":{"tokenUsage":{"last":{"inputTokens":10,"outputTokens":5,"cachedInputTokens":1,"reasoningOutputTokens":2},"total":{"inputTokens":30,"outputTokens":9}}}})");
  feed(
      R"({"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","primary":{"usedPercent":42.5,"resetsAt":1795990000}}}})");
  feed(R"({"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","primary":null}}})");
  std::string unknown = R"({"method":"thread/someFutureThing","params":{"x":1}})";
  feed(unknown);
  feed("not json at all");
  feed(R"({"method":"turn/completed","params":{"turn":{"id":"turn_1","status":"completed"}}})");

  ASSERT_EQ(sink.of<proto::ev::Text>().size(), 1u);
  EXPECT_EQ(sink.of<proto::ev::Text>()[0].text, "Hello.");
  ASSERT_EQ(sink.of<proto::ev::Thinking>().size(), 1u);
  EXPECT_EQ(sink.of<proto::ev::Thinking>()[0].text, "Think.");
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_EQ(sink.calls[0].call.call_id, "call_a");
  auto results = sink.of<proto::ev::ToolResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].exit_code, 2);
  EXPECT_EQ(results[0].is_error, false);
  EXPECT_EQ(results[0].outcome_source, "item/completed");
  auto usage = sink.of<proto::ev::Usage>();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].usage.input_tokens, 10u);
  EXPECT_EQ(usage[0].usage.cache_read_input_tokens, 1u);
  EXPECT_EQ(usage[0].usage.thinking_tokens, 2u);
  EXPECT_EQ(usage[0].model, "gpt-5.5");
  auto limits = sink.of<proto::ev::RateLimit>();
  ASSERT_EQ(limits.size(), 1u) << "a window with no figures is not a rate limit: it stays opaque";
  EXPECT_EQ(limits[0].info.utilization, 42.5);
  EXPECT_EQ(limits[0].info.window, "codex");
  auto opaque = sink.of<proto::ev::Opaque>();
  ASSERT_EQ(opaque.size(), 3u);
  EXPECT_EQ(opaque[1].vendor_type, "thread/someFutureThing");
  EXPECT_EQ(opaque[1].digest, proto::sha256_hex(unknown));
  EXPECT_FALSE(opaque[2].vendor_type) << "a line that is not JSON has no type to name";
  EXPECT_EQ(sink.turns, (std::vector<std::string>{"started", "ended:completed"}));

  auto ended = session->session_ended();
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->is_error, false);
  EXPECT_EQ(ended->final_answer->text, "Hello.");
  EXPECT_EQ(ended->num_turns, 1u);
  EXPECT_EQ(ended->usage->input_tokens, 30u);
  EXPECT_FALSE(ended->permission_denials) << "Codex keeps no denial list: unknown, not none";
}

TEST_F(CodexSession, AFinal401IsAuthExpiredAndARetriedOneIsNot) {
  open();
  turn_started("turn_1");
  feed(
      R"({"method":"error","params":{"error":{"message":"unexpected status 401","codexErrorInfo":{"responseStreamConnectionFailed":{"httpStatusCode":401}}},"willRetry":true}})");
  EXPECT_TRUE(sink.of<proto::ev::AuthExpired>().empty()) << "Codex is still retrying";
  feed(
      R"({"method":"error","params":{"error":{"message":"unexpected status 401 Unauthorized: revoked","codexErrorInfo":{"responseStreamConnectionFailed":{"httpStatusCode":401}}},"willRetry":false}})");
  auto expired = sink.of<proto::ev::AuthExpired>();
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_NE(expired[0].detail.value_or("").find("revoked"), std::string::npos);
  feed(
      R"({"method":"turn/completed","params":{"turn":{"id":"turn_1","status":"failed","error":{"message":"x","codexErrorInfo":{"responseStreamConnectionFailed":{"httpStatusCode":401}}}}}})");
  auto ended = session->session_ended();
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->is_error, true);
  EXPECT_EQ(ended->api_error_status, "401");
  EXPECT_EQ(classify_close(false, ended), proto::CloseReason::error);
}

TEST_F(CodexSession, AServerRequestNothingConfiguredIsRefusedNotLeftWaiting) {
  open();
  feed(R"({"method":"item/tool/requestUserInput","id":11,"params":{"questions":[]}})");
  EXPECT_EQ(sink.last_written().at("id"), 11);
  EXPECT_TRUE(sink.last_written().contains("error"));
  ASSERT_EQ(sink.of<proto::ev::Opaque>().size(), 1u);
}

TEST_F(CodexSession, ASteerShowsAsAnInjectionOnceItLandsAndOurOwnTurnInputIsOnlyItsEcho) {
  open();
  turn_started("turn_1");
  feed(
      R"({"method":"item/completed","params":{"item":{"type":"userMessage","id":"u1","content":[{"type":"text","text":"go"}]}}})");
  EXPECT_TRUE(sink.of<proto::ev::Injection>().empty());
  session->steer("STEER", sink.in());
  feed(
      R"({"method":"item/completed","params":{"item":{"type":"userMessage","id":"u2","content":[{"type":"text","text":"STEER"}]}}})");
  auto injections = sink.of<proto::ev::Injection>();
  ASSERT_EQ(injections.size(), 1u);
  EXPECT_EQ(injections[0].text, "STEER");
  EXPECT_EQ(injections[0].origin, "steer");
}

// A scratch tree with the two programs a Codex plan names (empty files: planning only looks for
// them), the host config naming them, and the run spec the plan tests start from.
struct PlanBench {
  explicit PlanBench(const std::string& tag)
      : root(std::filesystem::temp_directory_path() / (tag + std::to_string(::getpid()))) {
    std::filesystem::create_directories(root / "bin");
    std::ofstream(root / "bin/codex") << "";
    std::ofstream(root / "bin/hook") << "";
    config.binaries["codex"] = root / "bin/codex";
    config.binaries["codex-hook"] = root / "bin/hook";
  }
  ~PlanBench() { std::filesystem::remove_all(root); }
  RunPaths paths() const { return RunPaths{root / "run", root / "run/scratch"}; }
  static RunSpec spec() {
    RunSpec spec;
    spec.run_id = "r9";
    spec.adapter = "codex";
    spec.prompt = "go";
    spec.model_endpoint = ModelEndpoint{"http://127.0.0.1:9", "tok"};
    return spec;
  }

  std::filesystem::path root;
  HostConfig config;
};

TEST(CodexAdapter, PlanIsAValueNamingTheNativeBinaryAScratchHomeAndTheHook) {
  PlanBench bench("mh-codex-plan-");
  const auto& root = bench.root;
  auto adapter = make_codex_adapter(bench.config);
  RunSpec spec = PlanBench::spec();
  spec.decision_deadline_ms = 55'000;
  spec.vendor_options["stream_max_retries"] = "0";
  auto planned = adapter->plan(spec, bench.paths());
  ASSERT_TRUE(std::holds_alternative<LaunchPlan>(planned)) << std::get<LaunchRefusal>(planned).message;
  const auto& p = std::get<LaunchPlan>(planned);
  EXPECT_EQ(p.program, root / "bin/codex");
  EXPECT_EQ(p.args, (std::vector<std::string>{"app-server"}));
  ASSERT_EQ(p.files.size(), 1u);
  const std::string& toml = p.files[0].contents;
  for (auto needle : {"base_url = \"http://127.0.0.1:9/v1\"", "wire_api = \"responses\"", "web_search = \"disabled\"",
                      "unified_exec_tty = false", "trust_level = \"untrusted\"", "matcher = \"*\"",
                      "stream_max_retries = 0", "timeout = 85"})
    EXPECT_NE(toml.find(needle), std::string::npos) << needle << " in\n" << toml;
  EXPECT_EQ(toml.find("approval_policy"), std::string::npos) << "this version refuses it as a config key";
  std::map<std::string, std::string> env(p.env.begin(), p.env.end());
  EXPECT_EQ(env["METAHARNESS_MODEL_TOKEN"], "tok");
  EXPECT_EQ(env["METAHARNESS_HOOK_SOCKET"], "@metaharness/hook/r9");
  EXPECT_EQ(env["METAHARNESS_HOOK_DEADLINE_S"], "75") << "after our deadline, before Codex's hook timeout";
  EXPECT_EQ(env["METAHARNESS_RUN"], "r9");
  EXPECT_FALSE(env.count("OPENAI_API_KEY"));

  spec.vendor_options = {{"approval_policy", "never"}};
  auto refused = adapter->plan(spec, bench.paths());
  ASSERT_TRUE(std::holds_alternative<LaunchRefusal>(refused)) << "an unknown vendor option is refused";
  spec.vendor_options.clear();
  spec.vendor_env = {{"CODEX_HOME", "/elsewhere"}};
  EXPECT_TRUE(std::holds_alternative<LaunchRefusal>(adapter->plan(spec, bench.paths())));
  spec.vendor_env.clear();
  bench.config.binaries["codex-hook"] = root / "bin/missing";
  auto no_hook = make_codex_adapter(bench.config)->plan(spec, bench.paths());
  ASSERT_TRUE(std::holds_alternative<LaunchRefusal>(no_hook)) << "no hook program, no run: the seam would be half";
}

}  // namespace
}  // namespace mh::adapters

namespace mh::adapters {
namespace {

// Numbers from the vendor are untrusted: out-of-range clocks, ids, exit codes and reset times are
// read as unknown, never thrown on (found by fuzz_vendor_transcript: a 2^64-ish emittedAtMs
// aborted the reader).
TEST_F(CodexSession, NumbersNoFieldCanHoldAreUnknownNotACrash) {
  open();
  feed(
      R"({"method":"turn/started","params":{"threadId":"thr_1","turn":{"id":"t1"}},"emittedAtMs":18446744073709551615})");
  feed(R"({"method":"thread/started","params":{},"emittedAtMs":1e300})");
  feed(R"({"id":18446744073709551615,"result":{}})");
  feed(R"({"id":1.5,"result":{}})");
  feed(
      R"({"method":"item/completed","params":{"threadId":"thr_1","turnId":"t1","item":{"type":"commandExecution","id":"c1","command":"ls","status":"completed","exitCode":1e300}}})");
  feed(
      R"({"method":"account/rateLimits/updated","params":{"rateLimits":{"limitId":"codex","primary":{"usedPercent":1e400,"resetsAt":-1e300}}}})");
  EXPECT_EQ(sink.turns, (std::vector<std::string>{"started"}));
  auto results = sink.of<proto::ev::ToolResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_FALSE(results[0].exit_code.has_value());
}

// --- issue 9: sub-agents, escalation, 429, deny-only, patch subjects ----------------------------

json::object approval(int id, const std::string& thread, const std::string& item, json::value reason = nullptr) {
  return json::object{{"method", "item/commandExecution/requestApproval"},
                      {"id", id},
                      {"params", json::object{{"kind", "command"},
                                              {"threadId", thread},
                                              {"turnId", "t1"},
                                              {"itemId", item},
                                              {"command", "/bin/bash -lc 'touch x'"},
                                              {"cwd", "/work"},
                                              {"reason", reason}}}};
}

TEST_F(CodexSession, ASubAgentsCallNamesItsThreadAndItsDenyReasonGoesIntoThatThread) {
  open();
  turn_started("t1");
  // Captured shape: the sub-agent's approval carries its own (child) threadId.
  feed(approval(0, "thr_child", "call_sub"));
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_EQ(sink.calls[0].call.agent, std::optional<std::string>("thr_child"));
  session->answer(*sink.calls[0].reply, sink.calls[0].call, proto::decision::Deny{"SUPERVISOR: not you"}, sink.in());
  const json::object* inject = nullptr;
  for (const auto& w : sink.written)
    if (w.contains("method") && w.at("method") == "thread/inject_items") inject = &w;
  ASSERT_TRUE(inject);
  EXPECT_EQ(inject->at("params").as_object().at("threadId"), "thr_child") << "the thread that made the call";
  EXPECT_EQ(sink.last_written().at("result").as_object().at("decision"), "decline");

  // The main agent's own call carries no agent.
  feed(approval(1, "thr_1", "call_main"));
  EXPECT_FALSE(sink.calls.back().call.agent.has_value());
  // The hook's input names a sub-agent by agent_id (its session_id is the root thread's).
  session->on_hook_request(7,
                           json::object{{"session_id", "thr_1"},
                                        {"agent_id", "thr_child"},
                                        {"tool_name", "view_image"},
                                        {"tool_use_id", "call_img"},
                                        {"tool_input", json::object{{"path", "a.png"}}}},
                           sink.in());
  EXPECT_EQ(sink.calls.back().call.agent, std::optional<std::string>("thr_child"));
}

TEST_F(CodexSession, ASpawnsResultNamesTheAgentItStarted) {
  open();
  turn_started("t1");
  // Captured shape (codex 0.171.0, model slug without metadata): spawn_agent's item/completed.
  feed(R"({"method":"item/completed","params":{"item":{"type":"collabAgentToolCall","id":"call_spawn",)"
       R"("tool":"spawnAgent","status":"completed","senderThreadId":"thr_1","receiverThreadIds":["thr_child"],)"
       R"("prompt":"CHILD TASK","model":"mock-model","reasoningEffort":"medium",)"
       R"("agentsStates":{"thr_child":{"status":"pendingInit","message":null}}},"threadId":"thr_1","turnId":"t1"}})");
  auto results = sink.of<proto::ev::ToolResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].call_id, "call_spawn");
  EXPECT_EQ(results[0].is_error, std::optional<bool>(false));
  EXPECT_EQ(results[0].content.as_object().at("receiverThreadIds"), json::array{"thr_child"});
}

TEST_F(CodexSession, ASubAgentsTurnsAreOpaqueAndTurnsCountTheMainAgentsOnly) {
  open();
  turn_started("t1");
  feed(json::object{{"method", "turn/started"},
                    {"params", json::object{{"threadId", "thr_child"}, {"turn", json::object{{"id", "t_child"}}}}}});
  feed(json::object{
      {"method", "item/completed"},
      {"params",
       json::object{{"threadId", "thr_child"},
                    {"item", json::object{{"type", "agentMessage"}, {"id", "m1"}, {"text", "child says"}}}}}});
  feed(json::object{{"method", "turn/completed"},
                    {"params", json::object{{"threadId", "thr_child"},
                                            {"turn", json::object{{"id", "t_child"}, {"status", "completed"}}}}}});
  EXPECT_EQ(sink.turns, std::vector<std::string>{"started"}) << "the sub-agent's turn is inside the main one";
  EXPECT_TRUE(sink.of<proto::ev::Text>().empty()) << "a sub-agent's words are not the main agent's text";
  std::size_t opaque_turns = 0;
  for (const auto& o : sink.of<proto::ev::Opaque>())
    if (o.vendor_type == "turn/started" || o.vendor_type == "turn/completed") ++opaque_turns;
  EXPECT_EQ(opaque_turns, 2u) << "nothing vanishes";
  feed(json::object{
      {"method", "turn/completed"},
      {"params", json::object{{"threadId", "thr_1"}, {"turn", json::object{{"id", "t1"}, {"status", "completed"}}}}}});
  EXPECT_EQ(sink.turns, (std::vector<std::string>{"started", "ended:completed"}));
}

TEST_F(CodexSession, ASecondApprovalForTheSameItemIsItsOwnEscalationCall) {
  open();
  turn_started("t1");
  feed(approval(0, "thr_1", "call_touch"));
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_EQ(sink.calls[0].call.call_id, "call_touch");
  EXPECT_FALSE(sink.calls[0].call.escalation);
  session->answer(*sink.calls[0].reply, sink.calls[0].call, proto::decision::Allow{}, sink.in());
  // Captured shape (granular policy, codex-gating.md §2): the retry asks again for the same item.
  feed(approval(1, "thr_1", "call_touch", "command failed; retry without sandbox?"));
  ASSERT_EQ(sink.calls.size(), 2u);
  EXPECT_EQ(sink.calls[1].call.call_id, "call_touch/escalation-1") << "a call of its own";
  EXPECT_TRUE(sink.calls[1].call.escalation);
  EXPECT_EQ(sink.calls[1].call.input.as_object().at("reason"), "command failed; retry without sandbox?");
  ASSERT_TRUE(sink.calls[1].reply);
  EXPECT_NE(sink.calls[1].reply->id, sink.calls[0].reply->id) << "answered on its own request id";
}

TEST_F(CodexSession, A429IsARateLimitWithTheVendorsStatusAndNothingInvented) {
  open();
  turn_started("t1");
  for (bool retry : {true, false})
    feed(json::object{
        {"method", "error"},
        {"params",
         json::object{{"threadId", "thr_1"},
                      {"willRetry", retry},
                      {"error", json::object{{"message", "exceeded retry limit, last status: 429 Too Many Requests"},
                                             {"codexErrorInfo", json::object{{"responseStreamDisconnected",
                                                                              json::object{{"httpStatusCode", 429}}}}},
                                             {"additionalDetails", nullptr}}}}}});
  auto limits = sink.of<proto::ev::RateLimit>();
  ASSERT_EQ(limits.size(), 2u);
  for (const auto& l : limits) {
    EXPECT_EQ(l.info.status, std::optional<std::string>("429"));
    EXPECT_FALSE(l.info.window);
    EXPECT_FALSE(l.info.resets_at) << "Codex tells no delay here: never invented";
    EXPECT_FALSE(l.info.utilization);
    EXPECT_FALSE(l.info.using_overage);
  }
  EXPECT_TRUE(sink.of<proto::ev::AuthExpired>().empty());
}

TEST_F(CodexSession, ADenyOnlyThreadRunsUnderNeverAndTheHookDecidesShellCalls) {
  spec.deny_only = true;
  session = adapter->open_session(spec, plan);
  open();
  EXPECT_EQ(sink.written.at(2).at("params").as_object().at("approvalPolicy"), "never");
  session->on_hook_request(3,
                           json::object{{"session_id", "thr_1"},
                                        {"tool_name", "Bash"},
                                        {"tool_use_id", "call_b"},
                                        {"tool_input", json::object{{"command", "touch x"}}}},
                           sink.in());
  ASSERT_EQ(sink.calls.size(), 1u);
  ASSERT_TRUE(sink.calls[0].reply) << "under never no approval follows: the hook must wait for the decision";
  EXPECT_TRUE(sink.hook_replies.empty());
  session->answer(*sink.calls[0].reply, sink.calls[0].call, proto::decision::Deny{"no"}, sink.in());
  ASSERT_EQ(sink.hook_replies.size(), 1u);
  EXPECT_NE(sink.hook_replies[0].second.find("\"deny\""), std::string::npos);
  auto untrusted = session->set_permission("untrusted", sink.in());
  EXPECT_EQ(untrusted.kind, ControlAck::Kind::refused);
}

TEST_F(CodexSession, AnAllowOverridesTheSandboxPosturesOnly) {
  EXPECT_TRUE(session->allow_overrides_posture("read-only"));
  EXPECT_TRUE(session->allow_overrides_posture("workspace-write"));
  EXPECT_FALSE(session->allow_overrides_posture("untrusted"));
  EXPECT_FALSE(session->allow_overrides_posture("danger-full-access"));
}

TEST_F(CodexSession, APermissionChangeBeforeTheThreadExistsIsSentOnceItDoes) {
  auto ack = session->set_permission("read-only", sink.in());
  EXPECT_EQ(ack.kind, ControlAck::Kind::pending_vendor);
  EXPECT_TRUE(sink.written.empty()) << "no thread id yet: nothing is sent";
  open();
  const json::object* update = nullptr;
  for (const auto& w : sink.written)
    if (w.contains("method") && w.at("method") == "thread/settings/update") update = &w;
  ASSERT_TRUE(update);
  EXPECT_EQ(update->at("params").as_object().at("threadId"), "thr_1");
  EXPECT_EQ("rpc:" + std::to_string(update->at("id").to_number<std::int64_t>()), ack.control_id);
}

// --- the hermetic evidence: what Codex says about its own surface ---------------------------

// The evidence is asked while the thread starts (the MCP list, which needs the thread, right
// after it), and session.started waits for every answer: it carries Codex's words, never a guess.
TEST_F(CodexSession, SessionStartedWaitsForCodexsOwnAnswersAndCarriesThem) {
  start_thread();
  const json::object* account = request_of("account/read");
  const json::object* plugins = request_of("plugin/installed");
  const json::object* config = request_of("config/read");
  const json::object* mcp = request_of("mcpServerStatus/list");
  ASSERT_TRUE(account && plugins && config && mcp);
  EXPECT_EQ(plugins->at("params").at("cwds"), (json::array{"/work"})) << "repo marketplaces of the working directory";
  EXPECT_EQ(config->at("params").at("cwd"), "/work") << "the effective config as seen from the working directory";
  EXPECT_EQ(mcp->at("params").at("threadId"), "thr_1") << "the thread's own MCP connections";
  EXPECT_GT(mcp->at("id").to_number<std::int64_t>(), config->at("id").to_number<std::int64_t>());

  answer("account/read", no_account());
  answer("plugin/installed", no_plugins());
  answer("config/read", default_config());
  EXPECT_TRUE(sink.of<proto::ev::SessionStarted>().empty()) << "the MCP answer is still out";
  EXPECT_EQ(sink.ready, 0);
  EXPECT_EQ(request_of("turn/start"), nullptr);
  answer("mcpServerStatus/list", no_mcp_servers());

  auto started = sink.of<proto::ev::SessionStarted>();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].credential_source, "none") << "account: null, the provider is not OpenAI's";
  EXPECT_EQ(started[0].output_style, "default") << "no personality, no instruction override";
  ASSERT_TRUE(started[0].plugins);
  EXPECT_TRUE(started[0].plugins->empty()) << "[] because Codex says none, never because nobody asked";
  ASSERT_TRUE(started[0].mcp_servers);
  EXPECT_TRUE(started[0].mcp_servers->empty());
  EXPECT_EQ(sink.ready, 1);
  EXPECT_TRUE(sink.of<proto::ev::Warning>().empty());
}

TEST_F(CodexSession, WhatCodexReportsLoadedIsNamedAsCodexSaysIt) {
  start_thread();
  answer("account/read", json::object{{"account", json::object{{"type", "apiKey"}}}, {"requiresOpenaiAuth", true}});
  json::array listed{
      json::object{{"id", "probe-plugin@probe-market"},
                   {"name", "probe-plugin"},
                   {"localVersion", "0.1.0"},
                   {"installed", true},
                   {"enabled", true}},
      json::object{{"id", "off@probe-market"}, {"name", "off"}, {"installed", true}, {"enabled", false}},
      json::object{{"id", "shelf@probe-market"}, {"name", "shelf"}, {"installed", false}, {"enabled", false}}};
  answer("plugin/installed",
         json::object{{"marketplaces", json::array{json::object{{"name", "probe-market"}, {"plugins", listed}}}},
                      {"marketplaceLoadErrors", json::array{}}});
  json::object config = default_config();
  config["config"].as_object()["developer_instructions"] = "be terse";
  config["config"].as_object()["personality"] = "friendly";
  answer("config/read", config);
  // Two pages: the second is asked with the first one's cursor.
  answer("mcpServerStatus/list",
         json::object{{"data", json::array{json::object{{"name", "probe"}, {"runtimeStatus", "failed"}}}},
                      {"nextCursor", "c2"}});
  ASSERT_TRUE(sink.of<proto::ev::SessionStarted>().empty());
  EXPECT_EQ(request_of("mcpServerStatus/list")->at("params").at("cursor"), "c2");
  answer("mcpServerStatus/list",
         json::object{{"data", json::array{json::object{{"name", "docs"}, {"runtimeStatus", nullptr}}}},
                      {"nextCursor", nullptr}});

  auto started = sink.of<proto::ev::SessionStarted>();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].credential_source, "apiKey");
  ASSERT_TRUE(started[0].plugins);
  ASSERT_EQ(started[0].plugins->size(), 1u) << "a disabled or uninstalled plugin does not load";
  EXPECT_EQ(started[0].plugins->at(0).name, "probe-plugin");
  EXPECT_EQ(started[0].plugins->at(0).source, "probe-market");
  EXPECT_EQ(started[0].plugins->at(0).version, "0.1.0");
  EXPECT_EQ(started[0].output_style, "custom: personality friendly, developer_instructions");
  ASSERT_TRUE(started[0].mcp_servers);
  ASSERT_EQ(started[0].mcp_servers->size(), 2u);
  EXPECT_EQ(started[0].mcp_servers->at(0).name, "probe");
  EXPECT_EQ(started[0].mcp_servers->at(0).status, "failed");
  EXPECT_EQ(started[0].mcp_servers->at(1).name, "docs");
  EXPECT_EQ(started[0].mcp_servers->at(1).status, std::nullopt);
}

// A refusal, or an answer without what is read from it, leaves that field null (unknown, never
// none): the session still opens, and a warning after session.started says which and why.
TEST_F(CodexSession, AnAnswerThatDoesNotSayLeavesItsFieldUnknownAndTheStreamSaysSo) {
  start_thread();
  refuse("account/read", "not now");
  answer("plugin/installed",
         json::object{{"marketplaces", json::array{}},
                      {"marketplaceLoadErrors",
                       json::array{json::object{{"marketplacePath", "/m.json"}, {"message", "bad json"}}}}});
  json::object config = default_config();
  config["config"].as_object().erase("personality");
  answer("config/read", config);
  answer("mcpServerStatus/list", json::object{{"nextCursor", nullptr}});

  ASSERT_FALSE(sink.events.empty());
  ASSERT_TRUE(std::holds_alternative<proto::ev::SessionStarted>(sink.events[0])) << "the stream opens with it";
  const auto& started = std::get<proto::ev::SessionStarted>(sink.events[0]);
  EXPECT_EQ(started.credential_source, std::nullopt);
  EXPECT_EQ(started.plugins, std::nullopt) << "a marketplace Codex could not read may hold a plugin";
  EXPECT_EQ(started.output_style, std::nullopt);
  EXPECT_EQ(started.mcp_servers, std::nullopt);
  auto warnings = sink.of<proto::ev::Warning>();
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_EQ(warnings[0].code, "VENDOR_REFUSED");
  EXPECT_NE(warnings[0].message.find("codex refused account/read: not now"), std::string::npos) << warnings[0].message;
  EXPECT_NE(warnings[0].message.find("session.started.credential_source is null (unknown)"), std::string::npos);
  for (const auto& w : warnings)
    EXPECT_NE(w.message.find("is null (unknown)"), std::string::npos) << w.message;
  EXPECT_EQ(sink.ready, 1) << "unknown evidence is for the floor to judge; the run goes on";
}

// H11: Codex names the instruction files it loaded. Metaharness puts none anywhere, so any one
// (here an AGENTS.md in the CODEX_HOME, and one in the working directory) stops the run before its
// first turn, so the model never reads it, and the attestation says H11 did not hold, naming them.
TEST_F(CodexSession, AMemoryFileCodexReportsLoadedStopsTheRunBeforeItsFirstTurn) {
  plan.attestation.imposed = {{proto::HermeticRow::h11, "pinned untrusted"}};
  session = adapter->open_session(spec, plan);
  start_thread(json::object{{"thread", json::object{{"id", "thr_1"}}},
                            {"cwd", "/work"},
                            {"instructionSources", json::array{"/x/codex-home/AGENTS.md", "/work/AGENTS.md"}}});
  answer_evidence();
  auto started = sink.of<proto::ev::SessionStarted>();
  ASSERT_EQ(started.size(), 1u);
  const auto& h = started[0].hermetic;
  EXPECT_TRUE(h.imposed.empty()) << "H11 is no longer claimed";
  ASSERT_EQ(h.unavailable.size(), 1u);
  EXPECT_EQ(h.unavailable[0].row, proto::HermeticRow::h11);
  EXPECT_EQ(h.unavailable[0].why,
            "Codex reports loading /x/codex-home/AGENTS.md, /work/AGENTS.md (thread/start instructionSources)");
  ASSERT_EQ(sink.failures.size(), 1u);
  EXPECT_NE(sink.failures[0].find("/x/codex-home/AGENTS.md, /work/AGENTS.md"), std::string::npos) << sink.failures[0];
  EXPECT_EQ(sink.ready, 0);
  EXPECT_EQ(request_of("turn/start"), nullptr);
}

TEST_F(CodexSession, NoInstructionFileLoadedKeepsTheH11ClaimAndTheRunStarts) {
  plan.attestation.imposed = {{proto::HermeticRow::h11, "pinned untrusted"}};
  for (bool listed : {true, false}) {
    sink = OutputRecorder{};
    session = adapter->open_session(spec, plan);
    json::object thread{{"thread", json::object{{"id", "thr_1"}}}, {"cwd", "/work"}};
    // Without the list (a Codex that does not say) the launch's own controls are the claim.
    if (listed) thread["instructionSources"] = json::array{};
    start_thread(thread);
    answer_evidence();
    auto started = sink.of<proto::ev::SessionStarted>();
    ASSERT_EQ(started.size(), 1u);
    ASSERT_EQ(started[0].hermetic.imposed.size(), 1u);
    EXPECT_EQ(started[0].hermetic.imposed[0].row, proto::HermeticRow::h11);
    EXPECT_TRUE(sink.failures.empty());
    EXPECT_EQ(sink.ready, 1);
  }
}

// A permission change asked for while the thread exists but the evidence is still out waits for
// session.started too: its answer must not come before the record that opens the stream.
TEST_F(CodexSession, APermissionChangeBeforeSessionStartedIsSentWhenItIsWritten) {
  start_thread();
  auto ack = session->set_permission("untrusted", sink.in());
  EXPECT_EQ(ack.kind, ControlAck::Kind::pending_vendor);
  EXPECT_EQ(request_of("thread/settings/update"), nullptr);
  answer_evidence();
  const json::object* update = request_of("thread/settings/update");
  ASSERT_TRUE(update);
  EXPECT_EQ(update->at("params").at("threadId"), "thr_1");
  ASSERT_EQ(sink.of<proto::ev::SessionStarted>().size(), 1u);
}

// The reader alone (translate) over a retained transcript: no id of ours is known, the evidence
// answers are recognised by their shape, and session.started carries them as it did live.
TEST(CodexTranslate, TheEvidenceInARetainedTranscriptReachesSessionStarted) {
  auto adapter = make_codex_adapter(HostConfig{});
  auto line = [](json::object o) { return proto::canonical_json(o) + "\n"; };
  std::string start = line({{"id", 1}, {"result", json::object{{"userAgent", "metaharness/0.171.0 (x)"}}}}) +
                      line({{"id", 3}, {"result", no_account()}}) + line({{"id", 4}, {"result", no_plugins()}}) +
                      line({{"id", 5}, {"result", default_config()}}) +
                      line({{"method", "thread/started"}, {"params", json::object{}}}) +
                      line({{"id", 2},
                            {"result", json::object{{"thread", json::object{{"id", "thr_1"}}},
                                                    {"cwd", "/work"},
                                                    {"instructionSources", json::array{}}}}});
  std::string turn = line({{"id", 7}, {"result", json::object{{"turn", json::object{{"id", "t1"}}}}}}) +
                     line({{"method", "turn/started"},
                           {"params", json::object{{"threadId", "thr_1"}, {"turn", json::object{{"id", "t1"}}}}}});
  auto events = adapter->translate(start + line({{"id", 6}, {"result", no_mcp_servers()}}) + turn, "r1");
  ASSERT_FALSE(events.empty());
  const auto* started = std::get_if<proto::ev::SessionStarted>(&events[0].payload);
  ASSERT_TRUE(started);
  EXPECT_EQ(started->credential_source, "none");
  EXPECT_EQ(started->output_style, "default");
  EXPECT_TRUE(started->plugins && started->plugins->empty());
  EXPECT_TRUE(started->mcp_servers && started->mcp_servers->empty());
  EXPECT_TRUE(std::any_of(events.begin(), events.end(),
                          [](const auto& e) { return std::holds_alternative<proto::ev::TurnStarted>(e.payload); }));

  // A transcript with no MCP answer: the session opens at the first answer after the thread's,
  // with the MCP surface unknown.
  events = adapter->translate(start + turn, "r2");
  ASSERT_FALSE(events.empty());
  started = std::get_if<proto::ev::SessionStarted>(&events[0].payload);
  ASSERT_TRUE(started);
  EXPECT_EQ(started->mcp_servers, std::nullopt);
  EXPECT_EQ(started->credential_source, "none");
}

TEST(CodexEvidence, EveryInstructionSourceIsNamedAsCodexWroteIt) {
  json::object result{{"instructionSources", json::array{"/w/AGENTS.md", "relative/AGENTS.md", 7}}};
  EXPECT_EQ(codex::instruction_sources(result), (std::vector<std::string>{"/w/AGENTS.md", "relative/AGENTS.md", "7"}));
  EXPECT_EQ(codex::instruction_sources(json::object{}), std::nullopt) << "no list: Codex did not say";
}

TEST(CodexPatchSubjects, EveryFileThePatchNamesVerbatim) {
  // The hook's tool_input (codex-wire.md §4): the patch text as the model wrote it.
  json::value hook_input = json::object{
      {"command",
       "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** Update File: src/a.c\n*** Move to: src/b.c\n@@\n-x\n+y\n"
       "*** Delete File: ../outside/old.txt\n*** End Patch\n"}};
  EXPECT_EQ(codex::patch_subjects(hook_input),
            (std::vector<std::string>{"file:hello.txt", "file:src/a.c", "file:src/b.c", "file:../outside/old.txt"}));
  // item/started / the approval: Codex's changes (codex-gating.md §2.3), paths as Codex resolved them.
  json::value changes = json::object{
      {"changes", json::array{json::object{{"path", "/work/patched.txt"}, {"kind", json::object{{"type", "add"}}}},
                              json::object{{"path", "/work/a.c"},
                                           {"kind", json::object{{"type", "update"}, {"move_path", "/work/b.c"}}}}}}};
  EXPECT_EQ(codex::patch_subjects(changes),
            (std::vector<std::string>{"file:/work/patched.txt", "file:/work/a.c", "file:/work/b.c"}));
  EXPECT_TRUE(codex::patch_subjects(json::object{}).empty());
}

// --- issue 9 follow-ups: the first approval's escalation, a steer that never landed, the attestation

json::object escalated_args() {
  return json::object{{"cmd", "touch escalated.txt"},
                      {"sandbox_permissions", "require_escalated"},
                      {"justification", "ESCALATE: outside the sandbox"}};
}
// The PreToolUse hook's input for that call, as Codex sends it (the shell command only).
json::object escalated_hook_input() {
  return json::object{{"tool_name", "Bash"},
                      {"tool_use_id", "call_esc"},
                      {"tool_input", json::object{{"command", "touch escalated.txt"}}}};
}

// Captured (0.171.0, untrusted): a first call with require_escalated asks one approval whose reason
// is the justification; nothing but the model's raw function_call says the sandbox was asked off.
TEST_F(CodexSession, AFirstCallThatAsksForEscalationIsPresentedAsOneWithTheModelsWords) {
  open();
  turn_started("t1");
  feed(raw_call("call_esc", escalated_args()));
  EXPECT_TRUE(sink.calls.empty()) << "the raw record restates the call; the hook presents it";
  ASSERT_EQ(sink.of<proto::ev::Opaque>().back().vendor_type, "rawResponseItem/completed") << "kept, as opaque";
  session->on_hook_request(1, escalated_hook_input(), sink.in());
  ASSERT_EQ(sink.calls.size(), 1u);
  const ToolCall presented = sink.calls[0].call;  // a copy: later calls grow the vector
  EXPECT_TRUE(presented.escalation);
  EXPECT_EQ(presented.input.at("command"), "touch escalated.txt");
  EXPECT_EQ(presented.input.at("sandbox_permissions"), "require_escalated");
  EXPECT_EQ(presented.input.at("justification"), "ESCALATE: outside the sandbox");

  feed(approval(0, "thr_1", "call_esc", "ESCALATE: outside the sandbox"));
  ASSERT_EQ(sink.calls.size(), 2u);
  const ToolCall& asked = sink.calls[1].call;
  EXPECT_EQ(asked.call_id, "call_esc") << "the first approval is the call itself, not a re-run";
  EXPECT_TRUE(asked.escalation);
  EXPECT_EQ(asked.input.at("justification"), "ESCALATE: outside the sandbox");
  EXPECT_EQ(asked.input.at("sandbox_permissions"), "require_escalated");
  EXPECT_EQ(asked.input.at("reason"), "ESCALATE: outside the sandbox");
  EXPECT_TRUE(session->same_request(presented, asked));

  // A plain call of the same turn asks for nothing of the kind.
  feed(raw_call("call_ls", json::object{{"cmd", "ls"}}));
  feed(approval(1, "thr_1", "call_ls"));
  EXPECT_FALSE(sink.calls.back().call.escalation);
  EXPECT_FALSE(sink.calls.back().call.input.as_object().contains("sandbox_permissions"));
}

TEST_F(CodexSession, AShellHookAheadOfTheModelsRecordLeavesThePresentationToTheItem) {
  open();
  turn_started("t1");
  session->on_hook_request(1, escalated_hook_input(), sink.in());
  EXPECT_TRUE(sink.calls.empty()) << "not presented without what the model asked";
  ASSERT_EQ(sink.hook_replies.size(), 1u);
  EXPECT_EQ(sink.hook_replies[0].second, "") << "the approval decides: no opinion at the hook";
  feed(raw_call("call_esc", escalated_args()));
  feed(R"({"method":"item/started","params":{"item":{"type":"commandExecution","id":"call_esc",)"
       R"("command":"/bin/bash -lc 'touch escalated.txt'","cwd":"/work","status":"inProgress"},)"
       R"("threadId":"thr_1","turnId":"t1"}})");
  ASSERT_EQ(sink.calls.size(), 1u);
  EXPECT_TRUE(sink.calls[0].call.escalation);
  EXPECT_EQ(sink.calls[0].call.input.at("sandbox_permissions"), "require_escalated");
  EXPECT_EQ(sink.calls[0].call.input.at("justification"), "ESCALATE: outside the sandbox");
}

TEST_F(CodexSession, UnderDenyOnlyTheHookPresentsTheEscalationItDecides) {
  spec.deny_only = true;
  session = adapter->open_session(spec, plan);
  open();
  turn_started("t1");
  feed(raw_call("call_esc", escalated_args()));
  session->on_hook_request(1, escalated_hook_input(), sink.in());
  ASSERT_EQ(sink.calls.size(), 1u);
  ASSERT_TRUE(sink.calls[0].reply);
  EXPECT_TRUE(sink.calls[0].call.escalation);
  EXPECT_EQ(sink.calls[0].call.input.at("justification"), "ESCALATE: outside the sandbox");
}

TEST_F(CodexSession, AStartedThreadAsksForTheModelsRawItems) {
  open();
  EXPECT_EQ(sink.written.at(2).at("params").as_object().at("experimentalRawEvents"), true);
}

// A steer Codex took and never showed in its turn is gone with the turn: the same words in a later
// turn are not that steer (the run core reports the lost one, STEER_UNDELIVERED).
TEST_F(CodexSession, ASteerThatNeverLandedIsNotTakenForALaterMessageOfTheSameWords) {
  open();
  turn_started("turn_1");
  session->steer("STEER", sink.in());
  feed(json::object{{"method", "turn/completed"},
                    {"params", json::object{{"threadId", "thr_1"},
                                            {"turn", json::object{{"id", "turn_1"}, {"status", "interrupted"}}}}}});
  turn_started("turn_2");
  feed(
      R"({"method":"item/completed","params":{"item":{"type":"userMessage","id":"u3","content":[{"type":"text","text":"STEER"}]}}})");
  EXPECT_TRUE(sink.of<proto::ev::Injection>().empty()) << "turn 2's own input, not the lost steer";
}

// The attestation's ambient inputs say whether an allow grants: under deny-only it never does.
TEST(CodexAdapter, TheAttestationSaysWhatAnAllowDoesUnderEveryModeWithAndWithoutDenyOnly) {
  PlanBench bench("mh-codex-attest-");
  auto adapter = make_codex_adapter(bench.config);
  for (auto mode : {proto::DecisionMode::observe, proto::DecisionMode::ask, proto::DecisionMode::frame})
    for (bool deny_only : {false, true}) {
      RunSpec spec = PlanBench::spec();
      spec.decisions = mode;
      spec.deny_only = deny_only;
      auto planned = adapter->plan(spec, bench.paths());
      ASSERT_TRUE(std::holds_alternative<LaunchPlan>(planned)) << std::get<LaunchRefusal>(planned).message;
      const auto& a = std::get<LaunchPlan>(planned).attestation;
      std::string ambient;
      for (const auto& line : a.ambient_inputs)
        ambient += line + "\n";
      std::string what = std::string(proto::to_string(mode)) + (deny_only ? " deny-only" : "") + ":\n" + ambient;
      EXPECT_EQ(a.deny_only, deny_only) << what;
      if (deny_only) {
        EXPECT_EQ(ambient.find("grants"), std::string::npos) << what;
        EXPECT_EQ(ambient.find("an allow overrides"), std::string::npos) << what;
        EXPECT_NE(ambient.find("Codex's sandbox and rules decide"), std::string::npos) << what;
      } else {
        EXPECT_NE(ambient.find("an allow overrides the read-only and workspace-write postures"), std::string::npos)
            << what;
      }
      bool observe = mode == proto::DecisionMode::observe;
      EXPECT_EQ(ambient.find("observe mode answers every call with allow, delivered as abstain") != std::string::npos,
                observe && deny_only)
          << what;
      EXPECT_EQ(
          ambient.find("observe mode accepts every approval, and an accept on this wire grants") != std::string::npos,
          observe && !deny_only)
          << what;
    }
}

}  // namespace
}  // namespace mh::adapters
