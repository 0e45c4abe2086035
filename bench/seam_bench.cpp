// mh_seam_bench: what deciding a tool call costs, per call, measured with the REAL vendor CLI
// against the project's scripted model endpoint (issues 3 and 5). One invocation runs one
// vendor's variants side by side, interleaved round-robin, each a single turn of N sequential
// shell calls: `--vendor NAME`, one of the rows seam/seam_<vendor>.cpp register (--list-vendors;
// each row names its variants: a floor, a bare driver, a command hook where the vendor has one,
// metaharness_ask).
//
// Per run it records the wall time from the spawn to the turn's end (the vendor's own end of
// turn record; turn.ended for metaharness) and to the end of the stream (stdout EOF;
// stream.closed), the span between the first and the last main-loop request the scripted
// endpoint received (which holds exactly the N call cycles and nothing of start-up or
// shut-down), every call cycle (gap between successive calls as the driver sees them) and every
// call latency (a call seen -> its result seen), and the CPU the run cost. The added time per
// call of a variant is (median(variant) - median(floor)) / N for per-turn figures, the
// difference of the medians for per-call ones; 95% bootstrap intervals say how much of a
// difference is noise. metaharness's own share comes from the --latency-report files it writes.
// Output: a table on stdout and a JSON summary.
//
// This file is what the vendors share: the variant loop, the metaharness ask variant, the
// command line. Every wait is bounded; a run that does not finish in time is killed (its process
// group) and reaped, and the program then exits non-zero.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>
#include <tuple>

#include "bench/seam/seam.hpp"
#include "daemon/model/scripted_endpoint.hpp"
#include "metaharness/build_info.hpp"
#include "testkit/bench_args.hpp"
#include "testkit/stop_signals.hpp"

namespace mh::seam {

std::atomic<pid_t> g_running_child{0};
volatile std::sig_atomic_t g_stop_requested = 0;
const VendorDriver* g_vendor = nullptr;  // the default row until --vendor names another (parse_options)

namespace {
std::vector<const VendorDriver*>& registered() {
  static std::vector<const VendorDriver*> all;
  return all;
}
}  // namespace

bool register_driver(const VendorDriver* driver) {
  auto& all = registered();
  all.insert(std::upper_bound(all.begin(), all.end(), driver,
                              [](const VendorDriver* a, const VendorDriver* b) { return a->name < b->name; }),
             driver);
  return true;
}

const std::vector<const VendorDriver*>& drivers() {
  return registered();
}

// The rows' names as the help and the refusals list them: "a, b or c".
std::string driver_names(bool mark_default) {
  std::string out;
  const auto& all = drivers();
  for (std::size_t i = 0; i < all.size(); ++i) {
    out += i == 0 ? "" : i + 1 == all.size() ? " or " : ", ";
    out += std::string(all[i]->name) + (mark_default && all[i]->is_default ? " (default)" : "");
  }
  return out;
}

std::string VendorDriver::bin_env() const {
  std::string var = "METAHARNESS_" + std::string(name) + "_BIN";
  std::transform(var.begin(), var.end(), var.begin(), [](unsigned char ch) { return std::toupper(ch); });
  return var;
}

std::string_view name_of(Variant v) {
  return g_vendor->variant_names[static_cast<std::size_t>(v)];
}

std::optional<std::string> string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v && v->is_string()) return std::string(v->get_string());
  return std::nullopt;
}

std::unique_ptr<model::ScriptedEndpoint> RunContext::start_endpoint(RunRecord& r) const {
  auto scenario = model::load_scenario_file(o.scenario);
  if (!scenario) {
    r.failure = "scenario: " + scenario.error().message();
    return nullptr;
  }
  auto endpoint = std::make_unique<model::ScriptedEndpoint>(
      io, std::move(*scenario), model::EndpointOptions{.log_path = r.dir / "model-requests.jsonl"});
  if (auto port = endpoint->start(); !port) {
    r.failure = "endpoint: " + port.error().message();
    return nullptr;
  }
  return endpoint;
}

