// metaharness.scenario/1 loading: what a valid scenario becomes, and that every invalid one is
// refused with the offending key and the problem named.
#include "daemon/model/scenario.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace mh::model {
namespace {

std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Scenario, ResolvesPerWireOverridesAndDefaults) {
  auto scenario = parse_scenario(R"({
    "format": "metaharness.scenario/1",
    "description": "one step, two wires",
    "steps": [
      {"name": "call the shell",
       "content": [
         {"type": "thinking", "text": "plan"},
         {"type": "tool_call", "name": "Bash", "input": {"command": "ls"},
          "responses": {"name": "exec_command", "input": {"cmd": "ls"}}}],
       "usage": {"input_tokens": 7, "cached_input_tokens": 3},
       "responses": {"usage": {"input_tokens": 9, "reasoning_tokens": 2}}},
      {"content": [{"type": "text", "text": "done"}], "repeat": 2},
      {"error": {"status": 529}, "sticky": true}
    ]
  })");
  ASSERT_TRUE(scenario) << scenario.error().message();
  ASSERT_EQ(scenario->steps.size(), 3u);
  const Step& call = scenario->steps[0];
  EXPECT_EQ(call.name, "call the shell");
  ASSERT_EQ(call.anthropic.content.size(), 2u);
  EXPECT_EQ(call.anthropic.content[1].name, "Bash");
  EXPECT_EQ(call.anthropic.content[1].input.at("command"), "ls");
  EXPECT_EQ(call.responses.content[1].name, "exec_command");
  EXPECT_EQ(call.responses.content[1].input.at("cmd"), "ls");
  EXPECT_EQ(call.anthropic.usage.input_tokens, 7u);
  EXPECT_EQ(call.anthropic.usage.cached_input_tokens, 3u);
  // A step-level override replaces the whole key: the Responses usage is its own object.
  EXPECT_EQ(call.responses.usage.input_tokens, 9u);
  EXPECT_EQ(call.responses.usage.cached_input_tokens, 0u);
  EXPECT_EQ(call.responses.usage.reasoning_tokens, 2u);
  EXPECT_EQ(scenario->steps[1].repeat, 2u);
  EXPECT_TRUE(scenario->steps[2].sticky);
  ASSERT_TRUE(scenario->steps[2].anthropic.error);
  EXPECT_EQ(scenario->steps[2].anthropic.error->status, 529u);
  // Defaults: the aux and exhausted answers are plain end_turn texts.
  ASSERT_EQ(scenario->aux.anthropic.content.size(), 1u);
  EXPECT_EQ(scenario->aux.anthropic.content[0].kind, Block::Kind::text);
  ASSERT_EQ(scenario->exhausted.responses.content.size(), 1u);
  EXPECT_EQ(scenario->exhausted.anthropic.stop_reason, "end_turn");
  EXPECT_EQ(scenario->main_loop, MainLoopRule::requests_with_tools);
}

TEST(Scenario, TheGeminiWireTakesItsOwnOverridesAndIsServedUnlessWiresLeaveItOut) {
  auto scenario = parse_scenario(R"({
    "format": "metaharness.scenario/1",
    "steps": [
      {"content": [{"type": "tool_call", "name": "Bash", "input": {"command": "ls"},
                    "gemini": {"name": "run_shell_command", "id": "g1"}}],
       "gemini": {"stop_reason": "max_tokens", "usage": {"input_tokens": 9}}}
    ]
  })");
  ASSERT_TRUE(scenario) << scenario.error().message();
  EXPECT_TRUE(scenario->serves(Wire::gemini));
  const StepForm& gemini = scenario->steps[0].form(Wire::gemini);
  EXPECT_EQ(gemini.content[0].name, "run_shell_command");
  EXPECT_EQ(gemini.content[0].id, "g1");
  EXPECT_EQ(gemini.content[0].input.at("command"), "ls");  // not overridden: the block's own
  EXPECT_EQ(gemini.stop_reason, "max_tokens");
  EXPECT_EQ(gemini.usage.input_tokens, 9u);
  const StepForm& anthropic = scenario->steps[0].form(Wire::anthropic);
  EXPECT_EQ(anthropic.content[0].name, "Bash");
  EXPECT_TRUE(anthropic.content[0].id.empty());
  EXPECT_FALSE(anthropic.stop_reason);

  auto only = parse_scenario(R"({"format": "metaharness.scenario/1", "wires": ["gemini"]})");
  ASSERT_TRUE(only) << only.error().message();
  EXPECT_TRUE(only->serves(Wire::gemini));
  EXPECT_FALSE(only->serves(Wire::anthropic));
  EXPECT_FALSE(only->serves(Wire::responses));
  EXPECT_EQ(to_string(Wire::gemini), "gemini");
}

