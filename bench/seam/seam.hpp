// The call seam bench (bench/seam_bench.cpp): what deciding a tool call costs per call on a REAL
// vendor CLI against the project's scripted model endpoint, every variant in one invocation,
// interleaved round-robin. What is shared by the vendors lives here, in seam_bench.cpp (the
// variant loop, the metaharness ask variant, the run record) and in seam_report.cpp (the
// statistics and the tables every vendor prints); what differs
// between the vendors is one VendorDriver row each (seam_claude.cpp, seam_codex.cpp, seam_opencode.cpp):
// how the bench drives the CLI directly, how it reads metaharness's latency report, and the
// report it prints (the figures of each vendor's RESULTS.md section).
#pragma once

#include <sys/types.h>

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "testkit/line_reader.hpp"
#include "testkit/proc.hpp"
#include "testkit/stats.hpp"
#include "testkit/subprocess.hpp"

namespace mh::model {
class ScriptedEndpoint;
}

namespace mh::seam {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using testkit::fixed;
using testkit::LineReader;
using testkit::median;
using testkit::ms_between;
using testkit::quantile_of_sorted;
using testkit::Spread;
using testkit::spread_of;
using testkit::spread_text;
using testkit::Subprocess;
using testkit::to_json;

// Ctrl-C / SIGTERM: the signal is passed on to the running child (the CLI exits; metaharness
// stops its run and kills the run's processes), and the bench stops after reaping it.
extern std::atomic<pid_t> g_running_child;
extern volatile std::sig_atomic_t g_stop_requested;

// The floor is the variant every added time is measured against: the vendor with nothing asked
// (no hook and the shell pre-approved, or an approval policy of never; each row names its own).
// A vendor offers the variants its row names.
enum class Variant { floor, bare_driver, command_hook, metaharness_ask };
constexpr std::array<Variant, 4> kVariants = {Variant::floor, Variant::bare_driver, Variant::command_hook,
                                              Variant::metaharness_ask};
std::string_view name_of(Variant v);  // the active vendor's name for it

struct Options {
  int runs = 0;    // measured rounds; every round runs each variant once (default: the vendor's)
  int warmup = 1;  // rounds run first and discarded (cold page cache, first CLI start-up)
  int timeout_s = 0;
  fs::path scenario;
  fs::path vendor_bin;  // --<vendor>
  fs::path metaharness;
  fs::path work_root;
  fs::path json_out;
  std::vector<Variant> variants;
  std::string hook_command;  // a row with a command_hook variant: the hook's command
  std::string prompt = "Touch the files.";
  std::string model = "gpt-5.5";  // a row whose CLI takes a model slug: the adapter's default (real tool metadata)
  bool keep = false;
};

struct LatencySummary {
  std::uint64_t samples = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
};

struct RunRecord {
  Variant variant = Variant::floor;
  int round = 0;  // negative: warm-up
  bool ok = false;
  std::string failure;
  double wall_turn_ms = 0;  // spawn -> the turn's end read (the vendor's end-of-turn record; turn.ended)
  double wall_end_ms = 0;   // spawn -> stdout EOF (metaharness: stream.closed read by the client)
  double span_ms = 0;       // first -> last main-loop request at the endpoint (the N call cycles)
  double child_cpu_ms = 0;  // CPU of the spawned process and its descendants (the CLI, tools; metaharness)
  double bench_cpu_ms = 0;  // CPU of this process during the run (driver/client, in-process endpoint)
  double cpu_ms = 0;        // the two together: all the CPU the run cost, wherever its endpoint ran
  double load_before = 0;   // 1-minute load average when the run started
  int calls_answered = 0;   // hook_callbacks / approvals answered, tool.decide sent
  int aux_requests = 0;     // requests the endpoint answered as not main-loop (no tools offered)
  std::vector<double> driver_reaction_us;  // bare driver: the ask read -> the answer written
  // When the driver saw each call, ms since the spawn (the vendor's announcement; the first
  // tool.requested for metaharness). Successive differences are the call cycles.
  std::vector<double> call_seen_ms;
  // Per call, from the driver seeing it to the driver seeing its result: the seam and the tool
  // run, without the model round trip that makes most of a cycle's noise.
  std::vector<double> call_latency_ms;
  std::map<std::string, double> seen_by_id, done_by_id;  // ms since the spawn, by call id

