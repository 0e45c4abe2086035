// Stalls (issue 27 §2): a run whose vendor makes no output while no decision is pending is named
// stalled once per silence (a warning RUN_STALLED with its figures), and halted when on_stall is
// halt; a call waiting on a decision is not a stall. The core keeps the clock; the host only runs
// the timer it is told to (RunEffects::arm_stall).
#include "protocol/run_failure.hpp"
#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

class RunCoreStall : public RunCoreTest {
 protected:
  void open_stalling(proto::OnStall on_stall, proto::DecisionMode mode = proto::DecisionMode::ask,
                     bool keep_open = false) {
    spec.stall_after_ms = 10'000;
    spec.on_stall = on_stall;
    open_and_begin(mode, std::nullopt, keep_open);
  }

  std::vector<proto::ev::Warning> stalls() const {
    std::vector<proto::ev::Warning> out;
    for (const auto& w : all<proto::ev::Warning>())
      if (w.code == "RUN_STALLED") out.push_back(w);
    return out;
  }

  // The timer runs out when the core last set it (and is then no longer armed, as the host's).
  void timer_runs_out() {
    ASSERT_TRUE(fx.stall_at) << "no stall timer is armed";
    now = *fx.stall_at;
    fx.stall_at.reset();
    core->on_stall_timeout(now);
  }
};

constexpr const char* kAllow =
    R"({"format":"metaharness.command/1","id":"d1","command":"tool.decide","call_id":"toolu_1","decision":{"decision":"allow"}})";

