// The opencode launch plan (adapters/opencode/opencode_plan): the generated config drives the
// endpoint with every tool asking and the loop kept on deny; the seam plugin and its package are
// in the run's config dir; the environment is constructed, its scratch dirs hold everything
// opencode writes, and the npm registry is a dead loopback port. A plan is a value: computed over
// a vendor dir laid out as setup leaves it (an executable file for the binary), nothing spawned.
#include "adapters/opencode/opencode_plan.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/opencode/opencode_plugin.hpp"
#include "adapters/registry.hpp"
#include "protocol/digest.hpp"
#include "protocol/json.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::adapters::opencode {
namespace {

namespace proto = mh::protocol;
namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

class OpencodePlan : public ::testing::Test {
 protected:
  OpencodePlan() {
    write(default_binary(vendor()), "#!/bin/sh\n");
    ::chmod(default_binary(vendor()).c_str(), 0755);
    write(plugin_package_dir(vendor()) / "package.json", R"({"dependencies":{"@opencode-ai/plugin":"1.18.33"}})");
    write(plugin_package_dir(vendor()) / "package-lock.json", R"({"lockfileVersion":3})");
    write(plugin_package_dir(vendor()) / "node_modules/@opencode-ai/plugin/package.json", R"({"version":"1.18.33"})");
    spec.run_id = "r1";
    spec.adapter = "opencode";
    spec.prompt = "Leave a marker.";
    spec.model_endpoint = ModelEndpoint{"http://127.0.0.1:41234/", "tok-1"};
  }
  fs::path vendor() const { return dir.path() / "vendor"; }
  RunPaths paths() const { return {dir.path() / "run", dir.path() / "run/scratch"}; }
  std::variant<LaunchPlan, LaunchRefusal> plan() const {
    auto adapter = make_opencode_adapter(HostConfig{vendor(), {}});
    return adapter->plan(spec, paths());
  }
  LaunchPlan planned() const {
    auto p = plan();
    if (auto* refused = std::get_if<LaunchRefusal>(&p)) ADD_FAILURE() << refused->message;
    return std::get<LaunchPlan>(p);
  }
  const ScratchFile* file(const LaunchPlan& p, const fs::path& path) const {
    for (const auto& f : p.files)
      if (f.path == path) return &f;
    return nullptr;
  }

