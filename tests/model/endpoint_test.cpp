// The scripted endpoint over loopback, driven by a Beast client: the bytes each wire gets, how
// steps are consumed, errors, pacing, the token check, the request log and hostile input.
#include <gtest/gtest.h>
#include <unistd.h>

#include <boost/asio/error.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json/serialize.hpp>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/model/test_support.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

std::chrono::milliseconds since(Clock::time_point start) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start);
}

// One request carrying the run's token as the wire's own client sends it.
Response to_anthropic(const RunningEndpoint& ep, std::string_view method, std::string_view target,
                      const std::string& body) {
  return exchange(ep.port(), method, target, anthropic_headers(ep.token()), body);
}

Response to_openai(const RunningEndpoint& ep, std::string_view target, const std::string& body) {
  return exchange(ep.port(), "POST", target, openai_headers(ep.token()), body);
}

Response post_anthropic(const RunningEndpoint& ep, bool stream, bool with_tools = true) {
  return to_anthropic(ep, "POST", "/v1/messages?beta=true", anthropic_body(stream, with_tools));
}

Response post_responses(const RunningEndpoint& ep, bool stream, bool with_tools = true) {
  return to_openai(ep, "/v1/responses", responses_body(stream, with_tools));
}

// What each logged request was answered with: "step N" for a scenario step (by index), else the
// answer's name ("exhausted", "aux", ...).
std::vector<std::string> answers(const std::vector<ServedRequest>& log) {
  std::vector<std::string> out;
  for (const auto& r : log)
    out.push_back(r.answer == Answer::step && r.step ? "step " + std::to_string(*r.step)
                                                     : std::string(to_string(r.answer)));
  return out;
}

std::string text_of(const Response& r) {
  return r.status == 0 ? "(no response: " + r.error + ")" : r.body;
}

// The events of a streamed first answer, once the status, the content type, the request id (in
// header `id_header`) and at least `at_least` events are as both wires have them.
void streamed_events(const Response& r, std::string_view id_header, std::size_t at_least,
                     std::vector<SseEvent>& events) {
  ASSERT_EQ(r.status, 200u) << text_of(r);
  EXPECT_EQ(r.header("content-type"), "text/event-stream; charset=utf-8");
  EXPECT_EQ(r.header(id_header), "req_mh_0001");
  events = parse_sse(r.body);
  ASSERT_GE(events.size(), at_least);
}

// The events of one Anthropic content block, concatenated per delta kind.
struct AnthropicBlock {
  json::object start;
  std::map<std::string, std::string> deltas;  // delta type -> concatenated text
  bool stopped = false;
};

std::vector<AnthropicBlock> anthropic_blocks(const std::vector<SseEvent>& events) {
  std::vector<AnthropicBlock> blocks;
  for (const SseEvent& e : events) {
    const json::object& data = e.data.as_object();
    EXPECT_EQ(data.at("type").as_string(), e.name) << "event name and data.type agree";
    if (e.name == "content_block_start") {
      EXPECT_EQ(data.at("index").to_number<std::size_t>(), blocks.size()) << "blocks open in order";
      blocks.push_back({data.at("content_block").as_object(), {}, false});
    } else if (e.name == "content_block_delta") {
      const std::size_t index = data.at("index").to_number<std::size_t>();
      EXPECT_EQ(index + 1, blocks.size()) << "a delta belongs to the open block";
      EXPECT_FALSE(blocks.back().stopped);
      const json::object& delta = data.at("delta").as_object();
      const std::string type(delta.at("type").as_string());
      const char* field = type == "text_delta"         ? "text"
                          : type == "thinking_delta"   ? "thinking"
                          : type == "signature_delta"  ? "signature"
                          : type == "input_json_delta" ? "partial_json"
                                                       : nullptr;
      EXPECT_NE(field, nullptr) << "unexpected delta type " << type;
      if (field) blocks.back().deltas[type] += delta.at(field).as_string();
    } else if (e.name == "content_block_stop") {
      EXPECT_EQ(data.at("index").to_number<std::size_t>() + 1, blocks.size());
      blocks.back().stopped = true;
    }
  }
  return blocks;
}

constexpr const char* kAllBlocksScenario = R"({
  "format": "metaharness.scenario/1",
  "steps": [
    {"name": "everything",
     "content": [
       {"type": "thinking", "text": "plan it", "signature": "sig-from-script"},
       {"type": "text", "text": "Hello there, wörld"},
       {"type": "tool_call", "id": "toolu_fixed", "name": "Bash",
        "input": {"command": "echo hi", "description": "say hi"}}],
     "usage": {"input_tokens": 120, "output_tokens": 33, "cached_input_tokens": 40,
               "cache_creation_input_tokens": 7},
     "delta_bytes": 4}
  ]
})";

