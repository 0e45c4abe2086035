// The ACP client (adapters/acp) driven line by line with what opencode 1.18.33 sent over
// `opencode acp` against the scripted endpoint (docs/reference/opencode-acp-wire.md; ids and
// paths as captured, the long configOptions list cut to one model), then with hostile lines. No
// process, no clock: the run-loop side is the recording sink.
#include "adapters/acp/acp_client.hpp"

#include <gtest/gtest.h>

#include "adapters/session.hpp"
#include "protocol/json.hpp"
#include "protocol/run_failure.hpp"
#include "tests/support/output_recorder.hpp"

namespace mh::adapters::acp {
namespace {

namespace proto = mh::protocol;

using test::OutputRecorder;

// --- opencode 1.18.33's own lines ---------------------------------------------------------------

constexpr std::string_view kInitialized =
    R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true,"mcpCapabilities":{"http":true,"sse":true},"promptCapabilities":{"embeddedContext":true,"image":true},"sessionCapabilities":{"close":{},"fork":{},"list":{},"resume":{}}},"authMethods":[{"description":"Run `opencode auth login` in the terminal","name":"Login with opencode","id":"opencode-login"}],"agentInfo":{"name":"OpenCode","version":"1.18.33"}}})";
constexpr std::string_view kSessionNew =
    R"({"jsonrpc":"2.0","id":2,"result":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","configOptions":[{"id":"model","name":"Model","category":"model","type":"select","currentValue":"mh/scripted","options":[{"value":"mh/scripted","name":"metaharness scripted/scripted"}]}]}})";
constexpr std::string_view kCommands =
    R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"available_commands_update","availableCommands":[{"name":"init","description":"guided AGENTS.md setup"}]}}})";
constexpr std::string_view kThought =
    R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"agent_thought_chunk","messageId":"prt_23f6647f4001mhFfWOFzZZ2Mkp","content":{"type":"text","text":"I should leave a marker."}}}})";
constexpr std::string_view kMessage =
    R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"agent_message_chunk","messageId":"msg_23f6636da001Y4Mcm3tEfKYZgb","content":{"type":"text","text":"Leaving it."}}}})";
constexpr std::string_view kToolCall =
    R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"tool_call","toolCallId":"toolu_marker","title":"bash","kind":"execute","status":"pending","locations":[{"path":"/tmp/acp-probe/run1/work"}],"rawInput":{"cwd":"/tmp/acp-probe/run1/work"}}}})";
constexpr std::string_view kInProgress =
    R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"tool_call_update","toolCallId":"toolu_marker","status":"in_progress","kind":"execute","title":"touch marker.txt","locations":[{"path":"/tmp/acp-probe/run1/work"}],"rawInput":{"command":"touch marker.txt","description":"Leave a marker","cwd":"/tmp/acp-probe/run1/work"}}}})";
constexpr std::string_view kPermission =
    R"({"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","toolCall":{"toolCallId":"toolu_marker","title":"touch marker.txt","kind":"execute","status":"pending","locations":[],"rawInput":{"command":"touch marker.txt"}},"options":[{"optionId":"once","kind":"allow_once","name":"Allow once"},{"optionId":"always","kind":"allow_always","name":"Always allow"},{"optionId":"reject","kind":"reject_once","name":"Reject"}]}})";
constexpr std::string_view kCompleted =
    R"J({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"tool_call_update","toolCallId":"toolu_marker","status":"completed","title":"touch marker.txt","content":[{"type":"content","content":{"type":"text","text":"(no output)"}}],"rawOutput":{"output":"(no output)","metadata":{"output":"(no output)","exit":0,"truncated":false}}}}})J";
constexpr std::string_view kRejected =
    R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"tool_call_update","toolCallId":"toolu_marker","status":"failed","kind":"execute","title":"touch marker.txt","locations":[{"path":"/tmp/acp-probe/run1/work"}],"rawInput":{"command":"touch marker.txt","description":"Leave a marker","cwd":"/tmp/acp-probe/run1/work"},"content":[{"type":"content","content":{"type":"text","text":"The user rejected permission to use this specific tool call."}}],"rawOutput":{"error":"The user rejected permission to use this specific tool call."}}}})";