std::string RunContext::check_files(const fs::path& work) const {
  for (int i = 1; i <= calls; ++i)
    if (!fs::exists(work / ("f" + std::to_string(i)))) return "f" + std::to_string(i) + " was not created";
  return "";
}

std::string RunContext::span_from(const std::vector<double>& step_received_ms, RunRecord& r) const {
  if (static_cast<int>(step_received_ms.size()) != calls + 1)
    return "the endpoint answered " + std::to_string(step_received_ms.size()) + " main-loop requests with steps, not " +
           std::to_string(calls + 1);
  r.span_ms = step_received_ms.back() - step_received_ms.front();
  return "";
}

std::optional<json::object> next_object(LineReader& reader, std::string& line, Clock::time_point& read_at,
                                        Clock::time_point deadline, std::string_view before, RunRecord& r,
                                        std::vector<std::string>* keep) {
  for (;;) {
    auto status = reader.next(line, read_at, deadline);
    if (status != LineReader::Status::line) {
      r.failure = g_stop_requested                        ? "stopped by a signal"
                  : status == LineReader::Status::timeout ? "timed out before " + std::string(before)
                                                          : "stdout ended before " + std::string(before);
      return std::nullopt;
    }
    if (keep) keep->push_back(line);
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (!ec && v.is_object()) return std::move(v.get_object());
  }
}

bool DirectChild::spawn(testkit::SpawnOptions options, RunRecord& r) {
  child.track_in(&g_running_child);
  options.stderr_file = r.dir / "stderr.txt";
  started = Clock::now();
  deadline = c.deadline_from(started);
  if (auto error = child.spawn(options); !error.empty()) {
    r.failure = error;
    return false;
  }
  reader.emplace(child.stdout_fd(), &g_stop_requested);
  return true;
}

void DirectChild::read_rpc(std::string_view before, RunRecord& r, const RpcHandler& handle) {
  while (!turn_done_at && r.failure.empty()) {
    auto m = next_object(*reader, line, read_at, deadline, before, r, c.o.keep ? &transcript : nullptr);
    if (!m) return;
    handle(*m, m->if_contains("id"), string_at(*m, "method"));
  }
}

// What the endpoint served, checked. Main-loop requests are the ones that offer tools (the
// endpoint's default rule): every request of the vendor's agent loop carries its tool list, and each
// is answered with a step (or, past the script, the `exhausted` text). A run must show exactly
// N + 1 of them, all answered with steps: the prompt, then one after each tool result. Requests
// without tools would get the `aux` answer; the vendors measured send none in such a turn (none
// was seen in any run), but they would not be model steps of the loop, so they are counted and
// reported rather than refused. Any other answer (unauthorized, not found, ...) fails the run.
std::string RunContext::check_requests(const std::vector<Served>& served, RunRecord& r) const {
  std::vector<double> steps;
  int exhausted = 0;
  for (const auto& s : served) {
    if (s.answer == "step")
      steps.push_back(s.received_ms);
    else if (s.answer == "aux")
      ++r.aux_requests;
    else if (s.answer == "exhausted")
      ++exhausted;
    else
      return "the endpoint answered a request with " + s.answer;
  }
  if (exhausted > 0)
    return "the endpoint ran out of steps: " + std::to_string(exhausted) + " main-loop request(s) beyond the " +
           std::to_string(calls + 1) + " scripted";
  if (static_cast<int>(steps.size()) != calls + 1)
    return "the endpoint answered " + std::to_string(steps.size()) + " main-loop requests with steps, not " +
           std::to_string(calls + 1);
  r.span_ms = steps.back() - steps.front();
  return "";
}