TEST(AnthropicWire, StreamsThinkingTextAndToolUse) {
  RunningEndpoint ep(kAllBlocksScenario);
  const Response r = post_anthropic(ep, true);
  std::vector<SseEvent> events;
  ASSERT_NO_FATAL_FAILURE(streamed_events(r, "request-id", 5, events));
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(events.front().name, "message_start");
  EXPECT_EQ(events[events.size() - 2].name, "message_delta");
  EXPECT_EQ(events.back().name, "message_stop");

  const json::object& message = events.front().data.at("message").as_object();
  EXPECT_EQ(message.at("id"), "msg_mh_0001");
  EXPECT_EQ(message.at("model"), "claude-test-model");
  EXPECT_EQ(message.at("role"), "assistant");
  EXPECT_TRUE(message.at("content").as_array().empty());
  EXPECT_TRUE(message.at("stop_reason").is_null());
  EXPECT_EQ(message.at("usage").at("input_tokens"), 120);
  EXPECT_EQ(message.at("usage").at("cache_read_input_tokens"), 40);
  EXPECT_EQ(message.at("usage").at("cache_creation_input_tokens"), 7);

  const auto blocks = anthropic_blocks(events);
  ASSERT_EQ(blocks.size(), 3u);
  for (const auto& b : blocks)
    EXPECT_TRUE(b.stopped);
  EXPECT_EQ(blocks[0].start.at("type"), "thinking");
  EXPECT_EQ(blocks[0].deltas.at("thinking_delta"), "plan it");
  EXPECT_EQ(blocks[0].deltas.at("signature_delta"), "sig-from-script");
  EXPECT_EQ(blocks[1].start.at("type"), "text");
  EXPECT_EQ(blocks[1].deltas.at("text_delta"), "Hello there, wörld");  // split without breaking UTF-8
  EXPECT_EQ(blocks[2].start.at("type"), "tool_use");
  EXPECT_EQ(blocks[2].start.at("id"), "toolu_fixed");
  EXPECT_EQ(blocks[2].start.at("name"), "Bash");
  EXPECT_TRUE(blocks[2].start.at("input").as_object().empty());
  EXPECT_EQ(parse(blocks[2].deltas.at("input_json_delta")), parse(R"({"command":"echo hi","description":"say hi"})"));

  // delta_bytes = 4 splits the text into several deltas.
  std::size_t text_deltas = 0;
  for (const auto& e : events)
    if (e.name == "content_block_delta" && e.data.at("delta").at("type") == "text_delta") ++text_deltas;
  EXPECT_GE(text_deltas, 5u);

  const json::object& final_delta = events[events.size() - 2].data.as_object();
  EXPECT_EQ(final_delta.at("delta").at("stop_reason"), "tool_use");
  EXPECT_EQ(final_delta.at("usage").at("output_tokens"), 33);
}

TEST(AnthropicWire, AnswersNonStreamingRequestsWithOneMessage) {
  RunningEndpoint ep(kAllBlocksScenario);
  const Response r = post_anthropic(ep, false);
  ASSERT_EQ(r.status, 200u) << text_of(r);
  EXPECT_EQ(r.header("content-type"), "application/json");
  const json::value message = parse(r.body);
  EXPECT_EQ(message.at("type"), "message");
  EXPECT_EQ(message.at("stop_reason"), "tool_use");
  const json::array& content = message.at("content").as_array();
  ASSERT_EQ(content.size(), 3u);
  EXPECT_EQ(content[0].at("type"), "thinking");
  EXPECT_EQ(content[0].at("thinking"), "plan it");
  EXPECT_EQ(content[0].at("signature"), "sig-from-script");
  EXPECT_EQ(content[1].at("text"), "Hello there, wörld");
  EXPECT_EQ(content[2].at("type"), "tool_use");
  EXPECT_EQ(content[2].at("input").at("command"), "echo hi");
  EXPECT_EQ(message.at("usage").at("output_tokens"), 33);
  EXPECT_EQ(message.at("usage").at("cache_read_input_tokens"), 40);
  ASSERT_TRUE(ep.wait_until_ended(1));
  EXPECT_FALSE(ep.requests()[0].stream);
}

TEST(AnthropicWire, DefaultStopReasonIsEndTurnWithoutToolCalls) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "just text"}]},
              {"content": [{"type": "text", "text": "cut"}], "stop_reason": "max_tokens"}]})");
  const auto first = parse_sse(post_anthropic(ep, true).body);
  ASSERT_GE(first.size(), 2u);
  EXPECT_EQ(first[first.size() - 2].data.at("delta").at("stop_reason"), "end_turn");
  const auto second = parse(post_anthropic(ep, false).body);
  EXPECT_EQ(second.at("stop_reason"), "max_tokens");
}

constexpr const char* kResponsesScenario = R"({
  "format": "metaharness.scenario/1",
  "wires": ["responses"],
  "steps": [
    {"content": [
       {"type": "text", "text": "I will patch it."},
       {"type": "thinking", "text": "**Planning** the patch"},
       {"type": "tool_call", "name": "exec_command", "input": {"cmd": "ls -la", "yield_time_ms": 1000}},
       {"type": "custom_tool_call", "id": "call_patch_1", "name": "apply_patch",
        "input": "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n"}],
     "usage": {"input_tokens": 200, "output_tokens": 50, "cached_input_tokens": 150, "reasoning_tokens": 12},
     "delta_bytes": 5}
  ]
})";

