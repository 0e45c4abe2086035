// The run registry on its own (no strand, no socket): admission, what it records, what it
// counts, and what it finds in a state directory at start.
#include "daemon/server/registry.hpp"

#include <gtest/gtest.h>

#include <regex>

#include "daemon/run/run_dir.hpp"
#include "daemon/stream/event_log.hpp"
#include "protocol/reader.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {
namespace {

using daemon::RunRegistry;
const auto kNow = std::chrono::system_clock::now();

daemon::RunRecord record_for(const std::filesystem::path& dir, std::uint32_t uid) {
  daemon::RunRecord r;
  r.dir = dir;
  r.owner_uid = uid;
  r.adapter = "claude";
  r.labels = {{"suite", "nightly"}};
  return r;
}

TEST(ServerRegistry, AdmissionReservesAFreshIdAndRefusesBusyAtMaxActiveUntilOneIsReleased) {
  TempDir dir("registry-busy");
  RunRegistry registry(dir.path(), 2, {});
  auto first = registry.admit(1000, kNow);
  auto second = registry.admit(1000, kNow);
  ASSERT_TRUE(first);
  ASSERT_TRUE(second);
  EXPECT_NE(*first, *second);
  EXPECT_TRUE(std::regex_match(*first, std::regex("[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}"))) << *first;
  EXPECT_EQ(registry.active(), 2u);
  auto third = registry.admit(1000, kNow);
  ASSERT_FALSE(third);
  EXPECT_EQ(third.error().code, "BUSY");
  EXPECT_NE(third.error().reason.find("runs.max_active (2)"), std::string::npos) << third.error().reason;
  // A run that could not be created leaves no trace and frees its place.
  registry.release(*first);
  EXPECT_EQ(registry.active(), 1u);
  EXPECT_FALSE(registry.lookup(*first));
  EXPECT_TRUE(registry.admit(1000, kNow));
}

TEST(ServerRegistry, AStoppingRegistryRefusesShuttingDownAndNamesItInItsStatus) {
  TempDir dir("registry-stop");
  RunRegistry registry(dir.path(), 10, {});
  ASSERT_TRUE(registry.admit(1000, kNow));
  EXPECT_EQ(registry.status_text(), "STATUS=1 active run(s), 0 closed");
  EXPECT_TRUE(registry.stop_accepting().empty()) << "an admitted run not yet created has nothing to stop";
  EXPECT_FALSE(registry.accepting());
  auto refused = registry.admit(1000, kNow);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, "SHUTTING_DOWN");
  EXPECT_EQ(registry.status_text(), "STATUS=1 active run(s), 0 closed; stopping");
}

TEST(ServerRegistry, AnOwnerOverADailyBudgetIsRefusedBudgetExhaustedAndNobodyElseIs) {
  TempDir dir("registry-daily");
  adapters::Budgets daily;
  daily.input_tokens = 100;
  RunRegistry registry(dir.path(), 10, daily);
  auto id = registry.admit(1000, kNow);
  ASSERT_TRUE(id);
  registry.record(*id, record_for(dir.path() / "r", 1000), kNow);
  daemon::Spend some;
  some.input_tokens = 60;
  auto under = registry.spent(*id, 1000, some, kNow);
  EXPECT_TRUE(under.save_soon);
  EXPECT_FALSE(under.crossed);
  EXPECT_TRUE(registry.admit(1000, kNow));
  daemon::Spend more = some;
  more.input_tokens = 150;
  auto over = registry.spent(*id, 1000, more, kNow);
  ASSERT_TRUE(over.crossed);
  EXPECT_NE(over.crossed->find("uid 1000"), std::string::npos) << *over.crossed;
  auto refused = registry.admit(1000, kNow);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, "BUDGET_EXHAUSTED");
  EXPECT_TRUE(registry.admit(1001, kNow)) << "another owner's day is its own";
  // The crossing is kept at once: a daemon killed now still refuses after its restart.
  RunRegistry restarted(dir.path(), 10, daily);
  EXPECT_FALSE(restarted.load_ledger(kNow));
  EXPECT_FALSE(restarted.admit(1000, kNow));
}

