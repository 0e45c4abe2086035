// RunTimers (daemon/run/run_timers.hpp): a timer that runs out hands its timeout to the shell,
// never after its owner is gone, never once cancelled; the grace is armed once in a run's life.
// Timers are set in the past, so each runs out at the first turn of the loop: no clock is waited on.
#include "daemon/run/run_timers.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace mh::daemon {
namespace {

class RunTimersTest : public ::testing::Test {
 protected:
  RunTimers make() {
    return RunTimers(
        boost::asio::make_strand(io), [this](journal::Input timeout) { timeouts.push_back(std::move(timeout)); },
        [this] { ++graces; });
  }

  boost::asio::io_context io;
  std::vector<journal::Input> timeouts;
  int graces = 0;
  std::shared_ptr<int> owner = std::make_shared<int>(0);
  const Instant past = std::chrono::steady_clock::now() - std::chrono::seconds(1);
};

TEST_F(RunTimersTest, ADeadlineThatRunsOutIsHandedBackAndACancelledOneIsNot) {
  RunTimers timers = make();
  timers.bind(owner);
  timers.arm_deadline("call-1", past);
  timers.arm_deadline("call-2", past);
  timers.cancel_deadline("call-2");
  timers.arm_wall_budget(past);
  io.run();
  ASSERT_EQ(timeouts.size(), 2u);
  std::vector<std::string> deadlines;
  bool wall = false;
  for (const auto& t : timeouts) {
    if (const auto* d = std::get_if<journal::Deadline>(&t)) deadlines.push_back(d->call_id);
    if (std::holds_alternative<journal::WallBudget>(t)) wall = true;
  }
  EXPECT_EQ(deadlines, std::vector<std::string>{"call-1"});
  EXPECT_TRUE(wall);
}

TEST_F(RunTimersTest, NothingRunsOutOnceItsOwnerIsGone) {
  RunTimers timers = make();
  timers.bind(owner);
  timers.arm_deadline("call-1", past);
  timers.arm_idle(std::chrono::milliseconds(0));
  timers.arm_grace_at(past);
  owner.reset();
  io.run();
  EXPECT_TRUE(timeouts.empty());
  EXPECT_EQ(graces, 0);
}

TEST_F(RunTimersTest, TheGraceIsArmedOnceAndCancelAllStopsEveryTimer) {
  {
    RunTimers timers = make();
    timers.bind(owner);
    timers.arm_grace_at(past);
    timers.arm_grace_at(past);  // a halt after a close: the first grace stands, once
    io.run();
    EXPECT_EQ(graces, 1);
    io.restart();
    timers.arm_grace_at(past);  // armed once in a run's life: never again
    io.run();
    EXPECT_EQ(graces, 1);
  }
  io.restart();
  RunTimers timers = make();
  timers.bind(owner);
  timers.arm_deadline("call-1", past);
  timers.arm_idle(std::chrono::milliseconds(0));
  timers.arm_wall_budget(past);
  timers.arm_grace_at(past);
  timers.cancel_all();
  io.run();
  EXPECT_TRUE(timeouts.empty());
  EXPECT_EQ(graces, 1) << "the second object's grace was cancelled";
}

// Issue 27 §2: the stall timer hands back a StallTimeout; a later arm replaces it, nullopt disarms
// it, and once the run closed (cancel_all) no arm takes effect.
TEST_F(RunTimersTest, TheStallTimerRunsOutOnceAsLastSetAndNeverAfterTheClose) {
  RunTimers timers = make();
  timers.bind(owner);
  timers.arm_stall(past);
  timers.arm_stall(past + std::chrono::milliseconds(1));  // replaces the first
  io.run();
  ASSERT_EQ(timeouts.size(), 1u);
  EXPECT_TRUE(std::holds_alternative<journal::StallTimeout>(timeouts[0]));
  io.restart();
  timers.arm_stall(past);
  timers.arm_stall(std::nullopt);
  io.run();
  EXPECT_EQ(timeouts.size(), 1u) << "disarmed";
  io.restart();
  timers.cancel_all();
  timers.arm_stall(past);
  io.run();
  EXPECT_EQ(timeouts.size(), 1u) << "the run closed: the stall timer is not armed again";
}

}  // namespace
}  // namespace mh::daemon
