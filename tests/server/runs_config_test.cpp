// The [runs] keys of the run's body in the daemon's config: the per-run limit defaults take the
// bounds a run spec's own limits have, and supervision is on unless turned off.
#include <gtest/gtest.h>

#include "daemon/config/config.hpp"
#include "tests/support/config_text.hpp"

namespace mh::test {
namespace {

TEST(RunsConfig, LimitDefaultsAreBoundedLikeASpecsLimitsAndRefusedNamingTheKey) {
  auto c = load_config_text("[runs]\nmemory_max_bytes = 268435456\npids_max = 64\ncpu_max_percent = 200\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->memory_max_bytes, 268435456u);
  EXPECT_EQ(c->pids_max, 64u);
  EXPECT_EQ(c->cpu_max_percent, 200u);
  for (auto [toml, names] :
       std::vector<std::pair<std::string, std::string>>{{"cpu_max_percent = 0", "runs.cpu_max_percent"},
                                                        {"cpu_max_percent = 100001", "runs.cpu_max_percent"},
                                                        {"pids_max = 99999999", "runs.pids_max"},
                                                        {"memory_max_bytes = 1000", "runs.memory_max_bytes"}}) {
    EXPECT_TRUE(refused_naming("[runs]\n" + toml + "\n", {names, "must be"}));
  }
}

TEST(RunsConfig, SupervisionIsOnUnlessTurnedOffAndDetachNeedsIt) {
  auto defaults = load_config_text("");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_TRUE(defaults->supervise) << "a daemon that dies loses no run, by default";
  EXPECT_EQ(defaults->on_stop, "halt");
  auto off = load_config_text("[runs]\nsupervise = false\n");
  ASSERT_TRUE(off) << off.error();
  EXPECT_FALSE(off->supervise);
  EXPECT_TRUE(refused_naming("[runs]\nsupervise = false\non_stop = \"detach\"\n", {"runs.on_stop"}));
}

// Issue 27 §2: a run silent for stall_after (600 s unless configured) is warned; halt on request.
TEST(RunsConfig, StallAfterAndOnStallDefaultAndAreRefusedNamingTheKey) {
  auto defaults = load_config_text("");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_EQ(defaults->stall_after, std::chrono::seconds(600));
  EXPECT_EQ(defaults->on_stall, "warn");
  auto set = load_config_text("[runs]\nstall_after_s = 30\non_stall = \"halt\"\n");
  ASSERT_TRUE(set) << set.error();
  EXPECT_EQ(set->stall_after, std::chrono::seconds(30));
  EXPECT_EQ(set->on_stall, "halt");
  auto never = load_config_text("[runs]\nstall_after_s = 0\n");
  ASSERT_TRUE(never) << never.error();
  EXPECT_EQ(never->stall_after, std::chrono::seconds(0));
  EXPECT_TRUE(refused_naming("[runs]\nstall_after_s = -1\n", {"runs.stall_after_s", "negative"}));
  EXPECT_TRUE(refused_naming("[runs]\nstall_after_s = 99999999999\n", {"runs.stall_after_s", "must be"}));
  EXPECT_TRUE(refused_naming("[runs]\nstall_after_s = \"10m\"\n", {"runs.stall_after_s"}));
  EXPECT_TRUE(refused_naming("[runs]\non_stall = \"kill\"\n", {"runs.on_stall", "must be"}));
}

// Issue 27 §5: parking is off unless configured; park_after_s is refused naming the key.
TEST(RunsConfig, ParkAfterIsUnsetByDefaultAndRefusedNamingTheKey) {
  auto defaults = load_config_text("");
  ASSERT_TRUE(defaults) << defaults.error();
  EXPECT_FALSE(defaults->park_after) << "unset: never parked";
  auto set = load_config_text("[runs]\nsupervise = false\npark_after_s = 900\n");
  ASSERT_TRUE(set) << set.error();
  EXPECT_EQ(set->park_after, std::chrono::seconds(900));
  // Supervised runs (the default) park too: their supervisor starts the vendor again.
  auto supervised = load_config_text("[runs]\npark_after_s = 900\n");
  ASSERT_TRUE(supervised) << supervised.error();
  EXPECT_EQ(supervised->park_after, std::chrono::seconds(900));
  auto never = load_config_text("[runs]\npark_after_s = 0\n");
  ASSERT_TRUE(never) << never.error();
  EXPECT_FALSE(never->park_after) << "0: never";
  EXPECT_TRUE(refused_naming("[runs]\npark_after_s = -1\n", {"runs.park_after_s"}));
  EXPECT_TRUE(refused_naming("[runs]\npark_after_s = 99999999999\n", {"runs.park_after_s", "must be"}));
  EXPECT_TRUE(refused_naming("[runs]\npark_after_s = \"10m\"\n", {"runs.park_after_s"}));
}

}  // namespace
}  // namespace mh::test