TEST(ResponsesWire, StreamsMessageReasoningFunctionAndCustomToolCalls) {
  RunningEndpoint ep(kResponsesScenario);
  std::vector<SseEvent> events;
  ASSERT_NO_FATAL_FAILURE(streamed_events(post_responses(ep, true), "x-request-id", 4, events));
  EXPECT_EQ(events[0].name, "response.created");
  EXPECT_EQ(events[1].name, "response.in_progress");
  EXPECT_EQ(events.back().name, "response.completed");
  for (std::size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i].data.at("type").as_string(), events[i].name);
    EXPECT_EQ(events[i].data.at("sequence_number"), i) << events[i].name;
  }
  EXPECT_EQ(events[0].data.at("response").at("status"), "in_progress");
  EXPECT_EQ(events[0].data.at("response").at("model"), "gpt-test-model");

  // Per output item: added ... done, with the streamed pieces adding up to the done item.
  std::map<std::size_t, std::vector<const SseEvent*>> by_item;
  for (const auto& e : events)
    if (const auto* index = e.data.as_object().if_contains("output_index"))
      by_item[index->to_number<std::size_t>()].push_back(&e);
  ASSERT_EQ(by_item.size(), 4u);
  std::vector<json::object> done_items;
  for (auto& [index, item_events] : by_item) {
    EXPECT_EQ(item_events.front()->name, "response.output_item.added") << index;
    EXPECT_EQ(item_events.back()->name, "response.output_item.done") << index;
    done_items.push_back(item_events.back()->data.at("item").as_object());
    std::string streamed;
    for (const SseEvent* e : item_events)
      if (e->name.ends_with(".delta")) streamed += e->data.at("delta").as_string();
    const json::object& item = done_items.back();
    const std::string type(item.at("type").as_string());
    if (type == "message") {
      EXPECT_EQ(streamed, "I will patch it.");
      EXPECT_EQ(item.at("role"), "assistant");
      EXPECT_EQ(item.at("content").at(0).at("type"), "output_text");
      EXPECT_EQ(item.at("content").at(0).at("text"), "I will patch it.");
    } else if (type == "reasoning") {
      EXPECT_EQ(streamed, "**Planning** the patch");
      EXPECT_EQ(item.at("summary").at(0).at("text"), "**Planning** the patch");
    } else if (type == "function_call") {
      EXPECT_EQ(item.at("name"), "exec_command");
      EXPECT_TRUE(item.at("call_id").as_string().starts_with("call_"));
      EXPECT_EQ(parse(item.at("arguments").as_string()), parse(R"({"cmd":"ls -la","yield_time_ms":1000})"));
      EXPECT_EQ(streamed, item.at("arguments").as_string());
    } else if (type == "custom_tool_call") {
      EXPECT_EQ(item.at("call_id"), "call_patch_1");
      EXPECT_EQ(item.at("name"), "apply_patch");
      EXPECT_EQ(item.at("input"), "*** Begin Patch\n*** Add File: a.txt\n+hi\n*** End Patch\n");
      EXPECT_EQ(streamed, item.at("input").as_string());
    } else {
      ADD_FAILURE() << "unexpected item type " << type;
    }
  }
  EXPECT_EQ(done_items[0].at("type"), "message");
  EXPECT_EQ(done_items[1].at("type"), "reasoning");
  EXPECT_EQ(done_items[2].at("type"), "function_call");
  EXPECT_EQ(done_items[3].at("type"), "custom_tool_call");

  const json::value& completed = events.back().data.at("response");
  EXPECT_EQ(completed.at("status"), "completed");
  EXPECT_EQ(completed.at("id"), "resp_mh_0001");
  EXPECT_EQ(completed.at("output").as_array().size(), 4u);
  const json::value& usage = completed.at("usage");
  EXPECT_EQ(usage.at("input_tokens"), 200);
  EXPECT_EQ(usage.at("input_tokens_details").at("cached_tokens"), 150);
  EXPECT_EQ(usage.at("output_tokens"), 50);
  EXPECT_EQ(usage.at("output_tokens_details").at("reasoning_tokens"), 12);
  EXPECT_EQ(usage.at("total_tokens"), 250);
}

TEST(ResponsesWire, AnswersNonStreamingRequestsWithOneResponse) {
  RunningEndpoint ep(kResponsesScenario);
  const Response r = post_responses(ep, false);
  ASSERT_EQ(r.status, 200u) << text_of(r);
  const json::value response = parse(r.body);
  EXPECT_EQ(response.at("object"), "response");
  EXPECT_EQ(response.at("status"), "completed");
  ASSERT_EQ(response.at("output").as_array().size(), 4u);
  EXPECT_EQ(response.at("output").at(3).at("type"), "custom_tool_call");
  EXPECT_EQ(response.at("usage").at("total_tokens"), 250);
}

TEST(Wires, AScenarioAnswersOnlyTheWiresItDeclares) {
  RunningEndpoint ep(kResponsesScenario);
  const Response r = post_anthropic(ep, true);
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(parse(r.body).at("error").at("type"), "not_found_error");
  ASSERT_TRUE(ep.wait_until_ended(1));
  EXPECT_EQ(ep.requests()[0].answer, Answer::wire_not_served);
  // The refused request consumed nothing.
  EXPECT_EQ(parse_sse(post_responses(ep, true).body).back().name, "response.completed");
  ASSERT_TRUE(ep.wait_until_ended(2));
  EXPECT_EQ(ep.requests()[1].step, 0u);
}

// ---------------------------------------------------------------------------------------------
// Step consumption
// ---------------------------------------------------------------------------------------------

constexpr const char* kTwoWireScenario = R"({
  "format": "metaharness.scenario/1",
  "aux": {"content": [{"type": "text", "text": "A short title"}]},
  "exhausted": {"content": [{"type": "text", "text": "nothing left"}]},
  "steps": [
    {"name": "shell", "repeat": 2,
     "content": [{"type": "tool_call", "name": "Bash", "input": {"command": "touch m"},
                  "responses": {"name": "exec_command", "input": {"cmd": "touch m"}}}]},
    {"name": "answer", "content": [{"type": "text", "text": "done"}]}
  ]
})";

std::string first_text(const Response& r) {
  const json::value body = parse(r.body);
  if (const auto* content = body.as_object().if_contains("content"))
    return std::string(content->at(0).at("text").as_string());
  return std::string(body.at("output").at(0).at("content").at(0).at("text").as_string());
}

TEST(Steps, AuxRequestsGetTheAuxAnswerAndConsumeNothing) {
  RunningEndpoint ep(kTwoWireScenario);
  EXPECT_EQ(first_text(post_anthropic(ep, false, /*with_tools=*/false)), "A short title");
  const json::value step0 = parse(post_anthropic(ep, false).body);
  EXPECT_EQ(step0.at("content").at(0).at("name"), "Bash");
  EXPECT_EQ(first_text(post_responses(ep, false, false)), "A short title");
  ASSERT_TRUE(ep.wait_until_ended(3));
  const auto log = ep.requests();
  EXPECT_EQ(log[0].answer, Answer::aux);
  EXPECT_FALSE(log[0].step.has_value());
  EXPECT_EQ(log[1].answer, Answer::step);
  EXPECT_EQ(log[1].step, 0u);
  EXPECT_EQ(log[1].step_name, "shell");
  EXPECT_EQ(log[2].answer, Answer::aux);
}

TEST(Steps, RepeatServesAStepAgainAndOverridesFollowTheWire) {
  RunningEndpoint ep(kTwoWireScenario);
  // One cursor for both wires: the repeated step goes once to each.
  const json::value claude = parse(post_anthropic(ep, false).body);
  EXPECT_EQ(claude.at("content").at(0).at("name"), "Bash");
  EXPECT_EQ(claude.at("content").at(0).at("input").at("command"), "touch m");
  const json::value codex = parse(post_responses(ep, false).body);
  EXPECT_EQ(codex.at("output").at(0).at("name"), "exec_command");
  EXPECT_EQ(parse(codex.at("output").at(0).at("arguments").as_string()).at("cmd"), "touch m");
  EXPECT_EQ(first_text(post_anthropic(ep, false)), "done");
  EXPECT_EQ(first_text(post_responses(ep, false)), "nothing left");
  EXPECT_EQ(first_text(post_anthropic(ep, false)), "nothing left");
  ASSERT_TRUE(ep.wait_until_ended(5));
  const auto log = ep.requests();
  EXPECT_EQ(answers(log), (std::vector<std::string>{"step 0", "step 0", "step 1", "exhausted", "exhausted"}));
}