constexpr std::string_view kEndTurn =
    R"({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":10,"outputTokens":5,"totalTokens":15},"_meta":{}}})";
constexpr std::string_view kCancelled =
    R"({"jsonrpc":"2.0","id":3,"result":{"stopReason":"cancelled","usage":{"inputTokens":0,"outputTokens":0,"totalTokens":0},"_meta":{}}})";
constexpr std::string_view kWriteTextFile =
    R"({"jsonrpc":"2.0","id":2,"method":"fs/write_text_file","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","path":"/tmp/acp-probe/run1/work/hello.txt","content":"hello\n"}})";

class AcpClient : public ::testing::Test {
 protected:
  AcpClient() : client(options()) {}
  static ClientOptions options() {
    ClientOptions o;
    o.info.version = "test";
    o.cwd = "/tmp/acp-probe/run1/work";
    o.started.adapter = "opencode";
    return o;
  }
  void feed(std::string_view text) {
    proto::FramedLine line;
    line.text = text;
    line.number = ++line_no;
    line.length = text.size();
    AdapterOutputs out;
    client.on_line(line, out);
    r.take(out);
  }
  // initialize, session/new and one prompt sent: a turn is running (our prompt is id 3).
  void open_and_prompt() {
    AdapterOutputs out;
    client.start(out);
    r.take(out);
    feed(kInitialized);
    feed(kSessionNew);
    AdapterOutputs p;
    ASSERT_TRUE(client.prompt({"Leave a marker."}, p));
    r.take(p);
  }
  void decide(const proto::Decision& d) {
    ASSERT_FALSE(r.calls.empty());
    ASSERT_TRUE(r.calls.back().reply);
    AdapterOutputs out;
    client.answer(*r.calls.back().reply, d, out);
    r.take(out);
  }
  Client client;
  OutputRecorder r;
  std::uint64_t line_no = 0;
};

TEST_F(AcpClient, OpensWithInitializeDeclaringNoCapabilityThenSessionNewThenSessionStarted) {
  open_and_prompt();
  ASSERT_EQ(r.written.size(), 3u);
  EXPECT_EQ(r.written[0].at("method"), "initialize");
  EXPECT_EQ(r.written[0].at("id"), 1);
  const auto& caps = r.written[0].at("params").at("clientCapabilities").as_object();
  EXPECT_EQ(caps.at("terminal"), false);
  EXPECT_EQ(caps.at("fs").at("writeTextFile"), false);
  EXPECT_EQ(caps.at("fs").at("readTextFile"), false);
  EXPECT_EQ(r.written[1].at("method"), "session/new");
  EXPECT_EQ(r.written[1].at("params").at("cwd"), "/tmp/acp-probe/run1/work");
  EXPECT_TRUE(r.written[1].at("params").at("mcpServers").as_array().empty());
  auto started = r.of<proto::ev::SessionStarted>();
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].session_id, "ses_dc099cb22ffe1vQapdkhAVz5kp");
  EXPECT_EQ(started[0].harness_version, "1.18.33");
  EXPECT_EQ(started[0].adapter, "opencode");
  EXPECT_EQ(r.ready, 1);
  EXPECT_EQ(r.written[2].at("method"), "session/prompt");
  EXPECT_EQ(r.written[2].at("params").at("sessionId"), "ses_dc099cb22ffe1vQapdkhAVz5kp");
  EXPECT_EQ(r.written[2].at("params").at("prompt").at(0).at("text"), "Leave a marker.");
  EXPECT_EQ(r.turns, std::vector<std::string>{"started"});
  EXPECT_TRUE(client.prompt_running());
  AdapterOutputs second;
  EXPECT_FALSE(client.prompt({"again"}, second)) << "one prompt at a time";
  EXPECT_TRUE(second.empty());
}

