// The scripted endpoint's Gemini wire (generateContent, streamGenerateContent?alt=sse,
// countTokens): the scenario format unchanged, a "gemini" override where the wire needs one, the
// key as x-goog-api-key or ?key=, errors in Gemini's google.rpc.Status shape. The shapes follow
// what the real Gemini CLI 0.61.0 sends and reads (docs/scenarios.md, "The Gemini wire").
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>

#include "daemon/model/scenario.hpp"
#include "tests/model/test_support.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;

constexpr std::string_view kStreamPath = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
constexpr std::string_view kJsonPath = "/v1beta/models/gemini-2.5-flash:generateContent";

Headers gemini_headers(const std::string& token) {
  return {{"content-type", "application/json"}, {"x-goog-api-key", token}};
}

// A main-loop request as the Gemini CLI sends it: contents, systemInstruction, tools with
// functionDeclarations, generationConfig.
std::string gemini_body(const json::array& contents = {}) {
  json::array all{json::object{{"role", "user"}, {"parts", json::array{json::object{{"text", "make the file"}}}}}};
  for (const auto& c : contents)
    all.push_back(c);
  return json::serialize(json::object{
      {"contents", std::move(all)},
      {"systemInstruction", {{"parts", json::array{json::object{{"text", "You are a CLI agent."}}}}}},
      {"tools",
       json::array{json::object{
           {"functionDeclarations",
            json::array{json::object{{"name", "run_shell_command"},
                                     {"parameters", {{"type", "object"}, {"properties", json::object{}}}}}}}}}},
      {"generationConfig", {{"temperature", 1}}}});
}

constexpr const char* kGeminiScenario = R"({
  "format": "metaharness.scenario/1",
  "steps": [
    {"name": "shell",
     "content": [
       {"type": "thinking", "text": "Plan: touch"},
       {"type": "text", "text": "I will run it."},
       {"type": "tool_call", "name": "Bash", "input": {"command": "touch m"},
        "gemini": {"name": "run_shell_command", "input": {"command": "touch m", "description": "make m"}}},
       {"type": "tool_call", "id": "call-given-7", "name": "Bash", "input": {"command": "ls"},
        "gemini": {"name": "run_shell_command", "input": {"command": "ls"}}}],
     "usage": {"input_tokens": 120, "output_tokens": 30, "cached_input_tokens": 20, "reasoning_tokens": 7},
     "delta_bytes": 8},
    {"name": "limit", "content": [{"type": "text", "text": "cut short"}], "stop_reason": "max_tokens"},
    {"name": "quota", "error": {"status": 429}},
    {"name": "broken", "error": {"status": 500, "message": "scripted outage"}},
    {"name": "mid-stream", "content": [{"type": "text", "text": "partial"}], "finish": "stream_error"}
  ]
})";

json::array parts_of(const json::value& chunk) {
  return chunk.at("candidates").at(0).at("content").at("parts").as_array();
}

TEST(GeminiWire, StreamsThoughtTextAndFunctionCallChunksEndingWithFinishReasonAndUsage) {
  RunningEndpoint ep(kGeminiScenario);
  Response r = exchange(ep.port(), "POST", kStreamPath, gemini_headers(ep.token()), gemini_body());
  ASSERT_TRUE(r.complete) << r.error;
  EXPECT_EQ(r.status, 200u);
  EXPECT_TRUE(r.header("content-type").starts_with("text/event-stream"));
  const auto events = parse_sse(r.body);
  ASSERT_FALSE(events.empty());
  json::array parts;
  for (const auto& e : events) {
    EXPECT_EQ(e.name, "") << "Gemini's alt=sse stream has no event names";
    EXPECT_EQ(e.data.at("modelVersion"), "gemini-2.5-flash");  // the model named in the path
    for (const auto& p : parts_of(e.data))
      parts.push_back(p);
  }
  // The thought and the text cut at 8 bytes (the thought's signature on its last piece), two
  // calls, then the finishing chunk's empty text.
  ASSERT_EQ(parts.size(), 7u) << json::serialize(parts);
  EXPECT_EQ(parts[0].at("thought"), true);
  EXPECT_EQ(parts[0].at("text"), "Plan: to");
  EXPECT_FALSE(parts[0].as_object().contains("thoughtSignature"));
  EXPECT_EQ(parts[1].at("thought"), true);
  EXPECT_EQ(parts[1].at("text"), "uch");
  EXPECT_TRUE(parts[1].as_object().contains("thoughtSignature"));
  EXPECT_EQ(parts[2].at("text"), "I will r");
  EXPECT_FALSE(parts[2].as_object().contains("thought"));
  EXPECT_EQ(parts[3].at("text"), "un it.");
  const json::object& call = parts[4].at("functionCall").as_object();
  EXPECT_EQ(call.at("name"), "run_shell_command");
  EXPECT_EQ(call.at("args").at("description"), "make m");
  EXPECT_FALSE(call.contains("id")) << "the Gemini API gives a call no id unless the scenario does";
  EXPECT_EQ(parts[5].at("functionCall").at("id"), "call-given-7");
  EXPECT_EQ(parts[6].at("text"), "");

  const json::value& last = events.back().data;
  EXPECT_EQ(last.at("candidates").at(0).at("finishReason"), "STOP");
  const json::object& usage = last.at("usageMetadata").as_object();
  EXPECT_EQ(usage.at("promptTokenCount"), 120);
  EXPECT_EQ(usage.at("candidatesTokenCount"), 30);
  EXPECT_EQ(usage.at("cachedContentTokenCount"), 20);
  EXPECT_EQ(usage.at("thoughtsTokenCount"), 7);
  EXPECT_EQ(usage.at("totalTokenCount"), 157);
  for (std::size_t i = 0; i + 1 < events.size(); ++i)
    EXPECT_FALSE(events[i].data.at("candidates").at(0).as_object().contains("finishReason"));

  ASSERT_TRUE(ep.wait_until_ended(1));
  const auto log = ep.requests();
  EXPECT_EQ(log[0].wire, Wire::gemini);
  EXPECT_TRUE(log[0].stream) << "streaming is said by the path (streamGenerateContent)";
  EXPECT_EQ(log[0].answer, Answer::step);
  EXPECT_EQ(log[0].step, 0u);
}

