// The real Gemini CLI (`gemini --acp`, @google/gemini-cli 0.61.0) against the scripted endpoint's
// Gemini wire, driven by a minimal ACP client (initialize, session/new, session/prompt; answers
// session/request_permission: the first call allowed once, the second rejected). Proves what the
// CLI sends (path, key header, body shape, no side requests) and that the scenario's steps work
// unchanged on this wire, the rejection reaching the model as a functionResponse.
//
// The CLI is pinned (vendor/pins; ./run setup installs it), so this executable is built unless
// -DMH_GEMINI_CLI_TESTS=OFF (label "gemini-cli"); it takes the CLI from $MH_GEMINI_CLI or
// .vendor/node_modules/.bin/gemini and fails naming both when neither exists.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <filesystem>

#include "tests/model/gemini_acp_client.hpp"
#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;

constexpr const char* kScenario = R"({
  "format": "metaharness.scenario/1",
  "wires": ["gemini"],
  "steps": [
    {"name": "make", "content": [
       {"type": "text", "text": "I will make the file."},
       {"type": "tool_call", "name": "run_shell_command",
        "input": {"command": "touch made-by-gemini.txt", "description": "make a file"}}],
     "usage": {"input_tokens": 120, "output_tokens": 30}},
    {"name": "remove", "content": [
       {"type": "tool_call", "name": "run_shell_command",
        "input": {"command": "rm -f made-by-gemini.txt", "description": "remove it"}}]},
    {"name": "done", "content": [{"type": "text", "text": "All done."}]}
  ]
})";

TEST(GeminiCli, RunsAScenarioOverAcpAgainstTheGeminiWire) {
  const auto cli = gemini_cli();
  ASSERT_TRUE(cli) << "the Gemini CLI is missing: set MH_GEMINI_CLI to its `gemini` or install "
                      "@google/gemini-cli@0.61.0 so that "
                   << MH_SOURCE_DIR << "/.vendor/node_modules/.bin/gemini exists";
  ASSERT_TRUE(std::filesystem::exists(*cli)) << "MH_GEMINI_CLI names " << *cli << ", which does not exist";

  EndpointOptions options;
  options.token = "gemini-probe-key-1";
  RunningEndpoint ep(kScenario, options);
  TempDir dir("gemini-cli");
  std::filesystem::create_directories(dir / "home");
  std::filesystem::create_directories(dir / "work");
  const char* path = std::getenv("PATH");

  ProcessSpec spec;
  spec.executable = *cli;
  spec.args = {"--acp", "--model", "gemini-2.5-flash"};
  spec.environment = {"PATH=" + std::string(path ? path : "/usr/bin:/bin"), "HOME=" + (dir / "home").string(),
                      "GEMINI_API_KEY=" + ep.token(), "GOOGLE_GEMINI_BASE_URL=" + ep.base_url()};
  spec.working_dir = dir / "work";
  spec.output_dir = dir.path();
  spec.pipe_stdin = true;
  LiveProcess gemini(spec);
  AcpClient acp(gemini);

  auto init = acp.call(
      "initialize",
      {{"protocolVersion", 1},
       {"clientCapabilities", {{"fs", {{"readTextFile", false}, {"writeTextFile", false}}}, {"terminal", false}}}});
  ASSERT_TRUE(init) << "no answer to initialize; stderr: " << gemini.stderr_text();
  // GOOGLE_GEMINI_BASE_URL selects the "gateway" auth method, offered as such.
  EXPECT_NE(json::serialize(*init).find("\"gateway\""), std::string::npos) << json::serialize(*init);
  auto session = acp.call("session/new", {{"cwd", (dir / "work").string()}, {"mcpServers", json::array{}}});
  ASSERT_TRUE(session && session->as_object().contains("result")) << (session ? json::serialize(*session) : "none");
  const json::value session_id = session->at("result").at("sessionId");
  auto prompt = acp.call(
      "session/prompt",
      {{"sessionId", session_id}, {"prompt", json::array{json::object{{"type", "text"}, {"text", "make it"}}}}});
  ASSERT_TRUE(prompt) << "no answer to session/prompt; stderr: " << gemini.stderr_text();
  EXPECT_EQ(prompt->at("result").at("stopReason"), "end_turn") << json::serialize(*prompt);
  EXPECT_EQ(acp.permissions_asked, 2);
  // Allowed, ran; the removal was rejected, so the file is still there.
  EXPECT_TRUE(std::filesystem::exists(dir / "work" / "made-by-gemini.txt"));
  gemini.close_stdin();
  gemini.signal(SIGTERM);
  gemini.wait(std::chrono::seconds(10));

  ASSERT_TRUE(ep.wait_until_ended(3));
  const auto log = ep.requests();
  ASSERT_EQ(log.size(), 3u) << "side requests (countTokens, model list, ...) reached the endpoint";
  for (const auto& r : log) {
    EXPECT_EQ(r.target, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    EXPECT_EQ(r.credential, Credential::matched) << "the key is sent as x-goog-api-key";
    EXPECT_TRUE(r.header("user-agent").starts_with("GeminiCLI-acp/0.61.0/")) << r.header("user-agent");
    EXPECT_EQ(r.answer, Answer::step);
    EXPECT_TRUE(r.body.at("systemInstruction").is_object());
    bool offers_shell = false;
    for (const auto& d : r.body.at("tools").at(0).at("functionDeclarations").as_array())
      offers_shell = offers_shell || d.at("name") == "run_shell_command";
    EXPECT_TRUE(offers_shell);
  }
  // The third request carries the rejection back to the model as the call's functionResponse.
  const auto& contents = log[2].body.at("contents").as_array();
  const json::value& last = contents.back().at("parts").at(0).at("functionResponse");
  EXPECT_EQ(last.at("name"), "run_shell_command");
  EXPECT_NE(json::serialize(last.at("response")).find("canceled by the user"), std::string::npos)
      << json::serialize(last);
  // The call's id is the CLI's own (the API gave none), echoed in its functionResponse.
  const json::value& call = contents[contents.size() - 2].at("parts").at(0).at("functionCall");
  EXPECT_EQ(call.at("id"), last.at("id"));
}

}  // namespace
}  // namespace mh::model::testing
