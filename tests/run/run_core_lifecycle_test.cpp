// The run's lifecycle as the core owns it: one phase (created, launching, starting, turn, idle,
// ending, vendor_ended, closed), and every command answered exactly once through
// command_answered, recorded only once the host says its result is durable.
#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

// The core's own fixture, under its own suite name (each test file's fixture is its own class).
class RunCoreLifecycle : public RunCoreTest {};

constexpr const char* kHalt = R"({"format":"metaharness.command/1","id":"h","command":"halt"})";
constexpr const char* kInject = R"({"format":"metaharness.command/1","id":"m","command":"message.inject","text":"x"})";

TEST_F(RunCoreLifecycle, CommandsBeforeStartWaitInTheCoreAndAreHandledInOrderAtStart) {
  start_now = false;
  open(proto::DecisionMode::ask, std::nullopt, /*keep_open=*/true);
  EXPECT_EQ(core->phase(), RunCore::Phase::created);
  EXPECT_EQ(core->public_phase(), RunPhase::starting);
  core->launch();
  EXPECT_EQ(core->phase(), RunCore::Phase::launching);
  command(kInject, std::nullopt, 7);
  command("not json", std::nullopt, 8);
  EXPECT_TRUE(fx.events.empty()) << "nothing is recorded before the run starts";
  EXPECT_TRUE(fx.answered.empty());
  core->start(now);
  EXPECT_EQ(core->phase(), RunCore::Phase::starting);
  ASSERT_EQ(all<proto::ev::CommandResult>().size(), 2u);
  EXPECT_EQ(all<proto::ev::CommandResult>()[0].id, "m");
  EXPECT_EQ(result_for("m").outcome.applies_at, "the next turn boundary");
  EXPECT_EQ(all<proto::ev::CommandResult>()[1].id, "-");
  EXPECT_TRUE(fx.answered.empty()) << "not answered before the host says the results are durable";
  core->on_recorded(fx.events.size());
  ASSERT_EQ(answers_for(7).size(), 1u);
  EXPECT_TRUE(answers_for(7)[0].recorded);
  ASSERT_EQ(answers_for(8).size(), 1u);
  EXPECT_EQ(answers_for(8)[0].result.outcome.refusal->code, proto::RefusalCode::MALFORMED);
}

TEST_F(RunCoreLifecycle, ARunThatNeverStartsAnswersWhatWaitedTooLateUnrecorded) {
  start_now = false;
  open(proto::DecisionMode::ask);
  core->launch();
  command(kHalt, std::nullopt, 3);
  core->on_stream_closed();
  EXPECT_EQ(core->phase(), RunCore::Phase::closed);
  auto answers = answers_for(3);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_FALSE(answers[0].recorded);
  EXPECT_EQ(answers[0].result.id, "h");
  EXPECT_EQ(answers[0].result.outcome.refusal->code, proto::RefusalCode::TOO_LATE);
  EXPECT_TRUE(fx.events.empty());
}

// Issue 24: a daemon's shutdown while the run was still launching was dropped (nothing ran yet),
// so the run went on once it started and outlived the stop. It applies at the start.
TEST_F(RunCoreLifecycle, AShutdownBeforeTheStartEndsTheRunAsSoonAsItStarts) {
  start_now = false;
  open(proto::DecisionMode::ask);
  core->launch();
  core->on_shutdown(now);
  EXPECT_EQ(core->phase(), RunCore::Phase::launching) << "nothing runs yet";
  EXPECT_FALSE(fx.terminated);
  core->start(now);
  EXPECT_TRUE(fx.terminated) << "the vendor is told to go as soon as it is there";
  EXPECT_EQ(core->phase(), RunCore::Phase::ending);
  ASSERT_TRUE(core->ending());
  EXPECT_EQ(core->ending()->forced, proto::CloseReason::killed);
}

TEST_F(RunCoreLifecycle, ACommandAfterTheCloseIsAnsweredOnceUnrecordedAndNothingIsEmitted) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::result());
  core->wind_up({proto::ProcessKind::exited, 0, 0}, now);
  ASSERT_EQ(core->phase(), RunCore::Phase::closed);
  std::size_t events = fx.events.size();
  command(kHalt, std::nullopt, 5);
  EXPECT_EQ(fx.events.size(), events);
  auto answers = answers_for(5);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_FALSE(answers[0].recorded);
  EXPECT_EQ(answers[0].result.outcome.refusal->code, proto::RefusalCode::TOO_LATE);
}

