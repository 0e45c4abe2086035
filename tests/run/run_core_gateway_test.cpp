// The run core and its model gateway (issue 25): the gateway's usage is a `usage` event of source
// "gateway" that the budgets count instead of the vendor's own; a request is checked against the
// run's budgets before it is forwarded; a 429 is a rate_limit; a refused route and a denied
// egress destination are warned of once each, and every egress attempt is counted.
#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

class RunCoreGateway : public RunCoreTest {
 protected:
  void open_with_gateway(proto::DecisionMode mode = proto::DecisionMode::frame) {
    start_now = false;
    open(mode);
    core->meter_by_gateway();
    core->start(now);
    feed(lines::initialize_ok());
    feed(lines::init());
  }
  GatewayAnswer answer(std::uint64_t request, std::uint64_t in, std::uint64_t out, std::int32_t status = 200,
                       std::string model = "claude-opus-4") {
    GatewayAnswer a;
    a.request = request;
    a.status = status;
    a.model = std::move(model);
    a.usage.input_tokens = in;
    a.usage.output_tokens = out;
    a.complete = true;
    return a;
  }
  std::vector<proto::ev::Usage> gateway_usages() const {
    std::vector<proto::ev::Usage> out;
    for (const auto& u : all<proto::ev::Usage>())
      if (u.source == "gateway") out.push_back(u);
    return out;
  }
};

TEST_F(RunCoreGateway, AGatewayUsageIsARequestUsageOfSourceGatewayAndTheVendorsIsOnlyRecorded) {
  PriceTable prices;
  prices.set("claude-opus-*", ModelPrice{1.0, 2.0, std::nullopt, std::nullopt});  // $ per Mtok
  options.prices = &prices;
  open_with_gateway();
  feed(lines::text("one"));  // the vendor says 5 in, 1 out: recorded, not counted
  EXPECT_EQ(fx.spend.input_tokens, 0u) << "the vendor's figures are informational once a gateway meters the run";
  core->on_gateway_usage(answer(1, 1'000'000, 500'000), now);
  auto usages = gateway_usages();
  ASSERT_EQ(usages.size(), 1u);
  EXPECT_EQ(usages[0].scope, "request");
  EXPECT_EQ(usages[0].model, "claude-opus-4");
  EXPECT_EQ(usages[0].request_id, "gateway-1");
  ASSERT_TRUE(usages[0].usage.cost_usd);
  EXPECT_DOUBLE_EQ(*usages[0].usage.cost_usd, 2.0);
  EXPECT_EQ(fx.spend.input_tokens, 1'000'000u);
  EXPECT_EQ(fx.spend.output_tokens, 500'000u);
  ASSERT_TRUE(fx.spend.usd);
  EXPECT_DOUBLE_EQ(*fx.spend.usd, 2.0);
  EXPECT_TRUE(fx.spend.gateway_metered);
  EXPECT_EQ(fx.spend.to_json().at("usage_source"), "gateway");
  // The vendor's usage lines keep no source (byte-identical to before).
  for (const auto& u : all<proto::ev::Usage>())
    if (u.source != "gateway") {
      EXPECT_FALSE(u.source);
      EXPECT_EQ(proto::serialize(proto::Event{1, "r-1", std::nullopt, u}).find("source"), std::string::npos);
    }
}

TEST_F(RunCoreGateway, WithoutAGatewayTheVendorsUsageIsCountedAsBefore) {
  open_and_begin(proto::DecisionMode::frame);
  feed(lines::text("one"));
  EXPECT_EQ(fx.spend.input_tokens, 5u);
  EXPECT_FALSE(fx.spend.gateway_metered);
  EXPECT_EQ(fx.spend.to_json().at("usage_source"), "vendor");
}

TEST_F(RunCoreGateway, AnUnpricedModelsGatewayUsageCostsNullNotZero) {
  PriceTable prices;
  prices.set("other-model", ModelPrice{1.0, 1.0, 1.0, 1.0});
  options.prices = &prices;
  open_with_gateway();
  core->on_gateway_usage(answer(1, 10, 10), now);
  auto usages = gateway_usages();
  ASSERT_EQ(usages.size(), 1u);
  EXPECT_FALSE(usages[0].usage.cost_usd);
  EXPECT_FALSE(fx.spend.usd) << "unknown is not zero";
}

TEST_F(RunCoreGateway, AGatewayUsageThatCrossesATokenBudgetStopsTheRunWithReasonBudget) {
  spec.budget.output_tokens = 100;
  open_with_gateway();
  core->on_gateway_usage(answer(1, 10, 150), now);
  EXPECT_TRUE(fx.terminated);
  EXPECT_EQ(only<proto::ev::Warning>().code, "BUDGET_EXHAUSTED");
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 0, 0}, now), proto::CloseReason::budget);
}

