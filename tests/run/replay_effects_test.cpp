// The core's effects while an adoption replays its run's journal (daemon/run/replay_effects.hpp):
// events on record are checked against the record and not written again, the ones past it go to
// the live record, and what the core asks of the vendor and the timers is collected, not done.
#include "daemon/run/replay_effects.hpp"

#include <gtest/gtest.h>

namespace mh::daemon {
namespace {

namespace ev = protocol::ev;
using namespace std::chrono_literals;

// The live effects: records what reaches them.
struct LiveEffects final : RunEffects {
  std::vector<std::string> emitted;
  std::vector<Ticket> answered;
  std::uint64_t emit(proto::EventPayload payload, std::optional<std::string> at) override {
    return emit_cut(std::move(payload), std::move(at), {});
  }
  std::uint64_t emit_cut(proto::EventPayload payload, std::optional<std::string>,
                         std::vector<proto::CutField>) override {
    emitted.emplace_back(proto::event_name(payload));
    return 100 + emitted.size();
  }
  void write_vendor(std::string) override { ADD_FAILURE() << "a replay wrote to the vendor"; }
  void reply_hook(std::uint64_t, std::string) override { ADD_FAILURE() << "a replay answered a hook"; }
  void arm_deadline(const std::string&, Instant) override { ADD_FAILURE() << "a replay armed a deadline"; }
  void cancel_deadline(const std::string&) override { ADD_FAILURE() << "a replay cancelled a deadline"; }
  void close_vendor_stdin() override { ADD_FAILURE() << "a replay closed the vendor's stdin"; }
  void terminate_vendor(std::chrono::milliseconds) override { ADD_FAILURE() << "a replay ended the vendor"; }
  void command_answered(Ticket ticket, const proto::ev::CommandResult&, bool) override { answered.push_back(ticket); }
};

TEST(ReplayEffects, EventsOnRecordAreCheckedNotWrittenAndThoseAfterGoToTheLiveRecord) {
  LiveEffects live;
  ReplayEffects replay(live, {"turn.started", "warning"}, 1000ms);
  EXPECT_EQ(replay.recorded_last(), 2u);
  EXPECT_EQ(replay.emit(ev::TurnStarted{}, std::nullopt), 1u);
  EXPECT_EQ(replay.emit(ev::Warning{"X", "y"}, std::nullopt), 2u);
  EXPECT_TRUE(live.emitted.empty());
  EXPECT_EQ(replay.seq(), 2u);
  // Past the record: written as the live run writes it, with the seq the live record gives.
  EXPECT_EQ(replay.emit(ev::Warning{"RUN_ADOPTED", "z"}, std::nullopt), 101u);
  EXPECT_EQ(live.emitted, std::vector<std::string>{"warning"});
  EXPECT_FALSE(replay.diverged());
  // A command's one result still reaches its sender.
  replay.command_answered(7, ev::CommandResult{}, true);
  EXPECT_EQ(live.answered, std::vector<Ticket>{7});
}

TEST(ReplayEffects, AnEventOtherThanTheRecordsDivergesNamingBothAndTheFirstWhyIsKept) {
  LiveEffects live;
  ReplayEffects replay(live, {"turn.started", "turn.started"}, 1000ms);
  replay.emit(ev::Warning{"X", "y"}, std::nullopt);
  ASSERT_TRUE(replay.diverged());
  EXPECT_EQ(*replay.diverged(), "the replay made warning where the stream holds turn.started (seq 1)");
  replay.emit(ev::Warning{"X", "y"}, std::nullopt);
  replay.diverge("a later why");
  EXPECT_EQ(*replay.diverged(), "the replay made warning where the stream holds turn.started (seq 1)");
  EXPECT_TRUE(live.emitted.empty());
}

TEST(ReplayEffects, WhatTheCoreAsksOfTheVendorAndTheTimersIsCollectedNotDone) {
  LiveEffects live;
  ReplayEffects replay(live, {}, 5000ms);
  const Instant t0 = Instant{} + 1h;
  replay.at(t0);
  replay.write_vendor("one");
  replay.write_vendor("two");
  replay.reply_hook(3, "allow");
  replay.arm_deadline("a", t0 + 10s);
  replay.arm_deadline("b", t0 + 20s);
  replay.cancel_deadline("a");
  replay.arm_wall_budget(t0 + 1min);
  EXPECT_FALSE(replay.stall().has_value());  // never set: the adoption arms nothing
  replay.arm_stall(t0 + 30s);
  replay.arm_stall(t0 + 40s);  // the core's last wish is what the adoption arms
  // A normal end gives the exit grace from the entry it began in; a forced end's shorter grace wins.
  replay.close_vendor_stdin();
  EXPECT_EQ(replay.kill_at(), t0 + 5000ms);
  replay.at(t0 + 1s);
  replay.terminate_vendor(1000ms);
  EXPECT_EQ(replay.kill_at(), t0 + 2s);
  replay.terminate_vendor(10s);  // a later, longer one does not move it
  EXPECT_EQ(replay.kill_at(), t0 + 2s);

  EXPECT_EQ(replay.stdin_bytes(), "one\ntwo\n");
  EXPECT_TRUE(replay.stdin_closed());
  EXPECT_EQ(replay.hook_replies(), (std::map<std::uint64_t, std::string>{{3, "allow"}}));
  EXPECT_EQ(replay.deadlines(), (std::map<std::string, Instant>{{"b", t0 + 20s}}));
  EXPECT_EQ(replay.wall(), t0 + 1min);
  EXPECT_EQ(replay.stall(), std::optional<std::optional<Instant>>(t0 + 40s));
  EXPECT_EQ(replay.now(), t0 + 1s);
}

// Parking (issue 27 §5) in a replayed journal: the park timer is collected for the adoption to arm
// again; a line written once stdin was closed never reached the vendor (the supervisor did not
// accept it, nor keep it in its stdin log), so it is not among the bytes the reconciliation
// compares; and once the parked vendor was started again its stdin is open and the old grace is
// over, so the adoption neither closes the new process's stdin nor kills it.
TEST(ReplayEffects, AParkedVendorStartedAgainHasItsStdinOpenAndNoGraceLeft) {
  LiveEffects live;
  ReplayEffects replay(live, {}, 5000ms);
  const Instant t0 = Instant{} + 1h;
  replay.at(t0);
  EXPECT_FALSE(replay.park());
  replay.arm_park("toolu_1", t0 + 200ms);
  EXPECT_EQ(replay.park(), (std::optional<std::pair<std::string, Instant>>{{"toolu_1", t0 + 200ms}}));
  replay.arm_park("toolu_1", std::nullopt);
  EXPECT_FALSE(replay.park()) << "disarmed: nothing to arm again";
  replay.write_vendor("first process");
  replay.close_vendor_stdin();  // parked: the vendor's stdin closed
  replay.write_vendor("never accepted");
  EXPECT_EQ(replay.stdin_bytes(), "first process\n");
  ASSERT_TRUE(replay.kill_at());
  replay.vendor_started_again();
  EXPECT_FALSE(replay.stdin_closed());
  EXPECT_FALSE(replay.kill_at());
  replay.write_vendor("second process");
  EXPECT_EQ(replay.stdin_bytes(), "first process\nsecond process\n");
  replay.arm_park("toolu_2", t0 + 1s);
  EXPECT_EQ(replay.park()->first, "toolu_2");
}

}  // namespace
}  // namespace mh::daemon