TEST_F(AcpClient, ChunksAreTextAndThinkingAndTheCommandListIsOpaque) {
  open_and_prompt();
  feed(kCommands);
  feed(kThought);
  feed(kMessage);
  ASSERT_EQ(r.of<proto::ev::Opaque>().size(), 1u);
  EXPECT_EQ(r.of<proto::ev::Opaque>()[0].vendor_type, "session/update");
  EXPECT_EQ(r.of<proto::ev::Opaque>()[0].vendor_subtype, "available_commands_update");
  EXPECT_EQ(r.of<proto::ev::Opaque>()[0].source_line, 3u);
  ASSERT_EQ(r.of<proto::ev::Thinking>().size(), 1u);
  EXPECT_EQ(r.of<proto::ev::Thinking>()[0].text, "I should leave a marker.");
  ASSERT_EQ(r.of<proto::ev::Text>().size(), 1u);
  EXPECT_EQ(r.of<proto::ev::Text>()[0].text, "Leaving it.");
}

TEST_F(AcpClient, APermissionIsTheCallAwaitingItsAnswerAndAnAllowSelectsOnce) {
  open_and_prompt();
  feed(kToolCall);
  feed(kInProgress);
  EXPECT_TRUE(r.calls.empty()) << "nothing is presented before the agent asks";
  feed(kPermission);
  ASSERT_EQ(r.calls.size(), 1u);
  const auto& call = r.calls[0];
  EXPECT_EQ(call.call.call_id, "toolu_marker");
  EXPECT_EQ(call.call.name, "bash") << "the tool's name from its first notice, not the command text";
  EXPECT_EQ(call.call.seam, proto::Seam::control_request);
  EXPECT_EQ(proto::canonical_json(call.call.input), R"({"command":"touch marker.txt"})");
  ASSERT_TRUE(call.reply);
  EXPECT_EQ(call.reply->seam, proto::Seam::control_request);
  decide(proto::decision::Allow{});
  ASSERT_EQ(r.written.size(), 4u);
  EXPECT_EQ(proto::canonical_json(r.written[3]),
            R"({"id":0,"jsonrpc":"2.0","result":{"outcome":{"optionId":"once","outcome":"selected"}}})");
  feed(kCompleted);
  ASSERT_EQ(r.calls.size(), 1u) << "an asked call is not presented again at its end";
  auto results = r.of<proto::ev::ToolResult>();
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].call_id, "toolu_marker");
  EXPECT_EQ(results[0].is_error, false);
  EXPECT_EQ(results[0].exit_code, 0);
  feed(kEndTurn);
  ASSERT_EQ(r.of<proto::ev::Usage>().size(), 1u);
  EXPECT_EQ(r.of<proto::ev::Usage>()[0].usage.input_tokens, 10u);
  EXPECT_FALSE(r.of<proto::ev::Usage>()[0].scope) << "not the turn's sum on opencode: unsaid";
  EXPECT_EQ(r.turns, (std::vector<std::string>{"started", "ended:end_turn"}));
  auto ended = client.session_ended();
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->num_turns, 1u);
  EXPECT_EQ(ended->is_error, false);
  EXPECT_EQ(ended->usage->output_tokens, 5u);
  EXPECT_TRUE(r.of<proto::ev::Opaque>().empty());
}

TEST_F(AcpClient, DenyAndAbstainSelectRejectOnceAndNeverAnAlwaysOption) {
  for (proto::Decision d :
       {proto::Decision{proto::decision::Deny{"not in this step"}}, proto::Decision{proto::decision::Abstain{}}}) {
    Client fresh(options());
    std::swap(client, fresh);
    r = {};
    line_no = 0;
    open_and_prompt();
    feed(kToolCall);
    feed(kPermission);
    decide(d);
    ASSERT_EQ(r.written.size(), 4u);
    EXPECT_EQ(r.written[3].at("result").at("outcome").at("optionId"), "reject");
    feed(kRejected);
    auto results = r.of<proto::ev::ToolResult>();
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].is_error, true);
  }
}

// A deny's reason has no place in a permission answer: the reject is sent, and the run says by
// name that the reason did not reach the model (carrying it); a deny without a reason (none to
// lose) and an abstain say nothing.
TEST_F(AcpClient, ADenysReasonThatCannotRideTheAnswerIsNamedInAWarning) {
  open_and_prompt();
  feed(kToolCall);
  feed(kPermission);
  decide(proto::decision::Deny{"SUPERVISOR: not on my watch"});
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), "reject");
  auto warnings = r.of<proto::ev::Warning>();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].code, "DENY_REASON_NOT_DELIVERED");
  EXPECT_NE(warnings[0].message.find("SUPERVISOR: not on my watch"), std::string::npos) << warnings[0].message;
  EXPECT_NE(warnings[0].message.find("toolu_marker"), std::string::npos) << warnings[0].message;
}

