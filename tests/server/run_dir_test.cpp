// The one owner of a run directory's layout and of run ids.
#include "daemon/run/run_dir.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "adapters/registry.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {
namespace {

const std::regex kRunId("[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}");

TEST(DaemonRunDir, ARunIdIsTheUtcSecondThenFortyEightRandomBitsAndNeverRepeats) {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    std::string id = daemon::new_run_id();
    ASSERT_TRUE(std::regex_match(id, kRunId)) << id;
    EXPECT_TRUE(seen.insert(id).second) << id;
  }
  // The stamp is now, in UTC.
  std::time_t t = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char day[16];
  std::strftime(day, sizeof day, "%Y%m%d", &utc);
  EXPECT_EQ(daemon::new_run_id().substr(0, 8), day);
}

TEST(DaemonRunDir, TheLayoutIsNamedOnceAndTheMetaRoundTrips) {
  TempDir dir("rundir");
  daemon::RunDir run = daemon::RunDir::in_state_dir(dir.path(), "r1");
  EXPECT_EQ(run.root(), dir.path() / "runs" / "r1");
  EXPECT_EQ(run.events(), run.root() / "events.jsonl");
  EXPECT_EQ(run.spec_json(), run.root() / "spec.json");
  EXPECT_EQ(run.plan_json(), run.root() / "plan.json");
  EXPECT_EQ(run.run_json(), run.root() / "run.json");
  EXPECT_EQ(run.scenario_json(), run.root() / "scenario.json");
  EXPECT_EQ(run.vendor_stdout(), run.root() / "vendor-stdout.jsonl");
  EXPECT_EQ(run.vendor_stdin(), run.root() / "vendor-stdin.jsonl");
  EXPECT_EQ(run.vendor_stderr(), run.root() / "vendor-stderr.log");
  EXPECT_EQ(run.paths().scratch, run.root() / "scratch");
  EXPECT_EQ(run.paths().run_dir, run.root());

  std::filesystem::create_directories(run.root());
  EXPECT_FALSE(run.read_meta()) << "no run.json yet";
  EXPECT_TRUE(run.read_spec().is_null());
  daemon::RunMeta meta{1000, 77, "claude", {{"suite", "nightly"}}, 1700000000};
  ASSERT_FALSE(run.write_meta(meta));
  auto back = run.read_meta();
  ASSERT_TRUE(back);
  EXPECT_EQ(back->owner_uid, 1000u);
  EXPECT_EQ(back->owner_pid, 77);
  EXPECT_EQ(back->adapter, "claude");
  EXPECT_EQ(back->labels, meta.labels);
  EXPECT_EQ(back->created_unix, 1700000000);
  EXPECT_EQ(std::filesystem::status(run.run_json()).permissions() & std::filesystem::perms::others_read,
            std::filesystem::perms::none);

  adapters::RunSpec spec;
  spec.run_id = "r1";
  spec.adapter = "claude";
  spec.prompt = "go";
  ASSERT_FALSE(run.write_spec(spec));
  EXPECT_EQ(run.read_spec().as_object().at("prompt"), "go");
  auto missing = daemon::RunDir(dir.path() / "nowhere").write_spec(spec);
  ASSERT_TRUE(missing);
  EXPECT_NE(missing->find("cannot write"), std::string::npos) << *missing;
}

// The adapters compute their transcripts' paths themselves: they must be the layout's names.
TEST(DaemonRunDir, EveryAdaptersPlanPutsItsTranscriptsWhereTheLayoutNamesThem) {
  TempDir dir("rundir-plans");
  adapters::AdapterRegistry registry(adapters::host_config_from_environment());
  daemon::RunDir run(dir.path() / "r1");
  for (auto id : registry.ids()) {
    adapters::RunSpec spec;
    spec.run_id = "r1";
    spec.adapter = std::string(id);
    spec.prompt = "go";
    spec.model_endpoint = adapters::ModelEndpoint{"http://127.0.0.1:9", "t"};
    auto planned = registry.find(id)->plan(spec, run.paths());
    auto* plan = std::get_if<adapters::LaunchPlan>(&planned);
    ASSERT_TRUE(plan) << id << ": " << std::get<adapters::LaunchRefusal>(planned).message;
    EXPECT_EQ(plan->transcript_path, run.vendor_stdout()) << id;
    EXPECT_EQ(plan->stdin_log_path, run.vendor_stdin()) << id;
  }
}

}  // namespace
}  // namespace mh::test
