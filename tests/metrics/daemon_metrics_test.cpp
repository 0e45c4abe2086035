// The daemon's metrics as the runs' events feed them (daemon/metrics): each figure from the
// events a run appends, through the observer a run is given.
#include "daemon/metrics/daemon_metrics.hpp"

#include <gtest/gtest.h>

#include <map>

#include "tests/metrics/metrics_support.hpp"

namespace mh::metrics {
namespace {

namespace ev = protocol::ev;

// The page's samples: series (name and labels, as written) -> value.
using mh::test::parse_samples;

class DaemonMetricsTest : public ::testing::Test {
 protected:
  DaemonMetricsTest() {
    daemon::PriceTable prices;
    daemon::ModelPrice opus;
    opus.input_per_mtok = 2.0;
    opus.output_per_mtok = 10.0;
    prices.set("claude-opus-*", opus);
    metrics = std::make_shared<DaemonMetrics>(prices);
  }

  std::string value(const std::string& series, const Gauges& gauges = {}) {
    auto all = parse_samples(metrics->render(gauges));
    auto it = all.find(series);
    return it == all.end() ? "(absent)" : it->second;
  }

  static ev::ToolRequested approval(const std::string& call) {
    ev::ToolRequested r;
    r.call_id = call;
    r.name = "Bash";
    r.decision_required = true;
    r.deadline_ms = 55000;
    return r;
  }
  static ev::ToolDecided decided(const std::string& call, protocol::Decision d, protocol::DecidedBy by,
                                 std::optional<std::uint64_t> latency_ms) {
    ev::ToolDecided e;
    e.call_id = call;
    e.decision = std::move(d);
    e.decided_by = by;
    e.latency_ms = latency_ms;
    return e;
  }
  static ev::Usage usage(std::optional<std::string> model, std::uint64_t in, std::uint64_t out,
                         std::optional<double> cost = std::nullopt) {
    ev::Usage u;
    u.model = std::move(model);
    u.usage.input_tokens = in;
    u.usage.output_tokens = out;
    u.usage.cost_usd = cost;
    return u;
  }