// --- Gemini CLI 0.61.0's own lines (tests/gemini; docs/adapters.md) -----------------------------

constexpr std::string_view kGeminiSessionNew =
    R"({"jsonrpc":"2.0","id":2,"result":{"sessionId":"19b84725-2e5d-4dca-a026-bb939bb03147","modes":{"availableModes":[{"id":"default","name":"Default","description":"Prompts for approval"}],"currentModeId":"default"},"models":{"availableModels":[{"modelId":"gemini-2.5-flash","name":"gemini-2.5-flash"}],"currentModelId":"gemini-2.5-flash"}}})";
constexpr std::string_view kGeminiPermission =
    R"({"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"19b84725-2e5d-4dca-a026-bb939bb03147","options":[{"optionId":"proceed_always","name":"Allow for this session","kind":"allow_always"},{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}],"toolCall":{"toolCallId":"run_shell_command__toolu_marker","status":"pending","title":"touch marker.txt","content":[],"locations":[],"kind":"execute"}}})";
constexpr std::string_view kGeminiEndTurn =
    R"({"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","_meta":{"quota":{"token_count":{"input_tokens":20,"output_tokens":10},"model_usage":[{"model":"gemini-2.5-flash","token_count":{"input_tokens":20,"output_tokens":10}}]}}}})";

class GeminiLines : public AcpClient {
 protected:
  static ClientOptions gemini_options(std::string expected_model) {
    ClientOptions o = options();
    o.started.adapter = "gemini";
    o.expected_model = std::move(expected_model);
    o.tool_of_call = [](std::string_view id) -> std::optional<std::string> {
      auto at = id.find("__");
      if (at == std::string_view::npos) return std::nullopt;
      return std::string(id.substr(0, at));
    };
    return o;
  }
  void open(std::string expected_model) {
    Client fresh(gemini_options(std::move(expected_model)));
    std::swap(client, fresh);
    AdapterOutputs out;
    client.start(out);
    r.take(out);
    feed(
        R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentInfo":{"name":"gemini-cli","version":"0.61.0"}}})");
    feed(kGeminiSessionNew);
  }
};

// The session's model is models.currentModelId: another one than the launch's fails the run before
// its first prompt.
TEST_F(GeminiLines, TheSessionsModelIsCheckedAgainstTheLaunchs) {
  open("gemini-2.5-flash");
  EXPECT_TRUE(r.failures.empty());
  EXPECT_EQ(r.ready, 1);
  r = {};
  line_no = 0;
  open("gemini-2.5-pro");
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("gemini-2.5-flash, not the configured gemini-2.5-pro"), std::string::npos)
      << r.failures[0];
  EXPECT_EQ(r.ready, 0);
}

// A permission request that names no tool and carries no input presents the call under the tool
// its id names; the prompt's usage is its _meta.quota.token_count.
TEST_F(GeminiLines, ACallIsNamedByItsIdAndTheTurnsUsageIsTheQuotasTokenCount) {
  open("gemini-2.5-flash");
  AdapterOutputs p;
  ASSERT_TRUE(client.prompt({"go"}, p));
  r.take(p);
  feed(kGeminiPermission);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].call.call_id, "run_shell_command__toolu_marker");
  EXPECT_EQ(r.calls[0].call.name, "run_shell_command");
  EXPECT_TRUE(r.calls[0].call.input.is_null());
  decide(proto::decision::Allow{});
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), "proceed_once");
  feed(kGeminiEndTurn);
  auto usage = r.of<proto::ev::Usage>();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].usage.input_tokens, 20u);
  EXPECT_EQ(usage[0].usage.output_tokens, 10u);
}