// A tool_call's `namespace` (responses override only) is rendered on the function_call item,
// in output_item.added, output_item.done and response.output alike.
TEST(ResponsesWire, AToolCallsNamespaceIsRenderedOnTheFunctionCallItem) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1", "wires": ["responses"], "steps": [
    {"content": [{"type": "tool_call", "id": "call_spawn", "name": "spawn_agent", "input": {"message": "go"},
                  "responses": {"namespace": "multi_agent_v1"}}]},
    {"content": [{"type": "tool_call", "id": "call_plain", "name": "exec_command", "input": {"cmd": "ls"}}]}]})");
  const json::value whole = parse(post_responses(ep, false).body);
  EXPECT_EQ(whole.at("output").at(0).at("namespace"), "multi_agent_v1");
  EXPECT_EQ(whole.at("output").at(0).at("name"), "spawn_agent");
  const json::value plain = parse(post_responses(ep, false).body);
  EXPECT_FALSE(plain.at("output").at(0).as_object().contains("namespace")) << "no namespace unless given";

  RunningEndpoint streamed(R"({"format": "metaharness.scenario/1", "wires": ["responses"], "steps": [
    {"content": [{"type": "tool_call", "id": "call_spawn", "name": "spawn_agent", "input": {},
                  "responses": {"namespace": "multi_agent_v1"}}]}]})");
  Response r = post_responses(streamed, true);
  int with_namespace = 0;
  for (const auto& e : parse_sse(r.body)) {
    const json::object& o = e.data.as_object();
    if (const json::value* item = o.if_contains("item"))
      if (item->at("type") == "function_call" && item->at("namespace") == "multi_agent_v1") ++with_namespace;
  }
  EXPECT_EQ(with_namespace, 2) << "output_item.added and output_item.done";
}

// `when` routes a step by a request header: a request takes the first step not used up whose
// `when` it matches, so concurrent agents (Codex marks a sub-agent's requests with
// x-openai-subagent) get their own steps whatever order their requests arrive in.
TEST(Steps, WhenRoutesAStepByARequestHeader) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1", "wires": ["responses"], "steps": [
    {"name": "main 1", "when": {"no_header": "x-openai-subagent"}, "content": [{"type": "text", "text": "main one"}]},
    {"name": "sub 1", "when": {"header": "X-OpenAI-Subagent"}, "content": [{"type": "text", "text": "sub one"}]},
    {"name": "main 2", "when": {"no_header": "x-openai-subagent"}, "content": [{"type": "text", "text": "main two"}]},
    {"name": "anyone", "content": [{"type": "text", "text": "anyone"}]}]})");
  Headers sub = openai_headers(ep.token());
  sub.emplace_back("x-openai-subagent", "collab_spawn");
  auto post_sub = [&] { return exchange(ep.port(), "POST", "/v1/responses", sub, responses_body(false)); };
  EXPECT_EQ(first_text(post_sub()), "sub one") << "the sub-agent's request skips the main agent's step";
  EXPECT_EQ(first_text(post_responses(ep, false)), "main one");
  EXPECT_EQ(first_text(post_responses(ep, false)), "main two");
  EXPECT_EQ(first_text(post_sub()), "anyone") << "a step without when matches every request";
  EXPECT_EQ(first_text(post_responses(ep, false)), "metaharness: the scenario has no steps left.");
  ASSERT_TRUE(ep.wait_until_ended(5));
  const auto log = ep.requests();
  EXPECT_EQ(answers(log), (std::vector<std::string>{"step 1", "step 0", "step 2", "step 3", "exhausted"}));
}

TEST(Steps, DefaultExhaustedAnswerIsAPlainEndTurn) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1", "steps": []})");
  const json::value message = parse(post_anthropic(ep, false).body);
  EXPECT_EQ(message.at("stop_reason"), "end_turn");
  EXPECT_EQ(message.at("content").at(0).at("text"), "metaharness: the scenario has no steps left.");
}

TEST(Steps, AStickyStepAnswersEveryLaterRequest) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "first"}]},
              {"name": "down for good", "error": {"status": 529}, "sticky": true}]})");
  EXPECT_EQ(post_anthropic(ep, false).status, 200u);
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(post_anthropic(ep, i % 2 == 0).status, 529u);
  EXPECT_EQ(post_responses(ep, true).status, 529u);
  ASSERT_TRUE(ep.wait_until_ended(6));
  for (std::size_t i = 1; i < 6; ++i) {
    EXPECT_EQ(ep.requests()[i].step, 1u);
    EXPECT_EQ(ep.requests()[i].step_name, "down for good");
  }
}

TEST(Steps, AllRequestsRuleMakesToolLessRequestsConsumeSteps) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1", "main_loop": "all_requests",
    "steps": [{"content": [{"type": "text", "text": "one"}]}, {"content": [{"type": "text", "text": "two"}]}]})");
  EXPECT_EQ(first_text(post_anthropic(ep, false, false)), "one");
  EXPECT_EQ(first_text(post_responses(ep, false, false)), "two");
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

constexpr const char* kErrorsScenario = R"({
  "format": "metaharness.scenario/1",
  "steps": [
    {"error": {"status": 401}},
    {"error": {"status": 429, "retry_after": 2}},
    {"error": {"status": 429}},
    {"error": {"status": 500}},
    {"error": {"status": 529}},
    {"error": {"status": 429, "retry_after_ms": 250, "message": "slow down",
               "headers": {"anthropic-ratelimit-unified-status": "rejected"}}}
  ]
})";