namespace {

using namespace std::chrono_literals;

extern "C" void on_stop_signal(int) {
  g_stop_requested = 1;
  if (pid_t child = g_running_child.load(); child > 0) ::kill(child, SIGTERM);
}

// The endpoint's io_context runs on one thread of its own for the whole bench.
struct EndpointHost {
  boost::asio::io_context io;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard{io.get_executor()};
  std::thread thread{[this] { io.run(); }};
  ~EndpointHost() {
    guard.reset();
    io.stop();
    thread.join();
  }
};

// metaharness's --latency-report, parsed, then read by the vendor.
std::string read_latency_report(const fs::path& file, RunRecord& r) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  boost::system::error_code ec;
  json::value v = json::parse(text.str(), ec);
  if (ec || !v.is_object()) return "cannot read the latency report " + file.string();
  return g_vendor->read_latency_report(v.get_object(), r);
}

class Bench {
 public:
  Bench(const Options& options, int calls) : o_(options), calls_(calls) {}

  RunRecord run(Variant v, int round) {
    RunRecord r;
    r.variant = v;
    r.round = round;
    std::ostringstream dir_name;
    dir_name << (round < 0 ? "warmup" : "round") << std::abs(round < 0 ? round + 1 : round) << "-" << name_of(v);
    r.dir = o_.work_root / dir_name.str();
    std::error_code ec;
    fs::remove_all(r.dir, ec);
    fs::create_directories(r.dir, ec);
    if (ec) {
      r.failure = "cannot create " + r.dir.string() + ": " + ec.message();
      return r;
    }
    r.load_before = testkit::load_average();
    const double cpu_before = testkit::own_cpu_ms();
    if (v == Variant::metaharness_ask)
      run_metaharness(r);
    else
      g_vendor->run_directly(RunContext{o_, calls_, host_.io}, r);
    r.bench_cpu_ms = testkit::own_cpu_ms() - cpu_before;
    r.cpu_ms = r.child_cpu_ms + r.bench_cpu_ms;
    r.match_latencies();
    if (r.ok && !o_.keep) fs::remove_all(r.dir, ec);
    return r;
  }