// Gemini CLI answers a prompt the endpoint refused with a 401 as an error whose message is the
// endpoint's own (Google's UNAUTHENTICATED): the credential stopped working.
TEST_F(GeminiLines, APromptRefusedUnauthenticatedIsAuthExpired) {
  open("gemini-2.5-flash");
  AdapterOutputs p;
  ASSERT_TRUE(client.prompt({"go"}, p));
  r.take(p);
  feed(
      R"({"jsonrpc":"2.0","id":3,"error":{"code":401,"message":"{\"error\":{\"code\":401,\"message\":\"Request had invalid authentication credentials. Expected OAuth 2 access token.\",\"status\":\"UNAUTHENTICATED\"}}"}})");
  EXPECT_EQ(r.of<proto::ev::AuthExpired>().size(), 1u);
}

// The failure category a run that ended on this prompt's error closes with (issue 27's vocabulary),
// judged from session.ended as the record holds it.
std::string failure_category_after(const Client& client) {
  auto ended = client.session_ended();
  if (!ended) return "(no session.ended)";
  proto::FailureWitness witness;
  witness.observe(proto::EventPayload{*ended});
  auto failure = witness.judge(proto::CloseReason::error, proto::ProcessTermination{});
  return failure ? failure->category : "(none)";
}

// Gemini CLI answers a prompt whose model requests the endpoint kept throttling (its retries spent)
// with the 429 as the error's code, and one the endpoint failed with the 500: session.ended says
// the status, so the run's failure is rate_limit, or upstream, not a vendor exit.
TEST_F(GeminiLines, APromptRefusedWithAStatusIsTheRunsFailureCategory) {
  for (auto [status, message, category] :
       {std::tuple{429, "Resource has been exhausted (e.g. check quota).", "rate_limit"},
        std::tuple{500, "Internal error encountered.", "upstream"},
        std::tuple{401, "Request had invalid authentication credentials.", "auth"}}) {
    SCOPED_TRACE(status);
    r = {};
    line_no = 0;
    open("gemini-2.5-flash");
    AdapterOutputs p;
    ASSERT_TRUE(client.prompt({"go"}, p));
    r.take(p);
    feed(R"({"jsonrpc":"2.0","id":3,"error":{"code":)" + std::to_string(status) + R"(,"message":")" + message +
         R"("}})");
    auto ended = client.session_ended();
    ASSERT_TRUE(ended);
    EXPECT_TRUE(ended->is_error);
    EXPECT_EQ(ended->api_error_status, std::to_string(status));
    EXPECT_EQ(failure_category_after(client), category);
  }
}

// A JSON-RPC error code that is not an HTTP status says none: the failure stays the vendor's exit.
TEST_F(GeminiLines, AnErrorCodeThatIsNoHttpStatusSaysNone) {
  open("gemini-2.5-flash");
  AdapterOutputs p;
  ASSERT_TRUE(client.prompt({"go"}, p));
  r.take(p);
  feed(R"({"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error"}})");
  ASSERT_TRUE(client.session_ended());
  EXPECT_FALSE(client.session_ended()->api_error_status);
  EXPECT_EQ(failure_category_after(client), "vendor_exit");
}

// --- Qwen Code 0.24.4's own lines (tests/qwen; docs/adapters.md) -------------------------------

// A call's tool is the one its _meta.toolName names (the title is a display name, "Shell"); an
// empty message chunk says nothing (opaque, no text event); a prompt refused "Internal error" says
// why in the error's data.details, which is the endpoint's own answer: auth.expired.
TEST_F(AcpClient, QwenNamesItsToolInMetaSendsEmptyChunksAndExplainsErrorsInData) {
  open_and_prompt();
  feed(
      R"J({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"tool_call","toolCallId":"toolu_sh","status":"pending","title":"Shell","content":[],"locations":[],"kind":"execute","rawInput":{},"_meta":{"toolName":"run_shell_command","provenance":"builtin","phase":"preparing"}}}})J");
  feed(
      R"J({"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","options":[{"optionId":"proceed_once","name":"Allow","kind":"allow_once"},{"optionId":"cancel","name":"Reject","kind":"reject_once"}],"toolCall":{"toolCallId":"toolu_sh","status":"pending","title":"touch sh.txt (d)","content":[],"locations":[],"kind":"execute","rawInput":{"command":"touch sh.txt","description":"d"},"_meta":{
    "toolName" : "run_shell_command"}
}
}
})");
  ASSERT_EQ(r.calls.size(), 1u);