struct ExpectedError {
  unsigned status;
  const char* anthropic_type;
  const char* openai_code;  // "" = null
  const char* retry_after;  // "" = absent
};

constexpr ExpectedError kExpectedErrors[] = {
    {401, "authentication_error", "invalid_api_key", ""}, {429, "rate_limit_error", "rate_limit_exceeded", "2"},
    {429, "rate_limit_error", "rate_limit_exceeded", ""}, {500, "api_error", "", ""},
    {529, "overloaded_error", "overloaded", ""},
};

TEST(Errors, AnthropicErrorsCarryStatusTypeAndRetryAfter) {
  RunningEndpoint ep(kErrorsScenario);
  for (const ExpectedError& expected : kExpectedErrors) {
    const Response r = post_anthropic(ep, true);
    ASSERT_EQ(r.status, expected.status) << text_of(r);
    EXPECT_EQ(r.header("content-type"), "application/json");
    const json::value body = parse(r.body);
    EXPECT_EQ(body.at("type"), "error");
    EXPECT_EQ(body.at("error").at("type"), expected.anthropic_type) << expected.status;
    EXPECT_FALSE(body.at("error").at("message").as_string().empty());
    EXPECT_EQ(r.header("retry-after"), expected.retry_after) << expected.status;
  }
  const Response custom = post_anthropic(ep, false);
  EXPECT_EQ(custom.status, 429u);
  EXPECT_EQ(parse(custom.body).at("error").at("message"), "slow down");
  EXPECT_EQ(custom.header("retry-after-ms"), "250");
  EXPECT_EQ(custom.header("anthropic-ratelimit-unified-status"), "rejected");
}

TEST(Errors, OpenAiErrorsCarryStatusCodeAndRetryAfter) {
  RunningEndpoint ep(kErrorsScenario);
  for (const ExpectedError& expected : kExpectedErrors) {
    const Response r = post_responses(ep, true);
    ASSERT_EQ(r.status, expected.status) << text_of(r);
    const json::value body = parse(r.body);
    const json::value& error = body.at("error");
    EXPECT_FALSE(error.at("message").as_string().empty());
    EXPECT_TRUE(error.at("param").is_null());
    if (*expected.openai_code) {
      EXPECT_EQ(error.at("code"), expected.openai_code) << expected.status;
    } else {
      EXPECT_TRUE(error.at("code").is_null()) << expected.status;
    }
    EXPECT_EQ(r.header("retry-after"), expected.retry_after) << expected.status;
  }
  ASSERT_TRUE(ep.wait_until_ended(5));
  for (std::size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(ep.requests()[i].status, kExpectedErrors[i].status);
    EXPECT_EQ(ep.requests()[i].step, i);
  }
}

TEST(Errors, ScriptedStreamFailuresEndTheStreamTheWireWay) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "partial"}], "finish": "stream_error", "repeat": 2},
              {"content": [{"type": "text", "text": "cut"}], "finish": "disconnect"}]})");
  const auto anthropic = parse_sse(post_anthropic(ep, true).body);
  ASSERT_FALSE(anthropic.empty());
  EXPECT_EQ(anthropic.back().name, "error");
  EXPECT_EQ(anthropic.back().data.at("error").at("type"), "overloaded_error");

  const auto responses = parse_sse(post_responses(ep, true).body);
  ASSERT_FALSE(responses.empty());
  EXPECT_EQ(responses.back().name, "response.failed");
  EXPECT_EQ(responses.back().data.at("response").at("status"), "failed");
  EXPECT_EQ(responses.back().data.at("response").at("error").at("code"), "server_error");

  const Response cut = post_anthropic(ep, true);
  EXPECT_FALSE(cut.complete) << "a disconnect finish must not end the chunked body cleanly";
  EXPECT_NE(cut.body.find("\"text\":\"cut\""), std::string::npos);
  EXPECT_EQ(cut.body.find("message_stop"), std::string::npos);
  ASSERT_TRUE(ep.wait_until_ended(3));
  EXPECT_EQ(ep.requests()[2].ending, Ending::disconnected_by_scenario);
}

// ---------------------------------------------------------------------------------------------
// Pacing. Only lower bounds are asserted; a loaded machine may always be slower.
// ---------------------------------------------------------------------------------------------

TEST(Timing, HeadersDelayHoldsBackTheWholeAnswer) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "late"}], "timing": {"headers_delay_ms": 150}},
              {"error": {"status": 429}, "timing": {"headers_delay_ms": 120}}]})");
  auto start = Clock::now();
  EXPECT_EQ(post_anthropic(ep, true).status, 200u);
  EXPECT_GE(since(start).count(), 150);
  start = Clock::now();
  EXPECT_EQ(post_responses(ep, false).status, 429u);
  EXPECT_GE(since(start).count(), 120);
}

TEST(Timing, EventDelaySpacesEveryEvent) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "slow"}], "timing": {"event_delay_ms": 25}}]})");
  const auto start = Clock::now();
  const Response r = post_anthropic(ep, true);
  const auto elapsed = since(start);
  const auto events = parse_sse(r.body);
  ASSERT_EQ(events.size(), 6u);  // start, block start, delta, block stop, delta, stop
  EXPECT_GE(elapsed.count(), 25 * 5);
}

TEST(Timing, HoldKeepsTheStreamOpenBeforeTheFinalEvents) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "hold"}], "timing": {"hold_ms": 200}},
              {"content": [{"type": "text", "text": "hold"}], "timing": {"hold_ms": 150}}]})");
  Client client(ep.port());
  ASSERT_TRUE(client.connect());
  const auto start = Clock::now();
  ASSERT_TRUE(client.send("POST", "/v1/messages", anthropic_headers(ep.token()), anthropic_body(true)));
  ASSERT_TRUE(client.read_until("content_block_stop")) << client.partial().error;
  EXPECT_EQ(client.partial().body.find("message_delta"), std::string::npos);
  const Response whole = client.finish_response();
  EXPECT_TRUE(whole.complete);
  EXPECT_GE(since(start).count(), 200);
  EXPECT_NE(whole.body.find("message_stop"), std::string::npos);

  const auto again = Clock::now();
  ASSERT_TRUE(client.send("POST", "/v1/responses", openai_headers(ep.token()), responses_body(true)));
  const Response second = client.read_response();
  EXPECT_GE(since(again).count(), 150);
  EXPECT_EQ(parse_sse(second.body).back().name, "response.completed");
}

