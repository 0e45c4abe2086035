// mh_adoption_bench: the numbers of issue 11 item 5 (runs that outlive the daemon), side by side
// in one invocation, on the real `metaharness daemon` hosting the stand-in harness (tests/standin)
// in place of a vendor CLI:
//
//   supervised    a daemon with runs.supervise = true and on_stop = "detach"; N runs (ask mode,
//                 long deadline) each stopped at tool.requested, waiting for a decision. With all
//                 N pending: the memory of every run's `metaharness-supervisor` (VmRSS, RssAnon
//                 from /proc/<pid>/status, Pss from smaps_rollup; pids from each run's
//                 supervisor.json, checked against /proc/<pid>/cmdline) and the daemon's own RSS
//                 against its RSS at READY. Then SIGKILL to the daemon alone, and a new daemon on
//                 the same state dir: exec -> READY=1 (its NOTIFY_SOCKET), and exec -> each run's
//                 `pending` reply on an attach opened right after READY (the run adopted and
//                 live: an attach waits for the adoption). Then every call allowed; each run must
//                 close `completed` and its supervisor exit (released).
//   unsupervised  the same N runs with runs.supervise off, the same SIGKILL and restart: the runs
//                 are recovered (closed `error` at start, their stand-ins killed); exec -> READY=1
//                 and exec -> each run's `end` on attach.
//
//   close at N   (--close-at 5,50,200 --baseline DIR) only the supervised phase, once per N with
//                 today's programs (DIR: metaharness, metaharness-supervisor, the stand-in of
//                 an earlier build) and once with these, alternating which goes first: allow ->
//                 stream.closed side by side in one invocation (issue 26 §5: closes that queue
//                 behind each other show as a median growing with N).
//
// Every phase has its own daemons (own state dir, socket and NOTIFY_SOCKET, which a thread here
// drains as systemd would). Every wait is bounded. At the end nothing the bench started may be
// left: each supervisor (by the pid in its run's supervisor.json, after /proc/<pid>/cmdline names
// that run) and each stand-in (by the script path in its environment) still alive is killed and
// counted. Output: a readable table on stdout and a JSON summary (--json, and on stdout). Exit
// status 0; 1 when a run was not adopted, did not complete or left a process behind (a finding
// about the daemon); 2 when the bench itself failed.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "testkit/bench_args.hpp"
#include "testkit/daemon_process.hpp"
#include "testkit/proc.hpp"
#include "testkit/socket_client.hpp"
#include "testkit/stats.hpp"
#include "testkit/stop_signals.hpp"
#include "tests/standin/standin_identity.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace std::chrono_literals;
using namespace mh::testkit;

// The one-minute load average and CPU pressure (some, avg10): how steady the machine was.
struct Steadiness {
  double load1 = 0, load5 = 0, pressure_some_avg10 = 0;
};

Steadiness steadiness_now() {
  Steadiness s;
  std::ifstream in("/proc/loadavg");
  in >> s.load1 >> s.load5;
  std::string pressure = read_file("/proc/pressure/cpu");
  if (auto at = pressure.find("avg10="); at != std::string::npos)
    s.pressure_some_avg10 = std::stod(pressure.substr(at + 6));
  return s;
}

json::object to_json(const Steadiness& s) {
  return json::object{{"load1", s.load1}, {"load5", s.load5}, {"cpu_pressure_some_avg10", s.pressure_some_avg10}};
}

std::string steadiness_text(const Steadiness& s) {
  return "load " + fixed(s.load1, 2) + " / " + fixed(s.load5, 2) + " (1 / 5 min), CPU pressure some avg10 " +
         fixed(s.pressure_some_avg10, 1) + " %";
}

double max_of(const std::vector<double>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v)
    s += x;
  return s;
}

// ---------------------------------------------------------------------------------------------
// Processes, from /proc
// ---------------------------------------------------------------------------------------------

// One process's memory in KiB: VmRSS and RssAnon from status, Pss from smaps_rollup (nullopt
// where the kernel has no smaps_rollup).
struct Memory {
  long vm_rss_kb = 0, rss_anon_kb = 0;
  std::optional<long> pss_kb;
};

std::optional<Memory> memory_of(pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::string status = read_file(proc + "/status");
  if (status.empty()) return std::nullopt;
  Memory m;
  auto field = [&](std::string_view key) -> long {
    auto at = status.find(std::string(key) + ":");
    return at == std::string::npos ? 0 : std::atol(status.c_str() + at + key.size() + 1);
  };
  m.vm_rss_kb = field("VmRSS");
  m.rss_anon_kb = field("RssAnon");
  std::string rollup = read_file(proc + "/smaps_rollup");
  if (auto at = rollup.find("\nPss:"); at != std::string::npos) m.pss_kb = std::atol(rollup.c_str() + at + 5);
  return m;
}