TEST(ServerRegistry, ARecordedRunIsFoundListedCountedAndClosedOnce) {
  TempDir dir("registry-record");
  RunRegistry registry(dir.path(), 10, {});
  auto id = registry.admit(1000, kNow);
  auto pending = registry.admit(1000, kNow);
  ASSERT_TRUE(id && pending);
  auto counts = registry.counts();
  EXPECT_EQ(counts.starting, 2u);
  EXPECT_EQ(counts.total, 2u);
  EXPECT_TRUE(registry.snapshot().empty()) << "admitted runs have no directory yet";
  EXPECT_TRUE(registry.lookup(*id)->dir.empty());

  registry.record(*id, record_for(dir.path() / *id, 1000), kNow);
  auto found = registry.lookup(*id);
  ASSERT_TRUE(found);
  EXPECT_EQ(found->owner_uid, 1000u);
  EXPECT_EQ(found->adapter, "claude");
  EXPECT_EQ(found->labels.at("suite"), "nightly");
  ASSERT_EQ(registry.snapshot().size(), 1u);
  EXPECT_EQ(registry.snapshot()[0].id, *id);

  daemon::RunOutcome outcome;
  outcome.reason = protocol::CloseReason::completed;
  outcome.events = 12;
  outcome.turns = 1;
  EXPECT_TRUE(registry.closed(*id, outcome));
  EXPECT_FALSE(registry.closed(*id, outcome)) << "a close is counted once";
  EXPECT_FALSE(registry.closed("no-such-run", outcome));
  EXPECT_EQ(registry.active(), 1u);
  auto closed = registry.lookup(*id);
  EXPECT_TRUE(closed->closed);
  EXPECT_EQ(closed->close_reason, protocol::CloseReason::completed);
  EXPECT_EQ(closed->last_seq, 12u);
  EXPECT_EQ(closed->turns, 1u);
  counts = registry.counts();
  EXPECT_EQ(counts.starting, 1u);
  EXPECT_EQ(counts.total, 2u);
  EXPECT_EQ(registry.status_text(), "STATUS=1 active run(s), 1 closed");
}

TEST(ServerRegistry, AtStartAClosedRunIsReadFromItsTailAndACutOffRunIsClosedWithAWarning) {
  TempDir dir("registry-recover");
  auto runs = daemon::RunDir::runs_of(dir.path());
  std::filesystem::create_directories(runs / "done");
  std::filesystem::create_directories(runs / "cut");
  std::filesystem::create_directories(runs / "empty");  // no stream: not a run
  {
    auto done = daemon::EventLog::create(daemon::RunDir(runs / "done").events(), "done");
    ASSERT_TRUE(done);
    ASSERT_TRUE(done->append(protocol::ev::Warning{"X", "one"}));
    ASSERT_TRUE(done->close(protocol::CloseReason::completed, protocol::ProcessTermination{}));
    auto cut = daemon::EventLog::create(daemon::RunDir(runs / "cut").events(), "cut");
    ASSERT_TRUE(cut);
    ASSERT_TRUE(cut->append(protocol::ev::Warning{"X", "one"}));
  }  // the cut run's writer goes without stream.closed, as a killed daemon's would
  daemon::RunMeta meta;
  meta.owner_uid = 4242;
  meta.adapter = "codex";
  meta.created_unix = 1700000000;
  ASSERT_FALSE(daemon::RunDir(runs / "done").write_meta(meta));

  auto done_marker = RunRegistry::closed_marker(daemon::RunDir(runs / "done").events());
  ASSERT_TRUE(done_marker);
  EXPECT_EQ(done_marker->reason, protocol::CloseReason::completed);
  EXPECT_EQ(done_marker->seq, 2u);
  EXPECT_FALSE(done_marker->failure);
  EXPECT_FALSE(RunRegistry::closed_marker(daemon::RunDir(runs / "cut").events()));

  RunRegistry registry(dir.path(), 10, {});
  registry.recover();
  EXPECT_EQ(registry.size(), 2u);
  EXPECT_EQ(registry.active(), 0u);
  auto done = registry.lookup("done");
  ASSERT_TRUE(done);
  EXPECT_TRUE(done->closed);
  EXPECT_EQ(done->close_reason, protocol::CloseReason::completed);
  EXPECT_EQ(done->last_seq, 2u);
  EXPECT_EQ(done->owner_uid, 4242u) << "run.json is read when the run is looked at";
  EXPECT_EQ(done->adapter, "codex");
  EXPECT_FALSE(done->turns) << "a run found on disk has no turn count";
  auto cut = registry.lookup("cut");
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->close_reason, protocol::CloseReason::error);
  auto lines = read_lines(daemon::RunDir(runs / "cut").events());
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[1].find("RECOVERED_AFTER_RESTART"), std::string::npos) << lines[1];
  auto cut_marker = RunRegistry::closed_marker(daemon::RunDir(runs / "cut").events());
  ASSERT_TRUE(cut_marker);
  EXPECT_EQ(cut_marker->reason, protocol::CloseReason::error);
  EXPECT_EQ(cut_marker->seq, 3u);
  EXPECT_EQ(cut->last_seq, 3u);
  ASSERT_TRUE(cut->failure) << "the recovery's close says why";
  EXPECT_EQ(cut->failure->category, "daemon");
  EXPECT_TRUE(cut->failure->retryable);
  EXPECT_FALSE(registry.lookup("empty"));
}

}  // namespace
}  // namespace mh::test
