// The opencode launch (adapters/opencode/opencode_plan): the generated config drives the scripted
// endpoint with every tool asking and the loop kept on deny; the environment is constructed, its
// scratch dirs hold everything opencode writes, and the npm registry is a dead loopback port.
#include "adapters/opencode/opencode_plan.hpp"

#include <gtest/gtest.h>

#include <map>

#include "adapters/opencode/opencode_adapter.hpp"
#include "protocol/json.hpp"

namespace mh::adapters::opencode {
namespace {

namespace proto = mh::protocol;

LaunchInputs inputs() {
  return LaunchInputs{default_binary("/opt/vendor"), "/runs/r1/scratch", "/runs/r1/scratch/work",
                      ModelEndpoint{"http://127.0.0.1:41234/", "tok-1"}, "scripted"};
}

TEST(OpencodePlan, TheConfigNamesTheEndpointTheTokenAndAsksForEveryCall) {
  auto v = proto::parse_json(config_json(inputs().endpoint, "scripted"));
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
}

TEST(OpencodePlan, TheLaunchIsAcpInTheWorkDirWithAConstructedEnvironment) {
  auto l = launch(inputs());
  EXPECT_EQ(l.program, "/opt/vendor/node_modules/opencode-linux-x64/bin/opencode");
  EXPECT_EQ(l.args, (std::vector<std::string>{"acp", "--cwd", "/runs/r1/scratch/work"}));
  std::map<std::string, std::string> env(l.env.begin(), l.env.end());
  EXPECT_EQ(env.size(), l.env.size()) << "each variable once";
  EXPECT_EQ(env.at("npm_config_registry"), kDeadRegistry);
  EXPECT_EQ(env.at("OPENCODE_CONFIG"), "/runs/r1/scratch/opencode.json");
  EXPECT_EQ(env.at("OPENCODE_DISABLE_AUTOUPDATE"), "1");
  EXPECT_EQ(env.at("OPENCODE_DISABLE_MODELS_FETCH"), "1");
  EXPECT_EQ(env.at("PATH"), "/usr/bin:/bin");
  // Everything opencode writes (config dir, sessions db, log, cache, its native module) is in the scratch.
  for (const char* var : {"HOME", "TMPDIR", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME"})
    EXPECT_EQ(env.at(var).rfind("/runs/r1/scratch/", 0), 0u) << var;
  EXPECT_EQ(l.config_dir, "/runs/r1/scratch/xdg/config/opencode");
  for (const auto& dir :
       {l.config_dir, std::filesystem::path(env.at("TMPDIR")), std::filesystem::path("/runs/r1/scratch/work")})
    EXPECT_NE(std::find(l.directories.begin(), l.directories.end(), dir), l.directories.end()) << dir;
  ASSERT_EQ(l.files.size(), 1u);
  EXPECT_EQ(l.files[0].path, "/runs/r1/scratch/opencode.json");
  EXPECT_EQ(l.files[0].mode, 0600u) << "it carries the token";
  EXPECT_EQ(l.files[0].contents, config_json(inputs().endpoint, "scripted"));
}

}  // namespace
}  // namespace mh::adapters::opencode