// Kills each process (pidfd, so a recycled pid is never hit) and waits for it, bounded; returns
// how many were killed.
std::size_t kill_all(const std::vector<pid_t>& pids) {
  std::size_t killed = 0;
  for (pid_t pid : pids) {
    int pidfd = open_pidfd(pid);
    if (pidfd < 0) continue;
    kill_by_pidfd(pidfd);
    wait_pidfd(pidfd, monotonic_ns() + 5'000'000'000);
    ::close(pidfd);
    ++killed;
  }
  return killed;
}

// The supervisor of a run: the pid in its supervisor.json, if /proc/<pid>/cmdline names this
// run's spec (a pid that was recycled names something else) and it is not a zombie.
std::optional<pid_t> live_supervisor_of(const fs::path& run_dir) {
  boost::system::error_code ec;
  json::value state = json::parse(read_file(run_dir / "supervisor.json"), ec);
  if (ec || !state.is_object() || !state.as_object().contains("supervisor_pid")) return std::nullopt;
  auto pid = static_cast<pid_t>(state.as_object().at("supervisor_pid").to_number<std::int64_t>());
  const std::string proc = "/proc/" + std::to_string(pid);
  if (read_file(proc + "/cmdline").find((run_dir / "supervisor-spec.json").string()) == std::string::npos)
    return std::nullopt;
  if (read_file(proc + "/status").find("State:\tZ") != std::string::npos) return std::nullopt;
  return pid;
}

// Polls every connection until `done()` or the deadline; each line read goes to on_line(index,
// line). False at the deadline (or a stop signal).
template <typename OnLine, typename Done>
bool pump(std::vector<std::unique_ptr<LineClient>>& conns, std::chrono::milliseconds timeout, OnLine on_line,
          Done done) {
  const std::int64_t deadline = monotonic_ns() + std::chrono::nanoseconds(timeout).count();
  std::vector<pollfd> fds;
  std::vector<std::size_t> index;
  while (!done()) {
    if (stop_requested() || monotonic_ns() >= deadline) return false;
    fds.clear();
    index.clear();
    for (std::size_t i = 0; i < conns.size(); ++i)
      if (conns[i]->connected() && !conns[i]->eof()) {
        fds.push_back(pollfd{conns[i]->fd(), POLLIN, 0});
        index.push_back(i);
      }
    if (fds.empty()) return done();
    int left_ms = static_cast<int>(std::max<std::int64_t>(1, (deadline - monotonic_ns()) / 1'000'000));
    int ready = ::poll(fds.data(), fds.size(), std::min(left_ms, 1000));
    if (ready <= 0) continue;
    for (std::size_t k = 0; k < fds.size(); ++k)
      if (fds[k].revents)
        for (auto& line : conns[index[k]]->read_available())
          on_line(index[k], line);
  }
  return true;
}

// Waits (bounded) until every run's stream holds `event` (read from its events.jsonl).
std::size_t wait_all_have(const fs::path& runs_dir, const std::vector<std::string>& ids, std::string_view event,
                          std::chrono::seconds timeout) {
  std::vector<std::string> waiting = ids;
  const std::string needle = "\"event\":\"" + std::string(event) + "\"";
  const std::int64_t deadline = monotonic_ns() + std::chrono::nanoseconds(timeout).count();
  while (!waiting.empty() && monotonic_ns() < deadline && !stop_requested()) {
    std::erase_if(waiting, [&](const std::string& id) {
      return read_file(runs_dir / id / "events.jsonl").find(needle) != std::string::npos;
    });
    if (!waiting.empty()) std::this_thread::sleep_for(100ms);  // the poll's period; the bound is the deadline
  }
  return waiting.size();
}

// The reason of a run's stream.closed (the last line of its events.jsonl), or "" when open.
std::string close_reason(const fs::path& run_dir) {
  std::string events = read_file(run_dir / "events.jsonl");
  auto at = events.rfind("\"event\":\"stream.closed\"");
  if (at == std::string::npos) return "";
  auto line_start = events.rfind('\n', at);
  auto line_end = events.find('\n', at);
  std::string_view line =
      std::string_view(events).substr(line_start == std::string::npos ? 0 : line_start + 1,
                                      line_end == std::string::npos ? std::string::npos : line_end - line_start - 1);
  return std::string(string_field(line, "reason"));
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

struct Options {
  fs::path metaharness, standin, supervisor;
  fs::path work_root, json_out;
  bool keep = false;
  std::size_t runs = 200;
  std::int64_t deadline_ms = 600000;
  // --close-at: the Ns, and the build that is "today" (its three programs).
  std::vector<std::size_t> close_at;
  fs::path baseline;
  std::string phase_tag;  // prefixes the phase's directory (the close-at runs have many)
};

void usage(std::ostream& out) {
  out << "usage: mh_adoption_bench [--runs N] [--metaharness PATH] [--standin PATH] [--supervisor PATH]\n"
         "                         [--work-dir DIR] [--json FILE] [--keep]\n"
         "                         [--close-at N1,N2,... --baseline DIR]\n"
         "  --runs N         open runs killed and adopted (default 200)\n"
         "  --metaharness    the daemon binary (default: beside this program)\n"
         "  --standin        the stand-in harness (default: beside this program)\n"
         "  --supervisor     metaharness-supervisor (default: beside this program)\n"
         "  --work-dir DIR   state dirs and scripts (default: a fresh mkdtemp dir)\n"
         "  --json FILE      the summary (default: adoption-bench.json in the work dir)\n"
         "  --keep           keep the run directories\n"
         "  --close-at LIST  only allow -> stream.closed of the supervised phase, at each N of LIST,\n"
         "                   side by side with --baseline's programs (today's), in this one invocation\n"
         "  --baseline DIR   metaharness, metaharness-supervisor and the stand-in of the build\n"
         "                   to compare with (--close-at)\n";
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  fs::path self_dir = fs::canonical("/proc/self/exe").parent_path();
  o.metaharness = self_dir / "metaharness";
  o.standin = self_dir / mh::standin::kProgram;
  o.supervisor = self_dir / "metaharness-supervisor";
  const BenchArgs args{.values = {{"--metaharness", [&](const std::string& v) { o.metaharness = v; }},
                                  {"--standin", [&](const std::string& v) { o.standin = v; }},
                                  {"--supervisor", [&](const std::string& v) { o.supervisor = v; }},
                                  {"--work-dir", [&](const std::string& v) { o.work_root = v; }},
                                  {"--json", [&](const std::string& v) { o.json_out = v; }},
                                  {"--runs", [&](const std::string& v) { o.runs = std::stoul(v); }},
                                  {"--baseline", [&](const std::string& v) { o.baseline = v; }},
                                  {"--close-at",
                                   [&](const std::string& v) {
                                     std::stringstream in(v);
                                     for (std::string n; std::getline(in, n, ',');)
                                       o.close_at.push_back(std::stoul(n));
                                   }}},
                       .switches = {{"--keep", &o.keep}}};
  if (!parse_bench_args(argc, argv, "mh_adoption_bench", args, usage)) return std::nullopt;
  if (o.runs == 0 || std::find(o.close_at.begin(), o.close_at.end(), 0u) != o.close_at.end()) {
    std::cerr << "mh_adoption_bench: --runs and every --close-at N must be at least 1\n";
    return std::nullopt;
  }
  if (o.close_at.empty() != o.baseline.empty()) {
    std::cerr << "mh_adoption_bench: --close-at and --baseline go together\n";
    return std::nullopt;
  }
  return o;
}

std::string daemon_config(const Options& o, bool supervise) {
  std::string c = "[vendor]\n" + std::string(mh::standin::kAdapter) + " = \"" + o.standin.string() +
                  "\"\n[runs]\nsandbox_read_only = [\"" + o.work_root.string() +
                  "\"]\nmax_active = " + std::to_string(o.runs + 10) +
                  "\ndecision_deadline_ms = " + std::to_string(o.deadline_ms) + "\n";
  if (supervise)
    c += "supervise = true\non_stop = \"detach\"\nsupervisor = \"" + o.supervisor.string() +
         "\"\nadopt_within_ms = 600000\n";
  else
    c += "supervise = false\n";  // said: runs.supervise is true by default
  return c + "[server]\nmax_connections = 8192\n[log]\nlevel = \"warning\"\n";
}

// One Bash call that waits for its decision, then a text: each run sits at tool.requested.
json::object run_spec(const fs::path& script, std::int64_t deadline_ms) {
  return standin_run_spec(script, "ask", deadline_ms);
}

std::string standin_marker(const fs::path& phase_dir) {
  return "MH_STANDIN_SCRIPT=" + phase_dir.string() + "/";
}

// ---------------------------------------------------------------------------------------------
// A phase: N runs at tool.requested, SIGKILL, restart, attach every run
// ---------------------------------------------------------------------------------------------

struct PhaseResult {
  bool supervised = false;
  std::string failure;  // the bench itself could not go on
  std::vector<std::string> findings;
  std::size_t runs = 0;
  double submit_s = 0, all_requested_s = 0;
  long daemon_rss_ready_kib = 0, daemon_rss_pending_kib = 0, adopter_rss_kib = 0;
  // The supervisors', with every run pending.
  std::vector<double> sup_rss_kib, sup_anon_kib, sup_pss_kib;
  bool pss_available = true;
  std::size_t standins_after_kill = 0, supervisors_after_kill = 0;
  // The restart.
  double ready_ms = 0;
  std::vector<double> answer_ms;                        // exec -> this run's `pending` (supervised) or `end` (not)
  std::size_t not_answered = 0;                         // no pending / no end within the bound
  std::map<std::string, std::size_t> closed_by_reason;  // after the decisions (supervised) or at start
  std::vector<double> decide_to_closed_ms;
  std::size_t supervisors_left = 0, standins_left = 0;  // after the runs closed (then killed)
  Steadiness before, after;
};

json::object to_json(const PhaseResult& r) {
  json::object reasons;
  for (const auto& [k, v] : r.closed_by_reason)
    reasons[k] = v;
  json::array findings;
  for (const auto& f : r.findings)
    findings.push_back(json::value(f));
  json::object o{{"supervised", r.supervised},
                 {"failure", r.failure.empty() ? json::value(nullptr) : json::value(r.failure)},
                 {"findings", std::move(findings)},
                 {"runs", r.runs},
                 {"submit_s", r.submit_s},
                 {"all_at_tool_requested_s", r.all_requested_s},
                 {"daemon_rss_at_ready_kib", r.daemon_rss_ready_kib},
                 {"daemon_rss_all_pending_kib", r.daemon_rss_pending_kib},
                 {"daemon_rss_per_run_kib",
                  r.runs ? double(r.daemon_rss_pending_kib - r.daemon_rss_ready_kib) / double(r.runs) : 0.0},
                 {"restarted_daemon_rss_kib", r.adopter_rss_kib},
                 {"standins_alive_after_kill", r.standins_after_kill},
                 {"supervisors_alive_after_kill", r.supervisors_after_kill},
                 {"restart_exec_to_ready_ms", r.ready_ms},
                 {"restart_exec_to_answer_median_ms", median(r.answer_ms)},
                 {"restart_exec_to_last_answer_ms", max_of(r.answer_ms)},
                 {"runs_not_answered", r.not_answered},
                 {"closed_by_reason", std::move(reasons)},
                 {"decide_to_closed_median_ms", median(r.decide_to_closed_ms)},
                 {"decide_to_closed_max_ms", max_of(r.decide_to_closed_ms)},
                 {"supervisors_left_after_close", r.supervisors_left},
                 {"standins_left_after_close", r.standins_left},
                 {"steadiness_before", to_json(r.before)},
                 {"steadiness_after", to_json(r.after)}};
  if (r.supervised) {
    o["supervisors_measured"] = r.sup_rss_kib.size();
    o["supervisor_vmrss_median_kib"] = median(r.sup_rss_kib);
    o["supervisor_vmrss_total_kib"] = sum_of(r.sup_rss_kib);
    o["supervisor_rssanon_median_kib"] = median(r.sup_anon_kib);
    o["supervisor_rssanon_total_kib"] = sum_of(r.sup_anon_kib);
    o["supervisor_pss_median_kib"] = r.pss_available ? json::value(median(r.sup_pss_kib)) : json::value(nullptr);
    o["supervisor_pss_total_kib"] = r.pss_available ? json::value(sum_of(r.sup_pss_kib)) : json::value(nullptr);
  }
  return o;
}

// Every supervisor of a state dir still alive (checked by cmdline), by run directory.
std::vector<pid_t> live_supervisors(const fs::path& runs_dir) {
  std::vector<pid_t> pids;
  std::error_code ec;
  for (auto it = fs::directory_iterator(runs_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    if (auto pid = live_supervisor_of(it->path())) pids.push_back(*pid);
  return pids;
}

PhaseResult run_phase(const Options& o, bool supervised) {
  PhaseResult r;
  r.supervised = supervised;
  r.runs = o.runs;
  r.before = steadiness_now();
  const fs::path dir = o.work_root / (o.phase_tag + (supervised ? "supervised" : "unsupervised"));
  const fs::path state = dir / "state", runs_dir = state / "runs";
  fs::create_directories(dir);
  const fs::path script = dir / "one_call.json";
  write_file(script, mh::standin::script_head() + R"("description":"mh_adoption_bench: one call, waits",)"
                                                  R"("turns":[[{"type":"tool_use","id":"toolu_bench","name":"Bash",)"
                                                  R"("input":{"command":"touch decided.txt","description":"bench"}},)"
                                                  R"({"type":"text","text":"done"}]]})");
  const std::string config = daemon_config(o, supervised);
  auto finish = [&](std::string failure) {
    if (!failure.empty() && r.failure.empty()) r.failure = std::move(failure);
    // Whatever of this phase is still alive goes now, and is counted if the runs were closed.
    auto sups = live_supervisors(runs_dir);
    auto standins = processes_with_environment(standin_marker(dir));
    if (r.failure.empty()) {
      r.supervisors_left = sups.size();
      r.standins_left = standins.size();
      if (!sups.empty())
        r.findings.push_back(std::to_string(sups.size()) + " supervisor(s) still alive after their runs closed");
      if (!standins.empty())
        r.findings.push_back(std::to_string(standins.size()) + " stand-in(s) still alive after their runs closed");
    }
    kill_all(sups);
    kill_all(standins);
    r.after = steadiness_now();
    return r;
  };

  // 1. The first daemon: N runs, each at tool.requested.
  std::vector<std::string> ids;
  {
    DaemonProcess first(dir / "daemon1", o.metaharness, state, config);
    if (auto e = first.start(); !e.empty()) return finish(e);
    if (!first.wait_notify("READY=1", 30s)) return finish("the first daemon did not become ready: " + first.log_tail());
    if (auto m = memory_of(first.pid())) r.daemon_rss_ready_kib = m->vm_rss_kb;
    std::string error;
    const std::int64_t submitted_at = monotonic_ns();
    ids = submit_all(first.socket(), std::vector(o.runs, run_spec(script, o.deadline_ms)), error);
    if (ids.empty()) return finish(error + "\n" + first.log_tail());
    r.submit_s = double(monotonic_ns() - submitted_at) / 1e9;
    if (auto left = wait_all_have(runs_dir, ids, "tool.requested", 300s))
      return finish(std::to_string(left) + " run(s) never reached tool.requested\n" + first.log_tail());
    r.all_requested_s = double(monotonic_ns() - submitted_at) / 1e9;
    // Idle, every run pending: a second for lazily touched memory (the status timer) to settle.
    std::this_thread::sleep_for(1s);
    if (auto m = memory_of(first.pid())) r.daemon_rss_pending_kib = m->vm_rss_kb;
    if (supervised) {
      for (const auto& id : ids) {
        auto pid = live_supervisor_of(runs_dir / id);
        auto m = pid ? memory_of(*pid) : std::nullopt;
        if (!m) {
          r.findings.push_back("run " + id + ": no live supervisor to measure while pending");
          continue;
        }
        r.sup_rss_kib.push_back(double(m->vm_rss_kb));
        r.sup_anon_kib.push_back(double(m->rss_anon_kb));
        if (m->pss_kb)
          r.sup_pss_kib.push_back(double(*m->pss_kb));
        else
          r.pss_available = false;
      }
    }
    // 2. The crash: SIGKILL to the daemon alone.
    if (!first.kill_daemon_only()) return finish("the first daemon did not die of SIGKILL");
  }
  r.standins_after_kill = processes_with_environment(standin_marker(dir)).size();
  r.supervisors_after_kill = live_supervisors(runs_dir).size();
  if (supervised && r.supervisors_after_kill != ids.size())
    r.findings.push_back(std::to_string(r.supervisors_after_kill) + " of " + std::to_string(ids.size()) +
                         " supervisors alive after the daemon's SIGKILL");

  // 3. The restart: exec -> READY=1, then every run attached at once.
  DaemonProcess second(dir / "daemon2", o.metaharness, state, config);
  if (auto e = second.start(); !e.empty()) return finish(e);
  auto ready = second.wait_notify("READY=1", 120s);
  if (!ready) return finish("the restarted daemon did not become ready: " + second.log_tail());
  r.ready_ms = double(*ready - second.start_ns()) / 1e6;
  std::vector<std::unique_ptr<LineClient>> conns;
  for (const auto& id : ids) {
    conns.push_back(std::make_unique<LineClient>(second.socket()));
    if (!conns.back()->connected()) return finish("cannot connect to the restarted daemon");
    conns.back()->send_line(socket_request("attach", "a", json::object{{"run_id", id}, {"from_seq", 0}}));
  }
  const std::size_t n = ids.size();
  std::vector<std::optional<std::int64_t>> answered(n), closed(n);
  std::vector<std::string> call_of(n), reason_of(n), refused(n);
  std::size_t answers = 0, closes = 0;
  // Supervised: the answer is `pending` (adopted, live, the call still waiting); unsupervised:
  // `end` (the run was closed at start). `end` in the supervised phase is a run not adopted.
  auto on_line = [&](std::size_t i, const std::string& line) {
    std::string_view reply = string_field(line, "reply");
    std::string_view event = string_field(line, "event");
    if (event == "stream.closed") reason_of[i] = std::string(string_field(line, "reason"));
    if (!answered[i] && (reply == "pending" || reply == "end" || reply == "error")) {
      answered[i] = monotonic_ns();
      ++answers;
      if (reply == "pending") call_of[i] = std::string(string_field(line, "call_id"));
      if (reply == "error") refused[i] = line;
    }
    if (reply == "end" && !closed[i]) {
      closed[i] = monotonic_ns();
      ++closes;
    }
  };
  pump(conns, 180s, on_line, [&] { return answers == n; });
  for (std::size_t i = 0; i < n; ++i) {
    if (answered[i])
      r.answer_ms.push_back(double(*answered[i] - second.start_ns()) / 1e6);
    else
      ++r.not_answered;
    if (!refused[i].empty())
      r.findings.push_back("run " + ids[i] + ": attach refused: " + refused[i]);
    else if (supervised && answered[i] && call_of[i].empty())
      r.findings.push_back("run " + ids[i] + ": closed at the restart instead of adopted (" +
                           (reason_of[i].empty() ? close_reason(runs_dir / ids[i]) : reason_of[i]) + ")");
  }
  if (r.not_answered)
    r.findings.push_back(std::to_string(r.not_answered) + " run(s) gave no " + (supervised ? "pending" : "end") +
                         " on attach within 180 s");
  if (auto m = memory_of(second.pid())) r.adopter_rss_kib = m->vm_rss_kb;

  // 4. Supervised: every call allowed; each run must close `completed`.
  if (supervised) {
    std::vector<std::int64_t> decided_at(n, 0);
    for (std::size_t i = 0; i < n; ++i)
      if (!call_of[i].empty()) {
        decided_at[i] = monotonic_ns();
        conns[i]->send_line(json::serialize(json::object{{"format", "metaharness.command/1"},
                                                         {"id", "d"},
                                                         {"command", "tool.decide"},
                                                         {"call_id", call_of[i]},
                                                         {"decision", json::object{{"decision", "allow"}}}}));
      }
    pump(conns, 300s, on_line, [&] { return closes == n; });
    for (std::size_t i = 0; i < n; ++i)
      if (closed[i] && decided_at[i]) r.decide_to_closed_ms.push_back(double(*closed[i] - decided_at[i]) / 1e6);
  }
  // Every run's reason from its stream (the record, whatever the connections saw).
  std::size_t not_completed = 0;
  for (const auto& id : ids) {
    std::string reason = close_reason(runs_dir / id);
    ++r.closed_by_reason[reason.empty() ? "open" : reason];
    if (reason != (supervised ? "completed" : "error")) ++not_completed;
  }
  if (not_completed)
    r.findings.push_back(std::to_string(not_completed) + " of " + std::to_string(n) + " run(s) did not close " +
                         (supervised ? "completed" : "error"));
  // The supervisors leave once their runs are released; give them a bounded while.
  if (supervised) {
    for (pid_t pid : live_supervisors(runs_dir)) {
      int pidfd = open_pidfd(pid);
      if (pidfd < 0) continue;
      wait_pidfd(pidfd, monotonic_ns() + 10'000'000'000);
      ::close(pidfd);
    }
  }
  conns.clear();
  if (!second.stop(60s)) r.findings.push_back("the restarted daemon did not stop on SIGTERM within 60 s (killed)");
  return finish("");
}

bool raise_fd_limit() {
  rlimit l{};
  ::getrlimit(RLIMIT_NOFILE, &l);
  l.rlim_cur = l.rlim_max;
  return ::setrlimit(RLIMIT_NOFILE, &l) == 0;
}

// --close-at: the supervised phase at each N, today's programs (--baseline) and these, one after
// the other in this invocation, the order alternating from one N to the next. Exit status as
// main's.
int close_at_n(const Options& o) {
  struct Side {
    const char* name;
    fs::path metaharness, supervisor, standin;
  };
  const Side today{"today", o.baseline / "metaharness", o.baseline / "metaharness-supervisor",
                   o.baseline / mh::standin::kProgram},
      after{"after", o.metaharness, o.supervisor, o.standin};
  Steadiness start = steadiness_now();
  std::cerr << "mh_adoption_bench: close at N, today = " << today.metaharness.string()
            << ", after = " << after.metaharness.string() << "; " << steadiness_text(start) << "\n";
  struct Row {
    std::size_t n = 0;
    std::map<std::string, PhaseResult> by_side;
    std::vector<std::string> order;
  };
  std::vector<Row> rows;
  bool failed = false, findings = false;
  for (std::size_t k = 0; k < o.close_at.size() && !stop_requested(); ++k) {
    Row row;
    row.n = o.close_at[k];
    for (const Side* side : k % 2 == 0 ? std::vector{&today, &after} : std::vector{&after, &today}) {
      if (stop_requested()) break;
      Options one = o;
      one.runs = row.n;
      one.metaharness = side->metaharness;
      one.supervisor = side->supervisor;
      one.standin = side->standin;
      one.phase_tag = "n" + std::to_string(row.n) + "-" + side->name + "-";
      std::cerr << "mh_adoption_bench: N = " << row.n << ", " << side->name << "\n";
      PhaseResult r = run_phase(one, true);
      failed = failed || !r.failure.empty();
      findings = findings || !r.findings.empty();
      if (!o.keep && r.failure.empty() && r.findings.empty()) {
        std::error_code ec;
        fs::remove_all(o.work_root / (one.phase_tag + "supervised"), ec);
      }
      row.order.emplace_back(side->name);
      row.by_side.emplace(side->name, std::move(r));
    }
    rows.push_back(std::move(row));
  }
  Steadiness end = steadiness_now();

  std::ostringstream t;
  t << "Close at N: allow -> stream.closed (the `end` on each run's attach), supervised, after SIGKILL + adoption\n"
    << "  N      today median / max        after median / max        today, after vs their N = " << o.close_at[0]
    << "   first\n";
  json::array out_rows;
  auto base = [&](const char* side) {
    auto it = rows.empty() ? nullptr : &rows.front();
    return it && it->by_side.count(side) ? median(it->by_side.at(side).decide_to_closed_ms) : 0.0;
  };
  for (const Row& row : rows) {
    auto cell = [&](const char* side) -> std::pair<double, double> {
      auto it = row.by_side.find(side);
      if (it == row.by_side.end()) return {0, 0};
      return {median(it->second.decide_to_closed_ms), max_of(it->second.decide_to_closed_ms)};
    };
    auto [tm, tx] = cell("today");
    auto [am, ax] = cell("after");
    t << "  " << row.n << "\t " << fixed(tm, 1) << " / " << fixed(tx, 1) << " ms\t   " << fixed(am, 1) << " / "
      << fixed(ax, 1) << " ms\t     " << fixed(base("today") > 0 ? tm / base("today") : 0, 2) << "x, "
      << fixed(base("after") > 0 ? am / base("after") : 0, 2) << "x\t" << (row.order.empty() ? "-" : row.order[0])
      << "\n";
    json::object sides;
    for (const auto& [name, r] : row.by_side)
      sides[name] = to_json(r);
    json::array order;
    for (const auto& name : row.order)
      order.push_back(json::value(name));
    out_rows.push_back(json::object{{"runs", row.n},
                                    {"today_median_ms", tm},
                                    {"today_max_ms", tx},
                                    {"after_median_ms", am},
                                    {"after_max_ms", ax},
                                    {"order", std::move(order)},
                                    {"phases", std::move(sides)}});
  }
  t << "\nThe machine: at the start " << steadiness_text(start) << "; at the end " << steadiness_text(end) << "\n";
  for (const Row& row : rows)
    for (const auto& [name, r] : row.by_side) {
      if (!r.failure.empty()) t << "BENCH FAILED (N = " << row.n << ", " << name << "): " << r.failure << "\n";
      for (const auto& f : r.findings)
        t << "FINDING (N = " << row.n << ", " << name << "): " << f << "\n";
    }
  json::object summary{{"bench", "mh_adoption_bench --close-at"},
                       {"cpus", std::thread::hardware_concurrency()},
                       {"today", today.metaharness.string()},
                       {"after", after.metaharness.string()},
                       {"steadiness_start", to_json(start)},
                       {"steadiness_end", to_json(end)},
                       {"rows", std::move(out_rows)}};
  std::cout << t.str() << "\n" << json::serialize(summary) << "\n";
  write_file(o.json_out, json::serialize(summary) + "\n");
  std::cerr << "mh_adoption_bench: summary in " << o.json_out.string() << "\n";
  if (failed) return 2;
  return findings ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  route_stop_signals();
  auto parsed = parse_options(argc, argv);
  if (!parsed) return 2;
  Options o = std::move(*parsed);
  std::vector<std::pair<std::string, fs::path>> programs{{"metaharness", o.metaharness},
                                                         {std::string(mh::standin::kProgram), o.standin},
                                                         {"metaharness-supervisor", o.supervisor}};
  if (!o.baseline.empty())
    for (const char* name : {"metaharness", mh::standin::kProgram.data(), "metaharness-supervisor"})
      programs.emplace_back(std::string("--baseline's ") + name, o.baseline / name);
  for (const auto& [what, path] : programs) {
    if (::access(path.c_str(), X_OK) != 0) {
      std::cerr << "mh_adoption_bench: no executable " << what << " at " << path.string() << "\n";
      return 2;
    }
  }
  o.metaharness = fs::absolute(o.metaharness);
  o.standin = fs::absolute(o.standin);
  o.supervisor = fs::absolute(o.supervisor);
  if (auto e = prepare_work_root(o.work_root, "mh-abench"); !e.empty()) {
    std::cerr << "mh_adoption_bench: " << e << "\n";
    return 2;
  }
  if (o.json_out.empty()) o.json_out = o.work_root / "adoption-bench.json";
  raise_fd_limit();
  if (!o.close_at.empty()) {
    o.baseline = fs::absolute(o.baseline);
    return close_at_n(o);
  }
  Steadiness start = steadiness_now();
  std::cerr << "mh_adoption_bench: work dir " << o.work_root.string() << ", " << o.runs << " runs; "
            << steadiness_text(start) << "\n";

  std::cerr << "mh_adoption_bench: supervised: " << o.runs << " runs pending, SIGKILL, restart, adopt\n";
  PhaseResult sup = run_phase(o, true);
  std::cerr << "mh_adoption_bench: unsupervised: " << o.runs << " runs pending, SIGKILL, restart, recover\n";
  PhaseResult unsup = stop_requested() ? PhaseResult{} : run_phase(o, false);
  Steadiness end = steadiness_now();

  std::ostringstream t;
  auto per_run = [](const PhaseResult& p) {
    return p.runs ? double(p.daemon_rss_pending_kib - p.daemon_rss_ready_kib) / double(p.runs) : 0.0;
  };
  t << "Runs that outlive the daemon: " << o.runs << " open runs (stand-in, ask mode, each at tool.requested)\n"
    << "  SIGKILL to the daemon, then a new daemon on the same state dir\n"
    << "                                        supervised (adopted)   unsupervised (recovered)\n"
    << "  exec -> READY=1                        " << fixed(sup.ready_ms, 1) << " ms              "
    << fixed(unsup.ready_ms, 1) << " ms\n"
    << "  exec -> run answers, median            " << fixed(median(sup.answer_ms), 1) << " ms              "
    << fixed(median(unsup.answer_ms), 1) << " ms   (pending / end on attach)\n"
    << "  exec -> last run answers (total)       " << fixed(max_of(sup.answer_ms), 1) << " ms              "
    << fixed(max_of(unsup.answer_ms), 1) << " ms\n"
    << "  per run, (last - READY) / N            " << fixed((max_of(sup.answer_ms) - sup.ready_ms) / double(o.runs), 2)
    << " ms              " << fixed((max_of(unsup.answer_ms) - unsup.ready_ms) / double(o.runs), 2) << " ms\n"
    << "  ratio supervised / unsupervised: READY " << fixed(unsup.ready_ms > 0 ? sup.ready_ms / unsup.ready_ms : 0, 2)
    << "x, last answer " << fixed(max_of(unsup.answer_ms) > 0 ? max_of(sup.answer_ms) / max_of(unsup.answer_ms) : 0, 2)
    << "x\n"
    << "  runs not answering                     " << sup.not_answered << "                       "
    << unsup.not_answered << "\n";
  auto reasons = [](const PhaseResult& p) {
    std::string s;
    for (const auto& [k, v] : p.closed_by_reason)
      s += (s.empty() ? "" : ", ") + std::to_string(v) + " " + k;
    return s.empty() ? std::string("-") : s;
  };
  t << "  closed                                 " << reasons(sup) << " (after allow)   " << reasons(unsup)
    << " (at start)\n"
    << "  allow -> stream closed, median / max   " << fixed(median(sup.decide_to_closed_ms), 1) << " / "
    << fixed(max_of(sup.decide_to_closed_ms), 1) << " ms\n"
    << "  stand-in processes alive after SIGKILL " << sup.standins_after_kill << "                     "
    << unsup.standins_after_kill << "\n"
    << "  supervisors alive after the SIGKILL    " << sup.supervisors_after_kill << "\n"
    << "\nMemory with the " << o.runs << " runs pending (KiB)\n"
    << "  per supervisor (" << sup.sup_rss_kib.size() << " measured)  median        total\n"
    << "  VmRSS                         " << fixed(median(sup.sup_rss_kib), 0) << "       "
    << fixed(sum_of(sup.sup_rss_kib), 0) << "\n"
    << "  RssAnon                       " << fixed(median(sup.sup_anon_kib), 0) << "       "
    << fixed(sum_of(sup.sup_anon_kib), 0) << "\n"
    << "  Pss                           "
    << (sup.pss_available ? fixed(median(sup.sup_pss_kib), 0) + "       " + fixed(sum_of(sup.sup_pss_kib), 0)
                          : std::string("(no smaps_rollup)"))
    << "\n"
    << "  daemon VmRSS per run, (pending - READY) / N: supervised " << fixed(per_run(sup), 1) << ", unsupervised "
    << fixed(per_run(unsup), 1) << "\n"
    << "  daemon VmRSS: supervised " << sup.daemon_rss_ready_kib << " -> " << sup.daemon_rss_pending_kib
    << ", adopting daemon with the runs live " << sup.adopter_rss_kib << "; unsupervised " << unsup.daemon_rss_ready_kib
    << " -> " << unsup.daemon_rss_pending_kib << ", recovering daemon " << unsup.adopter_rss_kib << "\n"
    << "\nThe machine: at the start " << steadiness_text(start) << "; at the end " << steadiness_text(end) << "\n";
  bool findings = false, failed = false;
  for (const PhaseResult* p : {&sup, &unsup}) {
    const char* name = p->supervised ? "supervised" : "unsupervised";
    if (!p->failure.empty()) {
      t << "BENCH FAILED (" << name << "): " << p->failure << "\n";
      failed = true;
    }
    for (const auto& f : p->findings) {
      t << "FINDING (" << name << "): " << f << "\n";
      findings = true;
    }
  }
  json::object summary{{"bench", "mh_adoption_bench"},
                       {"runs", o.runs},
                       {"cpus", std::thread::hardware_concurrency()},
                       {"steadiness_start", to_json(start)},
                       {"steadiness_end", to_json(end)},
                       {"supervised", to_json(sup)},
                       {"unsupervised", to_json(unsup)}};
  std::cout << t.str() << "\n" << json::serialize(summary) << "\n";
  write_file(o.json_out, json::serialize(summary) + "\n");
  std::cerr << "mh_adoption_bench: summary in " << o.json_out.string() << "\n";
  if (!o.keep && !failed && !findings) {
    std::error_code ec;
    fs::remove_all(o.work_root / "supervised", ec);
    fs::remove_all(o.work_root / "unsupervised", ec);
  }
  if (failed) return 2;
  return findings ? 1 : 0;
}