TEST_F(RunCoreGateway, AnUpstream429IsARateLimitThenItsUsage) {
  open_with_gateway();
  GatewayAnswer throttled = answer(3, 0, 0, 429);
  throttled.usage = {};
  core->on_gateway_usage(throttled, now);
  auto limit = only<proto::ev::RateLimit>();
  EXPECT_EQ(limit.info.status, "429");
  auto n = names();
  auto rl = std::find(n.begin(), n.end(), "rate_limit");
  ASSERT_NE(rl, n.end());
  ASSERT_NE(rl + 1, n.end());
  EXPECT_EQ(*(rl + 1), "usage") << "the request stays on record";
}

TEST_F(RunCoreGateway, AReservationPastTheRunsUsdBudgetIsRefusedByName) {
  PriceTable prices;
  prices.set("claude-opus-*", ModelPrice{1.0, 10.0, std::nullopt, std::nullopt});
  options.prices = &prices;
  spec.budget.usd = 1.0;
  open_with_gateway();
  // 50'000 output tokens at $10/Mtok + 10'000 input bytes at $1/Mtok: $0.51 at worst.
  Spend worst = worst_case("claude-opus-4", 50'000, 10'000, &prices);
  ASSERT_TRUE(worst.usd);
  EXPECT_DOUBLE_EQ(*worst.usd, 0.51);
  EXPECT_FALSE(core->reserve_check(worst, Spend{}));
  Spend held;
  held.usd = 0.51;  // another request in flight
  auto refused = core->reserve_check(worst, held);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->budget, "usd");
  EXPECT_NE(refused->message().find("reserved by requests in flight"), std::string::npos) << refused->message();
  // A model with no price cannot be kept within a usd budget.
  Spend unpriced = worst_case("gpt-unknown", 10, 10, &prices);
  EXPECT_FALSE(unpriced.usd);
  auto no_price = core->reserve_check(unpriced, Spend{});
  ASSERT_TRUE(no_price);
  EXPECT_NE(no_price->message().find("gpt-unknown has no price"), std::string::npos) << no_price->message();
}

TEST_F(RunCoreGateway, AReservationOnceATokenBudgetIsReachedIsRefused) {
  spec.budget.input_tokens = 100;
  open_with_gateway();
  EXPECT_FALSE(core->reserve_check(worst_case("m", 10, 10, nullptr), Spend{}));
  core->on_gateway_usage(answer(1, 100, 1), now);  // reaches, does not exceed
  EXPECT_FALSE(fx.terminated);
  auto refused = core->reserve_check(worst_case("m", 10, 10, nullptr), Spend{});
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->budget, "input_tokens");
}

TEST_F(RunCoreGateway, TheWorstCaseTakesTheDearestInputPrice) {
  PriceTable prices;
  prices.set("m", ModelPrice{1.0, 2.0, 0.1, 3.0});  // cache writes are dearest
  Spend worst = worst_case("m", 1'000'000, 1'000'000, &prices);
  ASSERT_TRUE(worst.usd);
  EXPECT_DOUBLE_EQ(*worst.usd, 5.0);
  EXPECT_EQ(worst.input_tokens, 1'000'000u);
  EXPECT_EQ(worst.output_tokens, 1'000'000u);
}

