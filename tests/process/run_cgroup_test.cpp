// A run's own cgroup: what it holds cannot escape it (env -i + setsid, a double fork, a
// daemonizing child), and ending it kills everything, waits for it to be empty and removes it.
// Limits are written where their controller exists and refused by name where it does not; facts
// are null where unknown. Real cgroup2, real processes; each test makes its own parent group and
// removes it.
#include "daemon/process/run_cgroup.hpp"

#include <signal.h>
#include <sys/stat.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>

#include "daemon/process/child_process.hpp"
#include "process_test_support.hpp"

namespace mh::daemon::test {
namespace {

class RunCgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto base = CgroupParent::own_cgroup_dir();
    if (!base) GTEST_SKIP() << "no cgroup2 mount on this host";
    group_ = unique_marker_value("cgroup");
    auto parent = CgroupParent::open(*base, group_);
    if (!parent) GTEST_SKIP() << "no writable cgroup2 here: " << parent.error();
    parent_.emplace(std::move(*parent));
  }
  void TearDown() override {
    if (parent_) ::rmdir(parent_->dir().c_str());
  }

  // Spawns /bin/sh -c `script` into `group` and reads its stdout until every line of `expect`
  // was seen (in any order: background processes write them).
  std::unique_ptr<ChildProcess> spawn_until_ready(RunCgroup& group, const std::string& script,
                                                  std::set<std::string> expect = {"ready"}) {
    auto plan = make_plan("/bin/sh", {"-c", script}, {{"PATH", "/usr/bin:/bin"}}, scratch_.path());
    auto child = ChildProcess::spawn(strand_, plan, {.join_cgroup_fd = group.procs_fd()});
    if (!child) throw std::runtime_error(child.error());
    io_.run(strand_, read_lines_until(**child, std::move(expect)), 20s);
    return std::move(*child);
  }

  bool wait_empty(RunCgroup& group, std::chrono::milliseconds timeout) {
    return io_.run(strand_, group.wait_empty(strand_, timeout), timeout + 10s);
  }

  IoThreads io_{1};
  IoThreads::Strand strand_ = io_.make_strand();
  TempDir scratch_;
  std::string group_;
  std::optional<CgroupParent> parent_;
};

// env -i + setsid, a double fork to init, and a daemonizing child (setsid, chdir /, its
// descriptors closed): all three are still in the group, and all die with it.
TEST_F(RunCgroupTest, NothingEscapesAndTheKillTakesEverything) {
  auto group = parent_->create("run-1", {});
  ASSERT_TRUE(group) << group.error();
  // Each escapee says its name before it becomes a sleep; by then it is in the group (born there).
  auto child = spawn_until_ready(
      **group,
      "(/usr/bin/env -i /usr/bin/setsid /bin/sh -c 'echo env-i-setsid; exec /bin/sleep 1001' </dev/null 2>&1 &)\n"
      "( ( /bin/sh -c 'echo double-fork; exec /bin/sleep 1002' </dev/null 2>&1 & ) & )\n"
      "/usr/bin/setsid /bin/sh -c 'echo daemon; cd /; exec </dev/null >/dev/null 2>&1; exec sleep 1003' &\n"
      "echo ready\nexec /bin/sleep 1000\n",
      {"env-i-setsid", "double-fork", "daemon", "ready"});
  std::vector<pid_t> members = (*group)->processes();
  ASSERT_GE(members.size(), 4u) << "the root and its three escapees";
  for (pid_t pid : members)
    EXPECT_TRUE((*group)->holds(pid)) << pid;
  EXPECT_FALSE((*group)->holds(::getpid())) << "the test itself is not in the run's group";
  for (pid_t pid : members)
    EXPECT_FALSE(is_dead(pid)) << pid;

  ASSERT_TRUE((*group)->kill());
  EXPECT_TRUE(wait_empty(**group, 10s));
  for (pid_t pid : members)
    EXPECT_TRUE(is_dead(pid)) << pid << " survived the group's kill";
  EXPECT_FALSE((*group)->populated());
  CgroupFacts facts = (*group)->facts();
  ASSERT_TRUE(facts.processes_killed);
  EXPECT_GE(*facts.processes_killed, 4u);
  ASSERT_TRUE(facts.cpu_usec) << "cpu.stat is in every cgroup2 group";
  ASSERT_TRUE((*group)->remove());
  EXPECT_FALSE(std::filesystem::exists(parent_->dir() / "run-1"));
}

