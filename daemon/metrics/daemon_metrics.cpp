#include "daemon/metrics/daemon_metrics.hpp"

#include <algorithm>
#include <set>

#include "daemon/metrics/exposition.hpp"

namespace mh::metrics {

namespace proto = mh::protocol;

namespace {
constexpr auto kRelaxed = std::memory_order_relaxed;

void add(std::atomic<std::uint64_t>& counter, std::uint64_t n = 1) {
  counter.fetch_add(n, kRelaxed);
}
std::uint64_t read(const std::atomic<std::uint64_t>& counter) {
  return counter.load(kRelaxed);
}
}  // namespace

// One run's share: on that run's strand only, so its own state needs no lock; what it counts
// goes to the daemon's atomics.
class RunMetricsObserver final : public daemon::RunObserver {
 public:
  RunMetricsObserver(std::shared_ptr<DaemonMetrics> metrics, std::optional<std::string> model, bool gateway_metered)
      : m_(std::move(metrics)), model_(std::move(model)), gateway_metered_(gateway_metered) {}

  // A run that goes away without its stream.closed (the daemon stopping under it) takes its
  // pending approvals with it.
  ~RunMetricsObserver() override { forget_awaiting(); }

  void appended(const proto::EventPayload& event) override {
    add(m_->events_[event.index()]);
    std::visit([this](const auto& e) { on(e); }, event);
  }

 private:
  template <class E>
  void on(const E&) {}

  void on(const proto::ev::ToolRequested& e) {
    // An approval: the run waits for an embedder (ask mode). Frame and observe decisions follow
    // at once and are nobody's wait.
    if (e.decision_required && awaiting_.insert(e.call_id).second) m_->pending_.fetch_add(1, kRelaxed);
  }

  void on(const proto::ev::ToolDecided& e) {
    add(m_->decisions_[e.decision.index()][static_cast<std::size_t>(e.decided_by)]);
    if (e.decided_by == proto::DecidedBy::deadline) add(m_->deadline_denials_);
    if (awaiting_.erase(e.call_id)) {
      m_->pending_.fetch_sub(1, kRelaxed);
      // The record's own measure: from the request's delivery to the decision.
      if (e.latency_ms) m_->observe_wait(static_cast<double>(*e.latency_ms) / 1000.0);
    }
  }

  void on(const proto::ev::Usage& e) {
    // Settled usage only, as the budgets meter it: a request-scoped record (Claude's provisional
    // per-request figures) is superseded by its turn's own `scope: "turn"` record.
    // A run behind a model gateway counts the gateway's own reading of each answer (request-scoped,
    // `source: "gateway"`) and nothing the vendor says, as its budgets do (docs/gateway.md).
    if (gateway_metered_) {
      if (e.source != std::optional<std::string>("gateway")) return;
    } else if (e.scope && *e.scope == "request") {
      return;
    }
    const auto& u = e.usage;
    add(m_->tokens_[0], u.input_tokens.value_or(0));
    add(m_->tokens_[1], u.output_tokens.value_or(0));
    add(m_->tokens_[2], u.cache_read_input_tokens.value_or(0));
    add(m_->tokens_[3], u.cache_creation_input_tokens.value_or(0));
    // Priced as the budgets price it (daemon/run/budget_meter): the vendor's own figure first,
    // else the tokens at the configured price of the record's model (or the run's). No price:
    // the record is counted unpriced, never as free.
    std::optional<double> cost = u.cost_usd;
    const std::optional<std::string>& model = e.model ? e.model : model_;
    if (!cost && model)
      if (const daemon::ModelPrice* price = m_->prices_.find(*model)) cost = daemon::price_usage(u, *price);
    if (cost) {
      m_->spend_usd_.fetch_add(*cost, kRelaxed);
      add(m_->priced_usage_);
    } else {
      add(m_->unpriced_usage_);
    }
  }

  void on(const proto::ev::StreamClosed& e) {
    add(m_->closes_[static_cast<std::size_t>(e.reason)]);
    forget_awaiting();
  }

  void forget_awaiting() {
    m_->pending_.fetch_sub(static_cast<std::int64_t>(awaiting_.size()), kRelaxed);
    awaiting_.clear();
  }

