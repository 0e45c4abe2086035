// One run's body, contained end to end: prepared from a plan, spawned as the containment says,
// escapees started from inside, ended — nothing left, its user not root, its facts read; and
// what is not available said by name (a warning) or refused (a limit without a cgroup).
#include "daemon/process/run_containment.hpp"

#include <sys/stat.h>

#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <fstream>
#include <set>

#include "daemon/process/run_processes.hpp"
#include "process_test_support.hpp"

namespace mh::daemon::test {
namespace {

class RunContainmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_dir_ = state_.path() / "runs" / "run-1";
    scratch_ = run_dir_ / "scratch";
    std::filesystem::create_directories(scratch_ / "work");
    std::ofstream(run_dir_ / "events.jsonl") << "the record";
    if (auto base = CgroupParent::own_cgroup_dir()) {
      auto parent = CgroupParent::open(*base, unique_marker_value("containment"));
      if (parent) {
        parent_dir_ = parent->dir();
        policy_.cgroups.emplace(std::move(*parent));
      } else
        policy_.no_cgroups_why = parent.error();
    } else {
      policy_.no_cgroups_why = "no cgroup2 mount";
    }
    policy_.sandbox = ::access("/usr/bin/bwrap", X_OK) == 0;
    policy_.no_sandbox_why = "no bwrap";
    policy_.sandbox_spec.hidden = {state_.path()};
    policy_.daemon_is_root = ::geteuid() == 0;
    policy_.uids = std::make_shared<RunUidPool>();
  }
  void TearDown() override {
    // The parent this test made, even when the test dropped it from the policy.
    if (!parent_dir_.empty()) ::rmdir(parent_dir_.c_str());
  }

  adapters::LaunchPlan plan(const std::string& script) {
    auto p = make_plan("/bin/sh", {"-c", script},
                       {{"PATH", "/usr/bin:/bin"}, {"HOME", scratch_.string()}, {"MH_TEST_RUN", marker_}},
                       scratch_ / "work");
    p.directories = {scratch_};
    p.run_marker = {"MH_TEST_RUN", marker_};
    return p;
  }

  // Spawns the contained plan and reads its stdout until every line in `expect` was seen.
  std::unique_ptr<ChildProcess> spawn(RunContainment& c, std::set<std::string> expect,
                                      std::vector<std::string>* lines) {
    auto child = ChildProcess::spawn(strand_, c.launch_plan(), c.spawn_options());
    if (!child) throw std::runtime_error(child.error());
    *lines = io_.run(strand_, read_lines_until(**child, std::move(expect)), 20s);
    return std::move(*child);
  }

  IoThreads io_{1};
  IoThreads::Strand strand_ = io_.make_strand();
  TempDir state_;
  std::filesystem::path run_dir_, scratch_;
  std::string marker_ = unique_marker_value("containment");
  ContainmentPolicy policy_;
  std::filesystem::path parent_dir_;
};

