#include "daemon/server/server.hpp"

#include <thread>

#include "daemon/log.hpp"
#include "daemon/server/notify.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

namespace {
unsigned thread_count(const DaemonConfig& config) {
  unsigned n = config.threads ? config.threads : std::thread::hardware_concurrency();
  return n ? n : 2;
}

// `then` once, `delay` from the first ask; asks meanwhile are folded into it (`pending` says one
// is due). `then` holds the server alive, and with it `pending` and `timer`.
template <class Then>
void once_after(bool& pending, asio::steady_timer& timer, std::chrono::steady_clock::duration delay, Then then) {
  if (pending) return;
  pending = true;
  timer.expires_after(delay);
  timer.async_wait([&pending, then = std::move(then)](boost::system::error_code) {
    pending = false;
    then();
  });
}
}  // namespace

Server::Server(DaemonConfig c)
    : config(std::move(c)),
      pool(thread_count(config)),
      io(pool.main()),
      registry_strand(asio::make_strand(io)),
      registry(config.state_dir, config.max_active_runs, config.daily_budget),
      adapters(config.vendor),
      started_at(Clock::now()),
      status_timer_(registry_strand),
      ledger_timer_(registry_strand) {
  if (config.http_listen) daemon_metrics = std::make_shared<metrics::DaemonMetrics>(config.prices);
}

Server::~Server() = default;

std::function<void(const Spend&)> Server::spend_reporter(const std::string& id, std::uint32_t uid) {
  // Each report is a hop to the main io thread (a wake-up per tool call); only a daily budget
  // needs them. Otherwise `list` and `get` read a live run's spend from the run, and a closed
  // run's from its close (RunOutcome::spend).
  if (!registry.meters_spend()) return {};
  return [self = shared_from_this(), id, uid](const Spend& spend) {
    asio::post(self->registry_strand, [self, id, uid, spend] {
      auto outcome = self->registry.spent(id, uid, spend, std::chrono::system_clock::now());
      if (outcome.save_soon) self->save_ledger_soon();
    });
  };
}

void Server::wire_daily_reservations(RunOptions& options, const std::string& id, std::uint32_t uid) {
  if (!registry.meters_spend()) return;
  // The ledger outlives every run (the registry holds it; the server holds the registry).
  auto self = shared_from_this();
  options.reserve_daily = [self, id, uid](const Spend& worst) {
    return self->registry.ledger().reserve(uid, id, utc_day(std::chrono::system_clock::now()), worst);
  };
  options.settle_daily = [self](std::uint64_t reservation, const Spend& actual) {
    self->registry.ledger().settle(reservation, actual);
  };
  options.release_daily = [self, id] { self->registry.ledger().release(id); };
}

std::function<void(const Spend&)> Server::spend_seeder(const std::string& id) {
  return [self = shared_from_this(), id](const Spend& spend) {
    asio::post(self->registry_strand, [self, id, spend] { self->registry.seed_spend(id, spend); });
  };
}

std::function<void(const RunOutcome&)> Server::close_reporter(const std::string& id) {
  return [self = shared_from_this(), id](const RunOutcome& outcome) {
    asio::post(self->registry_strand, [self, id, outcome] { self->run_closed(id, outcome); });
  };
}

void Server::run_closed(const std::string& id, const RunOutcome& outcome) {
  if (!registry.closed(id, outcome)) return;
  schedule_status();
  if (!registry.accepting() && registry.active() == 0) drained();
}

void Server::schedule_status() {
  once_after(status_pending_, status_timer_, std::chrono::milliseconds(200), [self = shared_from_this()] {
    notify_without_waiting(self->registry.status_text());  // dropped if systemd is not reading
  });
}

// The ledger is written at most once a second, and at shutdown.
void Server::save_ledger_soon() {
  once_after(ledger_save_pending_, ledger_timer_, std::chrono::seconds(1), [self = shared_from_this()] {
    if (auto problem = self->registry.save_ledger()) log(LogPriority::error, "daily budgets: " + *problem);
  });
}

std::shared_ptr<RunObserver> Server::run_observer(const adapters::RunSpec& spec, bool gateway_metered) {
  return daemon_metrics ? daemon_metrics->observer_for(spec.model, gateway_metered) : nullptr;
}

namespace {
asio::awaitable<RunStatus> status_now(std::shared_ptr<Run> run) {
  auto ask = [run](auto done) { run->status(done); };
  co_return co_await await_callback<RunStatus>(std::move(ask));
}
}  // namespace

asio::awaitable<std::string> Server::metrics_page() {
  auto self = shared_from_this();
  auto snapshot = [self] { return self->registry.snapshot(); };
  std::vector<RunEntry> entries = co_await on_registry(std::move(snapshot));
  metrics::Gauges gauges;
  // Every adapter in every state, so a series reads 0 rather than vanishing when it empties.
  for (auto id : adapters.ids())
    for (RunPhase phase : kRunPhases)
      gauges.runs[{std::string(id), std::string(to_string(phase))}] = 0;
  for (const auto& e : entries) {
    RunPhase phase = RunPhase::closed;
    if (e.run && !e.closed) {
      RunStatus status = co_await status_now(e.run);
      phase = status.phase;
      gauges.add_progress(status.progress);  // issue 27 §2 (S)
    }
    ++gauges.runs[{e.adapter, std::string(to_string(phase))}];
  }
  gauges.connections = connections.load();
  gauges.tails = tails.load();
  gauges.attaches = attaches.load();
  co_return daemon_metrics->render(gauges);
}

void Server::cancel_timers() {
  status_timer_.cancel();
  ledger_timer_.cancel();
}

}  // namespace mh::daemon
