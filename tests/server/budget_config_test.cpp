// Budgets and prices in the daemon's config, the per-owner daily ledger, and the prices a usd
// budget needs at start.
#include <gtest/gtest.h>

#include <fstream>

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"
#include "daemon/config/config.hpp"
#include "daemon/server/daily_spend.hpp"
#include "tests/support/config_text.hpp"

namespace mh::test {
namespace {

TEST(BudgetConfig, DefaultsDailyBudgetsAndPricesLoad) {
  auto c = load_config_text(R"(
[budgets]
turns = 20
usd = 2.5
[budgets.daily]
output_tokens = 1000000
usd = 50
[prices."claude-sonnet-4-5"]
input_per_mtok = 3.0
output_per_mtok = 15
[prices."gpt-5*"]
input_per_mtok = 1.25
)");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->default_budget.turns, 20u);
  EXPECT_DOUBLE_EQ(c->default_budget.usd.value_or(0), 2.5);
  EXPECT_EQ(c->daily_budget.output_tokens, 1000000u);
  EXPECT_DOUBLE_EQ(c->daily_budget.usd.value_or(0), 50.0);
  const auto* sonnet = c->prices.find("claude-sonnet-4-5");
  ASSERT_TRUE(sonnet);
  EXPECT_DOUBLE_EQ(sonnet->output_per_mtok.value_or(0), 15.0);
  EXPECT_FALSE(sonnet->cache_read_per_mtok) << "a kind not given has no price, never zero";
  ASSERT_TRUE(c->prices.find("gpt-5.5")) << "a key ending in * prices the models it prefixes";
  EXPECT_FALSE(c->prices.find("claude-opus-4-8"));
}

TEST(BudgetConfig, BadValuesAreRefusedNamingTheKey) {
  EXPECT_TRUE(refused_naming("[budgets]\nturns = -1\n", {"budgets.turns"}));
  EXPECT_TRUE(refused_naming("[budgets]\nminutes = 3\n", {"unknown budget \"minutes\""}));
  EXPECT_TRUE(refused_naming("[budgets.daily]\nturns = 3\n", {"budgets.daily"}));
  EXPECT_TRUE(refused_naming("[prices.m]\ninput_per_mtok = \"3\"\n", {"prices.m.input_per_mtok"}));
  EXPECT_TRUE(refused_naming("[prices.m]\nper_token = 3\n", {"unknown key prices.m.per_token"}));
  EXPECT_TRUE(refused_naming("[prices]\nm = 3\n", {"prices.m: must be a table"}));
}

TEST(BudgetKeys, SetBudgetReadsEachKeyAndRefusesByName) {
  adapters::Budgets b;
  std::string error;
  EXPECT_TRUE(adapters::set_budget(b, "tool_calls", "12", error));
  EXPECT_EQ(b.tool_calls, 12u);
  EXPECT_TRUE(adapters::set_budget(b, "usd", "0.75", error));
  EXPECT_DOUBLE_EQ(*b.usd, 0.75);
  EXPECT_FALSE(adapters::set_budget(b, "usd", "-1", error));
  EXPECT_NE(error.find("budget usd"), std::string::npos);
  EXPECT_FALSE(adapters::set_budget(b, "wall_ms", "1.5", error));
  EXPECT_FALSE(adapters::set_budget(b, "cost", "1", error));
  EXPECT_NE(error.find("unknown budget \"cost\""), std::string::npos);
  adapters::Budgets defaults;
  defaults.turns = 3;
  defaults.tool_calls = 99;
  adapters::fill_unset_budgets(b, defaults);
  EXPECT_EQ(b.turns, 3u) << "unset: the default";
  EXPECT_EQ(b.tool_calls, 12u) << "set by the run: kept";
}

// Daily budgets of one kind: output tokens, or dollars.
adapters::Budgets daily_output_tokens(std::uint64_t tokens) {
  adapters::Budgets b;
  b.output_tokens = tokens;
  return b;
}
adapters::Budgets daily_usd(double usd) {
  adapters::Budgets b;
  b.usd = usd;
  return b;
}

daemon::Spend spend(std::uint64_t in, std::uint64_t out, std::optional<double> usd) {
  daemon::Spend s;
  s.input_tokens = in;
  s.output_tokens = out;
  s.usd = usd;
  return s;
}

TEST(DailySpend, AddsEachRunsDifferenceAndReportsTheCrossingOnce) {
  TempDir dir("daily");
  daemon::DailySpendLedger ledger(dir.path() / "daily-spend.json", daily_output_tokens(100));
  ASSERT_FALSE(ledger.load(20000));
  EXPECT_FALSE(ledger.add(1000, 20000, spend(0, 0, 0), spend(10, 60, 0)));
  EXPECT_FALSE(ledger.refusal(1000, 20000));
  auto crossed = ledger.add(1000, 20000, spend(0, 0, 0), spend(5, 40, 0));  // a second run of the same owner
  ASSERT_TRUE(crossed);
  EXPECT_NE(crossed->message().find(
                "the daily output_tokens budget of 100 token(s) is exhausted: 100 token(s) today by uid 1000"),
            std::string::npos)
      << crossed->message();
  EXPECT_FALSE(ledger.add(1000, 20000, spend(5, 40, 0), spend(6, 41, 0))) << "reported once";
  EXPECT_TRUE(ledger.refusal(1000, 20000));
  EXPECT_FALSE(ledger.refusal(1001, 20000)) << "another owner's day is their own";
  EXPECT_FALSE(ledger.refusal(1000, 20001)) << "a new UTC day starts from zero";
}

TEST(DailySpend, SurvivesARestartWithinTheDayButNotAcrossDays) {
  TempDir dir("daily-restart");
  const adapters::Budgets daily = daily_usd(1.0);
  auto file = dir.path() / "daily-spend.json";
  {
    daemon::DailySpendLedger ledger(file, daily);
    ASSERT_FALSE(ledger.load(20000));
    EXPECT_TRUE(ledger.add(7, 20000, spend(0, 0, 0.0), spend(0, 0, 1.5)));
    ASSERT_FALSE(ledger.save());
  }
  daemon::DailySpendLedger same_day(file, daily);
  ASSERT_FALSE(same_day.load(20000));
  EXPECT_TRUE(same_day.refusal(7, 20000));
  EXPECT_DOUBLE_EQ(same_day.today(7, 20000).usd.value_or(0), 1.5);
  daemon::DailySpendLedger next_day(file, daily);
  ASSERT_FALSE(next_day.load(20001));
  EXPECT_FALSE(next_day.refusal(7, 20001));
}

TEST(DailySpend, AnUnpricedUsageMakesTheDaysCostUnknownAndCrossesAUsdBudget) {
  TempDir dir("daily-unpriced");
  daemon::DailySpendLedger ledger(dir.path() / "d.json", daily_usd(100.0));
  ASSERT_FALSE(ledger.load(1));
  auto crossed = ledger.add(5, 1, spend(0, 0, 0.0), spend(1, 1, std::nullopt));
  ASSERT_TRUE(crossed);
  EXPECT_NE(crossed->figure.find("no longer known"), std::string::npos);
  EXPECT_FALSE(ledger.today(5, 1).usd);
}

TEST(UnpricedBudget, AUsdBudgetNeedsThePriceOfTheRunsModelAtStart) {
  adapters::AdapterRegistry registry{adapters::HostConfig{"/nonexistent", {}}};
  const adapters::Adapter& claude = *registry.find("claude");
  daemon::PriceTable prices;
  prices.set("claude-sonnet-4-5", daemon::ModelPrice{3.0, 15.0, std::nullopt, std::nullopt});
  adapters::RunSpec spec;
  EXPECT_FALSE(daemon::refuse_unpriced_budget(spec, claude, prices)) << "no usd budget: nothing to price";
  spec.budget.usd = 1.0;
  auto no_model = daemon::refuse_unpriced_budget(spec, claude, prices);
  ASSERT_TRUE(no_model);
  EXPECT_NE(no_model->find("names no model"), std::string::npos);
  spec.model = "claude-opus-4-8";
  auto unpriced = daemon::refuse_unpriced_budget(spec, claude, prices);
  ASSERT_TRUE(unpriced);
  EXPECT_NE(unpriced->find("no price for claude-opus-4-8"), std::string::npos);
  spec.model = "claude-sonnet-4-5";
  EXPECT_FALSE(daemon::refuse_unpriced_budget(spec, claude, prices));
}

}  // namespace
}  // namespace mh::test