TEST(GeminiWire, GenerateContentAnswersOneResponseAndErrorsHaveGeminisShape) {
  RunningEndpoint ep(kGeminiScenario);
  Client client(ep.port());
  ASSERT_TRUE(client.connect());
  const std::string body = gemini_body();
  auto post = [&](std::string_view path) {
    EXPECT_TRUE(client.send("POST", path, gemini_headers(ep.token()), body));
    return client.read_response();
  };
  ASSERT_EQ(post(kJsonPath).status, 200u);  // step 0, as one JSON answer
  Response limit = post(kJsonPath);
  ASSERT_EQ(limit.status, 200u);
  EXPECT_TRUE(limit.header("content-type").starts_with("application/json"));
  const json::value answer = parse(limit.body);
  EXPECT_EQ(answer.at("candidates").at(0).at("finishReason"), "MAX_TOKENS");
  EXPECT_EQ(answer.at("candidates").at(0).at("content").at("role"), "model");
  EXPECT_EQ(parts_of(answer).at(0).at("text"), "cut short");
  EXPECT_EQ(answer.at("usageMetadata").at("candidatesTokenCount"), 5);

  Response quota = post(kStreamPath);
  EXPECT_EQ(quota.status, 429u);
  const json::value q = parse(quota.body);
  EXPECT_EQ(q.at("error").at("code"), 429);
  EXPECT_EQ(q.at("error").at("status"), "RESOURCE_EXHAUSTED");
  EXPECT_TRUE(q.at("error").at("message").is_string());

  Response broken = post(kStreamPath);
  EXPECT_EQ(broken.status, 500u);
  EXPECT_EQ(parse(broken.body).at("error").at("status"), "INTERNAL");
  EXPECT_EQ(parse(broken.body).at("error").at("message"), "scripted outage");

  Response mid = post(kStreamPath);
  EXPECT_EQ(mid.status, 200u);
  const auto events = parse_sse(mid.body);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(parts_of(events[0].data).at(0).at("text"), "partial");
  EXPECT_EQ(events[1].data.at("error").at("code"), 500);
  EXPECT_EQ(events[1].data.at("error").at("status"), "INTERNAL");
}