TEST_F(RunContainmentTest, EscapeesAreGoneAfterTheEndAndTheRunWasNotRoot) {
  if (!policy_.cgroups || !policy_.sandbox) GTEST_SKIP() << "needs a writable cgroup2 and bwrap";
  auto c =
      RunContainment::prepare(policy_, "run-1", run_dir_,
                              plan("(/usr/bin/env -i /usr/bin/setsid /bin/sh -c 'echo escaped; exec sleep 1001' &)\n"
                                   "cat " +
                                   (run_dir_ / "events.jsonl").string() +
                                   " 2>/dev/null && echo record-read\n"
                                   "echo uid=$(id -u)\necho ready\nexec sleep 1000\n"),
                              {});
  ASSERT_TRUE(c) << c.error();
  EXPECT_TRUE((*c)->warnings().empty());
  std::vector<std::string> lines;
  auto child = spawn(**c, {"escaped", "ready"}, &lines);
  EXPECT_EQ(std::find(lines.begin(), lines.end(), "record-read"), lines.end()) << "the run read its own record";
  if (policy_.daemon_is_root) {
    auto uid_line =
        std::find_if(lines.begin(), lines.end(), [](const std::string& l) { return l.rfind("uid=", 0) == 0; });
    ASSERT_NE(uid_line, lines.end());
    uid_t uid = static_cast<uid_t>(std::stoul(uid_line->substr(4)));
    EXPECT_GE(uid, RunUidPool::kFirst);
    EXPECT_LE(uid, RunUidPool::kLast);
    EXPECT_EQ((*c)->uid(), std::optional<uid_t>(uid));
  }
  auto problems = io_.run(strand_, (*c)->end(strand_, child->pid(), 10s), 20s);
  EXPECT_EQ(problems, "");
  auto termination = io_.run(strand_, child->async_wait(), 10s);
  EXPECT_EQ((*c)->vendor_termination(termination).kind, protocol::ProcessKind::signaled);
  EXPECT_TRUE(find_run_processes(std::nullopt, {"MH_TEST_RUN", marker_}).empty());
  ASSERT_TRUE((*c)->facts());
  EXPECT_GE((*c)->facts()->processes_killed.value_or(0), 2u) << "the root and the escapee";
  EXPECT_TRUE((*c)->facts()->cpu_usec);
  // stream.closed's resources are those facts, with null where a controller is absent.
  auto resources = (*c)->resources();
  ASSERT_TRUE(resources);
  EXPECT_EQ(resources->cpu_usec, (*c)->facts()->cpu_usec);
  EXPECT_EQ(resources->processes_killed, (*c)->facts()->processes_killed);
  EXPECT_EQ(resources->memory_peak_bytes.has_value(), policy_.cgroups->has_controller("memory"));
  EXPECT_EQ(resources->tasks_peak.has_value(), policy_.cgroups->has_controller("pids"));
}

// A run spec's own limits (run.limits) win over the daemon's defaults, and one whose controller
// is not offered refuses the run naming the limit. Where the controller is offered, the spec's
// value is the one in the group's file.
TEST_F(RunContainmentTest, ARunSpecsLimitsOverrideTheDefaultsOrAreRefusedByName) {
  if (!policy_.cgroups) GTEST_SKIP() << "needs a writable cgroup2: " << policy_.no_cgroups_why;
  policy_.default_limits.pids_max = 100;
  adapters::RunSpec spec;
  spec.limits.pids_max = 8;
  auto c = RunContainment::prepare(policy_, "run-1", run_dir_, plan("exit 0"), limits_of(spec));
  if (policy_.cgroups->has_controller("pids")) {
    ASSERT_TRUE(c) << c.error();
    std::ifstream in(policy_.cgroups->dir() / "run-1" / "pids.max");
    std::string value;
    std::getline(in, value);
    EXPECT_EQ(value, "8");
  } else {
    ASSERT_FALSE(c);
    EXPECT_EQ(c.error(),
              "pids.max needs the pids controller, which is not available in " + policy_.cgroups->dir().string());
  }
  policy_.default_limits = {};
  spec.limits = {};
  spec.limits.memory_max_bytes = 64u << 20;
  auto m = RunContainment::prepare(policy_, "run-1", run_dir_, plan("exit 0"), limits_of(spec));
  if (!policy_.cgroups->has_controller("memory")) {
    ASSERT_FALSE(m);
    EXPECT_EQ(m.error(),
              "memory.max needs the memory controller, which is not available in " + policy_.cgroups->dir().string());
  }
}

