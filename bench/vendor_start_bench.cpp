// mh_vendor_start_bench: what starting a governed run costs per vendor, every vendor the build
// governs (`metaharness vendor list`) side by side in one invocation, interleaved round-robin:
// `metaharness run <vendor>` on a one-turn text scenario (bench/scenarios/start.json, served on
// every wire) against the scripted endpoint, stdin held open until the turn ends. Per run: spawn
// -> session.started (the vendor's session is open: its init, thread or session/new answered),
// spawn -> turn.ended, spawn -> stream.closed, and the
// vendor's peak resident memory: the VmHWM of every process of the vendor's tree (metaharness's
// descendants, read while the turn is over and the vendor still runs) summed, since a vendor may
// be a launcher running its CLI in a child of its own (Qwen Code's cli-entry.js); the sum is an
// upper bound of the tree's simultaneous peak. With the tree's process count and the machine's
// load beside. Medians and spreads per
// vendor; a JSON summary. Every wait is bounded; a run that does not finish is killed.
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "metaharness/build_info.hpp"
#include "testkit/bench_args.hpp"
#include "testkit/line_reader.hpp"
#include "testkit/proc.hpp"
#include "testkit/stats.hpp"
#include "testkit/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using mh::testkit::ms_between;

struct Vendor {
  std::string name;
  std::string scenario = "start.json";  // under <source>/bench/scenarios: one for every wire
};

// The vendors the binary governs, in registration order (`metaharness vendor list`); empty when
// it cannot say.
std::vector<Vendor> governed_vendors(const fs::path& metaharness) {
  std::vector<Vendor> out;
  const std::string command = "'" + metaharness.string() + "' vendor list";
  std::FILE* pipe = ::popen(command.c_str(), "r");
  if (!pipe) return out;
  std::string text;
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe))
    text += buffer;
  if (::pclose(pipe) != 0) return {};
  std::istringstream lines(text);
  for (std::string id; std::getline(lines, id);)
    if (!id.empty()) out.push_back(Vendor{id});
  return out;
}

struct Sample {
  bool ok = false;
  std::string failure;
  double session_ms = 0, turn_ms = 0, closed_ms = 0, peak_rss_kib = 0, processes = 0, load = 0;
};

// metaharness's children (the vendor it spawned), from /proc/<pid>/task/*/children.
std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& task : fs::directory_iterator("/proc/" + std::to_string(pid) + "/task", ec)) {
    std::istringstream in(mh::testkit::read_file(task.path() / "children"));
    for (pid_t child; in >> child;)
      out.push_back(child);
  }
  return out;
}

// Every descendant of `pid`, depth first.
std::vector<pid_t> descendants_of(pid_t pid) {
  std::vector<pid_t> out;
  for (pid_t child : children_of(pid)) {
    out.push_back(child);
    for (pid_t below : descendants_of(child))
      out.push_back(below);
  }
  return out;
}

double vm_hwm_kib(pid_t pid) {
  std::istringstream in(mh::testkit::read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6));
  return 0;
}

Sample run_once(const fs::path& metaharness, const Vendor& v, const fs::path& dir, int timeout_s) {
  Sample s;
  s.load = mh::testkit::load_average();
  const fs::path scenario = fs::path(mh::build_info::source_dir) / "bench/scenarios" / v.scenario;
  mh::testkit::Subprocess child;
  const Clock::time_point started = Clock::now(), deadline = started + std::chrono::seconds(timeout_s);
  if (auto error = child.spawn({.program = metaharness,
                                .args = {"run", v.name, "-p", "Say you started.", "--model-scenario", scenario.string(),
                                         "--run-dir", (dir / "run").string()},
                                .stderr_file = dir / "stderr.txt"});
      !error.empty()) {
    s.failure = error;
    return s;
  }
  mh::testkit::LineReader reader(child.stdout_fd());
  std::string line;
  Clock::time_point read_at;
  std::optional<Clock::time_point> session_at, turn_at, closed_at;
  std::string close_reason;
  while (!closed_at) {
    if (reader.next(line, read_at, deadline) != mh::testkit::LineReader::Status::line) break;
    boost::system::error_code ec;
    json::value e = json::parse(line, ec);
    if (ec || !e.is_object() || !e.get_object().if_contains("event")) continue;
    const auto& name = e.get_object().at("event");
    if (name == "session.started" && !session_at) {
      session_at = read_at;
    } else if (name == "turn.ended" && !turn_at) {
      turn_at = read_at;
      for (pid_t vendor : descendants_of(child.pid())) {
        s.peak_rss_kib += vm_hwm_kib(vendor);
        ++s.processes;
      }
      child.close_stdin();  // the turn is over: the run winds up
    } else if (name == "stream.closed") {
      closed_at = read_at;
      if (const auto* r = e.get_object().if_contains("reason"); r && r->is_string())
        close_reason = std::string(r->get_string());
    }
  }
  child.close_stdin();
  auto status = child.wait_exit(Clock::now() + 20s);
  child.terminate(5s);
  if (!session_at || !turn_at || !closed_at)
    s.failure = std::string("no ") + (!session_at ? "session.started" : !turn_at ? "turn.ended" : "stream.closed");
  else if (close_reason != "completed")
    s.failure = "stream.closed reason " + close_reason;
  else if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
    s.failure = "metaharness did not exit 0";
  else if (s.peak_rss_kib <= 0)
    s.failure = "no vendor process to read memory from";
  if (!s.failure.empty()) return s;
  s.session_ms = ms_between(started, *session_at);
  s.turn_ms = ms_between(started, *turn_at);
  s.closed_ms = ms_between(started, *closed_at);
  s.ok = true;
  return s;
}