TEST_F(RunCgroupTest, GroupsAreMadeWithAnExplicitModeWhateverTheUmask) {
  mode_t old = ::umask(0);
  auto group = parent_->create("run-mode", {});
  ::umask(old);
  ASSERT_TRUE(group) << group.error();
  struct stat info {};
  ASSERT_EQ(::stat((*group)->dir().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0750u);
  ASSERT_EQ(::stat(parent_->dir().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0750u);
}

TEST_F(RunCgroupTest, AGroupStillHoldingProcessesIsNotTakenOver) {
  auto first = parent_->create("run-busy", {});
  ASSERT_TRUE(first) << first.error();
  auto child = spawn_until_ready(**first, "echo ready; exec /bin/sleep 1000");
  auto second = parent_->create("run-busy", {});
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().find("already holds processes"), std::string::npos) << second.error();
  // Found again by name (a restarted daemon ending what is left of a run), and ended.
  auto found = parent_->find("run-busy");
  ASSERT_TRUE(found) << found.error();
  ASSERT_TRUE((*found)->kill());
  EXPECT_TRUE(wait_empty(**found, 10s));
  EXPECT_TRUE(is_dead(child->pid()));
}

// The destructor of a group that was never ended kills what it holds and removes it: no process
// and no directory outlives the object.
TEST_F(RunCgroupTest, DroppingAGroupEndsItsProcessesAndRemovesIt) {
  pid_t pid = -1;
  std::filesystem::path dir;
  std::unique_ptr<ChildProcess> child;
  {
    auto group = parent_->create("run-drop", {});
    ASSERT_TRUE(group) << group.error();
    dir = (*group)->dir();
    child = spawn_until_ready(**group, "echo ready; exec /bin/sleep 1000");
    pid = child->pid();
  }
  EXPECT_TRUE(is_dead(pid));
  EXPECT_FALSE(std::filesystem::exists(dir));
}

// The inotify instances this process holds (its descriptors that are one).
std::size_t inotify_instances() {
  std::size_t n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(it->path(), link_ec) == "anon_inode:inotify") ++n;
  }
  return n;
}

// Waiting for a group to be empty holds no inotify instance. Closing one blocks the closing
// thread until the kernel has reaped its marks (an SRCU grace period, ~10 ms, one reaper for the
// whole host); on a run's io thread that close made N runs that end together end one after the
// other (issue 26 §5; the figures are in bench/RESULTS.md). Looked at while the wait is parked on
// a populated group: the io_context is run here, by hand, until nothing is ready (no clock).
TEST_F(RunCgroupTest, WaitingForEmptyHoldsNoInotifyInstance) {
  auto group = parent_->create("run-wait", {});
  ASSERT_TRUE(group) << group.error();
  auto child = spawn_until_ready(**group, "echo ready; exec /bin/sleep 1000");
  const std::size_t before = inotify_instances();

  boost::asio::io_context io;
  std::optional<bool> emptied;
  boost::asio::co_spawn(io, (*group)->wait_empty(io.get_executor(), 60s), [&](std::exception_ptr e, bool empty) {
    if (e) std::rethrow_exception(e);
    emptied = empty;
  });
  io.poll();  // every step that is ready: the wait is now parked on the populated group
  ASSERT_FALSE(emptied) << "the group still holds the sleep";
  EXPECT_EQ(inotify_instances(), before) << "the wait holds an inotify instance";

  ASSERT_TRUE((*group)->kill());
  while (!emptied && io.run_one_for(20s) > 0) {
  }
  ASSERT_TRUE(emptied) << "the wait did not end once the group was killed";
  EXPECT_TRUE(*emptied);
  EXPECT_TRUE(is_dead(child->pid()));
  EXPECT_EQ(inotify_instances(), before);
}