TEST(Timing, HoldUntilDisconnectEndsWhenTheClientLeaves) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1",
    "steps": [{"name": "hang", "content": [{"type": "text", "text": "thinking forever"}],
               "timing": {"hold_until_disconnect": true}},
              {"content": [{"type": "text", "text": "after"}]}]})");
  {
    Client client(ep.port());
    ASSERT_TRUE(client.connect());
    ASSERT_TRUE(client.send("POST", "/v1/messages", anthropic_headers(ep.token()), anthropic_body(true)));
    ASSERT_TRUE(client.read_until("content_block_stop")) << client.partial().error;
    EXPECT_EQ(client.partial().body.find("message_stop"), std::string::npos);
    ASSERT_EQ(ep.requests().size(), 1u);
    EXPECT_EQ(ep.requests()[0].ending, Ending::in_progress);
    client.close();
  }
  ASSERT_TRUE(ep.wait_until_ended(1, 5s)) << "the hold did not notice the client leaving";
  EXPECT_EQ(ep.requests()[0].ending, Ending::client_disconnected);
  EXPECT_EQ(first_text(post_anthropic(ep, false)), "after");
}

TEST(Timing, StopEndsHeldStreamsAndTheServerThread) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "x"}], "timing": {"hold_until_disconnect": true}, "sticky": true}]})");
  Client a(ep.port()), b(ep.port());
  ASSERT_TRUE(a.connect());
  ASSERT_TRUE(b.connect());
  ASSERT_TRUE(a.send("POST", "/v1/messages", anthropic_headers(ep.token()), anthropic_body(true)));
  ASSERT_TRUE(b.send("POST", "/v1/responses", openai_headers(ep.token()), responses_body(true)));
  ASSERT_TRUE(a.read_until("content_block_stop"));
  ASSERT_TRUE(b.read_until("response.output_item.done"));
  EXPECT_TRUE(ep.stop_and_join(5s));
  EXPECT_TRUE(a.wait_for_close());
  EXPECT_TRUE(b.wait_for_close());
  for (const auto& r : ep.requests())
    EXPECT_EQ(r.ending, Ending::stopped);
}

// ---------------------------------------------------------------------------------------------
// Token check
// ---------------------------------------------------------------------------------------------

TEST(Auth, TheTokenIsCheckedPerWireAndRefusalsConsumeNothing) {
  EndpointOptions options;
  options.token = "sk-run-secret-42";
  RunningEndpoint ep(kTwoWireScenario, options);
  EXPECT_EQ(ep.token(), "sk-run-secret-42");
  const std::string body = anthropic_body(false);

  Response missing = exchange(ep.port(), "POST", "/v1/messages", {{"content-type", "application/json"}}, body);
  EXPECT_EQ(missing.status, 401u);
  EXPECT_EQ(parse(missing.body).at("error").at("type"), "authentication_error");

  Response wrong = exchange(ep.port(), "POST", "/v1/messages", {{"x-api-key", "sk-wrong"}}, body);
  EXPECT_EQ(wrong.status, 401u);
  EXPECT_EQ(parse(wrong.body).at("error").at("type"), "authentication_error");

  // OpenAI clients must use a bearer token; an x-api-key is not a credential there.
  Response codex_key = exchange(ep.port(), "POST", "/v1/responses", {{"x-api-key", ep.token()}}, responses_body(false));
  EXPECT_EQ(codex_key.status, 401u);
  EXPECT_EQ(parse(codex_key.body).at("error").at("code"), "invalid_api_key");
  Response codex_wrong =
      exchange(ep.port(), "POST", "/v1/responses", {{"authorization", "Bearer nope"}}, responses_body(false));
  EXPECT_EQ(codex_wrong.status, 401u);

  // Anthropic accepts the token as a bearer too (ANTHROPIC_AUTH_TOKEN).
  Response bearer = exchange(ep.port(), "POST", "/v1/messages", {{"authorization", "Bearer sk-run-secret-42"}}, body);
  EXPECT_EQ(bearer.status, 200u);

  ASSERT_TRUE(ep.wait_until_ended(5));
  const auto log = ep.requests();
  EXPECT_EQ(log[0].credential, Credential::missing);
  EXPECT_EQ(log[1].credential, Credential::mismatched);
  EXPECT_EQ(log[2].credential, Credential::missing);
  EXPECT_EQ(log[3].credential, Credential::mismatched);
  EXPECT_EQ(log[4].credential, Credential::matched);
  for (std::size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(log[i].answer, Answer::unauthorized);
    EXPECT_EQ(log[i].status, 401u);
  }
  EXPECT_EQ(log[4].step, 0u) << "refused requests consumed a step";
  for (const auto& r : log) {
    EXPECT_TRUE(r.header("x-api-key").empty());
    EXPECT_TRUE(r.header("authorization").empty());
    EXPECT_EQ(json::serialize(to_json(r)).find("sk-run-secret-42"), std::string::npos);
  }
}

TEST(Auth, AnEmptyTokenOptionGeneratesOne) {
  RunningEndpoint a(kTwoWireScenario), b(kTwoWireScenario);
  EXPECT_TRUE(a.token().starts_with("mh-"));
  EXPECT_EQ(a.token().size(), 35u);
  EXPECT_NE(a.token(), b.token());
}

// ---------------------------------------------------------------------------------------------
// The request log
// ---------------------------------------------------------------------------------------------

