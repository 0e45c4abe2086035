// The real vendor CLIs (installed by ./run setup under .vendor/) through a Gateway to the scripted
// endpoint over HTTPS with a throwaway CA: each CLI holds only the run's placeholder, every request
// the upstream saw carried the real key, and the gateway read the usage the CLI reports.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "daemon/gateway/gateway.hpp"
#include "tests/gateway/gateway_support.hpp"
#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"
#include "tests/support/test_ca.hpp"

namespace mh::gateway::testing {
namespace {

namespace fs = std::filesystem;
using model::Credential;
using model::testing::ProcessResult;
using model::testing::ProcessSpec;
using model::testing::RunningEndpoint;
using model::testing::TempDir;

const fs::path kVendor = fs::path(MH_SOURCE_DIR) / ".vendor/node_modules";
const fs::path kClaude = kVendor / "@anthropic-ai/claude-code-linux-x64/claude";
const fs::path kCodex = kVendor / "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
const fs::path kOpencode = kVendor / ".bin/opencode";

std::string describe(const ProcessResult& p) {
  std::ostringstream s;
  s << "finished=" << p.finished << " exit=" << p.exit_code << "\n--- stdout ---\n"
    << p.out.substr(0, 3000) << "\n--- stderr ---\n"
    << p.err.substr(0, 3000);
  return s.str();
}

class VendorThroughGateway : public ::testing::Test {
 protected:
  VendorThroughGateway() : dir_("gateway-vendor"), ca_(dir_ / "ca") {}

  void start(std::string_view scenario_file, Wire wire) {
    ASSERT_TRUE(ca_.ok()) << ca_.error();
    model::EndpointOptions options;
    options.tls_cert = ca_.cert_file();
    options.tls_key = ca_.key_file();
    endpoint_.emplace(model::testing::scenario_file_text(scenario_file), options);
    std::ofstream(dir_ / "upstream.key") << endpoint_->token() << "\n";
    RunningGateway::Setup s;
    s.options.upstream.name = "scripted";
    s.options.upstream.wire = wire;
    s.options.upstream.url = endpoint_->base_url();
    s.options.upstream.credential = dir_ / "upstream.key";
    s.options.upstream.ca_file = ca_.ca_file();
    s.options.token = token_;
    gateway_.emplace(std::move(s));
    ASSERT_TRUE(gateway_->ok()) << gateway_->prepare_error();
    for (const char* sub : {"home/.claude", "work", "tmp"})
      fs::create_directories(dir_ / sub);
  }

  std::string gateway_url() const { return "http://127.0.0.1:" + std::to_string(gateway_->port()); }

  // Every request that reached the upstream carried its key; the placeholder never did.
  void expect_keyed_upstream_traffic() {
    const auto log = endpoint_->requests();
    ASSERT_FALSE(log.empty());
    for (const auto& r : log) {
      EXPECT_EQ(r.credential, Credential::matched) << r.method << " " << r.target;
      for (const auto& [name, value] : r.headers)
        EXPECT_EQ(value.find(token_), std::string::npos) << name;
    }
    EXPECT_TRUE(gateway_->told().refused_routes.empty());
  }

