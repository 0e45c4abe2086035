// The daemon's metrics (docs/metrics.md): counters derived from the events the runs append, one
// RunObserver per run on that run's strand, plus the gauges the daemon reads when it is scraped
// (runs by state, connections, stream readers).
//
// Lock-free: every figure is an atomic, so runs on their own strands count without a lock and a
// scrape reads without stopping anyone. A scrape reads each figure on its own (Prometheus asks no
// more), and a histogram's `+Inf` bucket and `_count` come from the same reading.
//
// Counters count what this daemon process recorded since it started; a restart starts them at
// zero (Prometheus's rate() treats that as a reset). Gauges are read afresh at each scrape.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/run/budget_meter.hpp"
#include "daemon/run/run.hpp"
#include "protocol/events.hpp"

namespace mh::metrics {

// Upper bounds of metaharness_approval_wait_seconds: a human, or a policy service, answering a
// decision the run waits on (the default deadline is 55 s).
inline constexpr std::array<double, 12> kWaitBounds = {0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300};
// The token kinds of a usage record.
inline constexpr std::array<std::string_view, 4> kTokenKinds = {"input", "output", "cache_read", "cache_creation"};

// What the daemon reads for a scrape.
struct Gauges {
  std::map<std::pair<std::string, std::string>, std::uint64_t> runs;  // (adapter, state) -> runs
  std::uint64_t connections = 0;                                      // socket connections open
  std::uint64_t tails = 0;                                            // tail readers open
  std::uint64_t attaches = 0;                                         // attached readers open
  // Progress (issue 27 §2), from the live runs' status (RunProgress).
  std::uint64_t runs_waiting_on_decision = 0;  // live runs with a decision pending
  double oldest_decision_wait_seconds = 0;     // the longest a pending decision has waited; 0: none pending
  std::uint64_t runs_stalled = 0;              // live runs named RUN_STALLED and silent since
  // Counts one live run's progress in.
  void add_progress(const daemon::RunProgress& progress) {
    if (progress.waiting_ms) {
      ++runs_waiting_on_decision;
      oldest_decision_wait_seconds =
          std::max(oldest_decision_wait_seconds, static_cast<double>(*progress.waiting_ms) / 1000.0);
    }
    if (progress.stalled_ms) ++runs_stalled;
  }
};

class DaemonMetrics : public std::enable_shared_from_this<DaemonMetrics> {
 public:
  // `prices`: the config's [prices], to price usage the vendor did not (as the budgets do).
  explicit DaemonMetrics(daemon::PriceTable prices);

  // The observer of one run. `model`: the run's declared model, for usage records naming none.
  // `gateway_metered`: the run has a model gateway, whose usage records (source "gateway") are the
  // ones counted; the vendor's are not (docs/gateway.md).
  std::shared_ptr<daemon::RunObserver> observer_for(std::optional<std::string> model, bool gateway_metered = false);

  // The whole page, in the text exposition format 0.0.4.
  std::string render(const Gauges& gauges) const;

 private:
  friend class RunMetricsObserver;
  static constexpr std::size_t kDecisions = 4;  // allow, deny, replace, abstain (Decision's order)
  static constexpr std::size_t kDeciders = protocol::EnumNames<protocol::DecidedBy>::names.size();
  static constexpr std::size_t kReasons = protocol::EnumNames<protocol::CloseReason>::names.size();

  void observe_wait(double seconds);

  const daemon::PriceTable prices_;  // never changes: read from every strand without a lock
  std::array<std::atomic<std::uint64_t>, protocol::kEventCount> events_{};
  std::array<std::array<std::atomic<std::uint64_t>, kDeciders>, kDecisions> decisions_{};
  std::atomic<std::uint64_t> deadline_denials_{0};
  std::atomic<std::int64_t> pending_{0};
  std::array<std::atomic<std::uint64_t>, kWaitBounds.size() + 1> wait_buckets_{};
  std::atomic<double> wait_sum_{0};
  std::array<std::atomic<std::uint64_t>, kTokenKinds.size()> tokens_{};
  std::atomic<double> spend_usd_{0};
  std::atomic<std::uint64_t> priced_usage_{0};
  std::atomic<std::uint64_t> unpriced_usage_{0};
  std::array<std::atomic<std::uint64_t>, kReasons> closes_{};
};

}  // namespace mh::metrics