  void match_latencies() {
    for (const auto& [id, seen] : seen_by_id)
      if (auto it = done_by_id.find(id); it != done_by_id.end()) call_latency_ms.push_back(it->second - seen);
  }
  std::optional<LatencySummary> line_to_requested,
      decide_to_answer;  // metaharness_ask, a row reading in-band hook latencies
  // metaharness_ask, a row with a command hook: every hook run as the CLI timed it (hook/completed durationMs).
  std::vector<double> hook_ms;
  // metaharness_ask: the raw samples of its --latency-report, in µs.
  std::map<std::string, std::vector<double>> own_share_us;
  fs::path dir;
};

// What one run of a vendor's direct variant gets: the options, N, the endpoint's io_context.
struct RunContext {
  const Options& o;
  int calls;
  boost::asio::io_context& io;

  Clock::time_point deadline_from(Clock::time_point start) const { return start + std::chrono::seconds(o.timeout_s); }
  // The scripted endpoint of a direct run, playing the bench's scenario and keeping the same
  // request log as metaharness's own (a file in the run dir), so that its work is alike in every
  // variant; null, with r.failure saying why, when it cannot start.
  std::unique_ptr<model::ScriptedEndpoint> start_endpoint(RunRecord& r) const;
  // Every one of f1..fN exists: each call really ran, whoever decided it.
  std::string check_files(const fs::path& work) const;
  // The span of the N call cycles: main-loop request 1 (the prompt) to request N+1 (after the
  // last tool result), from the arrival times of the step-answered requests.
  std::string span_from(const std::vector<double>& step_received_ms, RunRecord& r) const;
  // What the endpoint served, checked strictly (see seam_bench.cpp): exactly N + 1 step answers,
  // aux ones counted, any other answer fails the run.
  struct Served {
    std::string answer;
    double received_ms;
  };
  std::string check_requests(const std::vector<Served>& served, RunRecord& r) const;
};

// The string at `key` of a JSON object, if it is one.
std::optional<std::string> string_at(const json::object& o, std::string_view key);

// The next line the child wrote that is a JSON object (lines that are not are passed over), and
// when it was read; nullopt, with r.failure saying why none came "before <before>" (a signal,
// the deadline, the end of stdout). keep: every line read, JSON or not, is appended to it.
std::optional<json::object> next_object(LineReader& reader, std::string& line, Clock::time_point& read_at,
                                        Clock::time_point deadline, std::string_view before, RunRecord& r,
                                        std::vector<std::string>* keep = nullptr);

// A vendor's CLI driven directly, from its spawn to finish_direct_run: the child (tracked for
// Ctrl-C, its stderr in the run dir), its stdout's reader, the spawn time and the run's deadline,
// and what the driver's loop keeps as it reads.
struct DirectChild {
  explicit DirectChild(const RunContext& context) : c(context) {}

  // Starts the clock and spawns it; false, with r.failure saying why, when it does not start.
  bool spawn(testkit::SpawnOptions options, RunRecord& r);
  // Reads what it writes until its turn is done or the run failed, every JSON-RPC message
  // (a JSON-RPC app-server, ACP) handed on with its id (none for a notification) and its method
  // (none for an answer).
  using RpcHandler =
      std::function<void(const json::object& m, const json::value* id, const std::optional<std::string>& method)>;
  void read_rpc(std::string_view before, RunRecord& r, const RpcHandler& handle);

