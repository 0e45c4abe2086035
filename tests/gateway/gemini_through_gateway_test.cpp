// The real Gemini CLI (`gemini --acp`, 0.61.0) through a run's gateway (`wire = "gemini"`) to the
// scripted endpoint over HTTPS: the CLI holds only the run's placeholder, the upstream sees only
// its own key, and the gateway meters every answer from its usageMetadata. Built unless
// -DMH_GEMINI_CLI_TESTS=OFF (label "gemini-cli"), as tests/model/gemini_cli_test.cpp.
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>
#include <csignal>
#include <fstream>

#include "daemon/gateway/gateway.hpp"
#include "tests/gateway/gateway_support.hpp"
#include "tests/model/gemini_acp_client.hpp"
#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"
#include "tests/support/test_ca.hpp"

namespace mh::gateway::testing {
namespace {

namespace json = boost::json;
using model::Credential;
using model::testing::AcpClient;
using model::testing::LiveProcess;
using model::testing::ProcessSpec;
using model::testing::RunningEndpoint;
using model::testing::TempDir;

constexpr const char* kScenario = R"({
  "format": "metaharness.scenario/1",
  "wires": ["gemini"],
  "steps": [
    {"name": "make", "content": [
       {"type": "tool_call", "name": "run_shell_command",
        "input": {"command": "touch through-gateway.txt", "description": "make a file"}}],
     "usage": {"input_tokens": 120, "output_tokens": 30, "cached_input_tokens": 20, "reasoning_tokens": 4}},
    {"name": "done", "content": [{"type": "text", "text": "Made it."}],
     "usage": {"input_tokens": 150, "output_tokens": 6}}
  ]
})";

TEST(GeminiThroughGateway, TheCliHoldsOnlyThePlaceholderAndEveryAnswerIsMetered) {
  const auto cli = model::testing::gemini_cli();
  ASSERT_TRUE(cli) << model::testing::kGeminiCliMissing;
  ASSERT_TRUE(std::filesystem::exists(*cli)) << "MH_GEMINI_CLI names " << *cli << ", which does not exist";

  TempDir dir("gateway-gemini-cli");
  mh::testing::TestCa ca(dir / "ca");
  ASSERT_TRUE(ca.ok()) << ca.error();
  model::EndpointOptions endpoint_options;
  endpoint_options.tls_cert = ca.cert_file();
  endpoint_options.tls_key = ca.key_file();
  RunningEndpoint endpoint(kScenario, endpoint_options);
  std::ofstream(dir / "upstream.key") << endpoint.token() << "\n";
  const std::string placeholder = placeholder_token("gemini");
  RunningGateway::Setup s;
  s.options.upstream.name = "scripted";
  s.options.upstream.wire = Wire::gemini;
  s.options.upstream.url = endpoint.base_url();
  s.options.upstream.credential = dir / "upstream.key";
  s.options.upstream.ca_file = ca.ca_file();
  s.options.token = placeholder;
  s.reserve = ReservationAnswer{true, ""};
  RunningGateway gateway(std::move(s));
  ASSERT_TRUE(gateway.ok()) << gateway.prepare_error();
  std::filesystem::create_directories(dir / "home");
  std::filesystem::create_directories(dir / "work");

  const char* path = std::getenv("PATH");
  ProcessSpec spec;
  spec.executable = *cli;
  spec.args = {"--acp", "--model", "gemini-2.5-flash"};
  spec.environment = {"PATH=" + std::string(path ? path : "/usr/bin:/bin"), "HOME=" + (dir / "home").string(),
                      "GEMINI_API_KEY=" + placeholder,
                      "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:" + std::to_string(gateway.port())};
  spec.working_dir = dir / "work";
  spec.output_dir = dir.path();
  spec.pipe_stdin = true;
  LiveProcess gemini(spec);
  AcpClient acp(gemini);
  ASSERT_TRUE(acp.call(
      "initialize",
      {{"protocolVersion", 1},
       {"clientCapabilities", {{"fs", {{"readTextFile", false}, {"writeTextFile", false}}}, {"terminal", false}}}}))
      << gemini.stderr_text();
  auto session = acp.call("session/new", {{"cwd", (dir / "work").string()}, {"mcpServers", json::array{}}});
  ASSERT_TRUE(session && session->as_object().contains("result")) << gemini.stderr_text();
  auto prompt = acp.call("session/prompt", {{"sessionId", session->at("result").at("sessionId")},
                                            {"prompt", json::array{json::object{{"type", "text"}, {"text", "go"}}}}});
  ASSERT_TRUE(prompt) << gemini.stderr_text();
  EXPECT_EQ(prompt->at("result").at("stopReason"), "end_turn") << json::serialize(*prompt);
  EXPECT_TRUE(std::filesystem::exists(dir / "work" / "through-gateway.txt"));
  gemini.close_stdin();
  gemini.signal(SIGTERM);
  gemini.wait(std::chrono::seconds(10));

  ASSERT_TRUE(endpoint.wait_until_ended(2));
  const auto log = endpoint.requests();
  ASSERT_EQ(log.size(), 2u);
  for (const auto& r : log) {
    EXPECT_EQ(r.credential, Credential::matched) << "the upstream's own key, added by the gateway";
    EXPECT_EQ(r.target, "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse");
    for (const auto& [name, value] : r.headers)
      EXPECT_EQ(value.find(placeholder), std::string::npos) << "the placeholder reached the upstream in " << name;
  }
  ASSERT_TRUE(gateway.wait_for([](const Told& t) { return t.usage.size() == 2; }));
  const Told told = gateway.told();
  EXPECT_TRUE(told.refused_routes.empty()) << "the CLI asked for a route outside the wire";
  ASSERT_EQ(told.reservations.size(), 2u);
  EXPECT_EQ(told.reservations[0].model, "gemini-2.5-flash");
  EXPECT_EQ(told.reservations[0].max_tokens, 0u) << "the CLI sends no maxOutputTokens (docs/gateway.md)";
  EXPECT_EQ(told.usage[0].input_tokens, 120u);
  EXPECT_EQ(told.usage[0].cache_read_tokens, 20u);
  EXPECT_EQ(told.usage[0].output_tokens, 34u);
  EXPECT_EQ(told.usage[1].input_tokens, 150u);
  EXPECT_EQ(told.usage[1].output_tokens, 6u);
  for (const auto& u : told.usage) {
    EXPECT_TRUE(u.complete);
    EXPECT_EQ(u.model, "gemini-2.5-flash");
  }
}

}  // namespace
}  // namespace mh::gateway::testing