// Where a controller exists the limit is written; where it does not, the limit is refused with
// the file and the controller named. Either way the test asserts what this host can do.
TEST_F(RunCgroupTest, ALimitIsWrittenOrRefusedByName) {
  struct Case {
    CgroupLimits limits;
    const char* file;
    const char* controller;
    std::string expected;
  };
  std::vector<Case> cases = {
      {CgroupLimits{.memory_max_bytes = 256u << 20}, "memory.max", "memory", std::to_string(256u << 20)},
      {CgroupLimits{.pids_max = 64}, "pids.max", "pids", "64"},
      {CgroupLimits{.cpu_max_percent = 50}, "cpu.max", "cpu", "50000 100000"},
  };
  int n = 0;
  for (const Case& c : cases) {
    std::string name = "run-limit-" + std::to_string(n++);
    auto group = parent_->create(name, c.limits);
    if (parent_->has_controller(c.controller)) {
      ASSERT_TRUE(group) << group.error();
      std::ifstream in((*group)->dir() / c.file);
      std::string value;
      std::getline(in, value);
      EXPECT_EQ(value, c.expected) << c.file;
    } else {
      ASSERT_FALSE(group) << c.file << " was accepted without the " << c.controller << " controller";
      EXPECT_EQ(group.error(), std::string(c.file) + " needs the " + c.controller +
                                   " controller, which is not available in " + parent_->dir().string());
      EXPECT_FALSE(std::filesystem::exists(parent_->dir() / name)) << "a refused run leaves no group";
    }
  }
}

// memory.peak and pids.peak exist only with their controllers: unknown (null) otherwise, never 0.
TEST_F(RunCgroupTest, FactsAreUnknownWhereTheControllerIsAbsent) {
  auto group = parent_->create("run-facts", {});
  ASSERT_TRUE(group) << group.error();
  auto child =
      spawn_until_ready(**group, "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo ready; exec sleep 1000");
  CgroupFacts facts = (*group)->facts();
  ASSERT_TRUE(facts.cpu_usec);
  EXPECT_GT(*facts.cpu_usec, 0u) << "the busy loop ran in the group";
  EXPECT_EQ(facts.memory_peak_bytes.has_value(), parent_->has_controller("memory"));
  EXPECT_EQ(facts.oom_kills.has_value(), parent_->has_controller("memory"));
  EXPECT_EQ(facts.tasks_peak.has_value(), parent_->has_controller("pids"));
  EXPECT_FALSE(facts.processes_killed) << "nothing was killed yet";
  ASSERT_TRUE((*group)->kill());
  EXPECT_TRUE(wait_empty(**group, 10s));
  EXPECT_EQ((*group)->facts().processes_killed, std::optional<std::uint64_t>(1));
}

TEST_F(RunCgroupTest, ARunIdThatIsNotADirectoryNameIsRefused) {
  for (std::string bad : {"", ".", "..", "a/b"}) {
    auto group = parent_->create(bad, {});
    ASSERT_FALSE(group) << bad;
    EXPECT_NE(group.error().find("not a directory name"), std::string::npos) << group.error();
  }
}

TEST(CgroupParent, ABaseThatIsNotCgroup2IsRefusedByName) {
  TempDir dir;
  auto parent = CgroupParent::open(dir.path(), "mh-x");
  ASSERT_FALSE(parent);
  EXPECT_EQ(parent.error(), dir.path().string() + " is not on a cgroup2 mount");
}

TEST(CgroupParent, TheGroupNameIsStablePerStateDirectoryAndDistinctBetweenThem) {
  EXPECT_EQ(CgroupParent::group_for_state_dir("/var/lib/metaharness"),
            CgroupParent::group_for_state_dir("/var/lib/metaharness"));
  EXPECT_NE(CgroupParent::group_for_state_dir("/var/lib/metaharness"),
            CgroupParent::group_for_state_dir("/var/lib/metaharness-2"));
  EXPECT_EQ(CgroupParent::group_for_state_dir("/var/lib/metaharness").size(), 3u + 12u);
}

}  // namespace
}  // namespace mh::daemon::test
