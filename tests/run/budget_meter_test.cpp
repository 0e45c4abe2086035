// The budget meter's view of a turn: request-scoped usage is provisional and counts as a floor
// while the turn runs; the turn's own figures replace it at the end, so a turn's tokens count once.
#include "daemon/run/budget_meter.hpp"

#include <gtest/gtest.h>

namespace mh::daemon {
namespace {

namespace proto = mh::protocol;

proto::ev::Usage usage(std::optional<std::string> scope, std::uint64_t in, std::uint64_t out,
                       std::optional<double> cost = std::nullopt,
                       std::optional<std::string> model = "claude-opus-4-8") {
  proto::ev::Usage u;
  u.model = std::move(model);
  u.usage.input_tokens = in;
  u.usage.output_tokens = out;
  u.usage.cost_usd = cost;
  u.scope = std::move(scope);
  return u;
}

TEST(BudgetMeter, TheTurnsFiguresSupersedeItsRequestFiguresAndNothingCountsTwice) {
  BudgetMeter meter({}, nullptr, std::nullopt);
  meter.turn_started();
  EXPECT_FALSE(meter.usage(usage("request", 100, 1)));
  EXPECT_FALSE(meter.usage(usage("request", 120, 1)));
  EXPECT_EQ(meter.spend().output_tokens, 2u) << "a floor while the turn runs";
  EXPECT_FALSE(meter.usage(usage("turn", 220, 90)));
  EXPECT_EQ(meter.spend().input_tokens, 220u) << "the requests' 220 in were replaced, not added to";
  EXPECT_EQ(meter.spend().output_tokens, 90u);
  EXPECT_FALSE(meter.turn_ended());
  // Turn 2: one request, then two models' turn figures (the second adds, it does not supersede).
  meter.turn_started();
  EXPECT_FALSE(meter.usage(usage("request", 300, 1)));
  EXPECT_EQ(meter.spend().output_tokens, 91u);
  EXPECT_FALSE(meter.usage(usage("turn", 300, 40)));
  EXPECT_FALSE(meter.usage(usage("turn", 10, 5, std::nullopt, "claude-haiku-4-5")));
  EXPECT_FALSE(meter.turn_ended());
  EXPECT_EQ(meter.spend().input_tokens, 530u);
  EXPECT_EQ(meter.spend().output_tokens, 135u);
  EXPECT_EQ(meter.spend().turns, 2u);
}

TEST(BudgetMeter, UsageOfNoScopeCountsAsFinalAsBefore) {
  BudgetMeter meter({}, nullptr, std::nullopt);
  meter.turn_started();
  EXPECT_FALSE(meter.usage(usage(std::nullopt, 10, 5)));
  EXPECT_FALSE(meter.usage(usage("turn", 10, 5)));
  EXPECT_EQ(meter.spend().output_tokens, 10u) << "a turn figure supersedes only request figures";
}

// A meter with `limits`, in its first turn: `under` stays within them; what `then` crosses.
std::optional<Crossing> crossing_after(const adapters::Budgets& limits, const proto::ev::Usage& under,
                                       const proto::ev::Usage& then) {
  BudgetMeter meter(limits, nullptr, std::nullopt);
  meter.turn_started();
  EXPECT_FALSE(meter.usage(under));
  return meter.usage(then);
}

TEST(BudgetMeter, AnOutputBudgetIsCrossedByTheTurnsFiguresWhenTheRequestsUndercount) {
  auto crossing = crossing_after({.output_tokens = 20}, usage("request", 10, 1), usage("turn", 10, 50));
  ASSERT_TRUE(crossing);
  EXPECT_EQ(crossing->budget, "output_tokens");
  EXPECT_EQ(crossing->figure, "50 token(s)");
}

TEST(BudgetMeter, RequestFiguresCrossABudgetMidTurn) {
  auto crossing = crossing_after({.input_tokens = 150}, usage("request", 100, 1), usage("request", 100, 1));
  ASSERT_TRUE(crossing) << "a runaway turn is caught before it ends";
  EXPECT_EQ(crossing->budget, "input_tokens");
}

TEST(BudgetMeter, TheVendorsTurnCostReplacesThePricedRequests) {
  PriceTable prices;
  prices.set("claude-opus-4-8", ModelPrice{1'000'000.0, 1'000'000.0, std::nullopt, std::nullopt});  // $1 a token
  BudgetMeter meter({}, &prices, std::nullopt);
  meter.turn_started();
  EXPECT_FALSE(meter.usage(usage("request", 5, 1)));
  ASSERT_TRUE(meter.spend().usd);
  EXPECT_DOUBLE_EQ(*meter.spend().usd, 6.0);
  EXPECT_FALSE(meter.usage(usage("turn", 5, 10, 0.25)));
  ASSERT_TRUE(meter.spend().usd);
  EXPECT_DOUBLE_EQ(*meter.spend().usd, 0.25) << "the vendor's own cost for the turn, not the requests' price";
}

// A meter with a $5 budget, in its first turn; only claude-opus-4-8 has a price.
struct InAPricedTurn {
  InAPricedTurn() { meter.turn_started(); }
  PriceTable prices = [] {
    PriceTable p;
    p.set("claude-opus-4-8", ModelPrice{1.0, 1.0, 1.0, 1.0});
    return p;
  }();
  BudgetMeter meter{adapters::Budgets{.usd = 5.0}, &prices, std::nullopt};
};

TEST(BudgetMeter, AnUnpricedRequestIsJudgedAtTheTurnsEndWhereTheVendorsCostPricesIt) {
  InAPricedTurn priced;
  BudgetMeter& meter = priced.meter;
  EXPECT_FALSE(meter.usage(usage("request", 5, 1, std::nullopt, "claude-haiku-9"))) << "deferred, not unknown yet";
  EXPECT_TRUE(meter.spend().usd) << "settled: the budget's judgement waits for the turn's figures";
  EXPECT_FALSE(meter.usage(usage("turn", 5, 9, 0.01, "claude-haiku-9")));
  EXPECT_FALSE(meter.turn_ended());
  ASSERT_TRUE(meter.spend().usd);
  EXPECT_DOUBLE_EQ(*meter.spend().usd, 0.01);
  ASSERT_TRUE(meter.reported().usd) << "the vendor's cost settled it";
  EXPECT_DOUBLE_EQ(*meter.reported().usd, 0.01);
  EXPECT_FALSE(meter.reported().unpriced_model);
}

// Issue 24 item 12: mid-turn, an unpriced request is reported as an unknown cost (never $0), named.
TEST(BudgetMeter, AnUnpricedRequestIsReportedUnknownAtOnceAndNamedUntilItsTurnSettlesIt) {
  InAPricedTurn priced;
  BudgetMeter& meter = priced.meter;
  EXPECT_FALSE(meter.usage(usage("request", 5, 1, 0.5)));  // a priced request first: $0.5 known
  ASSERT_TRUE(meter.reported().usd);
  EXPECT_DOUBLE_EQ(*meter.reported().usd, 0.5);
  EXPECT_FALSE(meter.usage(usage("request", 5, 1, std::nullopt, "claude-haiku-9")));
  EXPECT_FALSE(meter.reported().usd) << "unknown, not $0.5";
  EXPECT_EQ(meter.reported().unpriced_model, "claude-haiku-9");
  EXPECT_FALSE(meter.usage(usage("turn", 10, 9, 0.75)));
  ASSERT_TRUE(meter.reported().usd) << "the turn's own figures carry the vendor's cost";
  EXPECT_DOUBLE_EQ(*meter.reported().usd, 0.75);
  EXPECT_FALSE(meter.reported().unpriced_model);
}

TEST(BudgetMeter, AnUnpricedRequestWithNoTurnFiguresMakesTheCostUnknownAtTheTurnsEnd) {
  InAPricedTurn priced;
  BudgetMeter& meter = priced.meter;
  EXPECT_FALSE(meter.usage(usage("request", 5, 1, std::nullopt, "claude-haiku-9")));
  EXPECT_FALSE(meter.reported().usd);
  auto crossing = meter.turn_ended();
  ASSERT_TRUE(crossing);
  EXPECT_EQ(crossing->budget, "usd");
  EXPECT_NE(crossing->figure.find("claude-haiku-9 has no price"), std::string::npos);
  EXPECT_FALSE(meter.spend().usd);
  EXPECT_EQ(meter.spend().unpriced_model, "claude-haiku-9");
  EXPECT_FALSE(meter.reported().usd) << "unknown from then on";
  EXPECT_EQ(meter.reported().unpriced_model, "claude-haiku-9");
}

}  // namespace
}  // namespace mh::daemon