TEST(Scenario, ReadsTimingErrorsAndWires) {
  auto scenario = parse_scenario(R"({
    "format": "metaharness.scenario/1",
    "wires": ["responses"],
    "main_loop": "all_requests",
    "aux": {"content": [{"type": "text", "text": "title"}]},
    "exhausted": {"error": {"status": 500}},
    "steps": [
      {"content": [{"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch\n"}],
       "timing": {"headers_delay_ms": 5, "event_delay_ms": 6, "hold_until_disconnect": true},
       "finish": "disconnect", "delta_bytes": 3},
      {"error": {"status": 429, "retry_after": 2, "retry_after_ms": 1500, "message": "slow down",
                 "type": "requests", "code": "rate_limit_exceeded",
                 "headers": {"x-ratelimit-remaining-requests": "0"}}}
    ]
  })");
  ASSERT_TRUE(scenario) << scenario.error().message();
  EXPECT_FALSE(scenario->serves_anthropic);
  EXPECT_TRUE(scenario->serves_responses);
  EXPECT_EQ(scenario->main_loop, MainLoopRule::all_requests);
  const StepForm& held = scenario->steps[0].responses;
  EXPECT_EQ(held.content[0].kind, Block::Kind::custom_tool_call);
  EXPECT_EQ(held.content[0].input.as_string(), "*** Begin Patch\n");
  EXPECT_EQ(held.timing.headers_delay, std::chrono::milliseconds(5));
  EXPECT_EQ(held.timing.event_delay, std::chrono::milliseconds(6));
  EXPECT_TRUE(held.timing.hold_until_disconnect);
  EXPECT_EQ(held.finish, Finish::disconnect);
  EXPECT_EQ(held.delta_bytes, 3u);
  const HttpError& error = *scenario->steps[1].responses.error;
  EXPECT_EQ(error.status, 429u);
  EXPECT_EQ(error.retry_after_s, 2u);
  EXPECT_EQ(error.retry_after_ms, 1500u);
  EXPECT_EQ(error.code, "rate_limit_exceeded");
  ASSERT_EQ(error.headers.size(), 1u);
  EXPECT_EQ(error.headers[0].first, "x-ratelimit-remaining-requests");
  EXPECT_TRUE(scenario->exhausted.responses.error);
}

struct Refusal {
  const char* label;
  const char* document;
  const char* where;     // expected ScenarioError::where
  const char* mentions;  // a phrase the problem must contain
};

void PrintTo(const Refusal& r, std::ostream* out) {
  *out << r.label;
}

class ScenarioRefusal : public testing::TestWithParam<Refusal> {};

TEST_P(ScenarioRefusal, NamesTheKeyAndTheProblem) {
  const Refusal& r = GetParam();
  auto scenario = parse_scenario(r.document);
  ASSERT_FALSE(scenario) << r.label << " was accepted";
  EXPECT_EQ(scenario.error().where, r.where) << scenario.error().message();
  EXPECT_NE(scenario.error().problem.find(r.mentions), std::string::npos) << scenario.error().message();
  EXPECT_NE(scenario.error().message().find(r.where), std::string::npos);
}