TEST_F(RunCoreLifecycle, AResultIsRecordedOnlyUpToTheDurableSeqAndALostOneIsNot) {
  open_and_begin(proto::DecisionMode::ask, std::nullopt, /*keep_open=*/true);
  feed(lines::result());
  ASSERT_EQ(core->phase(), RunCore::Phase::idle);
  command(R"({"format":"metaharness.command/1","id":"i1","command":"interrupt"})", std::nullopt, 1);
  std::uint64_t before = fx.events.size() - 1;  // the result's write was cut back: durable only up to here
  core->on_recorded(before);
  ASSERT_EQ(answers_for(1).size(), 1u);
  EXPECT_FALSE(answers_for(1)[0].recorded);
  fx.refuse_emit = true;  // the stream cannot take the next result at all
  command(R"({"format":"metaharness.command/1","id":"i2","command":"interrupt"})", std::nullopt, 2);
  core->on_recorded(fx.events.size());
  ASSERT_EQ(answers_for(2).size(), 1u);
  EXPECT_FALSE(answers_for(2)[0].recorded) << "a result the stream never took is not recorded";
  EXPECT_EQ(answers_for(2)[0].result.outcome.refusal->code, proto::RefusalCode::TOO_LATE);
  core->on_recorded(fx.events.size());
  EXPECT_EQ(fx.answered.size(), 2u) << "each ticket is answered once";
}

TEST_F(RunCoreLifecycle, AVendorControlNeverAnsweredIsAnsweredTooLateAtWindUpOnce) {
  open_and_begin(proto::DecisionMode::ask);
  command(R"({"format":"metaharness.command/1","id":"i1","command":"interrupt"})", std::nullopt, 9);
  core->on_recorded(fx.events.size());
  EXPECT_TRUE(answers_for(9).empty()) << "the vendor has not acknowledged the interrupt yet";
  core->on_vendor_end(now);
  EXPECT_EQ(core->phase(), RunCore::Phase::vendor_ended);
  EXPECT_EQ(core->public_phase(), RunPhase::ending);
  core->wind_up({proto::ProcessKind::signaled, 0, 9}, now);
  core->on_recorded(fx.events.size());
  core->on_stream_closed();
  auto answers = answers_for(9);
  ASSERT_EQ(answers.size(), 1u);
  EXPECT_TRUE(answers[0].recorded);
  EXPECT_EQ(answers[0].result.outcome.refusal->code, proto::RefusalCode::TOO_LATE);
}

TEST_F(RunCoreLifecycle, TheEndIsPartOfThePhaseNormalOrForcedWithItsReason) {
  open_and_begin(proto::DecisionMode::ask);
  EXPECT_FALSE(core->ending());
  feed(lines::result());
  EXPECT_EQ(core->phase(), RunCore::Phase::ending);
  ASSERT_TRUE(core->ending());
  EXPECT_FALSE(core->ending()->forced) << "a normal end";
  command(kHalt);
  ASSERT_TRUE(core->ending());
  EXPECT_EQ(core->ending()->forced, proto::CloseReason::steer_halt) << "a halt outranks a normal end";
  core->on_vendor_end(now);
  EXPECT_EQ(core->phase(), RunCore::Phase::vendor_ended);
  EXPECT_EQ(core->ending()->forced, proto::CloseReason::steer_halt) << "kept past the vendor's end";
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 0, 0}, now), proto::CloseReason::steer_halt);
}

TEST_F(RunCoreLifecycle, AfterTheVendorsOutputEndedNoTurnCanBeSteeredOrStarted) {
  open_and_begin(proto::DecisionMode::ask, std::nullopt, /*keep_open=*/true);
  feed(lines::result());
  ASSERT_EQ(core->phase(), RunCore::Phase::idle);
  core->on_vendor_end(now);
  std::size_t writes = fx.vendor.size();
  command(kInject);
  EXPECT_EQ(result_for("m").outcome.refusal->code, proto::RefusalCode::TOO_LATE);
  EXPECT_EQ(fx.vendor.size(), writes) << "nothing is written to a vendor whose output has ended";
}

}  // namespace
}  // namespace mh::daemon
