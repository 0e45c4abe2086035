// `metaharness run ADAPTER -p PROMPT ...`: one governed run in the foreground. Events on stdout
// (read back from the run's durable events.jsonl, exactly what a daemon client would get),
// commands on stdin, the raw vendor transcript and everything else in the run directory.
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <fstream>
#include <iostream>
#include <thread>

#include "adapters/registry.hpp"
#include "cli/run_spec_options.hpp"
#include "cli/verbs.hpp"
#include "daemon/config/config.hpp"
#include "daemon/process/unique_fd.hpp"
#include "daemon/run/run.hpp"
#include "daemon/run/seam_timer.hpp"
#include "daemon/stream/stream_reader.hpp"
#include "protocol/reader.hpp"

namespace mh::cli {

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

// Copies the run's stream to standard output from its own thread and executor, the same way a
// socket subscriber reads it: from the file, at the pace of whoever reads our stdout.
asio::awaitable<void> pump_events(std::shared_ptr<daemon::SharedStreamState> stream) {
  auto executor = co_await asio::this_coro::executor;
  auto reader = daemon::StreamReader::open(stream, executor, daemon::ReaderStart::from_beginning());
  if (!reader) {
    std::cerr << "metaharness run: cannot read the event stream: " << reader.error() << "\n";
    co_return;
  }
  bool stdout_open = true;
  for (;;) {
    auto batch = reader->read_some();
    if (!batch) {
      std::cerr << "metaharness run: reading the event stream: " << batch.error() << "\n";
      co_return;
    }
    if (batch->count > 0 && stdout_open) stdout_open = daemon::write_all(STDOUT_FILENO, batch->bytes);
    if (batch->reached_end) co_return;
    if (batch->count == 0) {
      auto outcome = co_await reader->wait_for_more();
      if (outcome == daemon::WaitOutcome::writer_gone) co_return;
    }
  }
}

// Reads commands from standard input on a plain thread (stdin may be a file, a pipe or a
// terminal); hands each line to the run, which answers it on the stream.
void read_commands(std::shared_ptr<daemon::Run> run, std::atomic<bool>& stop) {
  protocol::LineFramer framer(protocol::kDefaultMaxLineBytes);
  std::chrono::steady_clock::time_point received_at;
  auto on_line = [&](const protocol::FramedLine& line) {
    if (line.too_long) {
      run->unreadable_command(protocol::too_long_refusal(line, framer.max_line_bytes()));
      return;
    }
    if (line.text.find_first_not_of(" \t\r") == std::string_view::npos) return;
    auto command = protocol::read_command_line(line.text);
    if (command)
      run->command(std::move(*command), std::nullopt, {}, received_at);
    else
      run->unreadable_command(command.error());
  };
  char buffer[64 * 1024];
  while (!stop.load()) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    int ready = ::poll(&p, 1, 200);
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    ssize_t n = ::read(STDIN_FILENO, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    received_at = std::chrono::steady_clock::now();
    framer.feed(std::string_view(buffer, static_cast<std::size_t>(n)), on_line);
  }
  if (!stop.load()) {
    framer.finish(on_line);
    run->command_source_closed();
  }
}

struct RunVerbOptions {
  RunSpecOptions spec;
  std::string run_dir;
  std::uint64_t idle_timeout_ms = 0;
  std::uint64_t halt_grace_ms = 3000;
  std::string latency_report;
  bool fsync = false;
  std::string config;
};

void write_latency_report(const std::string& path, const daemon::SeamLatencies& l) {
  auto summarize = [](std::vector<std::chrono::nanoseconds> v) {
    json::object o;
    o["samples"] = v.size();
    if (v.empty()) return o;
    std::sort(v.begin(), v.end());
    auto pct = [&](double p) {
      std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
      return static_cast<double>(v[i].count()) / 1000.0;
    };
    o["p50_us"] = pct(0.50);
    o["p90_us"] = pct(0.90);
    o["p99_us"] = pct(0.99);
    o["max_us"] = static_cast<double>(v.back().count()) / 1000.0;
    json::array samples;  // raw, so several runs can be pooled exactly
    for (auto d : v)
      samples.emplace_back(static_cast<double>(d.count()) / 1000.0);
    o["samples_us"] = std::move(samples);
    return o;
  };
  json::object report;
  report["line_to_requested"] = summarize(l.line_to_requested);
  report["decide_to_answer"] = summarize(l.decide_to_answer);
  report["line_to_answer"] = summarize(l.line_to_answer);
  std::ofstream out(path, std::ios::trunc);
  out << protocol::pretty_json(report, false);
}

// The hermetic floor at the end of the run. `off`: no verdicts, the run's own status. `on`: the
// §10.4 report on stderr (never on the event stream), the run's own status. `strict`: the report,
// and the gating rows decide the status with the run's end (daemon::exit_status_for).
int hermetic_exit_status(const daemon::RunOutcome& outcome, protocol::HermeticMode mode,
                         const std::filesystem::path& run_dir, const adapters::AdapterRegistry& registry) {
  if (mode == protocol::HermeticMode::off) return daemon::exit_status_for(outcome);
  auto audited = audit_path(run_dir, registry);
  if (!audited) {
    std::cerr << "metaharness run: the hermetic audit cannot read the run: " << audited.error() << "\n";
    // Strict promised a verdict and cannot give one: metaharness could not do its job.
    return mode == protocol::HermeticMode::strict ? 2 : daemon::exit_status_for(outcome);
  }
  std::cerr << protocol::audit_report_text(*audited);
  if (mode == protocol::HermeticMode::strict) return daemon::exit_status_for(outcome, *audited);
  return daemon::exit_status_for(outcome);
}

int run_verb(const RunVerbOptions& o) {
  adapters::AdapterRegistry registry(adapters::host_config_from_environment());
  const adapters::Adapter* adapter = registry.find(o.spec.adapter);
  if (!adapter) {
    std::cerr << "metaharness run: unknown adapter \"" << o.spec.adapter << "\"\n";
    return 2;
  }
  // A run in the foreground has no supervisor to host a model gateway, and no network namespace
  // for an egress list to bound: both need the daemon (docs/gateway.md).
  if (!o.spec.upstream.empty()) {
    std::cerr << "metaharness run: UPSTREAM_NEEDS_SUPERVISION: --upstream needs the run's model gateway, which "
                 "the daemon's supervised runs have; `submit` it to the daemon\n";
    return 2;
  }
  if (!o.spec.egress.empty()) {
    std::cerr << "metaharness run: EGRESS_NEEDS_GATEWAY: --egress is enforced by the egress proxy of a run on the "
                 "gateway network; this run is on the host's network, where nothing would enforce it; `submit` it "
                 "to the daemon\n";
    return 2;
  }
  auto spec = build_spec(o.spec, new_run_id());
  if (!spec) {
    std::cerr << "metaharness run: " << spec.error() << "\n";
    return 2;
  }
  const protocol::HermeticMode mode = spec->hermetic;
  daemon::RunOptions options;
  // Stalls: what the flags leave unset is the config's [runs] stall_after_s and on_stall, or
  // their defaults (600 s, warn), as a daemon's run would have.
  // The config's park_after_s is a default for the runs that can park, as the daemon takes it
  // (requests_runs.cpp): a run whose adapter cannot park is not refused for a host-wide
  // preference it never asked for; its own --park-after is a request, refused by name.
  auto fill_stall = [&spec, adapter](const daemon::DaemonConfig& c) {
    if (!spec->stall_after_ms) spec->stall_after_ms = static_cast<std::uint64_t>(c.stall_after.count()) * 1000;
    if (!spec->on_stall) spec->on_stall = protocol::parse_enum<protocol::OnStall>(c.on_stall);
    if (!spec->park_after_ms && c.park_after && adapter->capabilities().parking.honoured)
      spec->park_after_ms = static_cast<std::uint64_t>(c.park_after->count()) * 1000;
  };
  if (o.config.empty()) fill_stall(daemon::DaemonConfig{});
  if (!o.config.empty()) {
    // The daemon's config file: its [budgets] defaults and [prices] apply to this run too.
    auto config = daemon::load_config(std::filesystem::path(o.config));
    if (!config) {
      std::cerr << "metaharness run: " << config.error() << "\n";
      return 2;
    }
    adapters::fill_unset_budgets(spec->budget, config->default_budget);
    fill_stall(*config);
    options.prices = config->prices;
    // Its line bounds too: the run reads and writes lines as the daemon's runs would.
    options.max_vendor_line_bytes = config->max_vendor_line_bytes;
    options.max_event_line_bytes = config->max_event_line_bytes;
  }
  options.spec = std::move(*spec);
  options.run_dir = o.run_dir.empty() ? std::filesystem::path("metaharness-runs") / options.spec.run_id
                                      : std::filesystem::path(o.run_dir);
  if (!o.spec.model_scenario.empty()) options.model_scenario = o.spec.model_scenario;
  options.idle_timeout = std::chrono::milliseconds(o.idle_timeout_ms);
  options.halt_grace = std::chrono::milliseconds(o.halt_grace_ms);
  options.fsync_each_event = o.fsync;
  // Not contained (the daemon's runs are): said where the person running it reads, and a spec's
  // limits are refused at the run's start rather than ignored.
  std::cerr << "metaharness run: this run is not contained (no cgroup, no sandbox, your own identity; its "
               "processes are found by their environment marker at its end); `submit` it to the daemon to "
               "contain it (docs/containment.md)\n";
  // Timing only when a report is asked for: a run without one is not timed at all.
  std::shared_ptr<daemon::SeamTimer> timer;
  if (!o.latency_report.empty()) options.seam_probe = timer = std::make_shared<daemon::SeamTimer>();

  asio::io_context io;
  auto created = daemon::Run::create(io, *adapter, std::move(options));
  if (!created) {
    std::cerr << "metaharness run: " << created.error() << "\n";
    return 2;
  }
  std::shared_ptr<daemon::Run> run = *created;
  std::cerr << "metaharness: run " << run->id() << " in " << run->run_dir().string() << "\n";

  // Ctrl-C / SIGTERM stop the run (it closes `killed`), they do not abandon it mid-record.
  asio::signal_set signals(io, SIGINT, SIGTERM);
  signals.async_wait([run](boost::system::error_code ec, int) {
    if (!ec) run->shutdown();
  });

  daemon::RunOutcome outcome;
  run->start([&](const daemon::RunOutcome& result) {
    outcome = result;
    signals.cancel();
    if (timer) write_latency_report(o.latency_report, timer->latencies());  // on the run's strand, as the timer
  });

  asio::io_context out_io;
  asio::co_spawn(out_io, pump_events(run->stream()), asio::detached);
  std::thread out_thread([&] { out_io.run(); });

  std::atomic<bool> stop_reading{false};
  std::thread in_thread([&] { read_commands(run, stop_reading); });

  std::thread helper([&] { io.run(); });
  io.run();
  helper.join();
  out_thread.join();
  stop_reading = true;
  in_thread.join();
  return hermetic_exit_status(outcome, mode, run->run_dir(), registry);
}

}  // namespace