#define FMT R"("format": "metaharness.scenario/1")"

INSTANTIATE_TEST_SUITE_P(
    Refusals, ScenarioRefusal,
    testing::Values(
        Refusal{"not json", R"({"format": )", "", "not valid JSON"},
        Refusal{"no format", R"({"steps": []})", "format", "missing"},
        Refusal{"wrong format", R"({"format": "metaharness.scenario/2"})", "format", "metaharness.scenario/1"},
        Refusal{"unknown top key", "{" FMT R"(, "step": []})", "step", "unknown key"},
        Refusal{"steps not a list", "{" FMT R"(, "steps": {}})", "steps", "expected a list"},
        Refusal{"step neither content nor error", "{" FMT R"(, "steps": [{"name": "x"}]})", "steps[0]",
                "needs \"content\""},
        Refusal{"step both content and error", "{" FMT R"(, "steps": [{"content": [], "error": {"status": 500}}]})",
                "steps[0]", "not both"},
        Refusal{"unknown step key", "{" FMT R"(, "steps": [{"content": [], "hold_ms": 5}]})", "steps[0].hold_ms",
                "unknown key"},
        Refusal{"unknown block type", "{" FMT R"(, "steps": [{"content": [{"type": "image"}]}]})",
                "steps[0].content[0].type", "unknown block type"},
        Refusal{"text block without text", "{" FMT R"(, "steps": [{"content": [{"type": "text"}]}]})",
                "steps[0].content[0]", "needs \"text\""},
        Refusal{"tool input not an object",
                "{" FMT R"(, "steps": [{"content": [{"type": "tool_call", "name": "Bash", "input": "ls"}]}]})",
                "steps[0].content[0].input", "must be a JSON object"},
        Refusal{"key foreign to the block type",
                "{" FMT R"(, "steps": [{"content": [{"type": "text", "text": "a", "name": "b"}]}]})",
                "steps[0].content[0].name", "does not apply to a text block"},
        Refusal{"custom tool call on anthropic",
                "{" FMT
                R"(, "steps": [{"content": [{"type": "custom_tool_call", "name": "apply_patch", "input": "x"}]}]})",
                "steps[0].content[0].type", "no Anthropic form"},
        Refusal{"bad override in an override",
                "{" FMT R"(, "steps": [{"content": [], "responses": {"sticky": true}}]})", "steps[0].responses.sticky",
                "non-overridable"},
        Refusal{"override problem named at the override",
                "{" FMT R"(, "steps": [{"content": [{"type": "tool_call", "name": "Bash",
                   "responses": {"input": [1]}}]}]})",
                "steps[0].content[0].responses.input", "must be a JSON object"},
        Refusal{"namespace on the block itself",
                "{" FMT R"(, "steps": [{"content": [{"type": "tool_call", "name": "spawn_agent",
                   "namespace": "multi_agent_v1"}]}]})",
                "steps[0].content[0].namespace", "\"responses\" override"},
        Refusal{"namespace on the anthropic wire",
                "{" FMT R"(, "steps": [{"content": [{"type": "tool_call", "name": "spawn_agent",
                   "anthropic": {"namespace": "multi_agent_v1"}}]}]})",
                "steps[0].content[0].anthropic.namespace", "no tool namespaces"},
        Refusal{"namespace on a text block", "{" FMT R"(, "steps": [{"content": [{"type": "text", "text": "a",
                   "responses": {"namespace": "multi_agent_v1"}}]}]})",
                "steps[0].content[0].responses.namespace", "does not apply to a text block"},
        Refusal{"empty namespace", "{" FMT R"(, "steps": [{"content": [{"type": "tool_call", "name": "spawn_agent",
                   "responses": {"namespace": ""}}]}]})",
                "steps[0].content[0].responses.namespace", "must not be empty"},
        Refusal{"when with both keys",
                "{" FMT R"(, "steps": [{"content": [], "when": {"header": "a", "no_header": "b"}}]})", "steps[0].when",
                "exactly one"},
        Refusal{"when with a bad header name", "{" FMT R"(, "steps": [{"content": [], "when": {"header": "a b"}}]})",
                "steps[0].when.header", "header name"},
        Refusal{"when on a sticky step",
                "{" FMT R"(, "steps": [{"content": [], "sticky": true, "when": {"header": "a"}}]})", "steps[0].when",
                "cannot be routed"},
        Refusal{"when on aux", "{" FMT R"(, "aux": {"content": [], "when": {"header": "a"}}})", "aux.when",
                "only a step in"},
        Refusal{"status out of range", "{" FMT R"(, "steps": [{"error": {"status": 302}}]})", "steps[0].error.status",
                "400 to 599"},
        Refusal{"error without status", "{" FMT R"(, "steps": [{"error": {"message": "x"}}]})", "steps[0].error",
                "needs \"status\""},
        Refusal{"bad header name", "{" FMT R"(, "steps": [{"error": {"status": 429, "headers": {"bad name": "1"}}}]})",
                "steps[0].error.headers.bad name", "header name"},
        Refusal{"header value with newline",
                "{" FMT R"(, "steps": [{"error": {"status": 429, "headers": {"x-a": "1\r\nx-b: 2"}}}]})",
                "steps[0].error.headers.x-a", "CR, LF"},
        Refusal{"negative delay", "{" FMT R"(, "steps": [{"content": [], "timing": {"event_delay_ms": -1}}]})",
                "steps[0].timing.event_delay_ms", "whole number"},
        Refusal{"hold twice",
                "{" FMT R"(, "steps": [{"content": [], "timing": {"hold_ms": 5, "hold_until_disconnect": true}}]})",
                "steps[0].timing", "exclude each other"},
        Refusal{"unknown stop reason", "{" FMT R"(, "steps": [{"content": [], "stop_reason": "done"}]})",
                "steps[0].stop_reason", "unknown stop reason"},
        Refusal{"unknown finish", "{" FMT R"(, "steps": [{"content": [], "finish": "explode"}]})", "steps[0].finish",
                "unknown finish"},
        Refusal{"repeat zero", "{" FMT R"(, "steps": [{"content": [], "repeat": 0}]})", "steps[0].repeat", "from 1"},
        Refusal{"sticky and repeat", "{" FMT R"(, "steps": [{"content": [], "sticky": true, "repeat": 3}]})",
                "steps[0].repeat", "sticky"},
        Refusal{"step after a sticky step",
                "{" FMT R"(, "steps": [{"error": {"status": 401}, "sticky": true}, {"content": []}]})", "steps[1]",
                "unreachable"},
        Refusal{"aux cannot repeat", "{" FMT R"(, "aux": {"content": [], "repeat": 2}})", "aux.repeat", "only a step"},
        Refusal{"unknown wire", "{" FMT R"(, "wires": ["anthropic", "bedrock"]})", "wires[1]", "unknown wire"},
        Refusal{"custom tool call on gemini",
                "{" FMT R"(, "wires": ["responses", "gemini"], "steps": [{"content": [{"type": "custom_tool_call",
                   "name": "apply_patch", "input": "x"}]}]})",
                "steps[0].content[0].type", "no Gemini form"},
        Refusal{"namespace on the gemini wire",
                "{" FMT R"(, "steps": [{"content": [{"type": "tool_call", "name": "spawn_agent",
                   "gemini": {"namespace": "multi_agent_v1"}}]}]})",
                "steps[0].content[0].gemini.namespace", "no tool namespaces"},
        Refusal{"bad key in a gemini override", "{" FMT R"(, "steps": [{"content": [], "gemini": {"repeat": 2}}]})",
                "steps[0].gemini.repeat", "non-overridable"},
        Refusal{"unknown main loop rule", "{" FMT R"(, "main_loop": "sometimes"})", "main_loop", "unknown rule"},
        Refusal{"usage with a fraction", "{" FMT R"(, "steps": [{"content": [], "usage": {"input_tokens": 1.5}}]})",
                "steps[0].usage.input_tokens", "whole number"},
        Refusal{"usage on an error step", "{" FMT R"(, "steps": [{"error": {"status": 500}, "usage": {}}]})",
                "steps[0].usage", "error step"}),
    [](const testing::TestParamInfo<Refusal>& info) {
      std::string name = info.param.label;
      for (char& c : name)
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      return name;
    });