 private:
  // `metaharness run <vendor> --decisions ask`; the bench is the client and answers every
  // tool.requested with tool.decide allow at once.
  void run_metaharness(RunRecord& r) {
    const MetaharnessShape& shape = g_vendor->metaharness;
    const RunContext c{o_, calls_, host_.io};
    const fs::path run_dir = r.dir / "run", home = r.dir / "home", tmp = r.dir / "tmp";
    const fs::path latency_file = r.dir / "latency.json";
    fs::create_directories(home);
    fs::create_directories(tmp);
    std::vector<std::string> args = {"run", std::string(g_vendor->name), "-p", o_.prompt, "--decisions", "ask"};
    if (shape.model_flag) args.insert(args.end(), {"--model", o_.model});
    args.insert(args.end(), {"--model-scenario", o_.scenario.string(), "--latency-report", latency_file.string(),
                             "--run-dir", run_dir.string()});
    // metaharness builds the CLI's environment (and its config) itself; it only needs to find
    // the same binary (and its helper programs beside it).
    std::vector<std::string> env;
    // LANG, LC_ALL and TZ pass through to the vendor in some adapters' plans; the direct variants
    // pass them too, so every variant's CLI sees the same locale.
    if (shape.pass_locale)
      for (const char* name : {"LANG", "LC_ALL", "TZ"})
        if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
    env.insert(env.end(), {"HOME=" + home.string(), "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + tmp.string(),
                           g_vendor->bin_env() + "=" + o_.vendor_bin.string()});

    Subprocess child;
    child.track_in(&g_running_child);
    const Clock::time_point started = Clock::now();
    const Clock::time_point deadline = c.deadline_from(started);
    if (auto error = child.spawn(
            {.program = o_.metaharness, .args = args, .env = env, .cwd = r.dir, .stderr_file = r.dir / "stderr.txt"});
        !error.empty()) {
      r.failure = error;
      return;
    }
    LineReader reader(child.stdout_fd(), &g_stop_requested);
    std::string line;
    Clock::time_point read_at;
    std::optional<Clock::time_point> turn_ended_at, closed_at;
    std::string close_reason, stop_reason;
    int command_number = 0;
    while (!closed_at) {
      auto object = next_object(reader, line, read_at, deadline, "stream.closed", r);
      if (!object) break;
      const json::object& e = *object;
      auto event = string_at(e, "event");
      if (!event) continue;
      if (*event == "tool.requested") {
        auto call = string_at(e, "call_id");
        if (!call) continue;
        const json::value* required = e.if_contains("decision_required");
        const bool asks = required && *required == true;
        if (shape.seen_at_first_announcement) {
          // The first announcement of a call is when the client first sees it (the hook's, for
          // a shell command the hook sees first); the decision is asked for with decision_required.
          if (r.seen_by_id.emplace(*call, ms_between(started, read_at)).second)
            r.call_seen_ms.push_back(ms_between(started, read_at));
        } else if (asks) {
          r.call_seen_ms.push_back(ms_between(started, read_at));
          r.seen_by_id[*call] = ms_between(started, read_at);
        }
        if (!asks) continue;
        std::string decide = R"({"format":"metaharness.command/1","id":"d)" + std::to_string(++command_number) +
                             R"(","command":"tool.decide","call_id":)" + json::serialize(json::value(*call)) +
                             R"(,"decision":{"decision":"allow"}})";
        child.write_line(decide);
        // Once every call is decided nothing more is needed: the run ends after the turn.
        if (++r.calls_answered == calls_ && !shape.close_at_turn_end) child.close_stdin();
      } else if (*event == "tool.result") {
        if (auto call = string_at(e, "call_id")) r.done_by_id[*call] = ms_between(started, read_at);
      } else if (*event == "turn.ended") {
        turn_ended_at = read_at;
        stop_reason = string_at(e, "stop_reason").value_or("");
        // The turn is over and nothing more will be asked: closing the command source ends
        // the run (no --keep-open).
        if (shape.close_at_turn_end) child.close_stdin();
      } else if (*event == "stream.closed") {
        closed_at = read_at;
        close_reason = string_at(e, "reason").value_or("");
      }
    }
    child.close_stdin();
    std::optional<int> status;
    if (r.failure.empty()) {
      reader.drain(deadline);
      status = child.wait_exit(Clock::now() + 20s);
      if (!status) r.failure = "metaharness did not exit after stream.closed";
    }
    child.terminate(10s);
    r.child_cpu_ms = child.cpu_ms();
    if (!r.failure.empty()) return;

    if (!turn_ended_at)
      r.failure = "no turn.ended";
    else if (shape.check_stop_reason && stop_reason != "completed")
      r.failure = "turn.ended stop_reason " + stop_reason;
    else if (close_reason != "completed")
      r.failure = "stream.closed reason " + close_reason;
    else if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
      r.failure = "metaharness exit status " + std::to_string(WIFEXITED(*status) ? WEXITSTATUS(*status) : -1);
    else if (r.calls_answered != calls_)
      r.failure = "decided " + std::to_string(r.calls_answered) + " calls, not " + std::to_string(calls_);
    if (!r.failure.empty()) return;
    r.wall_turn_ms = ms_between(started, *turn_ended_at);
    r.wall_end_ms = ms_between(started, *closed_at);

    std::vector<RunContext::Served> served;
    std::vector<double> steps;
    std::ifstream log(run_dir / "model-requests.jsonl");
    for (std::string record; std::getline(log, record);) {
      boost::system::error_code ec;
      json::value v = json::parse(record, ec);
      if (ec || !v.is_object()) continue;
      const auto& o = v.get_object();
      if (string_at(o, "kind") != "request") continue;
      const json::value* received = o.if_contains("received_ms");
      const std::string answer = string_at(o, "answer").value_or("?");
      served.push_back({answer, received ? received->to_number<double>() : 0.0});
      if (answer == "step") steps.push_back(o.at("received_ms").to_number<double>());
    }
    r.failure = shape.strict_requests ? c.check_requests(served, r) : c.span_from(steps, r);
    if (r.failure.empty()) r.failure = c.check_files(run_dir / "scratch/work");
    if (r.failure.empty()) r.failure = read_latency_report(latency_file, r);
    if (r.failure.empty() && g_vendor->after_metaharness_run) g_vendor->after_metaharness_run(run_dir, r);
    r.ok = r.failure.empty();
  }

  const Options& o_;
  int calls_;
  EndpointHost host_;
};