TEST_F(RunCoreStall, ASilentVendorIsNamedStalledOnceWithWhatItLastDidAndGoesOnUnderWarn) {
  open_stalling(proto::OnStall::warn);
  const Instant last_output = now;
  ASSERT_TRUE(fx.stall_at);
  EXPECT_EQ(*fx.stall_at, last_output + 10s) << "timed from the vendor's last output";
  timer_runs_out();
  auto named = stalls();
  ASSERT_EQ(named.size(), 1u);
  ASSERT_TRUE(named[0].stall);
  EXPECT_EQ(named[0].stall->silent_ms, 10'000u);
  EXPECT_EQ(named[0].stall->last_event, "turn.started") << "the init record's last event";
  EXPECT_EQ(named[0].stall->stall_after_ms, 10'000u);
  EXPECT_EQ(named[0].stall->on_stall, proto::OnStall::warn);
  EXPECT_NE(named[0].message.find("10 s"), std::string::npos) << named[0].message;
  EXPECT_FALSE(fx.stall_at) << "a silence is named once: nothing is timed until the vendor speaks again";
  EXPECT_EQ(core->phase(), RunCore::Phase::turn) << "warn: the run goes on";
  EXPECT_FALSE(fx.terminated);
  ASSERT_TRUE(core->progress(now + 5s).stalled_ms);
  EXPECT_EQ(*core->progress(now + 5s).stalled_ms, 5'000u);
  EXPECT_EQ(*core->progress(now + 5s).silent_ms, 15'000u);
  // A late timeout (the host's timer raced the disarm) names nothing again.
  core->on_stall_timeout(now + 60s);
  EXPECT_EQ(stalls().size(), 1u);
}

TEST_F(RunCoreStall, HaltStopsTheStalledRunAndItsCloseIsJudgedStalled) {
  open_stalling(proto::OnStall::halt);
  now += 3s;
  feed(lines::tool_use("toolu_9", "Read", json::object{{"file_path", "a.txt"}}));
  // ask mode: the call waits on a decision; decided, the vendor then runs it and goes silent.
  command(
      R"({"format":"metaharness.command/1","id":"d9","command":"tool.decide","call_id":"toolu_9","decision":{"decision":"allow"}})");
  timer_runs_out();
  auto named = stalls();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].stall->on_stall, proto::OnStall::halt);
  EXPECT_EQ(named[0].stall->last_event, "tool.requested");
  EXPECT_EQ(named[0].stall->last_tool, "Read");
  EXPECT_TRUE(fx.terminated) << "halt: the vendor is stopped";
  ASSERT_TRUE(core->ending());
  EXPECT_EQ(core->ending()->forced, proto::CloseReason::steer_halt);
  proto::CloseReason reason = core->wind_up({proto::ProcessKind::signaled, 0, 9}, now);
  EXPECT_EQ(reason, proto::CloseReason::steer_halt);
  proto::FailureWitness witness;
  for (const auto& e : fx.events)
    witness.observe(e.payload);
  auto failure = witness.judge(reason, {proto::ProcessKind::signaled, 0, 9});
  ASSERT_TRUE(failure);
  EXPECT_EQ(failure->category, "stalled");
  EXPECT_TRUE(failure->retryable);
}

TEST_F(RunCoreStall, ACallWaitingOnADecisionIsNotAStallAndTheClockRestartsWhenItIsDecided) {
  open_stalling(proto::OnStall::halt);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  ASSERT_EQ(core->pending_count(), 1u);
  EXPECT_FALSE(fx.stall_at) << "the clock does not run while a decision is pending";
  const Instant asked = now;
  now += 40s;                   // four times stall_after
  core->on_stall_timeout(now);  // even a timeout that raced the disarm names nothing
  EXPECT_TRUE(stalls().empty());
  RunProgress progress = core->progress(now);
  ASSERT_TRUE(progress.waiting_ms);
  EXPECT_EQ(*progress.waiting_ms, 40'000u) << "waiting on a decision since it was asked";
  EXPECT_FALSE(progress.stalled_ms);
  (void)asked;
  command(kAllow);
  EXPECT_FALSE(core->progress(now).waiting_ms);
  ASSERT_TRUE(fx.stall_at);
  EXPECT_EQ(*fx.stall_at, now + 10s) << "timed afresh from the moment the decision was made";
  EXPECT_FALSE(fx.terminated);
}

TEST_F(RunCoreStall, OutputBeforeTheStallPutsItOffAndALaterSilenceIsNamedAgain) {
  open_stalling(proto::OnStall::warn);
  const Instant begun = now;
  const std::size_t arms = fx.stall_arms;
  now += 6s;
  feed(lines::text("still working"));
  EXPECT_EQ(fx.stall_arms, arms) << "a chatty vendor moves no timer per line";
  timer_runs_out();  // at begun + 10 s: the silence is 4 s old
  EXPECT_TRUE(stalls().empty()) << "output 4 s ago is no stall";
  ASSERT_TRUE(fx.stall_at);
  EXPECT_EQ(*fx.stall_at, begun + 16s) << "set again for 10 s after the last output";
  timer_runs_out();
  ASSERT_EQ(stalls().size(), 1u);
  EXPECT_EQ(stalls()[0].stall->last_event, "usage") << "the text record's last event: its usage";
  // Output after the warning: the next silence is timed, and named again.
  now += 2s;
  feed(lines::text("back"));
  ASSERT_TRUE(fx.stall_at);
  EXPECT_EQ(*fx.stall_at, now + 10s);
  EXPECT_FALSE(core->progress(now).stalled_ms) << "it spoke: no longer stalled";
  timer_runs_out();
  EXPECT_EQ(stalls().size(), 2u) << "each silence is named once";
}

TEST_F(RunCoreStall, AnIdleRunAndAnEndingRunAreNotTimedAndZeroMeansNever) {
  open_stalling(proto::OnStall::halt, proto::DecisionMode::ask, /*keep_open=*/true);
  ASSERT_TRUE(fx.stall_at);
  feed(lines::result());
  ASSERT_EQ(core->phase(), RunCore::Phase::idle);
  EXPECT_FALSE(fx.stall_at) << "idle: the run waits on its embedder, not on the vendor";
  command(R"({"format":"metaharness.command/1","id":"h","command":"halt"})");
  EXPECT_FALSE(fx.stall_at);

  RecordingEffects other;
  spec.stall_after_ms = 0;
  const adapters::Adapter* adapter = registry.find("claude");
  adapters::LaunchPlan plan;
  auto never = std::make_unique<RunCore>(spec, *adapter, adapter->open_session(spec, plan), other, options);
  never->start(now);
  EXPECT_EQ(other.stall_arms, 0u) << "stall_after_ms 0: never named stalled";
  never->on_stall_timeout(now + 24h);
  for (const auto& e : other.events)
    if (auto* w = std::get_if<proto::ev::Warning>(&e.payload)) {
      EXPECT_NE(w->code, "RUN_STALLED");
    }
}

// What an adoption's replay relies on: the same inputs give the same events, and the rebuilt core
// wants no timer for a silence it has named already, so a replay never names it twice.
TEST_F(RunCoreStall, TheSameInputsReplayedNameTheStallOnceAndLeaveNoTimerForIt) {
  open_stalling(proto::OnStall::warn);
  const Instant begun = now;
  timer_runs_out();
  ASSERT_EQ(stalls().size(), 1u);
  const std::size_t events = fx.events.size();

  RecordingEffects replayed;
  const adapters::Adapter* adapter = registry.find("claude");
  adapters::LaunchPlan plan;
  plan.transcript_path = "/runs/r-1/vendor-stdout.jsonl";
  plan.cwd = "/scratch/work";
  RunCore rebuilt(spec, *adapter, adapter->open_session(spec, plan), replayed, options);
  rebuilt.start(begun);
  std::uint64_t n = 0;
  for (const std::string& text : {lines::initialize_ok(), lines::init()}) {
    proto::FramedLine line;
    line.text = text;
    line.number = ++n;
    line.length = text.size();
    rebuilt.on_vendor_line(line, begun);
  }
  replayed.stall_at.reset();  // the timer the replay armed ran out: its timeout is the next entry
  rebuilt.on_stall_timeout(now);
  ASSERT_EQ(replayed.events.size(), events);
  std::size_t named = 0;
  for (const auto& e : replayed.events)
    if (auto* w = std::get_if<proto::ev::Warning>(&e.payload); w && w->code == "RUN_STALLED") ++named;
  EXPECT_EQ(named, 1u);
  EXPECT_FALSE(replayed.stall_at) << "no timer is left to name the same silence again";
}

}  // namespace
}  // namespace mh::daemon