// A model API as adapters, upstreams and the gateway name it, to the wire a scenario serves it on:
// the Responses API is "openai-responses" there and "responses" in a scenario; an unknown name
// is none of them.
TEST(Scenario, AModelApisNameGivesTheWireAScenarioServesItOn) {
  EXPECT_EQ(wire_of_model_api("anthropic"), Wire::anthropic);
  EXPECT_EQ(wire_of_model_api("openai-responses"), Wire::responses);
  EXPECT_EQ(wire_of_model_api("gemini"), Wire::gemini);
  EXPECT_EQ(wire_of_model_api("responses"), std::nullopt) << "a scenario's name, not an adapter's";
  EXPECT_EQ(wire_of_model_api("openai"), std::nullopt);
  EXPECT_EQ(wire_of_model_api(""), std::nullopt);
}

TEST(Scenario, FileLoadingNamesTheFile) {
  auto missing = load_scenario_file("/nonexistent/scenario.json");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("/nonexistent/scenario.json"), std::string::npos);

  const auto path = std::filesystem::temp_directory_path() / "mh-model-bad-scenario.json";
  std::ofstream(path) << R"({"format": "metaharness.scenario/1", "steps": [{"content": 3}]})";
  auto bad = load_scenario_file(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().where, "steps[0].content");
  EXPECT_NE(bad.error().message().find(path.string()), std::string::npos);
}