EXPECT_EQ(r.calls[0].call.name, "run_shell_command");
EXPECT_EQ(r.calls[0].call.input.at("command"), "touch sh.txt");
feed(
    R"J({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""}}}})J");
  EXPECT_TRUE(r.of<proto::ev::Text>().empty()) << "an empty chunk is no text";
  feed(
      R"J({"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error","data":{"details":"401 {\"type\":\"error\",\"error\":{\"type\":\"authentication_error\",\"message\":\"OAuth token has expired.\"}}"}}})J");
  ASSERT_EQ(r.of<proto::ev::AuthExpired>().size(), 1u);
  EXPECT_NE(r.of<proto::ev::AuthExpired>()[0].detail.value_or("").find("OAuth token has expired."), std::string::npos);
  // The status opening data.details is the endpoint's: the run's failure is auth.
  EXPECT_EQ(client.session_ended()->api_error_status, "401");
  EXPECT_EQ(failure_category_after(client), "auth");
}

// Qwen Code answers a prompt the endpoint kept throttling (its retries spent) with the 429 as the
// error's code: the run's failure is rate_limit.
TEST_F(AcpClient, QwenAnswersAThrottledPromptWithTheStatusAndTheRunsFailureIsRateLimit) {
  open_and_prompt();
  feed(R"({"jsonrpc":"2.0","id":3,"error":{"code":429,"message":"Rate limit exceeded. Try again later."}})");
  ASSERT_TRUE(client.session_ended());
  EXPECT_EQ(client.session_ended()->api_error_status, "429");
  EXPECT_EQ(failure_category_after(client), "rate_limit");
}

TEST_F(AcpClient, AnAllowWithNoOnceOptionIsDeliveredAsRejectWithAWarning) {
  open_and_prompt();
  feed(
      R"({"jsonrpc":"2.0","id":7,"method":"session/request_permission","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","toolCall":{"toolCallId":"c1"},"options":[{"optionId":"always","kind":"allow_always"},{"optionId":"no","kind":"reject_once"}]}})");
  decide(proto::decision::Allow{});
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("optionId"), "no");
  ASSERT_EQ(r.of<proto::ev::Warning>().size(), 1u);
  EXPECT_EQ(r.of<proto::ev::Warning>()[0].code, "ALLOW_NOT_DELIVERABLE");
}

TEST_F(AcpClient, ReplaceIsRefusedByName) {
  auto refusal = client.check_decision(proto::decision::Replace{json::object{{"command", "true"}}});
  ASSERT_TRUE(refusal);
  EXPECT_EQ(refusal->code, proto::RefusalCode::UNSUPPORTED_CONTROL);
  EXPECT_FALSE(client.check_decision(proto::decision::Allow{}));
}

TEST_F(AcpClient, AnUndeclaredFileWriteIsAnsweredWithAnErrorAndKept) {
  open_and_prompt();
  feed(kWriteTextFile);
  ASSERT_EQ(r.written.size(), 4u);
  EXPECT_EQ(r.written[3].at("id"), 2);
  EXPECT_EQ(r.written[3].at("error").at("code"), kMethodNotFound);
  ASSERT_EQ(r.of<proto::ev::Opaque>().size(), 1u);
  EXPECT_EQ(r.of<proto::ev::Opaque>()[0].vendor_type, "fs/write_text_file");
  feed(R"({"jsonrpc":"2.0","id":"t","method":"terminal/create","params":{}})");
  EXPECT_EQ(r.written.back().at("id"), "t");
  EXPECT_EQ(r.written.back().at("error").at("code"), kMethodNotFound);
}

