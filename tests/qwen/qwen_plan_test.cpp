// The Qwen Code launch plan (adapters/qwen/qwen_plan) and its capability table: the endpoint as
// the anthropic auth type, approval mode default and permissions.ask naming every tool (none under
// deny-only), the side requests that carry tools switched off, every settings tier in the scratch,
// and replace / the deny's reason refused by name. A plan is a value: nothing spawned.
#include "adapters/qwen/qwen_plan.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <set>

#include "adapters/qwen/qwen_adapter.hpp"
#include "adapters/registry.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "protocol/json.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::adapters::qwen {
namespace {

namespace proto = mh::protocol;
namespace fs = std::filesystem;

class QwenPlan : public ::testing::Test {
 protected:
  QwenPlan() {
    const fs::path binary = descriptor().default_binary(vendor());
    fs::create_directories(binary.parent_path());
    std::ofstream(binary) << "#!/usr/bin/env node\n";
    ::chmod(binary.c_str(), 0755);
    spec.run_id = "r1";
    spec.adapter = "qwen";
    spec.prompt = "Leave a marker.";
    spec.model_endpoint = ModelEndpoint{"http://127.0.0.1:41234/", "tok-1"};
  }
  fs::path vendor() const { return dir.path() / "vendor"; }
  std::variant<LaunchPlan, LaunchRefusal> plan() const {
    auto adapter = make_qwen_adapter(HostConfig{vendor(), {}});
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
  static proto::json::value settings_of(const LaunchPlan& p) {
    for (const auto& f : p.files)
      if (f.path.filename() == "settings.json") return proto::parse_json(f.contents).value_or(nullptr);
    return nullptr;
  }

  mh::test::TempDir dir{"qwen-plan"};
  RunSpec spec;
};

TEST_F(QwenPlan, LaunchesAcpOnTheAnthropicWireWithEveryToolAsking) {
  LaunchPlan p = planned();
  const fs::path scratch = fs::absolute(dir.path() / "run/scratch");
  EXPECT_EQ(p.args, (std::vector<std::string>{"--acp", "--auth-type", "anthropic", "--approval-mode", "default",
                                              "--model", "claude-sonnet-4-5"}));
  auto env = env_of(p);
  EXPECT_EQ(env["ANTHROPIC_API_KEY"], "tok-1");
  EXPECT_EQ(env["ANTHROPIC_BASE_URL"], "http://127.0.0.1:41234");
  EXPECT_EQ(env["ANTHROPIC_MODEL"], "claude-sonnet-4-5");
  EXPECT_EQ(env["QWEN_HOME"], (scratch / "home/.qwen").string());
  EXPECT_EQ(env["QWEN_CODE_NO_RELAUNCH"], "true");
  for (auto name :
       {"QWEN_CODE_SYSTEM_SETTINGS_PATH", "QWEN_CODE_SYSTEM_DEFAULTS_PATH", "QWEN_CODE_TRUSTED_FOLDERS_PATH"})
    EXPECT_EQ(fs::path(env[name]).parent_path(), scratch / "qwen") << name;
  auto s = settings_of(p);
  ASSERT_TRUE(s.is_object());
  EXPECT_EQ(s.at("memory").at("enableManagedAutoMemory"), false);
  EXPECT_EQ(s.at("memory").at("enableManagedAutoDream"), false);
  EXPECT_EQ(s.at("ui").at("enableFollowupSuggestions"), false);
  EXPECT_EQ(s.at("privacy").at("usageStatisticsEnabled"), false);
  EXPECT_EQ(s.at("tools").at("approvalMode"), "default");
  EXPECT_TRUE(s.at("mcpServers").as_object().empty());
  std::set<std::string> ask;
  for (const auto& rule : s.at("permissions").at("ask").as_array())
    ask.insert(std::string(rule.as_string()));
  for (auto tool : {"run_shell_command", "read_file", "glob", "grep_search", "write_file", "edit", "web_fetch"})
    EXPECT_TRUE(ask.count(tool)) << tool << " must ask";
}

TEST_F(QwenPlan, DenyOnlyLeavesQwensOwnRulesInForce) {
  spec.deny_only = true;
  auto s = settings_of(planned());
  ASSERT_TRUE(s.is_object());
  EXPECT_FALSE(s.as_object().contains("permissions"));
}

TEST_F(QwenPlan, ADeclaredVariableThatBringsOtherSettingsOrBackendsIsRefused) {
  for (auto name : {"QWEN_SYSTEM_MD", "OPENAI_BASE_URL", "QWEN_HOME", "ANTHROPIC_BASE_URL"}) {
    spec.vendor_env = {{name, "1"}};
    auto p = plan();
    auto* refused = std::get_if<LaunchRefusal>(&p);
    ASSERT_NE(refused, nullptr) << name;
    EXPECT_NE(refused->message.find(name), std::string::npos) << refused->message;
  }
}

// The one vendor option, max_retries, is Qwen Code's model.generationConfig.maxRetries (how often
// it retries a throttled or failed model request); any other key is refused by name.
TEST_F(QwenPlan, MaxRetriesIsTheGenerationConfigsAndAnyOtherOptionIsRefused) {
  EXPECT_FALSE(settings_of(planned()).at("model").as_object().contains("generationConfig")) << "Qwen's own default";
  spec.vendor_options = {{"max_retries", "0"}};
  auto s = settings_of(planned());
  EXPECT_EQ(s.at("model").at("generationConfig").at("maxRetries"), 0);
  EXPECT_EQ(s.at("model").at("name"), "claude-sonnet-4-5") << "the model stays named";
  spec.vendor_options = {{"max_attempts", "2"}};
  auto p = plan();
  auto* refused = std::get_if<LaunchRefusal>(&p);
  ASSERT_NE(refused, nullptr);
  EXPECT_NE(refused->message.find("unknown qwen vendor option \"max_attempts\" (known: max_retries)"),
            std::string::npos)
      << refused->message;
}

TEST(QwenCapabilities, ReplaceSteerAndPermissionSetAreRefusedAndTheReasonLimitIsNamed) {
  const auto& t = capabilities();
  EXPECT_TRUE(t.command(proto::CommandName::tool_decide).honoured);
  EXPECT_FALSE(t.command(proto::CommandName::steer).honoured);
  EXPECT_FALSE(t.command(proto::CommandName::permission_set).honoured);
  EXPECT_EQ(t.versions_pinned, (std::vector<std::string>{"0.24.4"}));
  bool reason_named = false;
  for (const auto& n : t.notes)
    reason_named = reason_named || n.find("DENY_REASON_NOT_DELIVERED") != std::string::npos;
  EXPECT_TRUE(reason_named);
  EXPECT_EQ(t.operations_for_tool("run_shell_command").at(0).op, proto::OpKind::shell);
}

}  // namespace
}  // namespace mh::adapters::qwen