TEST_F(RunContainmentTest, WithoutACgroupTheResourcesAreAbsentAndOneNeverSpawnedStillCounts) {
  if (!policy_.cgroups) GTEST_SKIP() << "needs a writable cgroup2: " << policy_.no_cgroups_why;
  auto counted = RunContainment::prepare(policy_, "run-1", run_dir_, plan("exit 0"), {});
  ASSERT_TRUE(counted) << counted.error();
  auto resources = (*counted)->resources();
  ASSERT_TRUE(resources) << "a run with a cgroup counts, even one that never spawned";
  EXPECT_TRUE(resources->cpu_usec);
  EXPECT_FALSE(resources->processes_killed) << "its end never ran: unknown, not 0";
  counted->reset();
  policy_.cgroups.reset();
  policy_.no_cgroups_why = "runs.cgroup_root is \"none\"";
  auto uncounted = RunContainment::prepare(policy_, "run-1", run_dir_, plan("exit 0"), {});
  ASSERT_TRUE(uncounted) << uncounted.error();
  EXPECT_FALSE((*uncounted)->resources()) << "no cgroup: nothing counted the run";
}

TEST_F(RunContainmentTest, WithoutACgroupTheRunSaysSoAndALimitIsRefused) {
  policy_.cgroups.reset();
  policy_.no_cgroups_why = "runs.cgroup_root is \"none\"";
  auto limited = RunContainment::prepare(policy_, "run-1", run_dir_, plan("exit 0"), CgroupLimits{.pids_max = 10});
  ASSERT_FALSE(limited);
  EXPECT_EQ(limited.error(),
            "pids.max needs a cgroup of the run's own, and there is none: runs.cgroup_root is \"none\"");

  auto c = RunContainment::prepare(policy_, "run-1", run_dir_, plan("echo ready; exec sleep 1000"), {});
  ASSERT_TRUE(c) << c.error();
  ASSERT_GE((*c)->warnings().size(), 1u);
  EXPECT_EQ((*c)->warnings()[0].first, "CGROUP_UNAVAILABLE");
  EXPECT_NE((*c)->warnings()[0].second.find("runs.cgroup_root is \"none\""), std::string::npos);
  std::vector<std::string> lines;
  auto child = spawn(**c, {"ready"}, &lines);
  EXPECT_EQ(io_.run(strand_, (*c)->end(strand_, child->pid(), 10s), 20s), "") << "the marker sweep ends it";
  EXPECT_FALSE((*c)->facts()) << "no cgroup, no counters: unknown, not zero";
}

TEST_F(RunContainmentTest, WithoutASandboxTheRunSaysSo) {
  policy_.sandbox = false;
  policy_.no_sandbox_why = "runs.sandbox is \"none\"";
  auto c = RunContainment::prepare(policy_, "run-1", run_dir_, plan("exit 0"), {});
  ASSERT_TRUE(c) << c.error();
  auto w = std::find_if((*c)->warnings().begin(), (*c)->warnings().end(),
                        [](const auto& w) { return w.first == "SANDBOX_UNAVAILABLE"; });
  ASSERT_NE(w, (*c)->warnings().end());
  EXPECT_NE(w->second.find("runs.sandbox is \"none\""), std::string::npos);
  EXPECT_EQ((*c)->launch_plan().program, "/bin/sh");
}

