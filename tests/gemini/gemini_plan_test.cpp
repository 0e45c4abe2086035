// The Gemini CLI launch plan (adapters/gemini/gemini_plan), its profile's call naming and its
// capability table: the endpoint as the gateway auth type, every tool asking through the admin
// policy (none under deny-only), the settings that switch off usage statistics, telemetry and
// update checks, no extension, every settings tier in the scratch, and replace / the deny's
// reason refused by name. A plan is a value: nothing spawned.
#include "adapters/gemini/gemini_plan.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "adapters/gemini/gemini_adapter.hpp"
#include "adapters/gemini/gemini_profile.hpp"
#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "protocol/json.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::adapters::gemini {
namespace {

namespace proto = mh::protocol;
namespace fs = std::filesystem;

class GeminiPlan : public ::testing::Test {
 protected:
  GeminiPlan() {
    const fs::path binary = descriptor().default_binary(vendor());
    fs::create_directories(binary.parent_path());
    std::ofstream(binary) << "#!/usr/bin/env node\n";
    ::chmod(binary.c_str(), 0755);
    spec.run_id = "r1";
    spec.adapter = "gemini";
    spec.prompt = "Leave a marker.";
    spec.model_endpoint = ModelEndpoint{"http://127.0.0.1:41234/", "tok-1"};
  }
  fs::path vendor() const { return dir.path() / "vendor"; }
  std::variant<LaunchPlan, LaunchRefusal> plan() const {
    auto adapter = make_gemini_adapter(HostConfig{vendor(), {}});
    return adapter->plan(spec, {dir.path() / "run", dir.path() / "run/scratch"});
  }
  LaunchPlan planned() const {
    auto p = plan();
    if (auto* refused = std::get_if<LaunchRefusal>(&p)) ADD_FAILURE() << refused->message;
    return std::get<LaunchPlan>(p);
  }
  static std::map<std::string, std::string> env_of(const LaunchPlan& p) {
    std::map<std::string, std::string> env;
    for (const auto& [k, v] : p.env)
      env[k] = v;
    return env;
  }
  static const ScratchFile* file_named(const LaunchPlan& p, const std::string& name) {
    for (const auto& f : p.files)
      if (f.path.filename() == name) return &f;
    return nullptr;
  }