std::optional<Variant> variant_named(std::string_view name) {
  for (Variant v : kVariants)
    if (!name_of(v).empty() && name_of(v) == name) return v;
  return std::nullopt;
}

void usage(std::ostream& out) {
  const VendorDriver& d = *g_vendor;
  std::string variants;
  for (Variant v : kVariants)
    if (!name_of(v).empty()) variants += (variants.empty() ? "" : ",") + std::string(name_of(v));
  std::string vendor_file = "--" + std::string(d.name) + " FILE";
  vendor_file.resize(std::max<std::size_t>(vendor_file.size() + 1, 20), ' ');  // the help's column
  const std::string helper =
      d.metaharness_helper.empty() ? "" : " (" + std::string(d.metaharness_helper) + " beside it)";
  std::string choices;
  for (const VendorDriver* row : drivers())
    choices += (choices.empty() ? "" : "|") + std::string(row->name);
  out << "usage: mh_seam_bench [--vendor " << choices << "] [options]   (options for --vendor " << d.name << ")\n"
      << "       mh_seam_bench --list-vendors   (one row a line, the default's marked: what scripts/bench.sh loops "
         "over)\n"
      << "  --vendor NAME       the CLI measured: " << driver_names(true) << "\n"
      << "  --runs N            measured rounds, each runs every variant once (default " << d.default_runs << ")\n"
      << "  --warmup N          discarded rounds run first (default 1)\n"
      << "  --variants LIST     comma-separated: " << variants << " (default all;\n"
      << "                      " << name_of(Variant::floor)
      << " is always run: every added time is measured against it)\n"
      << "  --scenario FILE     default <source>/bench/scenarios/" << d.scenario() << "\n"
      << "  " << vendor_file << "default $" << d.bin_env() << " or " << d.bin_default << "\n"
      << "  --metaharness FILE  default: metaharness next to this program" << helper << "\n";
  if (d.metaharness.model_flag)
    out << "  --model NAME        the model slug in config.toml (default " << Options{}.model << ", the adapter's)\n";
  out << "  --work-dir DIR      where runs happen (default: a new directory under $TMPDIR or /tmp)\n"
      << "  --json FILE         the JSON summary (default <work-dir>/" << d.json_name << ")\n";
  if (!d.default_hook_command.empty())
    out << "  --hook-command CMD  the command hook's command (default: sh printing the allow)\n";
  out << "  --timeout-s N       bound on one run (default " << d.default_timeout_s << ")\n"
      << "  --keep              keep every run's directory (failed runs are always kept)\n";
}