// Every scenario the tests and the demo ship, and every complete scenario shown in
// docs/scenarios.md, loads.
TEST(Scenario, ShippedAndDocumentedScenariosLoad) {
  const std::filesystem::path source(MH_SOURCE_DIR);
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(source / "tests/scenarios/model")) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    auto scenario = load_scenario_file(entry.path());
    EXPECT_TRUE(scenario) << scenario.error().message();
  }
  EXPECT_GE(files, 4u);
  // The demo's, one in each vendor's folder (adapters/<vendor>/demo/scenario.json; ./run demo).
  std::size_t demos = 0;
  for (const auto& folder : std::filesystem::directory_iterator(source / "adapters")) {
    const auto demo = folder.path() / "demo" / "scenario.json";
    if (!std::filesystem::exists(demo)) continue;
    ++demos;
    auto scenario = load_scenario_file(demo);
    EXPECT_TRUE(scenario) << demo << ": " << scenario.error().message();
  }
  EXPECT_GE(demos, 5u);

  const std::string doc = read_text(source / "docs/scenarios.md");
  std::size_t examples = 0;
  for (std::size_t at = doc.find("```json"); at != std::string::npos; at = doc.find("```json", at)) {
    const std::size_t start = doc.find('\n', at) + 1;
    const std::size_t end = doc.find("```", start);
    ASSERT_NE(end, std::string::npos);
    const std::string block = doc.substr(start, end - start);
    at = end + 3;
    if (block.find("\"format\": \"metaharness.scenario/1\"") == std::string::npos) continue;
    ++examples;
    auto scenario = parse_scenario(block);
    EXPECT_TRUE(scenario) << "docs example " << examples << ": " << scenario.error().message();
  }
  EXPECT_GE(examples, 3u);
}

}  // namespace
}  // namespace mh::model