  const RunContext& c;
  Subprocess child;
  std::optional<LineReader> reader;
  Clock::time_point started, deadline;
  std::string line;  // the last line read, and when
  Clock::time_point read_at;
  std::optional<Clock::time_point> turn_done_at;
  std::string problem;  // the run went on, but does not count
  // --keep: its stdout as the driver read it, written out after the run so that keeping it costs
  // the measured turn nothing (metaharness keeps its own, vendor-stdout.jsonl).
  std::vector<std::string> transcript;
};

// The end of a vendor's direct run, once its turn is over or it failed: stdin closed, stdout to
// its end, the exit, the endpoint stopped, the transcript kept (--keep), then the run judged: the
// exit status, the problem the driver noted, every request the endpoint served, the answers the
// driver gave, and f1..fN made; the run's figures set when it counts.
struct DirectRun {
  std::string_view vendor;         // its words in the failures, <vendor>-stdout.jsonl
  bool answers_expected;           // the driver answered one request per call
  std::string_view answered_what;  // "approvals"
  const fs::path& work;
};
void finish_direct_run(DirectChild& d, model::ScriptedEndpoint& endpoint, const DirectRun& how, RunRecord& r);

// How the metaharness ask variant differs between the vendors (the loop itself is shared).
struct MetaharnessShape {
  bool pass_locale = false;  // LANG, LC_ALL, TZ passed through (as the adapter's plan does)
  bool model_flag = false;   // `--model <o.model>` given
  // The first tool.requested of a call is the client's first sight of it, before the one asking
  // for the decision (e.g. a command hook's); otherwise only decision_required ones are counted.
  bool seen_at_first_announcement = false;
  // When stdin (the command source) is closed: after the N-th decision, or at turn.ended.
  bool close_at_turn_end = false;
  bool check_stop_reason = false;  // turn.ended must say stop_reason completed
  // Every request of the model log counts (an answer other than step/aux/exhausted fails the
  // run), or only the step-answered ones.
  bool strict_requests = false;
};

// ---- shared report pieces ------------------------------------------------------------------

using Runs = std::vector<const RunRecord*>;

// The completed runs and the failure count of each variant (warm-ups left out).
struct Outcome {
  std::map<Variant, Runs> ok;
  std::map<Variant, int> failed;
  explicit Outcome(const std::vector<RunRecord>& records);
  std::vector<double> values(Variant v, double RunRecord::*field);
};

// The call cycles of a set of runs, pooled: the gaps between successive calls as the driver saw
// them; and every call latency, pooled.
std::vector<double> call_cycles(const Runs& runs);
std::vector<double> call_latencies(const Runs& runs);

// How a variant's runs are summed up into one figure, and whether that figure is for the whole
// turn (then the added time per call is the difference over N) or already per call.
struct Metric {
  std::string_view key;
  std::string_view title;
  bool per_turn;
  double (*statistic)(const Runs&);
};

template <double RunRecord::*field>
double median_of(const Runs& runs) {
  std::vector<double> v;
  for (const RunRecord* r : runs)
    v.push_back(r->*field);
  return median(v);
}
double median_call_cycle(const Runs& runs);
double median_call_latency(const Runs& runs);

// The metrics every vendor reports, the turn's wall time first under the vendor's name for it
// (wall_result_ms "spawn -> result" or wall_turn_ms "spawn -> turn end", by row).
constexpr std::array<Metric, 5> shared_metrics(std::string_view turn_key, std::string_view turn_title) {
  return {
      // The definition: the turn's wall time, medians of runs, difference over N.
      Metric{turn_key, turn_title, true, &median_of<&RunRecord::wall_turn_ms>},
      Metric{"wall_end_ms", "spawn -> end of stream", true, &median_of<&RunRecord::wall_end_ms>},
      // The N call cycles alone, on the endpoint's clock (ms resolution): no start-up, no end.
      Metric{"span_ms", "model request 1 -> N+1", true, &median_of<&RunRecord::span_ms>},
      // The typical call: the median of every call cycle of every run, robust to the slow outlier
      // calls (the first call, the CLI's garbage collections) that dominate the noise of sums.
      Metric{"call_cycle_ms", "median call cycle", false, &median_call_cycle},
      // The part of a cycle the seam is in (the call seen -> its result seen), median of all calls.
      Metric{"call_latency_ms", "median call latency", false, &median_call_latency},
  };
}

// A 95% bootstrap interval of a statistic of several variants' runs (runs resampled with
// replacement, each variant on its own): how far the noise of this many runs moves the figure.
template <typename Statistic>
std::optional<std::pair<double, double>> bootstrap_interval(const std::vector<Runs>& groups, Statistic statistic) {
  for (const auto& g : groups)
    if (g.size() < 2) return std::nullopt;
  std::mt19937_64 random(20261129);  // fixed: the same data gives the same interval
  std::vector<double> estimates;
  constexpr int kResamples = 2000;
  for (int i = 0; i < kResamples; ++i) {
    std::vector<Runs> resampled;
    for (const auto& g : groups) {
      std::uniform_int_distribution<std::size_t> pick(0, g.size() - 1);
      Runs r;
      for (std::size_t k = 0; k < g.size(); ++k)
        r.push_back(g[pick(random)]);
      resampled.push_back(std::move(r));
    }
    if (auto e = statistic(resampled)) estimates.push_back(*e);
  }
  if (estimates.size() < kResamples / 2) return std::nullopt;
  std::sort(estimates.begin(), estimates.end());
  return std::make_pair(quantile_of_sorted(estimates, 0.025), quantile_of_sorted(estimates, 0.975));
}

// The summary's head every vendor writes first.
json::object summary_head(const Options& o, int calls);
// The per-variant table every vendor prints first, and the summary's "variants" it returns: the
// turn's wall times, the pooled call cycles and latencies, CPU and load, the completed and
// failed runs, and each run's own figures (seam_report.cpp). A VariantTable says what differs.
struct VariantTable {
  std::string_view seam_title;    // e.g. "<Vendor> call seam"
  std::string_view call_kind;     // "Bash": N sequential <kind> calls per turn
  std::string_view turn_key;      // the turn's wall time's key: "wall_result_ms", "wall_turn_ms"
  std::string_view turn_title;    // and its column: "spawn -> result", "spawn -> turn end"
  std::string_view latency_span;  // what one call latency spans, for the legend
  bool counts_aux_requests;       // the endpoint's aux answers, per variant and per run
  std::function<void(Variant, json::object& entry)> entry_extras;       // may be empty
  std::function<void(const RunRecord&, json::object& run)> run_extras;  // may be empty
};
json::object variant_table(const Options& o, int calls, Outcome& out, const std::vector<RunRecord>& records,
                           const VariantTable& t);
// The CPU table (child, bench, together, load) every vendor prints.
void print_cpu_table(const Options& o, Outcome& out);
// The report of a vendor whose seam is an approval answered in-band (a JSON-RPC approval or an ACP permission): the
// shared table, CPU, the added time per call (unpaired and paired by round, with 95% bootstrap intervals) of
// bare_driver and metaharness_ask against the floor and of metaharness_ask against bare_driver, metaharness's
// in-process share, and one machine-readable line per comparison.
struct ApprovalReport {
  std::string_view seam_title;    // e.g. "<Vendor> approval seam"
  std::string_view call_kind;     // "exec_command"
  std::string_view line_prefix;   // "codex_seam": the machine-readable lines' first word
  bool latency_against_floor;     // the floor announces a call where the other variants do
  std::string_view helper_title;  // the metaharness helper's per-call runs (RunRecord::hook_ms); "" = none
};
// The three paths metaharness's --latency-report times (cli/run_verb.cpp), and a reader that
// keeps their raw samples (RunRecord::own_share_us), for VendorDriver::read_latency_report.
inline constexpr std::array<std::string_view, 3> kOwnShares = {"line_to_requested", "decide_to_answer",
                                                               "line_to_answer"};
std::string read_own_shares(const json::object& report, RunRecord& r);
int approval_report(const ApprovalReport& shape, const Options& o, int calls, const std::vector<RunRecord>& records);
// Writes the JSON summary, names the failed runs; the exit status.
int finish_report(const Options& o, const json::object& summary, const Outcome& out,
                  const std::vector<RunRecord>& records);

// What a vendor's row says; what it leaves out is what most vendors share.
struct VendorDriver {
  std::string_view name;    // `metaharness run <name>`, --<name> FILE
  bool is_default = false;  // the row `--vendor` defaults to (exactly one)
  std::string_view program =
      "mh_seam_bench";  // the name it reports under (a row's old program name, kept for its figures)
  std::array<std::string_view, 4> variant_names;  // by Variant; "" = not offered
  int default_runs = 5;
  int default_timeout_s = 180;
  std::string_view bin_under_vendor;                                              // default under <source>/.vendor
  std::string_view bin_default = "the pinned native binary in <source>/.vendor";  // the default, as --help says it
  std::string_view json_name;             // default summary file name; the work dir's is mh-<its stem>
  std::string_view default_hook_command;  // "" = no command_hook variant
  std::string_view metaharness_helper;    // a program metaharness runs beside it ("" = none)
  MetaharnessShape metaharness;
  void (*run_directly)(const RunContext&, RunRecord&);
  // Takes what it needs from metaharness's --latency-report (read by the shared variant).
  std::string (*read_latency_report)(const json::object& report, RunRecord& r) = &read_own_shares;
  void (*after_metaharness_run)(const fs::path& run_dir, RunRecord& r) = nullptr;
  // The report: approval_report of this shape (a vendor whose seam is an approval answered
  // in-band), else the vendor's own.
  std::optional<ApprovalReport> approval;
  int (*report)(const Options& o, int calls, const std::vector<RunRecord>& records) = nullptr;

  // Its scenario under <source>/bench/scenarios: <name>_40_calls.json.
  std::string scenario() const { return std::string(name) + "_40_calls.json"; }
  // The variable the adapter takes its binary from (as every adapter does): METAHARNESS_<NAME>_BIN.
  std::string bin_env() const;
};

// Each vendor's row registers itself from its own file (seam/seam_<vendor>.cpp, linked into the
// program, so its static initialiser runs): the bench's command line loops over these, by name.
bool register_driver(const VendorDriver* driver);
const std::vector<const VendorDriver*>& drivers();  // by name
extern const VendorDriver* g_vendor;                // the active one

}  // namespace mh::seam