struct TempFile {
  std::filesystem::path path;
  explicit TempFile(std::string_view stem)
      : path(std::filesystem::temp_directory_path() /
             (std::string(stem) + "-" + std::to_string(::getpid()) + ".jsonl")) {
    std::filesystem::remove(path);
  }
  ~TempFile() { std::filesystem::remove(path); }
  std::string text() const {
    std::ifstream in(path, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
};

TEST(RequestLog, RecordsWhatTheModelWasSentInMemoryAndAsJsonl) {
  TempFile file("mh-model-log");
  EndpointOptions options;
  options.token = "sk-log-secret";
  options.log_path = file.path;
  RunningEndpoint ep(kTwoWireScenario, options);

  const std::string body = R"({"model":"claude-x","stream":true,"tools":[{"name":"Bash"}],)"
                           R"("messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1",)"
                           R"("content":"SUPERVISOR: denied","is_error":true}]}]})";
  ASSERT_EQ(to_anthropic(ep, "POST", "/v1/messages?beta=true", body).status, 200u);
  ASSERT_TRUE(ep.wait_until_ended(1));

  const ServedRequest r = ep.requests().at(0);
  EXPECT_EQ(r.sequence, 1u);
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.target, "/v1/messages?beta=true");
  EXPECT_EQ(r.wire, Wire::anthropic);
  EXPECT_EQ(r.header("user-agent"), "claude-cli/2.1.197 (external, sdk-cli)");
  EXPECT_EQ(r.header("anthropic-version"), "2023-06-01");
  EXPECT_EQ(r.header("x-claude-code-session-id"), "session-under-test");
  EXPECT_TRUE(r.header("x-api-key").empty());
  EXPECT_EQ(r.credential, Credential::matched);
  EXPECT_EQ(r.body_bytes, body.size());
  EXPECT_TRUE(r.body_error.empty());
  EXPECT_TRUE(r.stream);
  // What a test asks of the log: did the deny reason reach the model?
  EXPECT_EQ(r.body.at("messages").at(0).at("content").at(0).at("content"), "SUPERVISOR: denied");
  EXPECT_EQ(r.answer, Answer::step);
  EXPECT_EQ(r.step, 0u);
  EXPECT_EQ(r.step_name, "shell");
  EXPECT_EQ(r.status, 200u);
  EXPECT_EQ(r.ending, Ending::completed);
  ASSERT_TRUE(r.ended_at.has_value());
  EXPECT_GE(*r.ended_at, r.received_at);

  const std::string text = file.text();
  EXPECT_EQ(text.find("sk-log-secret"), std::string::npos);
  std::vector<json::value> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(parse(line));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("kind"), "request");
  EXPECT_EQ(lines[0].at("seq"), 1);
  EXPECT_EQ(lines[0].at("answer"), "step");
  EXPECT_EQ(lines[0].at("step"), 0);
  EXPECT_EQ(lines[0].at("credential"), "matched");
  EXPECT_EQ(lines[0].at("body"), parse(body));
  EXPECT_EQ(lines[1].at("kind"), "end");
  EXPECT_EQ(lines[1].at("seq"), 1);
  EXPECT_EQ(lines[1].at("ending"), "completed");
}

TEST(Endpoint, StartFailuresAreValues) {
  boost::asio::io_context io;
  EndpointOptions unwritable;
  unwritable.log_path = "/nonexistent-dir/requests.jsonl";
  ScriptedEndpoint no_log(io, scenario_from(R"({"format": "metaharness.scenario/1"})"), unwritable);
  EXPECT_FALSE(no_log.start());

  ScriptedEndpoint first(io, scenario_from(R"({"format": "metaharness.scenario/1"})"));
  auto port = first.start();
  ASSERT_TRUE(port) << port.error().message();
  EXPECT_NE(*port, 0);
  EXPECT_EQ(first.base_url(), "http://127.0.0.1:" + std::to_string(*port));
  EXPECT_EQ(first.openai_base_url(), first.base_url() + "/v1");
  EXPECT_FALSE(first.start()) << "a second start must fail";

  EndpointOptions same_port;
  same_port.port = *port;
  ScriptedEndpoint second(io, scenario_from(R"({"format": "metaharness.scenario/1"})"), same_port);
  auto taken = second.start();
  ASSERT_FALSE(taken);
  EXPECT_EQ(taken.error(), boost::asio::error::address_in_use);
}

// ---------------------------------------------------------------------------------------------
// Hostile and malformed input: answered, recorded, and the server keeps serving.
// ---------------------------------------------------------------------------------------------

TEST(Malformed, BadJsonIsA400NamedInTheLog) {
  RunningEndpoint ep(kTwoWireScenario);
  const Response r = to_anthropic(ep, "POST", "/v1/messages", "{\"model\": ");
  EXPECT_EQ(r.status, 400u);
  EXPECT_EQ(parse(r.body).at("error").at("type"), "invalid_request_error");
  const Response array = to_openai(ep, "/v1/responses", "[1,2]");
  EXPECT_EQ(array.status, 400u);
  const Response empty = to_openai(ep, "/v1/responses", "");
  EXPECT_EQ(empty.status, 400u);
  ASSERT_TRUE(ep.wait_until_ended(3));
  const auto log = ep.requests();
  EXPECT_EQ(log[0].answer, Answer::bad_request);
  EXPECT_NE(log[0].body_error.find("not JSON"), std::string::npos);
  EXPECT_TRUE(log[0].body.is_null());
  EXPECT_EQ(log[1].body_error, "not a JSON object");
  EXPECT_EQ(log[2].body_error, "empty body");
  EXPECT_EQ(post_anthropic(ep, false).status, 200u);
  ASSERT_TRUE(ep.wait_until_ended(4));
  EXPECT_EQ(ep.requests()[3].step, 0u);
}

TEST(Malformed, ABodyOverTheLimitIsA413) {
  EndpointOptions options;
  options.max_body_bytes = 64 * 1024;
  RunningEndpoint ep(kTwoWireScenario, options);
  const std::string huge = R"({"model":"m","tools":[1],"pad":")" + std::string(200 * 1024, 'x') + "\"}";
  const Response r = to_anthropic(ep, "POST", "/v1/messages", huge);
  EXPECT_EQ(r.status, 413u) << r.error;
  EXPECT_EQ(parse(r.body).at("error").at("type"), "request_too_large");
  EXPECT_EQ(r.header("connection"), "close");
  ASSERT_TRUE(ep.wait_until_ended(1));
  const auto log = ep.requests();
  EXPECT_EQ(log[0].answer, Answer::body_too_large);
  EXPECT_EQ(log[0].status, 413u);
  EXPECT_EQ(log[0].body_bytes, huge.size());
  EXPECT_EQ(log[0].target, "/v1/messages");
  EXPECT_EQ(post_anthropic(ep, false).status, 200u);
}