  TempDir dir_;
  mh::testing::TestCa ca_;
  const std::string token_ = placeholder_token("cli");
  std::optional<RunningEndpoint> endpoint_;
  std::optional<RunningGateway> gateway_;
};

TEST_F(VendorThroughGateway, ClaudeCodeWithAnAuthTokenPlaceholder) {
  ASSERT_TRUE(fs::exists(kClaude)) << kClaude << " is missing; run ./run setup";
  ASSERT_NO_FATAL_FAILURE(start("claude_text.json", Wire::anthropic));
  ProcessSpec spec;
  spec.executable = kClaude;
  spec.args = {
      "-p", "hi", "--output-format", "stream-json", "--verbose", "--setting-sources", "", "--strict-mcp-config"};
  // ANTHROPIC_AUTH_TOKEN: Claude Code sends it as a bearer token, as the adapter points it at a gateway.
  spec.environment = {
      "HOME=" + (dir_ / "home").string(),          "CLAUDE_CONFIG_DIR=" + (dir_ / "home/.claude").string(),
      "PATH=/usr/local/bin:/usr/bin:/bin",         "TMPDIR=" + (dir_ / "tmp").string(),
      "ANTHROPIC_BASE_URL=" + gateway_url(),       "ANTHROPIC_AUTH_TOKEN=" + token_,
      "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"};
  spec.working_dir = dir_ / "work";
  spec.output_dir = dir_.path();
  const ProcessResult run = model::testing::run_process(spec, std::chrono::seconds(120));
  ASSERT_TRUE(run.finished) << describe(run);
  EXPECT_EQ(run.exit_code, 0) << describe(run);
  EXPECT_NE(run.out.find("Hello from the scripted model."), std::string::npos) << describe(run);
  expect_keyed_upstream_traffic();
  // Waited for, within the bound: the vendor may read its answer's end before the gateway settles
  // that request.
  const bool read = gateway_->wait_for([](const Told& t) {
    return std::any_of(t.usage.begin(), t.usage.end(), [](const RequestUsage& u) {
      return u.complete && u.input_tokens == 12u && u.output_tokens == 6u;
    });
  });
  EXPECT_TRUE(read) << "no request settled with the scenario's usage (12 in, 6 out)";
}

TEST_F(VendorThroughGateway, CodexWithItsProviderPointedAtTheGateway) {
  ASSERT_TRUE(fs::exists(kCodex)) << kCodex << " is missing; run ./run setup";
  ASSERT_NO_FATAL_FAILURE(start("codex_text.json", Wire::openai_responses));
  std::ofstream(dir_ / "home/config.toml") << "model = \"gpt-5.5\"\n"
                                           << "model_provider = \"gateway\"\n"
                                           << "[model_providers.gateway]\n"
                                           << "name = \"metaharness gateway\"\n"
                                           << "base_url = \"" << gateway_url() << "/v1\"\n"
                                           << "wire_api = \"responses\"\n"
                                           << "env_key = \"MH_MODEL_TOKEN\"\n"
                                           << "request_max_retries = 0\n"
                                           << "stream_max_retries = 0\n";
  ProcessSpec spec;
  spec.executable = kCodex;
  spec.args = {"exec", "--json", "--skip-git-repo-check", "hi"};
  spec.environment = {"HOME=" + (dir_ / "home").string(), "CODEX_HOME=" + (dir_ / "home").string(),
                      "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + (dir_ / "tmp").string(),
                      "MH_MODEL_TOKEN=" + token_};
  spec.working_dir = dir_ / "work";
  spec.output_dir = dir_.path();
  const ProcessResult run = model::testing::run_process(spec, std::chrono::seconds(120));
  ASSERT_TRUE(run.finished) << describe(run);
  EXPECT_EQ(run.exit_code, 0) << describe(run);
  EXPECT_NE(run.out.find("Hello from the scripted model."), std::string::npos) << describe(run);
  expect_keyed_upstream_traffic();
  // Codex may have read its answer's end before the gateway settled that request (it then
  // closes the connection): waited for, within the bound, rather than read at the first usage.
  auto settled = [](const Told& t) {
    return std::any_of(t.usage.begin(), t.usage.end(), [](const RequestUsage& u) {
      return u.complete && u.input_tokens == 40u && u.cache_read_tokens == 8u;
    });
  };
  const bool read = gateway_->wait_for(settled);
  std::string seen;
  for (const auto& u : gateway_->told().usage)
    seen += " [request " + std::to_string(u.request) + " status " + std::to_string(u.status) +
            (u.complete ? " complete" : " incomplete") + " in " +
            (u.input_tokens ? std::to_string(*u.input_tokens) : "?") + " " + u.failure + "]";
  EXPECT_TRUE(read) << "no request settled with the scenario's usage (40 in, 8 cached):" << seen;
}

TEST_F(VendorThroughGateway, OpencodeWithAnApiKeyPlaceholder) {
  ASSERT_TRUE(fs::exists(kOpencode)) << kOpencode << " is missing; run ./run setup";
  ASSERT_NO_FATAL_FAILURE(start("claude_text.json", Wire::anthropic));
  for (const char* sub : {"xdg/data", "xdg/cache", "xdg/state", "xdg/config"})
    fs::create_directories(dir_ / sub);
  // As the adapter writes it (adapters/opencode/opencode_plan.cpp): @ai-sdk/anthropic, which
  // sends its apiKey as x-api-key, at the gateway's /v1.
  std::ofstream(dir_ / "opencode.json")
      << R"({"$schema": "https://opencode.ai/config.json", "provider": {"mh": {"npm": "@ai-sdk/anthropic", )"
      << R"("name": "metaharness", "options": {"baseURL": ")" << gateway_url() << R"(/v1", "apiKey": ")" << token_
      << R"("}, "models": {"scripted": {"name": "scripted"}}}}, "model": "mh/scripted", "small_model": "mh/scripted"})";
  ProcessSpec spec;
  spec.executable = kOpencode;
  spec.args = {"run", "--format", "json", "--pure", "hi"};
  spec.environment = {"HOME=" + (dir_ / "home").string(),
                      "PATH=/usr/local/bin:/usr/bin:/bin",
                      "TMPDIR=" + (dir_ / "tmp").string(),
                      "XDG_DATA_HOME=" + (dir_ / "xdg/data").string(),
                      "XDG_CACHE_HOME=" + (dir_ / "xdg/cache").string(),
                      "XDG_STATE_HOME=" + (dir_ / "xdg/state").string(),
                      "XDG_CONFIG_HOME=" + (dir_ / "xdg/config").string(),
                      "OPENCODE_CONFIG=" + (dir_ / "opencode.json").string(),
                      "OPENCODE_DISABLE_AUTOUPDATE=1",
                      "OPENCODE_DISABLE_MODELS_FETCH=1",
                      "OPENCODE_DISABLE_PROJECT_CONFIG=1",
                      "OPENCODE_DISABLE_CLAUDE_CODE=1",
                      "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
                      "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
                      "OPENCODE_DISABLE_SHARE=1",
                      "npm_config_registry=http://127.0.0.1:9"};
  spec.working_dir = dir_ / "work";
  spec.output_dir = dir_.path();
  const ProcessResult run = model::testing::run_process(spec, std::chrono::seconds(120));
  ASSERT_TRUE(run.finished) << describe(run);
  EXPECT_EQ(run.exit_code, 0) << describe(run);
  EXPECT_NE(run.out.find("Hello from the scripted model."), std::string::npos) << describe(run);
  expect_keyed_upstream_traffic();
}

}  // namespace
}  // namespace mh::gateway::testing
