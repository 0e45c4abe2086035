// One freeze pass of a run kill, stepped on a clock the test holds: a pass waits for the frozen
// processes to stop before it scans again, spends its round budget on scans only, and waits a
// process that is merely slow to stop longer than one stuck in an uninterruptible wait.
#include "daemon/process/freeze_pass.hpp"

#include <gtest/gtest.h>

#include <deque>
#include <functional>

namespace mh::daemon::test {
namespace {

using namespace std::chrono_literals;
using Clock = FreezePass::Clock;
using Next = FreezePass::Next;

// The run as the pass sees it: what each scan finds new, and how the frozen ones stand.
class FakeRun final : public FreezeTarget {
 public:
  Settling settling() override {
    ++looks;
    return standing;
  }
  std::size_t freeze_round() override {
    ++scans;
    if (newcomers.empty()) return 0;
    std::size_t found = newcomers.front();
    newcomers.pop_front();
    return found;
  }
  int rounds() const override { return scans; }

  std::deque<std::size_t> newcomers;  // per scan; none once empty
  Settling standing;
  int scans = 0;
  int looks = 0;
};

class FreezePassTest : public ::testing::Test {
 protected:
  // Steps the pass every `tick` until it is over; returns when (time since start).
  Clock::duration run_to_end(Clock::duration tick, const std::function<void(Clock::duration)>& before_step = {}) {
    for (Clock::duration elapsed{}; elapsed < 60s; elapsed += tick) {
      if (before_step) before_step(elapsed);
      if (pass.step(run, start + elapsed, deadline) == Next::over) return elapsed;
    }
    ADD_FAILURE() << "the pass never ended";
    return 60s;
  }

  FakeRun run;
  FreezePass pass;
  Clock::time_point start = Clock::now();
  Clock::time_point deadline = start + 10s;
};

TEST_F(FreezePassTest, AnEmptyRunIsAFixedPointAfterOneScan) {
  EXPECT_EQ(pass.step(run, start, deadline), Next::over);
  EXPECT_TRUE(pass.fixed_point());
  EXPECT_EQ(run.scans, 1);
}

// The CI failure this pass was written for: processes that took a while to stop on a loaded host
// used up the round budget on scans made while they were stopping, and a kill that did freeze the
// whole run reported no fixed point. Now the wait between two scans costs no round.
TEST_F(FreezePassTest, ProcessesSlowToStopAreWaitedForWithoutSpendingRounds) {
  run.newcomers = {5};
  auto ended = run_to_end(1ms, [&](Clock::duration elapsed) {
    // Frozen by the first scan; they show as stopped only after 800 ms (a loaded host).
    run.standing = run.scans == 0 || elapsed >= 800ms ? Settling{} : Settling{.runnable = 5};
  });
  EXPECT_TRUE(pass.fixed_point());
  EXPECT_EQ(run.scans, 2) << "one scan that froze them, one that proved nothing new appeared";
  EXPECT_GE(ended, 800ms);
  EXPECT_GT(run.looks, kMaxFreezeRounds) << "the waiting looked many times, none of them a round";
}

TEST_F(FreezePassTest, AScanWhileSomeAreStillStoppingProvesNothing) {
  // Nothing new is ever found, but one frozen process never stops: the pass gives up on the fixed
  // point once its patience is out, after one last scan for what that process might have started.
  run.newcomers = {1};
  auto ended =
      run_to_end(1ms, [&](Clock::duration) { run.standing = run.scans == 0 ? Settling{} : Settling{.runnable = 1}; });
  EXPECT_FALSE(pass.fixed_point());
  EXPECT_EQ(run.scans, 2);
  EXPECT_GE(ended, kRunnablePatience);
  EXPECT_LT(ended, kRunnablePatience + 10ms);
}

TEST_F(FreezePassTest, AProcessInAnUninterruptibleWaitIsWaitedForOnlyTheShortPatience) {
  run.newcomers = {2};
  auto ended = run_to_end(1ms, [&](Clock::duration) {
    run.standing = run.scans == 0 ? Settling{} : Settling{.runnable = 1, .uninterruptible = 1};
  });
  EXPECT_FALSE(pass.fixed_point());
  EXPECT_GE(ended, kStuckPatience);
  EXPECT_LT(ended, kStuckPatience + 10ms) << "not the runnable patience: a 'D' process may never stop";
}

TEST_F(FreezePassTest, NewcomersFoundAfterThePatienceStartItAgain) {
  // A stuck process outlasts the short patience, but the scan then finds two newcomers (its
  // children, say): they are frozen, and the next wait has its full patience again.
  run.newcomers = {1, 2};
  auto ended = run_to_end(1ms, [&](Clock::duration elapsed) {
    if (run.scans == 0) run.standing = Settling{};
    if (run.scans == 1) run.standing = Settling{.uninterruptible = 1};
    // After the second scan: the newcomers take a further 100 ms to stop, the stuck one is gone.
    if (run.scans >= 2) run.standing = elapsed < kStuckPatience + 100ms ? Settling{.runnable = 2} : Settling{};
  });
  EXPECT_TRUE(pass.fixed_point());
  EXPECT_EQ(run.scans, 3);
  EXPECT_GE(ended, kStuckPatience + 100ms);
}

TEST_F(FreezePassTest, TheRoundBudgetBoundsAForkingRun) {
  // Every scan finds something new (a run that keeps forking): the budget ends the pass.
  run.newcomers.assign(1000, 1);
  run_to_end(1ms);
  EXPECT_FALSE(pass.fixed_point());
  EXPECT_EQ(run.scans, kMaxFreezeRounds);
}

TEST_F(FreezePassTest, TheDeadlineEndsTheWait) {
  deadline = start + 500ms;
  run.newcomers = {1};
  auto ended =
      run_to_end(1ms, [&](Clock::duration) { run.standing = run.scans == 0 ? Settling{} : Settling{.runnable = 1}; });
  EXPECT_FALSE(pass.fixed_point());
  EXPECT_EQ(ended, 500ms);
}

}  // namespace
}  // namespace mh::daemon::test