TEST(Malformed, OversizedHeadersAreA431) {
  EndpointOptions options;
  options.max_header_bytes = 4096;
  RunningEndpoint ep(kTwoWireScenario, options);
  Headers headers = anthropic_headers(ep.token());
  headers.emplace_back("x-padding", std::string(8192, 'p'));
  const Response r = exchange(ep.port(), "POST", "/v1/messages", headers, anthropic_body(false));
  EXPECT_EQ(r.status, 431u) << r.error;
  ASSERT_TRUE(ep.wait_until_ended(1));
  EXPECT_EQ(ep.requests()[0].answer, Answer::headers_too_large);
  EXPECT_EQ(post_anthropic(ep, false).status, 200u);
}

TEST(Malformed, GarbageIsA400AndTheConnectionCloses) {
  RunningEndpoint ep(kTwoWireScenario);
  Client client(ep.port());
  ASSERT_TRUE(client.connect());
  ASSERT_TRUE(client.send_raw("THIS IS NOT HTTP\r\n\x01\x02\r\n\r\n"));
  const Response r = client.read_response();
  EXPECT_EQ(r.status, 400u) << r.error;
  EXPECT_TRUE(client.wait_for_close());
  ASSERT_TRUE(ep.wait_until_ended(1));
  EXPECT_EQ(ep.requests()[0].answer, Answer::bad_request);
  EXPECT_FALSE(ep.requests()[0].body_error.empty());

  // A connection that closes before sending anything is not a request.
  Client idle(ep.port());
  ASSERT_TRUE(idle.connect());
  idle.close();
  EXPECT_EQ(post_anthropic(ep, false).status, 200u);
  ASSERT_TRUE(ep.wait_until_ended(2));
  EXPECT_EQ(ep.requests().size(), 2u);
}

TEST(Malformed, UnknownPathsAndMethodsAreAnsweredAndLogged) {
  RunningEndpoint ep(kTwoWireScenario);
  const Response unknown = to_anthropic(ep, "POST", "/v1/complete", "{}");
  EXPECT_EQ(unknown.status, 404u);
  EXPECT_EQ(parse(unknown.body).at("error").at("type"), "not_found_error");
  const Response get = to_anthropic(ep, "GET", "/v1/messages", "");
  EXPECT_EQ(get.status, 405u);
  EXPECT_EQ(get.header("allow"), "POST");
  ASSERT_TRUE(ep.wait_until_ended(2));
  const auto log = ep.requests();
  EXPECT_EQ(log[0].answer, Answer::not_found);
  EXPECT_FALSE(log[0].wire.has_value());
  EXPECT_EQ(log[0].credential, Credential::not_checked);
  EXPECT_EQ(log[1].answer, Answer::method_not_allowed);
  EXPECT_EQ(log[1].method, "GET");
}

TEST(Malformed, HeadAnswersCarryNoBodySoKeepAliveStaysInStep) {
  // Claude Code's runtime opens with `HEAD /` and may reuse the connection for the real request.
  RunningEndpoint ep(kTwoWireScenario);
  Client client(ep.port());
  ASSERT_TRUE(client.connect());
  ASSERT_TRUE(client.send("HEAD", "/", {{"user-agent", "Bun/1.4.0"}}, ""));
  const Response head = client.read_response(5s, /*head_request=*/true);
  EXPECT_EQ(head.status, 404u) << head.error;
  EXPECT_TRUE(head.body.empty());
  EXPECT_NE(head.header("content-length"), "0");
  ASSERT_TRUE(client.send("POST", "/v1/messages", anthropic_headers(ep.token()), anthropic_body(false)));
  const Response next = client.read_response();
  EXPECT_EQ(next.status, 200u) << next.error;
  EXPECT_EQ(parse(next.body).at("type"), "message");
  ASSERT_TRUE(ep.wait_until_ended(2));
  EXPECT_EQ(ep.requests()[0].method, "HEAD");
  EXPECT_EQ(ep.requests()[0].answer, Answer::not_found);
}

// ---------------------------------------------------------------------------------------------
// Connections
// ---------------------------------------------------------------------------------------------

TEST(Connections, KeepAliveServesSeveralRequestsOnOneConnection) {
  RunningEndpoint ep(kTwoWireScenario);
  Client client(ep.port());
  ASSERT_TRUE(client.connect());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.send("POST", "/v1/messages?beta=true", anthropic_headers(ep.token()), anthropic_body(i != 1)));
    const Response r = client.read_response();
    EXPECT_EQ(r.status, 200u) << r.error;
    EXPECT_TRUE(r.complete);
  }
  ASSERT_TRUE(client.send("POST", "/v1/responses", openai_headers(ep.token()), responses_body(true)));
  EXPECT_EQ(parse_sse(client.read_response().body).back().name, "response.completed");
  ASSERT_TRUE(ep.wait_until_ended(4));
  EXPECT_EQ(ep.requests().size(), 4u);
}

TEST(Connections, ExpectContinueGetsAnInterimAnswer) {
  RunningEndpoint ep(kTwoWireScenario);
  Client client(ep.port());
  ASSERT_TRUE(client.connect());
  Headers headers = anthropic_headers(ep.token());
  headers.emplace_back("expect", "100-continue");
  ASSERT_TRUE(client.send("POST", "/v1/messages", headers, anthropic_body(false)));
  const Response interim = client.read_response();
  EXPECT_EQ(interim.status, 100u);
  const Response final_answer = client.read_response();
  EXPECT_EQ(final_answer.status, 200u) << final_answer.error;
}

}  // namespace
}  // namespace mh::model::testing