TEST_F(RunContainmentTest, UnderARootDaemonTheRunsDirectoriesBecomeItsOwn) {
  if (!policy_.daemon_is_root) GTEST_SKIP() << "not root";
  std::ofstream(scratch_ / "config.json") << "{}";
  auto p = plan("exit 0");
  p.files.push_back({scratch_ / "config.json", "{}", 0600});
  auto c = RunContainment::prepare(policy_, "run-1", run_dir_, p, {});
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE((*c)->uid());
  for (const auto& path : {scratch_, scratch_ / "work", scratch_ / "config.json"}) {
    struct stat info {};
    ASSERT_EQ(::lstat(path.c_str(), &info), 0);
    EXPECT_EQ(info.st_uid, *(*c)->uid()) << path;
  }
  struct stat info {};
  ASSERT_EQ(::lstat((run_dir_ / "events.jsonl").c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, 0u) << "the record stays the daemon's";
}

// Unsandboxed under a root daemon, the run passes through its own run directory (0750, the
// daemon's) by its group, which becomes the run's; the record in it stays the daemon's.
TEST_F(RunContainmentTest, UnderARootDaemonUnsandboxedTheRunDirectoryLetsTheRunsGroupPass) {
  if (!policy_.daemon_is_root) GTEST_SKIP() << "not root";
  policy_.sandbox = false;
  auto p = plan("exit 0");
  p.directories = {scratch_ / "work"};  // scratch_ itself lies between it and the run directory
  auto c = RunContainment::prepare(policy_, "run-1", run_dir_, p, {});
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE((*c)->uid());
  struct stat info {};
  for (const auto& dir : {run_dir_, scratch_}) {
    ASSERT_EQ(::lstat(dir.c_str(), &info), 0);
    EXPECT_EQ(info.st_uid, 0u) << dir;
    EXPECT_EQ(info.st_gid, static_cast<gid_t>(*(*c)->uid())) << dir << ": the run's group may pass";
  }
  ASSERT_EQ(::lstat((run_dir_ / "events.jsonl").c_str(), &info), 0);
  EXPECT_EQ(info.st_gid, 0u) << "the record stays the daemon's";
}

// network = "gateway" (issue 25): the run's gate is made (0755, the daemon's), the run is in a
// network namespace of its own, and its hook channel moved into the gate; without a sandbox the
// run is refused by name, never started on the host's network.
TEST_F(RunContainmentTest, ANetworkOfItsOwnMakesTheGateAndMovesTheHookChannel) {
  if (!policy_.sandbox) GTEST_SKIP() << "needs bwrap";
  policy_.sandbox_spec.exec_helper = MH_TEST_EXEC_HELPER;
  auto p = plan("readlink /proc/self/ns/net");
  p.env.emplace_back("METAHARNESS_HOOK_SOCKET", "@metaharness/hook/run-1");
  p.hook_channel = adapters::HookChannel{"METAHARNESS_HOOK_SOCKET", "@metaharness/hook/run-1", {}};
  const SandboxSpec::OwnNetwork own{run_dir_ / "gate", {}};
  auto c = RunContainment::prepare(policy_, "run-1", run_dir_, p, {}, own);
  ASSERT_TRUE(c) << c.error();
  struct stat info {};
  ASSERT_EQ(::lstat((run_dir_ / "gate").c_str(), &info), 0);
  EXPECT_TRUE(S_ISDIR(info.st_mode));
  EXPECT_EQ(info.st_mode & 07777, 0755u);
  EXPECT_EQ(info.st_uid, ::geteuid());
  const auto& contained = (*c)->launch_plan();
  ASSERT_TRUE(contained.hook_channel);
  EXPECT_EQ(contained.hook_channel->address, "/run/metaharness/hook.sock");
  EXPECT_EQ(contained.hook_channel->bound_at, run_dir_ / "gate" / "hook.sock");
  std::vector<std::string> lines;
  auto child = spawn(**c, {}, &lines);
  const std::string inside = io_.run(strand_, read_to_eof(child->stdout_pipe()), 20s);
  io_.run(strand_, child->async_wait(), 20s);
  std::error_code ec;
  const std::string host = std::filesystem::read_symlink("/proc/self/ns/net", ec).string();
  EXPECT_EQ(inside.rfind("net:[", 0), 0u) << inside;
  EXPECT_NE(inside, host + "\n") << "the run shares the host's network namespace";
  io_.run(strand_, (*c)->end(strand_, std::nullopt, 10s), 20s);

  policy_.sandbox = false;
  auto refused = RunContainment::prepare(policy_, "run-2", run_dir_, p, {}, own);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("network = \"gateway\" needs the sandbox"), std::string::npos) << refused.error();
}

TEST(RunUidPool, NoTwoLiveRunsShareAUidAndAReleasedOneIsFreeAgain) {
  RunUidPool pool;
  auto a = pool.acquire("run-a");
  auto b = pool.acquire("run-a");  // same id, same preferred uid: must still differ
  ASSERT_TRUE(a && b);
  EXPECT_NE(*a, *b);
  pool.release(*a);
  EXPECT_EQ(pool.acquire("run-a"), a);
}

}  // namespace
}  // namespace mh::daemon::test