TEST_F(AcpClient, ACallNobodyAskedAboutIsRecordedUngatedBeforeItsResult) {
  open_and_prompt();
  feed(kToolCall);
  feed(kInProgress);
  feed(kCompleted);
  ASSERT_EQ(r.calls.size(), 1u);
  EXPECT_EQ(r.calls[0].call.seam, proto::Seam::none);
  EXPECT_FALSE(r.calls[0].reply);
  EXPECT_EQ(r.calls[0].call.name, "bash");
  EXPECT_EQ(r.calls[0].call.input.at("command"), "touch marker.txt") << "the fullest input seen";
  EXPECT_EQ(r.of<proto::ev::ToolResult>().size(), 1u);
}

TEST_F(AcpClient, CancelAnswersOpenPermissionsCancelledAndSettlesWhenThePromptSaysCancelled) {
  open_and_prompt();
  feed(kToolCall);
  feed(kPermission);
  AdapterOutputs out;
  auto ack = client.cancel(out);
  r.take(out);
  EXPECT_EQ(ack.kind, ControlAck::Kind::pending_vendor);
  ASSERT_EQ(r.written.size(), 5u);
  EXPECT_EQ(r.written[3].at("method"), "session/cancel");
  EXPECT_FALSE(r.written[3].contains("id")) << "a notification";
  EXPECT_EQ(r.written[4].at("result").at("outcome").at("outcome"), "cancelled");
  ASSERT_EQ(r.withdrawn.size(), 1u);
  EXPECT_TRUE(r.withdrawn[0].same_channel(*r.calls[0].reply));
  feed(kCancelled);
  ASSERT_EQ(r.controls.size(), 1u);
  EXPECT_EQ(r.controls[0].control_id, ack.control_id);
  EXPECT_TRUE(r.controls[0].ok);
  EXPECT_EQ(r.turns.back(), "ended:cancelled");
  AdapterOutputs again;
  EXPECT_EQ(client.cancel(again).kind, ControlAck::Kind::refused) << "no prompt runs";
  AdapterOutputs next;
  EXPECT_TRUE(client.prompt({"next"}, next)) << "the session is still usable";
}

TEST_F(AcpClient, RefusalsBeforeTheSessionOpensEndTheRun) {
  AdapterOutputs out;
  client.start(out);
  r.take(out);
  feed(R"({"jsonrpc":"2.0","id":1,"result":{"protocolVersion":2}})");
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("version 2"), std::string::npos);

  Client other(options());
  std::swap(client, other);
  r = {};
  AdapterOutputs again;
  client.start(again);
  r.take(again);
  feed(R"({"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"Authentication required"}})");
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("Authentication required"), std::string::npos);
  EXPECT_EQ(r.ready, 0);
  EXPECT_FALSE(client.session_ended()) << "no session, no terminal record";
}

TEST_F(AcpClient, HostileLinesAreOpaqueAndNeverThrow) {
  open_and_prompt();
  const std::vector<std::string_view> hostile = {
      "not json",
      "[1,2,3]",
      R"({"jsonrpc":"2.0","id":99,"result":{}})",                     // an answer to nothing of ours
      R"({"jsonrpc":"2.0","id":-1,"result":{}})",                     // not our id space
      R"({"jsonrpc":"2.0","id":3,"result":{},"error":{}})",           // both
      R"({"jsonrpc":"1.0","method":"session/update","params":{}})",   // another protocol
      R"({"jsonrpc":"2.0","method":7})",                              // a method that is no string
      R"({"jsonrpc":"2.0","method":"session/update","params":[1]})",  // params not an object
      R"({"jsonrpc":"2.0","id":{"x":1},"method":"session/request_permission","params":{}})",  // id not an id
      R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"someone-else","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}})",
      R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA=="}}}})",
      R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"tool_call_update","status":"completed"}}})",
      R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"usage_update","used":100,"size":200000}}})",
      R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"brand_new_kind"}}})",
  };
  for (auto line : hostile)
    EXPECT_NO_THROW(feed(line)) << line;
  EXPECT_EQ(r.of<proto::ev::Opaque>().size(), hostile.size()) << "each line recorded once, none dropped";
  EXPECT_TRUE(r.calls.empty());
  EXPECT_TRUE(r.of<proto::ev::Text>().empty());
  EXPECT_EQ(r.written.size(), 3u) << "nothing answered to an id that is not one";
  EXPECT_TRUE(client.prompt_running()) << "an answer to nothing did not end the turn";
}