  std::shared_ptr<DaemonMetrics> m_;
  std::optional<std::string> model_;
  bool gateway_metered_ = false;
  std::set<std::string> awaiting_;  // approvals requested, not decided yet
};

DaemonMetrics::DaemonMetrics(daemon::PriceTable prices) : prices_(std::move(prices)) {}

std::shared_ptr<daemon::RunObserver> DaemonMetrics::observer_for(std::optional<std::string> model,
                                                                 bool gateway_metered) {
  return std::make_shared<RunMetricsObserver>(shared_from_this(), std::move(model), gateway_metered);
}

void DaemonMetrics::observe_wait(double seconds) {
  std::size_t i = 0;
  while (i < kWaitBounds.size() && seconds > kWaitBounds[i])
    ++i;
  add(wait_buckets_[i]);
  wait_sum_.fetch_add(seconds, kRelaxed);
}

std::string DaemonMetrics::render(const Gauges& gauges) const {
  Exposition x;
  x.family("metaharness_runs", MetricType::gauge,
           "Runs the daemon knows (its state directory included), by state as `status` reports it and adapter.");
  for (const auto& [key, n] : gauges.runs)
    x.sample({{"adapter", key.first}, {"state", key.second}}, n);

  x.family("metaharness_events_total", MetricType::counter, "Events appended to the runs' streams, by event name.");
  const auto& names = proto::event_names();
  for (std::size_t i = 0; i < names.size(); ++i)
    x.sample({{"event", std::string(names[i])}}, read(events_[i]));

  x.family("metaharness_decisions_total", MetricType::counter,
           "Tool calls decided (tool.decided), by the decision the vendor was given and who decided.");
  static constexpr std::array<std::string_view, kDecisions> kDecisionNames = {"allow", "deny", "replace", "abstain"};
  const auto& deciders = proto::EnumNames<proto::DecidedBy>::names;
  for (std::size_t d = 0; d < kDecisions; ++d)
    for (std::size_t by = 0; by < kDeciders; ++by)
      x.sample({{"decision", std::string(kDecisionNames[d])}, {"decided_by", std::string(deciders[by])}},
               read(decisions_[d][by]));

  x.family("metaharness_deadline_denials_total", MetricType::counter,
           "Tool calls denied because metaharness's decision deadline expired (tool.decided, decided_by deadline).");
  x.sample({}, read(deadline_denials_));

  x.family("metaharness_pending_approvals", MetricType::gauge,
           "Tool calls waiting for an embedder's decision (tool.requested with decision_required, not decided yet).");
  x.sample({}, static_cast<std::uint64_t>(std::max<std::int64_t>(0, pending_.load(kRelaxed))));

  x.family("metaharness_runs_waiting_on_decision", MetricType::gauge,
           "Live runs with a tool call waiting for an embedder's decision: waiting, not stalled.");
  x.sample({}, gauges.runs_waiting_on_decision);

  x.family("metaharness_oldest_pending_decision_seconds", MetricType::gauge,
           "How long the oldest decision still pending in any live run has waited (0 when none is pending).");
  x.sample({}, gauges.oldest_decision_wait_seconds);

  x.family("metaharness_runs_stalled", MetricType::gauge,
           "Live runs named stalled (a warning RUN_STALLED: no vendor output for stall_after while no decision "
           "was pending) and silent since.");
  x.sample({}, gauges.runs_stalled);

  x.family("metaharness_approval_wait_seconds", MetricType::histogram,
           "How long an approval waited, from its request's delivery to its decision (tool.decided latency_ms).");
  std::array<std::uint64_t, kWaitBounds.size() + 1> buckets{};
  for (std::size_t i = 0; i < buckets.size(); ++i)
    buckets[i] = read(wait_buckets_[i]);
  x.histogram({}, kWaitBounds, buckets, wait_sum_.load(kRelaxed));

  x.family("metaharness_tokens_total", MetricType::counter, "Tokens the vendors reported in usage events, by kind.");
  for (std::size_t k = 0; k < kTokenKinds.size(); ++k)
    x.sample({{"kind", std::string(kTokenKinds[k])}}, read(tokens_[k]));

  x.family("metaharness_spend_usd_total", MetricType::counter,
           "USD spent by priced usage events: the vendor's own cost, else the config's [prices]. Unpriced usage is "
           "not in it (see metaharness_unpriced_usage_total): an unknown cost is not zero.");
  x.sample({}, spend_usd_.load(kRelaxed));

  x.family("metaharness_priced_usage_total", MetricType::counter,
           "Usage events whose cost is known (counted in metaharness_spend_usd_total).");
  x.sample({}, read(priced_usage_));

  x.family("metaharness_unpriced_usage_total", MetricType::counter,
           "Usage events whose cost is unknown: no vendor cost and no price for their model in the config.");
  x.sample({}, read(unpriced_usage_));

  x.family("metaharness_runs_closed_total", MetricType::counter, "Runs whose stream closed, by stream.closed reason.");
  const auto& reasons = proto::EnumNames<proto::CloseReason>::names;
  for (std::size_t r = 0; r < kReasons; ++r)
    x.sample({{"reason", std::string(reasons[r])}}, read(closes_[r]));

  x.family("metaharness_connections", MetricType::gauge, "Socket API connections open (status: connections).");
  x.sample({}, gauges.connections);

  x.family("metaharness_stream_readers", MetricType::gauge, "Streams being read over the socket API, by request.");
  x.sample({{"kind", "attach"}}, gauges.attaches);
  x.sample({{"kind", "tail"}}, gauges.tails);
  return x.text();
}

}  // namespace mh::metrics