void usage(std::ostream& out) {
  out << "usage: mh_vendor_start_bench [--runs N] [--vendors A,B,...] [--metaharness FILE]\n"
         "                             [--work-dir DIR] [--json FILE] [--timeout-s N] [--keep]\n"
         "  --vendors  a subset of `metaharness vendor list` (default: every one)\n";
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 5, timeout_s = 180;
  bool keep = false;
  std::string vendors_arg;  // empty: every vendor the binary governs
  fs::path metaharness = fs::canonical("/proc/self/exe").parent_path() / "metaharness", root, json_out;
  mh::testkit::BenchArgs args{.values = {{"--runs", [&](const std::string& v) { runs = std::stoi(v); }},
                                         {"--timeout-s", [&](const std::string& v) { timeout_s = std::stoi(v); }},
                                         {"--vendors", [&](const std::string& v) { vendors_arg = v; }},
                                         {"--metaharness", [&](const std::string& v) { metaharness = v; }},
                                         {"--work-dir", [&](const std::string& v) { root = v; }},
                                         {"--json", [&](const std::string& v) { json_out = v; }}},
                              .switches = {{"--keep", &keep}}};
  if (!mh::testkit::parse_bench_args(argc, argv, "mh_vendor_start_bench", args, &usage)) return 2;
  if (auto error = mh::testkit::prepare_work_root(root, "mh-vendor-start"); !error.empty()) {
    std::cerr << "mh_vendor_start_bench: " << error << "\n";
    return 2;
  }
  const std::vector<Vendor> governed = governed_vendors(metaharness);
  if (governed.empty()) {
    std::cerr << "mh_vendor_start_bench: " << metaharness.string() << " vendor list named no vendor\n";
    return 2;
  }
  std::vector<Vendor> vendors;
  for (const auto& v : governed)
    if (vendors_arg.empty() || ("," + vendors_arg + ",").find("," + v.name + ",") != std::string::npos)
      vendors.push_back(v);

  std::map<std::string, std::vector<Sample>> samples;
  int failed = 0;
  for (int round = 0; round <= runs; ++round)  // round 0: a warm-up, discarded
    for (const auto& v : vendors) {
      fs::path dir = root / (v.name + "-" + std::to_string(round));
      fs::create_directories(dir);
      Sample s = run_once(metaharness, v, dir, timeout_s);
      if (!s.ok) {
        ++failed;
        std::cerr << v.name << " round " << round << ": " << s.failure << " (kept: " << dir.string() << ")\n";
        continue;
      }
      if (!keep) fs::remove_all(dir);
      if (round > 0) samples[v.name].push_back(s);
    }

  json::object summary{{"runs", runs}, {"load_average_end", mh::testkit::load_average()}};
  std::printf("%-10s %5s  %-24s %-24s %-24s %-28s %-10s %s\n", "vendor", "runs", "spawn -> session.started ms",
              "spawn -> turn.ended ms", "spawn -> stream.closed ms", "vendor tree peak RSS (VmHWM) MiB", "processes",
              "load");
  for (const auto& v : vendors) {
    auto& list = samples[v.name];
    auto column = [&](double Sample::*field, double scale = 1) {
      std::vector<double> values;
      for (const auto& s : list)
        values.push_back(s.*field / scale);
      return mh::testkit::spread_of(values);
    };
    auto session = column(&Sample::session_ms), turn = column(&Sample::turn_ms), closed = column(&Sample::closed_ms),
         rss = column(&Sample::peak_rss_kib, 1024), processes = column(&Sample::processes),
         load = column(&Sample::load);
    std::printf("%-10s %5zu  %-24s %-24s %-24s %-28s %-10s %s\n", v.name.c_str(), list.size(),
                mh::testkit::spread_text(session, 0).c_str(), mh::testkit::spread_text(turn, 0).c_str(),
                mh::testkit::spread_text(closed, 0).c_str(), mh::testkit::spread_text(rss, 0).c_str(),
                mh::testkit::spread_text(processes, 0).c_str(), mh::testkit::spread_text(load, 2).c_str());
    summary[v.name] = json::object{{"session_started_ms", mh::testkit::to_json(session)},
                                   {"turn_ended_ms", mh::testkit::to_json(turn)},
                                   {"stream_closed_ms", mh::testkit::to_json(closed)},
                                   {"peak_rss_mib", mh::testkit::to_json(rss)},
                                   {"processes", mh::testkit::to_json(processes)},
                                   {"load", mh::testkit::to_json(load)},
                                   {"completed", list.size()}};
  }
  if (json_out.empty()) json_out = root / "vendor-start-bench.json";
  std::ofstream(json_out) << json::serialize(summary) << "\n";
  std::cout << "summary: " << json_out.string() << "\n";
  return failed == 0 ? 0 : 1;
}