// A usage_update that carries token counts (the ACP shape of usage; opencode 1.18.33 sends none,
// another agent may) is one request's usage, each count in its place; its context-window figures
// alone are not (above: opaque).
TEST_F(AcpClient, AUsageUpdateCarryingTokensIsARequestsUsage) {
  open_and_prompt();
  feed(
      R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"usage_update","used":100,"size":200000,"inputTokens":12,"outputTokens":7,"cachedReadTokens":3,"cachedWriteTokens":2,"thoughtTokens":4}}})");
  EXPECT_TRUE(r.of<proto::ev::Opaque>().empty()) << "read, not left opaque";
  auto usage = r.of<proto::ev::Usage>();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].scope, "request");
  EXPECT_EQ(usage[0].usage.input_tokens, 12u);
  EXPECT_EQ(usage[0].usage.output_tokens, 7u);
  EXPECT_EQ(usage[0].usage.cache_read_input_tokens, 3u);
  EXPECT_EQ(usage[0].usage.cache_creation_input_tokens, 2u);
  EXPECT_EQ(usage[0].usage.thinking_tokens, 4u);
  // One count alone is enough; the others stay unknown, never zero.
  feed(
      R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"usage_update","outputTokens":9}}})");
  usage = r.of<proto::ev::Usage>();
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[1].usage.output_tokens, 9u);
  EXPECT_FALSE(usage[1].usage.input_tokens);
  EXPECT_FALSE(usage[1].usage.cache_read_input_tokens);
  EXPECT_TRUE(client.prompt_running()) << "usage ends no turn";
}

TEST_F(AcpClient, APermissionRequestWithoutItsPartsIsRefusedAndNothingIsPresented) {
  open_and_prompt();
  std::string long_id(kMaxIdBytes + 1, 'x');
  const std::vector<std::string> bad = {
      R"({"jsonrpc":"2.0","id":5,"method":"session/request_permission","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","toolCall":{"toolCallId":"c"}}})",
      R"({"jsonrpc":"2.0","id":6,"method":"session/request_permission","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","options":[]}})",
      R"({"jsonrpc":"2.0","id":8,"method":"session/request_permission","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","toolCall":{"toolCallId":")" +
          long_id + R"("},"options":[]}})",
  };
  for (const auto& line : bad)
    feed(line);
  EXPECT_TRUE(r.calls.empty());
  ASSERT_EQ(r.written.size(), 3u + bad.size());
  for (std::size_t i = 3; i < r.written.size(); ++i)
    EXPECT_EQ(r.written[i].at("error").at("code"), kInvalidParams);
  // Another session's request, valid in form: answered cancelled, never presented.
  feed(
      R"({"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"other","toolCall":{"toolCallId":"c"},"options":[{"optionId":"once","kind":"allow_once"}]}})");
  EXPECT_TRUE(r.calls.empty());
  EXPECT_EQ(r.written.back().at("result").at("outcome").at("outcome"), "cancelled");
}

TEST_F(AcpClient, OpenCallsAreBounded) {
  open_and_prompt();
  for (std::size_t i = 0; i < kMaxOpenCalls + 10; ++i) {
    std::string line =
        R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"ses_dc099cb22ffe1vQapdkhAVz5kp","update":{"sessionUpdate":"tool_call","toolCallId":"c)" +
        std::to_string(i) + R"(","title":"bash","status":"pending"}}})";
    feed(line);
  }
  EXPECT_EQ(r.of<proto::ev::Opaque>().size(), 10u) << "the calls past the bound are recorded, not tracked";
}

TEST_F(AcpClient, TheAgentGoingMidPromptEndsTheTurnAndTheSessionInError) {
  open_and_prompt();
  feed(kToolCall);
  feed(kPermission);
  AdapterOutputs out;
  client.on_end(out);
  r.take(out);
  EXPECT_EQ(r.withdrawn.size(), 1u);
  EXPECT_EQ(r.turns.back(), "ended:agent ended");
  auto ended = client.session_ended();
  ASSERT_TRUE(ended);
  EXPECT_EQ(ended->is_error, true);
}

}  // namespace
}  // namespace mh::adapters::acp