std::optional<Options> parse_options(int argc, char** argv) {
  // The vendor first: it sets the defaults the other options override.
  for (const VendorDriver* row : drivers())
    if (row->is_default) g_vendor = row;
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string_view(argv[i]) == "--vendor") {
      std::string_view name = argv[i + 1];
      const auto& all = drivers();
      auto it = std::find_if(all.begin(), all.end(), [&](const VendorDriver* row) { return row->name == name; });
      if (it == all.end()) {
        std::cerr << "mh_seam_bench: unknown vendor " << name << " (" << driver_names(false) << ")\n";
        return std::nullopt;
      }
      g_vendor = *it;
    }
  const VendorDriver& d = *g_vendor;
  const std::string program(d.program);
  Options o;
  o.runs = d.default_runs;
  o.timeout_s = d.default_timeout_s;
  o.hook_command = std::string(d.default_hook_command);
  for (Variant v : kVariants)
    if (!name_of(v).empty()) o.variants.push_back(v);
  const fs::path source(mh::build_info::source_dir);
  o.scenario = source / "bench/scenarios" / d.scenario();
  // The adapter's own resolution: METAHARNESS_<VENDOR>_BIN, else the pinned binary.
  if (const char* bin = std::getenv(d.bin_env().c_str()); bin && *bin)
    o.vendor_bin = bin;
  else
    o.vendor_bin = source / ".vendor" / d.bin_under_vendor;
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  o.metaharness = (ec ? fs::path(argv[0]).parent_path() : self.parent_path()) / "metaharness";
  const std::string vendor_flag = "--" + std::string(d.name);
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) {
        std::cerr << program << ": " << arg << " needs a value\n";
        return std::nullopt;
      }
      return std::string(argv[++i]);
    };
    auto number = [&](int& out) {
      auto v = value();
      if (!v) return false;
      char* end = nullptr;
      long n = std::strtol(v->c_str(), &end, 10);
      if (*end != '\0' || n < 0 || n > 100000) {
        std::cerr << program << ": " << arg << " needs a number, got " << *v << "\n";
        return false;
      }
      out = static_cast<int>(n);
      return true;
    };
    if (arg == "--vendor") {
      ++i;  // read above
    } else if (arg == "--runs") {
      if (!number(o.runs) || o.runs < 1) return std::nullopt;
    } else if (arg == "--warmup") {
      if (!number(o.warmup)) return std::nullopt;
    } else if (arg == "--timeout-s") {
      if (!number(o.timeout_s) || o.timeout_s < 1) return std::nullopt;
    } else if (arg == "--variants") {
      auto v = value();
      if (!v) return std::nullopt;
      o.variants.clear();
      std::stringstream list(*v);
      for (std::string name; std::getline(list, name, ',');) {
        auto variant = variant_named(name);
        if (!variant) {
          std::cerr << program << ": unknown variant " << name << "\n";
          return std::nullopt;
        }
        o.variants.push_back(*variant);
      }
      // The floor is what every added time is measured against.
      if (std::find(o.variants.begin(), o.variants.end(), Variant::floor) == o.variants.end())
        o.variants.insert(o.variants.begin(), Variant::floor);
    } else if (arg == "--scenario" || arg == vendor_flag || arg == "--metaharness" || arg == "--work-dir" ||
               arg == "--json" || (arg == "--hook-command" && !d.default_hook_command.empty()) ||
               (arg == "--model" && d.metaharness.model_flag)) {
      auto v = value();
      if (!v) return std::nullopt;
      if (arg == "--scenario")
        o.scenario = *v;
      else if (arg == vendor_flag)
        o.vendor_bin = *v;
      else if (arg == "--metaharness")
        o.metaharness = *v;
      else if (arg == "--work-dir")
        o.work_root = *v;
      else if (arg == "--json")
        o.json_out = *v;
      else if (arg == "--model")
        o.model = *v;
      else
        o.hook_command = *v;
    } else if (arg == "--keep") {
      o.keep = true;
    } else if (arg == "-h" || arg == "--help") {
      usage(std::cout);
      std::exit(0);
    } else {
      std::cerr << program << ": unknown option " << arg << "\n";
      usage(std::cerr);
      return std::nullopt;
    }
  }
  return o;
}

}  // namespace
}  // namespace mh::seam