  std::shared_ptr<DaemonMetrics> metrics;
};

TEST_F(DaemonMetricsTest, EveryEventIsCountedByItsName) {
  auto run = metrics->observer_for(std::nullopt);
  run->appended(ev::Text{"hi", std::nullopt});
  run->appended(ev::Text{"again", std::nullopt});
  run->appended(ev::Warning{"X", "y"});
  EXPECT_EQ(value(R"(metaharness_events_total{event="text"})"), "2");
  EXPECT_EQ(value(R"(metaharness_events_total{event="warning"})"), "1");
  EXPECT_EQ(value(R"(metaharness_events_total{event="tool.requested"})"), "0") << "every event name is on the page";
  EXPECT_EQ(value(R"(metaharness_events_total{event="stream.closed"})"), "0");
}

TEST_F(DaemonMetricsTest, DecisionsAreCountedByDecisionAndDecider_DeadlineDenialsApart) {
  auto run = metrics->observer_for(std::nullopt);
  using DB = protocol::DecidedBy;
  run->appended(decided("a", protocol::decision::Allow{}, DB::embedder, 12));
  run->appended(decided("b", protocol::decision::Deny{"no"}, DB::embedder, 40));
  run->appended(decided("c", protocol::decision::Deny{"late"}, DB::deadline, 55000));
  run->appended(decided("d", protocol::decision::Allow{}, DB::frame, std::nullopt));
  run->appended(decided("e", protocol::decision::Abstain{}, DB::adapter, 0));
  EXPECT_EQ(value(R"(metaharness_decisions_total{decision="allow",decided_by="embedder"})"), "1");
  EXPECT_EQ(value(R"(metaharness_decisions_total{decision="deny",decided_by="embedder"})"), "1");
  EXPECT_EQ(value(R"(metaharness_decisions_total{decision="deny",decided_by="deadline"})"), "1");
  EXPECT_EQ(value(R"(metaharness_decisions_total{decision="allow",decided_by="frame"})"), "1");
  EXPECT_EQ(value(R"(metaharness_decisions_total{decision="abstain",decided_by="adapter"})"), "1");
  EXPECT_EQ(value(R"(metaharness_decisions_total{decision="replace",decided_by="embedder"})"), "0");
  EXPECT_EQ(value("metaharness_deadline_denials_total"), "1");
}

TEST_F(DaemonMetricsTest, AnApprovalIsPendingFromItsRequestToItsDecisionAndItsWaitIsTheRecordsLatency) {
  auto run = metrics->observer_for(std::nullopt);
  run->appended(approval("a"));
  run->appended(approval("b"));
  ev::ToolRequested framed = approval("f");
  framed.decision_required = false;  // frame mode: decided on the spot, nobody's wait
  run->appended(framed);
  EXPECT_EQ(value("metaharness_pending_approvals"), "2");
  run->appended(decided("a", protocol::decision::Allow{}, protocol::DecidedBy::embedder, 300));
  run->appended(decided("f", protocol::decision::Allow{}, protocol::DecidedBy::frame, std::nullopt));
  EXPECT_EQ(value("metaharness_pending_approvals"), "1");
  run->appended(decided("b", protocol::decision::Deny{"late"}, protocol::DecidedBy::deadline, 55000));
  EXPECT_EQ(value("metaharness_pending_approvals"), "0");
  EXPECT_EQ(value(R"(metaharness_approval_wait_seconds_bucket{le="0.25"})"), "0");
  EXPECT_EQ(value(R"(metaharness_approval_wait_seconds_bucket{le="0.5"})"), "1");
  EXPECT_EQ(value(R"(metaharness_approval_wait_seconds_bucket{le="30"})"), "1");
  EXPECT_EQ(value(R"(metaharness_approval_wait_seconds_bucket{le="60"})"), "2");
  EXPECT_EQ(value(R"(metaharness_approval_wait_seconds_bucket{le="+Inf"})"), "2");
  EXPECT_EQ(value("metaharness_approval_wait_seconds_count"), "2");
  EXPECT_EQ(value("metaharness_approval_wait_seconds_sum"), "55.3");
}

TEST_F(DaemonMetricsTest, ARunThatClosesOrGoesAwayTakesItsPendingApprovalsWithIt) {
  auto closing = metrics->observer_for(std::nullopt);
  auto vanishing = metrics->observer_for(std::nullopt);
  closing->appended(approval("a"));
  closing->appended(approval("a"));  // the same call presented twice is one approval
  vanishing->appended(approval("a"));
  EXPECT_EQ(value("metaharness_pending_approvals"), "2");
  closing->appended(ev::StreamClosed{3, protocol::CloseReason::killed, "r1", {}});
  EXPECT_EQ(value("metaharness_pending_approvals"), "1");
  EXPECT_EQ(value(R"(metaharness_runs_closed_total{reason="killed"})"), "1");
  EXPECT_EQ(value(R"(metaharness_runs_closed_total{reason="steer-halt"})"), "0");
  vanishing.reset();
  EXPECT_EQ(value("metaharness_pending_approvals"), "0");
  EXPECT_EQ(value("metaharness_approval_wait_seconds_count"), "0")
      << "an approval never decided waited no measured time";
}

TEST_F(DaemonMetricsTest, TokensAreCountedByKindAndSpendOnlyWhereTheCostIsKnown) {
  auto run = metrics->observer_for(std::string("claude-opus-4-8"));  // the run's declared model
  run->appended(usage(std::string("claude-opus-4-8"), 1000, 100));   // priced: 0.002 + 0.001
  run->appended(usage(std::nullopt, 500, 0));                        // the run's model: 0.001
  run->appended(usage(std::string("some-other-model"), 7, 3));       // no price: unknown, not zero
  run->appended(usage(std::string("some-other-model"), 1, 1, 0.5));  // the vendor's own cost
  ev::Usage cached;
  cached.usage.cache_read_input_tokens = 40;
  cached.usage.cache_creation_input_tokens = 60;
  cached.model = "unpriced";
  run->appended(cached);
  EXPECT_EQ(value(R"(metaharness_tokens_total{kind="input"})"), "1508");
  EXPECT_EQ(value(R"(metaharness_tokens_total{kind="output"})"), "104");
  EXPECT_EQ(value(R"(metaharness_tokens_total{kind="cache_read"})"), "40");
  EXPECT_EQ(value(R"(metaharness_tokens_total{kind="cache_creation"})"), "60");
  EXPECT_DOUBLE_EQ(std::stod(value("metaharness_spend_usd_total")), 0.504);
  EXPECT_EQ(value("metaharness_priced_usage_total"), "3");
  EXPECT_EQ(value("metaharness_unpriced_usage_total"), "2");
}

TEST_F(DaemonMetricsTest, UsageOfARunWithNoModelAnywhereIsUnpriced) {
  auto run = metrics->observer_for(std::nullopt);
  run->appended(usage(std::nullopt, 10, 10));
  EXPECT_EQ(value("metaharness_unpriced_usage_total"), "1");
  EXPECT_EQ(value("metaharness_spend_usd_total"), "0");
}

TEST_F(DaemonMetricsTest, TheGaugesAreTheDaemonsReadingAndThePageIsStable) {
  Gauges g;
  g.runs[{"claude", "turn"}] = 2;
  g.runs[{"codex", "closed"}] = 5;
  g.connections = 3;
  g.tails = 1;
  g.attaches = 4;
  EXPECT_EQ(value(R"(metaharness_runs{adapter="claude",state="turn"})", g), "2");
  EXPECT_EQ(value(R"(metaharness_runs{adapter="codex",state="closed"})", g), "5");
  EXPECT_EQ(value("metaharness_connections", g), "3");
  EXPECT_EQ(value(R"(metaharness_stream_readers{kind="tail"})", g), "1");
  EXPECT_EQ(value(R"(metaharness_stream_readers{kind="attach"})", g), "4");
  auto run = metrics->observer_for(std::nullopt);
  run->appended(ev::Text{"x", std::nullopt});
  EXPECT_EQ(metrics->render(g), metrics->render(g));
  // Families in a fixed order, each once, HELP before TYPE.
  std::string page = metrics->render(g);
  std::vector<std::string> families;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("# TYPE ", 0) == 0) families.push_back(line.substr(7, line.find(' ', 7) - 7));
  EXPECT_EQ(families,
            (std::vector<std::string>{
                "metaharness_runs", "metaharness_events_total", "metaharness_decisions_total",
                "metaharness_deadline_denials_total", "metaharness_pending_approvals",
                "metaharness_runs_waiting_on_decision", "metaharness_oldest_pending_decision_seconds",
                "metaharness_runs_stalled", "metaharness_approval_wait_seconds", "metaharness_tokens_total",
                "metaharness_spend_usd_total", "metaharness_priced_usage_total", "metaharness_unpriced_usage_total",
                "metaharness_runs_closed_total", "metaharness_connections", "metaharness_stream_readers"}));
}

// Issue 27 §2: a run waiting on a decision is counted as waiting (with the oldest wait), not as
// stalled; a run named stalled is counted apart.
TEST_F(DaemonMetricsTest, RunsWaitingOnADecisionAndStalledRunsAreGaugedApart) {
  Gauges none;
  EXPECT_EQ(value("metaharness_runs_waiting_on_decision", none), "0");
  EXPECT_EQ(value("metaharness_oldest_pending_decision_seconds", none), "0");
  EXPECT_EQ(value("metaharness_runs_stalled", none), "0");
  Gauges g;
  g.add_progress(daemon::RunProgress{90'500, 1'000, std::nullopt});
  g.add_progress(daemon::RunProgress{2'000, 3'000, std::nullopt});
  g.add_progress(daemon::RunProgress{std::nullopt, 700'000, 100'000});
  g.add_progress(daemon::RunProgress{std::nullopt, 10, std::nullopt});
  EXPECT_EQ(value("metaharness_runs_waiting_on_decision", g), "2");
  EXPECT_EQ(value("metaharness_oldest_pending_decision_seconds", g), "90.5");
  EXPECT_EQ(value("metaharness_runs_stalled", g), "1");
}

}  // namespace
}  // namespace mh::metrics