TEST(GeminiWire, TheKeyIsTakenFromTheHeaderOrTheQueryAndNeverRecorded) {
  EndpointOptions options;
  options.token = "gem-secret-42";
  RunningEndpoint ep(kGeminiScenario, options);
  const std::string body = gemini_body();
  const Headers plain{{"content-type", "application/json"}};

  Response missing = exchange(ep.port(), "POST", kJsonPath, plain, body);
  EXPECT_EQ(missing.status, 401u);
  EXPECT_EQ(parse(missing.body).at("error").at("status"), "UNAUTHENTICATED");
  EXPECT_EQ(parse(missing.body).at("error").at("code"), 401);
  Response wrong = exchange(ep.port(), "POST", kJsonPath, gemini_headers("gem-wrong"), body);
  EXPECT_EQ(wrong.status, 401u);
  // Anthropic's header is not a Gemini credential.
  Response other = exchange(ep.port(), "POST", kJsonPath, {{"x-api-key", "gem-secret-42"}}, body);
  EXPECT_EQ(other.status, 401u);
  Response header = exchange(ep.port(), "POST", kJsonPath, gemini_headers("gem-secret-42"), body);
  EXPECT_EQ(header.status, 200u);
  Response query = exchange(ep.port(), "POST", std::string(kStreamPath) + "&key=gem-secret-42", plain, body);
  EXPECT_EQ(query.status, 200u);

  ASSERT_TRUE(ep.wait_until_ended(5));
  const auto log = ep.requests();
  EXPECT_EQ(log[0].credential, Credential::missing);
  EXPECT_EQ(log[1].credential, Credential::mismatched);
  EXPECT_EQ(log[2].credential, Credential::missing);
  EXPECT_EQ(log[3].credential, Credential::matched);
  EXPECT_EQ(log[4].credential, Credential::matched);
  EXPECT_EQ(log[3].step, 0u) << "refused requests consumed a step";
  EXPECT_EQ(log[4].step, 1u);
  for (const auto& r : log) {
    EXPECT_TRUE(r.header("x-goog-api-key").empty());
    EXPECT_EQ(r.target.find("gem-secret-42"), std::string::npos) << r.target;
    EXPECT_EQ(json::serialize(to_json(r)).find("gem-secret-42"), std::string::npos);
  }
  EXPECT_EQ(log[4].target, std::string(kStreamPath) + "&key=REDACTED");
}

TEST(GeminiWire, CountTokensIsAnsweredWithoutUsingAStepAndOtherRoutesAreNotFound) {
  RunningEndpoint ep(kGeminiScenario);
  const std::string body = gemini_body();
  Response count =
      exchange(ep.port(), "POST", "/v1beta/models/gemini-2.5-flash:countTokens", gemini_headers(ep.token()), body);
  EXPECT_EQ(count.status, 200u);
  EXPECT_GT(parse(count.body).at("totalTokens").as_int64(), 0);
  Response models =
      exchange(ep.port(), "POST", "/v1beta/models/gemini-2.5-flash:embedContent", gemini_headers(ep.token()), body);
  EXPECT_EQ(models.status, 404u);
  Response first = exchange(ep.port(), "POST", kJsonPath, gemini_headers(ep.token()), body);
  EXPECT_EQ(first.status, 200u);
  ASSERT_TRUE(ep.wait_until_ended(3));
  const auto log = ep.requests();
  EXPECT_EQ(log[0].answer, Answer::count_tokens);
  EXPECT_EQ(log[1].answer, Answer::not_found);
  EXPECT_EQ(log[2].step, 0u) << "countTokens used up a step";
}

TEST(GeminiWire, TheFunctionResponseTheModelIsSentIsRecorded) {
  // The check a scenario makes on a denial: its reason reached the model, here inside the
  // functionResponse the CLI sends back (the shape the Gemini CLI 0.61.0 sends on a rejection).
  RunningEndpoint ep(kGeminiScenario);
  const json::array history{
      json::object{{"role", "model"},
                   {"parts", json::array{json::object{
                                 {"functionCall", {{"id", "c1"}, {"name", "run_shell_command"}, {"args", {}}}}}}}},
      json::object{{"role", "user"},
                   {"parts", json::array{json::object{{"functionResponse",
                                                       {{"id", "c1"},
                                                        {"name", "run_shell_command"},
                                                        {"response", {{"error", "denied: policy forbids rm"}}}}}}}}}};
  Response r = exchange(ep.port(), "POST", kStreamPath, gemini_headers(ep.token()), gemini_body(history));
  EXPECT_EQ(r.status, 200u);
  ASSERT_TRUE(ep.wait_until_ended(1));
  const json::value body = ep.requests()[0].body;
  EXPECT_EQ(body.at("contents").at(2).at("parts").at(0).at("functionResponse").at("response").at("error"),
            "denied: policy forbids rm");
}

TEST(GeminiWire, AScenarioWithoutGeminiIsRefusedOnThatWireByName) {
  RunningEndpoint ep(R"({"format": "metaharness.scenario/1", "wires": ["anthropic"],
                         "steps": [{"content": [{"type": "text", "text": "hi"}]}]})");
  Response r = exchange(ep.port(), "POST", kJsonPath, gemini_headers(ep.token()), gemini_body());
  EXPECT_EQ(r.status, 404u);
  EXPECT_EQ(parse(r.body).at("error").at("status"), "NOT_FOUND");
  ASSERT_TRUE(ep.wait_until_ended(1));
  EXPECT_EQ(ep.requests()[0].answer, Answer::wire_not_served);
}

}  // namespace
}  // namespace mh::model::testing
