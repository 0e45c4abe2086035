// The daily ledger's reservations (issue 25): a model request reserves its worst case against its
// owner's day before it is forwarded, and settles it when its answer ended; runs of one uid
// reserving together, from many threads, never hold more than the budget.
#include "daemon/server/daily_spend.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace mh::daemon {
namespace {

constexpr std::int64_t kDay = 20000;

Spend costing(double usd) {
  Spend s;
  s.usd = usd;
  return s;
}

std::filesystem::path ledger_file() {
  return std::filesystem::temp_directory_path() / ("mh-daily-spend-test-" + std::to_string(::getpid()) + ".json");
}

adapters::Budgets usd_budget(double usd) {
  adapters::Budgets b;
  b.usd = usd;
  return b;
}

TEST(DailyReservations, TenRunsAskingTogetherForABudgetOfThreeGetExactlyThree) {
  DailySpendLedger ledger(ledger_file(), usd_budget(3.0));
  std::atomic<int> granted{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> runs;
  for (int i = 0; i < 10; ++i)
    runs.emplace_back([&, i] {
      while (!go.load())
        std::this_thread::yield();
      if (ledger.reserve(1000, "run-" + std::to_string(i), kDay, costing(1.0))) ++granted;
    });
  go = true;
  for (auto& t : runs)
    t.join();
  EXPECT_EQ(granted.load(), 3);
  auto owners = ledger.owners(kDay);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0].uid, 1000u);
  EXPECT_EQ(owners[0].reservations, 3u);
  EXPECT_DOUBLE_EQ(owners[0].reserved_usd, 3.0);
}

TEST(DailyReservations, ARefusalSaysWhatIsSpentReservedAndAsked) {
  DailySpendLedger ledger(ledger_file(), usd_budget(1.0));
  ASSERT_TRUE(ledger.reserve(7, "a", kDay, costing(0.75)));
  auto refused = ledger.reserve(7, "b", kDay, costing(0.5));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("daily usd budget of $1.0000"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("$0.7500 reserved today by uid 7"), std::string::npos) << refused.error();
  EXPECT_TRUE(ledger.reserve(8, "c", kDay, costing(0.5))) << "another owner's day is its own";
}

TEST(DailyReservations, SettlingLetsTheWorstCaseGoAndHoldsTheActualUntilTheRunReportsIt) {
  DailySpendLedger ledger(ledger_file(), usd_budget(1.0));
  auto r = ledger.reserve(7, "a", kDay, costing(0.9));
  ASSERT_TRUE(r);
  EXPECT_FALSE(ledger.reserve(7, "b", kDay, costing(0.2)));
  ledger.settle(*r, costing(0.3));  // the answer cost $0.30
  auto owners = ledger.owners(kDay);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0].reservations, 0u);
  EXPECT_DOUBLE_EQ(owners[0].reserved_usd, 0.3) << "held until the run's spend report counts it";
  // The run's report arrives: the $0.30 moves from held to spent, never both, never neither.
  Spend before = costing(0.0), after = costing(0.3);
  EXPECT_FALSE(ledger.add(7, kDay, before, after));
  owners = ledger.owners(kDay);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_DOUBLE_EQ(owners[0].reserved_usd, 0.0);
  ASSERT_TRUE(owners[0].spent.usd);
  EXPECT_DOUBLE_EQ(*owners[0].spent.usd, 0.3);
  EXPECT_TRUE(ledger.reserve(7, "b", kDay, costing(0.6)));
  EXPECT_FALSE(ledger.reserve(7, "c", kDay, costing(0.2)));
}

// Sums of prices carry float residue: a settled $0.00105 reported back as three small usages
// leaves nothing held (not 2e-19 of a dollar shown as reserved for ever).
TEST(DailyReservations, WhatTheRunsReportsCountedBackLeavesNoRoundingResidueHeld) {
  DailySpendLedger ledger(ledger_file(), usd_budget(1.0));
  auto r = ledger.reserve(7, "a", kDay, costing(0.5));
  ASSERT_TRUE(r);
  ledger.settle(*r, costing(0.00035 + 0.00035 + 0.00035));
  double reported = 0;
  for (int i = 0; i < 3; ++i) {
    const double before = reported;
    reported += 0.00035;
    EXPECT_FALSE(ledger.add(7, kDay, costing(before), costing(reported)));
  }
  auto owners = ledger.owners(kDay);
  ASSERT_EQ(owners.size(), 1u);
  EXPECT_EQ(owners[0].reserved_usd, 0.0) << "no residue held";
}

TEST(DailyReservations, ARunsEndReleasesWhatItStillHolds) {
  DailySpendLedger ledger(ledger_file(), usd_budget(1.0));
  ASSERT_TRUE(ledger.reserve(7, "a", kDay, costing(0.5)));
  ASSERT_TRUE(ledger.reserve(7, "a", kDay, costing(0.5)));
  EXPECT_FALSE(ledger.reserve(7, "b", kDay, costing(0.1)));
  ledger.release("a");
  EXPECT_TRUE(ledger.reserve(7, "b", kDay, costing(0.1)));
  ledger.settle(12345, costing(1.0));  // unknown: ignored
}

TEST(DailyReservations, AnUnpricedWorstCaseIsRefusedByAUsdBudget) {
  DailySpendLedger ledger(ledger_file(), usd_budget(1.0));
  Spend unknown;
  unknown.usd.reset();
  unknown.unpriced_model = "gpt-x";
  auto refused = ledger.reserve(7, "a", kDay, unknown);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("gpt-x"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("unknown cost is not zero"), std::string::npos) << refused.error();
}

TEST(DailyReservations, ADailyTokenBudgetAlreadyReachedRefuses) {
  adapters::Budgets b;
  b.output_tokens = 100;
  DailySpendLedger ledger(ledger_file(), b);
  Spend none, hundred;
  hundred.output_tokens = 100;
  (void)ledger.add(7, kDay, none, hundred);
  auto refused = ledger.reserve(7, "a", kDay, costing(0.0));
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("daily output_tokens"), std::string::npos) << refused.error();
  EXPECT_TRUE(ledger.reserve(8, "b", kDay, costing(0.0)));
}

}  // namespace
}  // namespace mh::daemon