  mh::test::TempDir dir{"gemini-plan"};
  RunSpec spec;
};

TEST_F(GeminiPlan, LaunchesAcpOnTheGeminiWireWithEveryToolAsking) {
  LaunchPlan p = planned();
  const fs::path scratch = fs::absolute(dir.path() / "run/scratch");
  const fs::path policy = scratch / "gemini/admin-policy.toml";
  EXPECT_EQ(p.args, (std::vector<std::string>{"--acp", "--model", "gemini-2.5-flash", "--approval-mode", "default",
                                              "--extensions", "none", "--admin-policy", policy.string()}));
  auto env = env_of(p);
  EXPECT_EQ(env["GEMINI_API_KEY"], "tok-1");
  EXPECT_EQ(env["GOOGLE_GEMINI_BASE_URL"], "http://127.0.0.1:41234") << "no trailing slash";
  EXPECT_EQ(env["HOME"], (scratch / "home").string());
  EXPECT_EQ(env["GEMINI_CLI_HOME"], (scratch / "home").string());
  EXPECT_EQ(env["GEMINI_CLI_NO_RELAUNCH"], "true");
  EXPECT_EQ(env["GEMINI_TELEMETRY_ENABLED"], "false");
  for (auto name :
       {"GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GEMINI_CLI_SYSTEM_DEFAULTS_PATH", "GEMINI_CLI_TRUSTED_FOLDERS_PATH"}) {
    EXPECT_EQ(fs::path(env[name]).parent_path(), scratch / "gemini") << name;
    EXPECT_EQ(file_named(p, fs::path(env[name]).filename().string()), nullptr) << name << " names no file";
  }
  const ScratchFile* policy_file = file_named(p, "admin-policy.toml");
  ASSERT_NE(policy_file, nullptr);
  EXPECT_NE(policy_file->contents.find("toolName = \"*\"\ndecision = \"ask_user\""), std::string::npos);
  const ScratchFile* settings = file_named(p, "settings.json");
  ASSERT_NE(settings, nullptr);
  EXPECT_EQ(settings->path, scratch / "home/.gemini/settings.json");
  auto s = proto::parse_json(settings->contents);
  ASSERT_TRUE(s && s->is_object());
  EXPECT_EQ(s->at("privacy").at("usageStatisticsEnabled"), false);
  EXPECT_EQ(s->at("telemetry").at("enabled"), false);
  EXPECT_EQ(s->at("general").at("enableAutoUpdate"), false);
  EXPECT_EQ(s->at("general").at("enableAutoUpdateNotification"), false);
  EXPECT_TRUE(s->at("mcpServers").as_object().empty());
  EXPECT_EQ(env.count("METAHARNESS_RUN"), 1u);
}

TEST_F(GeminiPlan, DenyOnlyLeavesGeminisOwnRulesInForce) {
  spec.deny_only = true;
  LaunchPlan p = planned();
  EXPECT_EQ(std::find(p.args.begin(), p.args.end(), "--admin-policy"), p.args.end());
  EXPECT_EQ(file_named(p, "admin-policy.toml"), nullptr);
}

TEST_F(GeminiPlan, ADeclaredVariableThatBringsOtherSettingsOrBackendsIsRefused) {
  for (auto name : {"GEMINI_CLI_TRUST_WORKSPACE", "GEMINI_SYSTEM_MD", "GOOGLE_GENAI_USE_VERTEXAI",
                    "GEMINI_CLI_SYSTEM_SETTINGS_PATH", "GOOGLE_GEMINI_BASE_URL"}) {
    spec.vendor_env = {{name, "1"}};
    auto p = plan();
    auto* refused = std::get_if<LaunchRefusal>(&p);
    ASSERT_NE(refused, nullptr) << name;
    EXPECT_NE(refused->message.find(name), std::string::npos) << refused->message;
  }
}

// The one vendor option, max_attempts, is Gemini CLI's general.maxAttempts (how often it sends a
// model request that failed retryably); any other key is refused by name.
TEST_F(GeminiPlan, MaxAttemptsIsGeneralMaxAttemptsAndAnyOtherOptionIsRefused) {
  auto settings_of = [](const LaunchPlan& p) {
    const ScratchFile* f = file_named(p, "settings.json");
    return f ? proto::parse_json(f->contents).value_or(nullptr) : proto::json::value(nullptr);
  };
  EXPECT_FALSE(settings_of(planned()).at("general").as_object().contains("maxAttempts")) << "Gemini's own default";
  spec.vendor_options = {{"max_attempts", "2"}};
  EXPECT_EQ(settings_of(planned()).at("general").at("maxAttempts"), 2);
  spec.vendor_options = {{"max_attempts", "99999999999999999999"}};
  EXPECT_EQ(settings_of(planned()).at("general").at("maxAttempts"), 10) << "Gemini CLI's own ceiling";
  spec.vendor_options = {{"retries", "2"}};
  auto p = plan();
  auto* refused = std::get_if<LaunchRefusal>(&p);
  ASSERT_NE(refused, nullptr);
  EXPECT_NE(refused->message.find("unknown gemini vendor option \"retries\" (known: max_attempts)"), std::string::npos)
      << refused->message;
}

TEST(GeminiProfile, ACallIsNamedByTheToolItsIdNames) {
  EXPECT_EQ(tool_of_call("run_shell_command__toolu_a"), "run_shell_command");
  EXPECT_EQ(tool_of_call("read_file-1765000000000-3"), "read_file");
  EXPECT_EQ(tool_of_call("grep_search_1765000000000_12"), "grep_search");
  EXPECT_EQ(tool_of_call("whatever"), std::nullopt);
  EXPECT_EQ(tool_of_call("__x"), std::nullopt);
}

TEST(GeminiCapabilities, ReplaceSteerAndPermissionSetAreRefusedAndTheReasonLimitIsNamed) {
  const auto& t = capabilities();
  EXPECT_TRUE(t.command(proto::CommandName::tool_decide).honoured);
  EXPECT_FALSE(t.command(proto::CommandName::steer).honoured);
  EXPECT_FALSE(t.command(proto::CommandName::permission_set).honoured);
  EXPECT_EQ(t.versions_pinned, (std::vector<std::string>{"0.61.0"}));
  bool reason_named = false;
  for (const auto& n : t.notes)
    reason_named = reason_named || n.find("DENY_REASON_NOT_DELIVERED") != std::string::npos;
  EXPECT_TRUE(reason_named);
  EXPECT_EQ(t.operations_for_tool("run_shell_command").at(0).op, proto::OpKind::shell);
}

}  // namespace
}  // namespace mh::adapters::gemini