TEST_F(RunCoreGateway, ARefusedRouteIsWarnedOfOncePerMethodAndPath) {
  open_with_gateway();
  core->on_gateway_refused("POST", "/v1/files", now);
  core->on_gateway_refused("POST", "/v1/files", now);
  core->on_gateway_refused("GET", "/v1/files", now);
  auto warnings = all<proto::ev::Warning>();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].code, "GATEWAY_ROUTE_REFUSED");
  EXPECT_NE(warnings[0].message.find("POST /v1/files"), std::string::npos) << warnings[0].message;
  EXPECT_NE(warnings[1].message.find("GET /v1/files"), std::string::npos) << warnings[1].message;
}

TEST_F(RunCoreGateway, EgressDeniedIsWarnedOncePerDestinationAndEveryAttemptIsCounted) {
  open_with_gateway();
  core->on_egress("evil.example:443", false, "not in the run's egress list", now);
  core->on_egress("evil.example:443", false, "not in the run's egress list", now);
  core->on_egress("pypi.org:443", true, "", now);
  core->on_egress("pypi.org:443", true, "", now);
  core->on_egress("169.254.169.254:80", false, "link-local", now);
  auto warnings = all<proto::ev::Warning>();
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0].code, "EGRESS_DENIED");
  EXPECT_NE(warnings[0].message.find("evil.example:443"), std::string::npos);
  EXPECT_NE(warnings[0].message.find("1 connection attempt(s) refused"), std::string::npos) << warnings[0].message;
  EXPECT_NE(warnings[1].message.find("169.254.169.254:80"), std::string::npos);
  EXPECT_NE(warnings[1].message.find("3 connection attempt(s) refused"), std::string::npos) << warnings[1].message;
  const auto& counts = core->egress_counts();
  EXPECT_EQ(counts.denied.at("evil.example:443"), 2u);
  EXPECT_EQ(counts.denied.at("169.254.169.254:80"), 1u);
  EXPECT_EQ(counts.allowed.at("pypi.org:443"), 2u);
  // As stream.closed carries them.
  proto::ev::RunResources resources;
  resources.egress = counts;
  auto line = proto::serialize(proto::Event{
      9, "r-1", std::nullopt, proto::ev::StreamClosed{8, proto::CloseReason::completed, "r-1", {}, resources}});
  EXPECT_NE(
      line.find(R"("egress":{"allowed":{"pypi.org:443":2},"denied":{"169.254.169.254:80":1,"evil.example:443":2}})"),
      std::string::npos)
      << line;
  auto read = proto::read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  auto closed = std::get<proto::ev::StreamClosed>(read->payload);
  ASSERT_TRUE(closed.resources && closed.resources->egress);
  EXPECT_EQ(closed.resources->egress->denied.at("evil.example:443"), 2u);
}

// What an adoption's replay relies on: the same gateway inputs in the same order give the same
// events and the same spend.
class GatewayDrive : public RunCoreGateway {
 public:
  void TestBody() override {}
  void drive() {
    open_with_gateway();
    feed(lines::text("one"));
    core->on_gateway_usage(answer(1, 40, 7), now);
    core->on_gateway_refused("POST", "/v1/batches", now);
    core->on_egress("a.example:443", false, "no", now);
    core->on_gateway_usage(answer(2, 60, 9, 429), now);
  }
  std::vector<std::string_view> event_names() const { return names(); }
  const Spend& spent() const { return fx.spend; }
};

TEST(RunCoreGatewayReplay, TheSameGatewayInputsGiveTheSameEventsAndSpend) {
  GatewayDrive first, second;
  first.drive();
  second.drive();
  EXPECT_EQ(first.event_names(), second.event_names());
  EXPECT_EQ(first.spent().input_tokens, 100u);
  EXPECT_EQ(second.spent().input_tokens, 100u);
  EXPECT_EQ(first.spent().output_tokens, second.spent().output_tokens);
}

}  // namespace
}  // namespace mh::daemon