void register_run_verb(CLI::App& app, Context& ctx) {
  auto o = std::make_shared<RunVerbOptions>();
  auto* run = app.add_subcommand(
      "run",
      "One governed run in the foreground: events on stdout, commands on stdin, the hermetic audit on stderr (unless "
      "--hermetic off). Exit status: 0 completed, 2 refused at start or could not launch, 3 error, 4 halted, "
      "5 budget, 6 killed; under --hermetic strict a gating gap exits 1 and a completed run with a gating unk 3");
  add_run_spec_options(run, o->spec);
  run->add_option("--run-dir", o->run_dir, "where the run's files go (default metaharness-runs/<run id>)");
  run->add_option("--idle-timeout-ms", o->idle_timeout_ms,
                  "how long a run held open between turns waits for a message (default: until stdin closes)");
  run->add_option("--halt-grace-ms", o->halt_grace_ms,
                  "after a halt, how long the vendor may take before every process of the run is killed");
  run->add_option("--latency-report", o->latency_report,
                  "write metaharness's own seam latencies (p50/p90/p99) to this JSON file at the end");
  run->add_flag("--fsync", o->fsync, "fdatasync events.jsonl after every event (default: at close)");
  run->add_option("--config", o->config,
                  "a daemon config file whose [budgets] defaults, [prices] and [runs] line bounds apply to this run "
                  "(docs/policies.md)");
  run->callback([&ctx, o] { ctx.exit_code = run_verb(*o); });
}

}  // namespace mh::cli