  test::TempDir dir{"opencode-plan"};
  RunSpec spec;
};

TEST_F(OpencodePlan, TheConfigNamesTheEndpointTheTokenAndAsksForEveryCall) {
  auto v = proto::parse_json(config_json(spec.model_endpoint.value(), "scripted"));
  ASSERT_TRUE(v && v->is_object());
  const auto& c = v->as_object();
  const auto& provider = c.at("provider").at(kProviderId).as_object();
  EXPECT_EQ(provider.at("npm"), "@ai-sdk/anthropic");
  EXPECT_EQ(provider.at("options").at("baseURL"), "http://127.0.0.1:41234/v1") << "one slash, then /v1";
  EXPECT_EQ(provider.at("options").at("apiKey"), "tok-1");
  EXPECT_TRUE(provider.at("models").as_object().contains("scripted"));
  EXPECT_EQ(c.at("model"), "metaharness/scripted");
  EXPECT_EQ(c.at("small_model"), "metaharness/scripted") << "the title request goes to the same endpoint";
  EXPECT_EQ(c.at("permission"), "ask");
  EXPECT_EQ(c.at("experimental").at("continue_loop_on_deny"), true);
  EXPECT_EQ(c.at("autoupdate"), false);
  EXPECT_EQ(c.at("share"), "disabled");
  EXPECT_TRUE(c.at("mcp").as_object().empty());
  auto deny_only = proto::parse_json(config_json(spec.model_endpoint.value(), "scripted", false));
  EXPECT_FALSE(deny_only->as_object().contains("permission")) << "deny-only leaves opencode's own rules";
}

TEST_F(OpencodePlan, TheLaunchIsAcpInTheWorkDirWithAConstructedEnvironment) {
  LaunchPlan p = planned();
  const fs::path scratch = fs::absolute(paths().scratch);
  EXPECT_EQ(p.program, default_binary(vendor()));
  EXPECT_EQ(p.args, (std::vector<std::string>{"acp", "--cwd", (scratch / "work").string()}));
  std::map<std::string, std::string> env(p.env.begin(), p.env.end());
  EXPECT_EQ(env.size(), p.env.size()) << "each variable once";
  EXPECT_EQ(env.at("npm_config_registry"), kDeadRegistry);
  EXPECT_EQ(env.at("OPENCODE_CONFIG"), (scratch / "opencode/opencode.json").string());
  for (const char* off : {"OPENCODE_DISABLE_AUTOUPDATE", "OPENCODE_DISABLE_MODELS_FETCH",
                          "OPENCODE_DISABLE_PROJECT_CONFIG", "OPENCODE_DISABLE_DEFAULT_PLUGINS"})
    EXPECT_EQ(env.at(off), "1") << off;
  EXPECT_EQ(env.at("METAHARNESS_RUN"), "r1");
  EXPECT_EQ(env.at(std::string(kHookSocketEnv)), "@metaharness/hook/r1");
  EXPECT_EQ(env.at(std::string(kHookDeadlineEnv)), "75") << "the default 55 s deadline + 20 s";
  ASSERT_TRUE(p.hook_channel);
  EXPECT_EQ(p.hook_channel->address, "@metaharness/hook/r1");
  // Everything opencode writes (config dir, sessions db, log, cache, its native module) is in the scratch.
  for (const char* var : {"HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"})
    EXPECT_EQ(env.at(var).rfind(scratch.string() + "/", 0), 0u) << var;
  const fs::path config_dir = scratch / "xdg/config/opencode";
  // Every file the plan writes is in a directory it makes: only those are visible in the sandbox.
  for (const auto& f : p.files)
    EXPECT_NE(std::find(p.directories.begin(), p.directories.end(), f.path.parent_path()), p.directories.end())
        << f.path;
  for (const auto& d : {config_dir, config_dir / "plugin", fs::path(env.at("TMPDIR")), scratch / "work"})
    EXPECT_NE(std::find(p.directories.begin(), p.directories.end(), d), p.directories.end()) << d;
  const ScratchFile* config = file(p, scratch / "opencode/opencode.json");
  ASSERT_TRUE(config);
  EXPECT_EQ(config->mode, 0600u) << "it carries the token";
  EXPECT_EQ(config->contents, config_json(spec.model_endpoint.value(), std::string(kDefaultModel)));
}

TEST_F(OpencodePlan, TheSeamPluginAndItsPackageAreInTheRunsConfigDir) {
  LaunchPlan p = planned();
  const fs::path config_dir = fs::absolute(paths().scratch) / "xdg/config/opencode";
  const ScratchFile* plugin = file(p, config_dir / "plugin" / std::string(kPluginFile));
  ASSERT_TRUE(plugin);
  EXPECT_EQ(plugin->contents, plugin_source());
  EXPECT_NE(plugin->contents.find("tool.execute.before"), std::string::npos);
  const ScratchFile* manifest = file(p, config_dir / "package.json");
  ASSERT_TRUE(manifest);
  EXPECT_EQ(manifest->contents, R"({"dependencies":{"@opencode-ai/plugin":"1.18.33"}})");
  ASSERT_TRUE(file(p, config_dir / "package-lock.json"));
  ASSERT_EQ(p.links.size(), 1u);
  EXPECT_EQ(p.links[0].path, config_dir / "node_modules");
  EXPECT_EQ(p.links[0].target, plugin_package_dir(vendor()) / "node_modules") << "linked, never copied per run";
}

// The seam plugin is the launch's own: the attestation declares it (installed_plugins), under the
// name session.started lists, with the written file's path and its plugin tree digest (one line
// "<file> <sha256 of its bytes>" per file, hashed), so the floor's H1a holds it as declared.
TEST_F(OpencodePlan, TheAttestationDeclaresTheSeamPluginItInstalls) {
  LaunchPlan p = planned();
  const fs::path plugin = fs::absolute(paths().scratch) / "xdg/config/opencode/plugin" / std::string(kPluginFile);
  ASSERT_EQ(p.attestation.installed_plugins.size(), 1u);
  const proto::InstalledPlugin& seam = p.attestation.installed_plugins[0];
  EXPECT_EQ(seam.name, kPluginName);
  EXPECT_EQ(seam.installed_at, plugin.string());
  ASSERT_TRUE(file(p, plugin));
  EXPECT_EQ(seam.digest,
            proto::sha256_hex(std::string(kPluginFile) + " " + proto::sha256_hex(file(p, plugin)->contents) + "\n"));
  EXPECT_FALSE(seam.loaded_by.empty());
}

TEST_F(OpencodePlan, NoPluginPackageRefusesTheRunByName) {
  fs::remove_all(plugin_package_dir(vendor()));
  auto p = plan();
  auto* refused = std::get_if<LaunchRefusal>(&p);
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->message.find("@opencode-ai/plugin"), std::string::npos) << refused->message;
  EXPECT_NE(refused->message.find(plugin_package_dir(vendor()).string()), std::string::npos) << refused->message;
}

TEST_F(OpencodePlan, AVariableThatWouldReplaceTheConfigIsRefused) {
  for (const char* name : {"OPENCODE_CONFIG_CONTENT", "OPENCODE_PERMISSION", "OPENCODE_CONFIG", "XDG_CONFIG_HOME"}) {
    spec.vendor_env = {{name, "x"}};
    auto p = plan();
    auto* refused = std::get_if<LaunchRefusal>(&p);
    ASSERT_TRUE(refused) << name;
    EXPECT_NE(refused->message.find(name), std::string::npos) << refused->message;
  }
}

// opencode starts a node launcher and a Bun-compiled binary: what either reads to load code is
// refused by name (issue 24, item 1).
TEST_F(OpencodePlan, AVariableThatLoadsCodeInNodeOrBunIsRefusedByName) {
  for (const char* name : {"NODE_OPTIONS", "BUN_OPTIONS", "BUN_INSPECT_PRELOAD", "LD_PRELOAD"}) {
    spec.vendor_env = {{name, "x"}};
    auto p = plan();
    auto* refused = std::get_if<LaunchRefusal>(&p);
    ASSERT_TRUE(refused) << name;
    EXPECT_EQ(refused->message.rfind("declared vendor environment refused: " + std::string(name) + " ", 0), 0u)
        << refused->message;
  }
}

TEST_F(OpencodePlan, SteerAndPermissionSetAreRefusedAtStartByName) {
  spec.requires_commands = {proto::CommandName::steer, proto::CommandName::permission_set,
                            proto::CommandName::message_inject};
  auto p = plan();
  auto* refused = std::get_if<LaunchRefusal>(&p);
  ASSERT_TRUE(refused);
  std::map<std::string, std::string> codes;
  for (const auto& r : refused->command_results)
    codes[r.id] = std::string(proto::to_string(r.outcome.refusal->code));
  EXPECT_EQ(codes, (std::map<std::string, std::string>{{"start/steer", "UNSUPPORTED_CONTROL"},
                                                       {"start/permission.set", "UNSUPPORTED_CONTROL"}}));
}

}  // namespace
}  // namespace mh::adapters::opencode
