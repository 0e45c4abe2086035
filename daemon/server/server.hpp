// The daemon as its request handlers see it: the config, the io contexts, the adapters, and the
// run registry on its own strand. Daemon::Impl (daemon.cpp) is the process around it — listening,
// signals, threads, shutdown — and implements the two lifecycle hooks below.
#pragma once

#include <atomic>
#include <boost/asio/async_result.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>

#include "adapters/registry.hpp"
#include "daemon/config/config.hpp"
#include "daemon/metrics/daemon_metrics.hpp"
#include "daemon/process/run_containment.hpp"
#include "daemon/server/io_pool.hpp"
#include "daemon/server/registry.hpp"
#include "daemon/server/submit_ledger.hpp"
#include "daemon/viewer/viewer_tokens.hpp"

namespace mh::daemon {

class FleetGate;

// Turns a callback API ("call done(value) exactly once, on any thread") into an awaitable that
// resumes on the awaiting coroutine's executor.
//
// GCC 12 double-destroys a capturing lambda that is a temporary inside a co_await expression,
// and miscompiles capturing lambda coroutines. So these helpers are plain functions (not
// coroutines), and every call site binds its lambda to a name before the co_await.
template <class T, class Initiate>
auto await_callback(Initiate initiate) {
  namespace asio = boost::asio;
  return asio::async_initiate<decltype(asio::use_awaitable), void(T)>(
      [](auto handler, Initiate initiate) {
        auto shared = std::make_shared<decltype(handler)>(std::move(handler));
        initiate([shared](T value) {
          auto executor = asio::get_associated_executor(*shared);
          asio::post(executor, [shared, value = std::move(value)]() mutable { (*shared)(std::move(value)); });
        });
      },
      asio::use_awaitable, std::move(initiate));
}

class Server : public std::enable_shared_from_this<Server> {
 public:
  using Clock = std::chrono::steady_clock;

  explicit Server(DaemonConfig config);
  virtual ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Stops accepting, halts every run, and stops the daemon once they closed (or the shutdown
  // grace passed). Any thread.
  virtual void begin_shutdown(const std::string& why) = 0;

  // Runs f() on the registry strand and resumes the awaiting coroutine with its result.
  template <class F>
  auto on_registry(F f) {
    using R = decltype(f());
    auto run_there = [strand = registry_strand, f = std::move(f)](auto done) mutable {
      boost::asio::post(strand, [f = std::move(f), done = std::move(done)]() mutable { done(f()); });
    };
    return await_callback<R>(std::move(run_there));
  }

  // What a run reports back, posted to the registry strand: its spend (only when a daily budget
  // is configured; otherwise an empty function, and nothing is posted) and its close.
  std::function<void(const Spend&)> spend_reporter(const std::string& id, std::uint32_t uid);
  // The daily ledger's reservation hooks for run `id` of `uid` (issue 25, docs/gateway.md): each
  // model request its gateway forwards reserves its worst case against the owner's day first, and
  // settles with what it spent. Nothing when no daily budget meters spend.
  void wire_daily_reservations(RunOptions& options, const std::string& id, std::uint32_t uid);
  // An adopted run's spend under the previous daemon: known, not metered again.
  std::function<void(const Spend&)> spend_seeder(const std::string& id);
  std::function<void(const RunOutcome&)> close_reporter(const std::string& id);

  // Registry strand only: the STATUS line to systemd, at most every 200 ms, never waiting on it
  // (notify.hpp).
  void schedule_status();

  // What a new run reports its events to: the daemon's metrics (nullptr when no [http] listener
  // is configured; then nothing is counted).
  std::shared_ptr<RunObserver> run_observer(const adapters::RunSpec& spec, bool gateway_metered = false);
  // The /metrics page (docs/metrics.md): the counters, and the gauges read now from the registry
  // and the runs, as `status` reads them. Any executor.
  boost::asio::awaitable<std::string> metrics_page();

  // A tail or attach being read (the stream readers gauge), from its start to just before its `end`.
  class StreamReading {
   public:
    StreamReading(Server& server, bool attach) : count_(attach ? server.attaches : server.tails) { ++count_; }
    ~StreamReading() { --count_; }
    StreamReading(const StreamReading&) = delete;
    StreamReading& operator=(const StreamReading&) = delete;

   private:
    std::atomic<std::size_t>& count_;
  };

  DaemonConfig config;
  // What each run's body gets (cgroup, sandbox, identity): decided once, at start.
  std::shared_ptr<const ContainmentPolicy> containment;
  // The runs' network (runs.network, docs/gateway.md): decided once, at start, with the policy.
  // Tests that build a Server without a daemon leave it "host".
  bool own_network = false;
  std::string why_host_network;  // the default fell to "host": why
  // The io threads, a context each (io_pool.hpp); `io` is the main one: the registry, the
  // acceptor, signals, HTTP and the fleet's glue. Runs live on pool.next_for_run().
  IoPool pool;
  boost::asio::io_context& io;
  boost::asio::strand<boost::asio::io_context::executor_type> registry_strand;
  RunRegistry registry;  // registry_strand only
  adapters::AdapterRegistry adapters;
  Clock::time_point started_at;
  std::atomic<std::size_t> connections{0};
  std::atomic<std::uint64_t> command_counter{0};
  std::atomic<std::size_t> tails{0}, attaches{0};          // streams being read (StreamReading)
  std::shared_ptr<metrics::DaemonMetrics> daemon_metrics;  // [http] configured; else null
  // The viewer page's tokens (viewer_tokens.hpp), and where the page is served: host:port of the
  // [http] listener, empty when none is configured. Set before the first connection is accepted.
  ViewerTokens viewer_tokens;
  std::string http_address;
  // The request ids of submits (submit_ledger.hpp): opened on its file at start; in memory only
  // for a Server built without a daemon. Any thread.
  SubmitLedger submits;
  // [fleet]: this daemon as a host of a fleet (fleet_gate.hpp); null without the section.
  std::shared_ptr<FleetGate> fleet;

 protected:
  // Registry strand: the daemon is stopping and its last run has closed.
  virtual void drained() = 0;
  // Registry strand: timers the daemon cancels at its stop.
  void cancel_timers();

 private:
  void save_ledger_soon();
  void run_closed(const std::string& id, const RunOutcome& outcome);

  boost::asio::steady_timer status_timer_;
  bool status_pending_ = false;
  boost::asio::steady_timer ledger_timer_;
  bool ledger_save_pending_ = false;
};

}  // namespace mh::daemon
