// The submit ledger (daemon/server/submit_ledger.hpp): one run per (uid, request_id), kept in a
// file that survives the daemon and a crash in the middle of a write.
#include "daemon/server/submit_ledger.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <fstream>

#include "tests/support/cli_process.hpp"

namespace mh::daemon {
namespace {

using namespace std::chrono_literals;
using Claim = SubmitLedger::Claim;
const auto t0 = SubmitLedger::SystemClock::time_point(std::chrono::hours(24 * 365 * 56));

TEST(RequestIdProblem, AcceptsOneTo128CharactersOfTheAlphabetAndNamesWhatIsWrong) {
  EXPECT_EQ(request_id_problem("a"), "");
  EXPECT_EQ(request_id_problem("AZaz09._:-"), "");
  EXPECT_EQ(request_id_problem(std::string(128, 'x')), "");
  EXPECT_NE(request_id_problem(std::string(129, 'x')).find("1-128 characters (it has 129)"), std::string::npos);
  EXPECT_NE(request_id_problem("").find("1-128"), std::string::npos);
  for (std::string bad : {"a b", "a/b", "a\nb", "é", "a\"b"})
    EXPECT_NE(request_id_problem(bad).find("may hold only"), std::string::npos) << bad;
}

TEST(SubmitLedger, AClaimIsFreshThenInFlightThenADuplicateOrAConflictByItsSpec) {
  SubmitLedger ledger;
  EXPECT_EQ(ledger.claim(1000, "r", "spec-a", t0).claim, Claim::fresh);
  EXPECT_EQ(ledger.claim(1000, "r", "spec-a", t0).claim, Claim::in_flight);
  EXPECT_EQ(ledger.claim(1001, "r", "spec-a", t0).claim, Claim::fresh) << "another uid's id is its own";
  EXPECT_EQ(ledger.commit(1000, "r", "run-1", t0), std::nullopt);
  auto duplicate = ledger.claim(1000, "r", "spec-a", t0);
  EXPECT_EQ(duplicate.claim, Claim::duplicate);
  EXPECT_EQ(duplicate.run_id, "run-1");
  auto conflict = ledger.claim(1000, "r", "spec-b", t0);
  EXPECT_EQ(conflict.claim, Claim::conflict);
  EXPECT_EQ(conflict.run_id, "run-1");
}

TEST(SubmitLedger, AReleasedClaimIsFreeAgainAndItsWaitersAreToldOnce) {
  SubmitLedger ledger;
  ASSERT_EQ(ledger.claim(7, "r", "d", t0).claim, Claim::fresh);
  int told = 0;
  ledger.when_settled(7, "r", [&] { ++told; });
  ledger.when_settled(7, "r", [&] { ++told; });
  EXPECT_EQ(told, 0) << "waiting while the claim is in flight";
  ledger.release(7, "r");
  EXPECT_EQ(told, 2);
  ledger.release(7, "r");
  EXPECT_EQ(told, 2) << "told once";
  EXPECT_EQ(ledger.claim(7, "r", "d", t0).claim, Claim::fresh);
  ledger.when_settled(7, "other", [&] { ++told; });
  EXPECT_EQ(told, 3) << "an id nobody holds is settled at once";
  ASSERT_EQ(ledger.commit(7, "r", "run", t0), std::nullopt);
  ledger.release(7, "r");
  EXPECT_EQ(ledger.claim(7, "r", "d", t0).claim, Claim::duplicate) << "a release after the commit changes nothing";
}

TEST(SubmitLedger, WhatIsCommittedSurvivesAReopenAndATornLastLineIsDropped) {
  test::TempDir dir("submit-ledger-reopen");
  auto file = dir.path() / "submits.jsonl";
  {
    SubmitLedger ledger;
    ASSERT_EQ(SubmitLedger::open(ledger, file, 3600s, t0), std::nullopt);
    ASSERT_EQ(ledger.claim(5, "kept", "d", t0).claim, Claim::fresh);
    ASSERT_EQ(ledger.commit(5, "kept", "run-kept", t0), std::nullopt);
    ASSERT_EQ(ledger.claim(5, "never-committed", "d", t0).claim, Claim::fresh);
  }
  EXPECT_EQ(
      (std::filesystem::status(file).permissions() & std::filesystem::perms::all),
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write | std::filesystem::perms::group_read);
  std::ofstream(file, std::ios::app) << R"({"uid":5,"request_id":"torn","spec_sha256":"d","run_i)";
  SubmitLedger reopened;
  ASSERT_EQ(SubmitLedger::open(reopened, file, 3600s, t0 + 10s), std::nullopt);
  auto kept = reopened.claim(5, "kept", "d", t0 + 10s);
  EXPECT_EQ(kept.claim, Claim::duplicate);
  EXPECT_EQ(kept.run_id, "run-kept");
  EXPECT_EQ(reopened.claim(5, "never-committed", "d", t0 + 10s).claim, Claim::fresh);
  EXPECT_EQ(reopened.claim(5, "torn", "d", t0 + 10s).claim, Claim::fresh);
  // The torn line is gone from the file, so the next line is whole.
  ASSERT_EQ(reopened.commit(5, "torn", "run-torn", t0 + 10s), std::nullopt);
  SubmitLedger third;
  ASSERT_EQ(SubmitLedger::open(third, file, 3600s, t0 + 20s), std::nullopt);
  EXPECT_EQ(third.claim(5, "torn", "d", t0 + 20s).run_id, "run-torn");
  EXPECT_EQ(test::read_lines(file).size(), 2u);
}

TEST(SubmitLedger, AnIdOlderThanTheRetentionIsForgottenInMemoryAndInTheFile) {
  test::TempDir dir("submit-ledger-retention");
  auto file = dir.path() / "submits.jsonl";
  SubmitLedger ledger;
  ASSERT_EQ(SubmitLedger::open(ledger, file, 60s, t0), std::nullopt);
  ASSERT_EQ(ledger.claim(1, "old", "d", t0).claim, Claim::fresh);
  ASSERT_EQ(ledger.commit(1, "old", "run-old", t0), std::nullopt);
  EXPECT_EQ(ledger.claim(1, "old", "d", t0 + 60s).claim, Claim::duplicate) << "kept for the whole retention";
  EXPECT_EQ(ledger.claim(1, "old", "d", t0 + 61s).claim, Claim::fresh) << "then forgotten";
  ledger.release(1, "old");
  SubmitLedger reopened;
  ASSERT_EQ(SubmitLedger::open(reopened, file, 60s, t0 + 61s), std::nullopt);
  EXPECT_EQ(reopened.size(), 0u);
  EXPECT_TRUE(test::read_lines(file).empty()) << "the expired line is rewritten away";
}

TEST(SubmitLedger, ALineThatCannotBeWrittenRefusesTheCommitAndFreesTheId) {
  test::TempDir dir("submit-ledger-unwritable");
  auto file = dir.path() / "submits.jsonl";
  SubmitLedger ledger;
  ASSERT_EQ(SubmitLedger::open(ledger, file, 60s, t0), std::nullopt);
  ASSERT_EQ(ledger.claim(2, "kept", "d", t0).claim, Claim::fresh);
  ASSERT_EQ(ledger.commit(2, "kept", "run-kept", t0), std::nullopt);
  const auto size = std::filesystem::file_size(file);
  ASSERT_EQ(ledger.claim(2, "r", "d", t0).claim, Claim::fresh);
  std::optional<std::string> refused;
  {
    // No byte more may be written to any file of this process (EFBIG), as a full disk would refuse.
    struct rlimit before {};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &before), 0);
    auto old_handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit capped = before;
    capped.rlim_cur = size + 10;  // room for a part of the line, not all of it
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &capped), 0);
    refused = ledger.commit(2, "r", "run-r", t0);
    ::setrlimit(RLIMIT_FSIZE, &before);
    ::signal(SIGXFSZ, old_handler);
  }
  ASSERT_TRUE(refused.has_value()) << "a line that was not kept is not promised";
  EXPECT_NE(refused->find("cannot write"), std::string::npos) << *refused;
  EXPECT_EQ(std::filesystem::file_size(file), size) << "the part that was written is cut off again";
  EXPECT_EQ(ledger.claim(2, "r", "d", t0).claim, Claim::fresh) << "the id is free for the retry";
  ASSERT_EQ(ledger.commit(2, "r", "run-r", t0), std::nullopt) << "and kept once the disk has room";
  SubmitLedger reopened;
  ASSERT_EQ(SubmitLedger::open(reopened, file, 60s, t0), std::nullopt);
  EXPECT_EQ(reopened.claim(2, "r", "d", t0).run_id, "run-r");
  EXPECT_EQ(reopened.claim(2, "kept", "d", t0).run_id, "run-kept");
}

}  // namespace
}  // namespace mh::daemon