int main(int argc, char** argv) {
  using namespace mh::seam;
  mh::testkit::route_stop_signals(on_stop_signal);
  if (argc == 2 && std::string_view(argv[1]) == "--list-vendors") {
    for (const VendorDriver* row : drivers())
      std::cout << row->name << (row->is_default ? " default" : "") << "\n";
    return 0;
  }
  auto parsed = parse_options(argc, argv);
  if (!parsed) return 2;
  Options o = std::move(*parsed);
  const VendorDriver& d = *g_vendor;
  const std::string program(d.program);

  auto scenario = mh::model::load_scenario_file(o.scenario);
  if (!scenario) {
    std::cerr << program << ": the scenario " << o.scenario.string() << " is refused: " << scenario.error().message()
              << "\n";
    return 2;
  }
  // The wire the row's CLI speaks is the one its scenario serves (make_seam_scenario.sh writes a
  // scenario of one wire, the vendor's): its tool calls are counted there.
  std::vector<mh::model::Wire> served;
  for (mh::model::Wire w : mh::model::kWires)
    if (scenario->serves(w)) served.push_back(w);
  if (served.size() != 1) {
    std::cerr << program << ": the scenario serves " << served.size() << " wires; a seam scenario serves one, the wire "
              << d.name << " speaks\n";
    return 2;
  }
  const mh::model::Wire wire = served.front();
  // N = the tool calls the scenario makes (on the vendor's wire), one per step.
  int calls = 0;
  for (const auto& step : scenario->steps)
    for (const auto& block : step.form(wire).content)
      if (block.kind == mh::model::Block::Kind::tool_call) calls += static_cast<int>(step.repeat);
  if (calls == 0) {
    std::cerr << program << ": the scenario makes no tool call\n";
    return 2;
  }
  const bool with_metaharness =
      std::find(o.variants.begin(), o.variants.end(), Variant::metaharness_ask) != o.variants.end();
  const fs::path helper = o.metaharness.parent_path() / d.metaharness_helper;
  for (const auto& [what, path, needed] :
       {std::tuple{std::string(d.name), o.vendor_bin, true},
        std::tuple{std::string("metaharness"), o.metaharness, with_metaharness},
        std::tuple{std::string(d.metaharness_helper), helper, with_metaharness && !d.metaharness_helper.empty()}}) {
    if (needed && ::access(path.c_str(), X_OK) != 0) {
      std::cerr << program << ": no executable " << what << " at " << path.string() << "\n";
      return 2;
    }
  }
  // Every run has its own working directory: the paths it is given must not depend on ours.
  o.scenario = fs::absolute(o.scenario);
  o.vendor_bin = fs::absolute(o.vendor_bin);
  o.metaharness = fs::absolute(o.metaharness);
  if (auto e = mh::testkit::prepare_work_root(o.work_root, "mh-" + fs::path(d.json_name).stem().string()); !e.empty()) {
    std::cerr << program << ": " << e << "\n";
    return 2;
  }
  if (o.json_out.empty()) o.json_out = o.work_root / d.json_name;
  std::cerr << program << ": " << calls << " calls per turn; runs in " << o.work_root.string() << "\n";

  std::vector<RunRecord> records;
  {
    Bench bench(o, calls);
    const int rounds = o.warmup + o.runs;
    for (int index = 0; index < rounds; ++index) {
      int round = index < o.warmup ? -(index + 1) : index - o.warmup;  // warm-ups are negative
      // Round-robin, with the starting variant rotated every round so that no variant always
      // runs right after the same other one.
      for (std::size_t k = 0; k < o.variants.size(); ++k) {
        Variant v = o.variants[(k + static_cast<std::size_t>(index)) % o.variants.size()];
        RunRecord r = bench.run(v, round);
        std::cerr << "  " << (round < 0 ? "warm-up" : "round " + std::to_string(round)) << " " << name_of(v) << ": "
                  << (r.ok ? fixed(r.wall_turn_ms, 0) + " ms to the turn's end, span " + fixed(r.span_ms, 0) + " ms"
                           : "FAILED: " + r.failure)
                  << "\n";
        records.push_back(std::move(r));
        if (g_stop_requested) break;
      }
      if (g_stop_requested) {
        std::cerr << program << ": stopped by a signal\n";
        return 130;
      }
    }
  }
  return d.approval ? approval_report(*d.approval, o, calls, records) : d.report(o, calls, records);
}
