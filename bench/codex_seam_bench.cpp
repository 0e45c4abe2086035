// mh_codex_seam_bench: what the approval seam costs per tool call on the REAL Codex CLI
// (`codex app-server`, the pinned native binary) against the project's scripted model endpoint
// (issue 5). One invocation runs three variants side by side, interleaved round-robin, each a
// single codex turn of N sequential exec_command calls (`touch f<i>`):
//
//   never_ask        the bench drives `codex app-server` over JSON-RPC stdio itself, thread/start
//                    with approvalPolicy "never": Codex asks nobody. The floor.
//   bare_driver      the same, approvalPolicy "untrusted" (what metaharness uses): Codex sends an
//                    item/commandExecution/requestApproval for every call and the bench answers
//                    {"decision":"accept"} at once. The approval round trip inside Codex itself.
//   metaharness_ask  `metaharness run codex --decisions ask`; the bench is the client and answers
//                    every tool.requested with tool.decide allow at once. On top of the bare
//                    driver: metaharness's PreToolUse hook (mh-codex-hook, one process per call,
//                    which the adapter configures for every tool) and metaharness's own path.
//
// The direct variants get the same CODEX_HOME/config.toml shape the codex adapter writes (model
// provider = the scripted endpoint, wire_api responses, env_key token, web search off, no TTY
// sessions, the project pinned untrusted) without its hooks section, and the same JSON-RPC
// messages (initialize with the same opt-outs, thread/start with cwd, sandbox workspace-write and
// bypass_hook_trust, turn/start with the prompt); only the approval policy differs between them.
//
// Per run it records the wall time from the spawn to the turn's end (turn/completed; turn.ended
// for metaharness) and to the end of the stream (stdout EOF after stdin closed; stream.closed),
// the span between the first and the last main-loop request the scripted endpoint received
// (exactly the N call cycles, nothing of start-up or shut-down), every call cycle (gap between
// successive calls as the driver sees them) and every call latency (call announced -> its result
// seen), and the CPU the run cost (the spawned tree plus the bench's driver and endpoint). Added
// time per call = (median(variant) - median(never_ask)) / N for per-turn figures, the difference
// of the medians for per-call ones; metaharness's own share is also given as metaharness_ask
// against bare_driver. Each comparison is also given paired by round (the median of the
// within-round differences), which load drifting over minutes on a shared machine moves far
// less. 95% bootstrap intervals say how much is noise. metaharness's in-process share comes from
// the raw samples of its --latency-report files, and its hook's from Codex's hook/completed.
//
// The structure (Child, LineReader, statistics) follows bench/seam_bench.cpp, the Claude one, so
// the two benches' figures mean the same things.
//
// Every wait is bounded; a run that does not finish in time is killed (its process group) and
// reaped, and the program then exits non-zero.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/json.hpp>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "daemon/model/scripted_endpoint.hpp"
#include "metaharness/build_info.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Ctrl-C / SIGTERM: the signal is passed on to the running child (app-server exits and kills its
// commands; metaharness stops its run and kills the run's processes), and the bench stops after
// reaping it, so an interrupted bench leaves nothing behind.
std::atomic<pid_t> g_running_child{0};
volatile std::sig_atomic_t g_stop_requested = 0;

extern "C" void on_stop_signal(int) {
  g_stop_requested = 1;
  if (pid_t child = g_running_child.load(); child > 0) ::kill(child, SIGTERM);
}

double ms_between(Clock::time_point from, Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

double cpu_ms_of(const rusage& u) {
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

// This process's CPU time so far (the driver and the in-process endpoint's thread).
double own_cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return cpu_ms_of(u);
}

// The machine's 1-minute load average: the runs share 2 cores with whatever else is running.
double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

// ---------------------------------------------------------------------------------------------
// Variants
// ---------------------------------------------------------------------------------------------

enum class Variant { never_ask, bare_driver, metaharness_ask };
constexpr std::array<Variant, 3> kAllVariants = {Variant::never_ask, Variant::bare_driver, Variant::metaharness_ask};

std::string_view name_of(Variant v) {
  switch (v) {
    case Variant::never_ask:
      return "never_ask";
    case Variant::bare_driver:
      return "bare_driver";
    case Variant::metaharness_ask:
      return "metaharness_ask";
  }
  return "?";
}

std::optional<Variant> variant_named(std::string_view name) {
  for (Variant v : kAllVariants)
    if (name_of(v) == name) return v;
  return std::nullopt;
}

// What the codex adapter asks Codex not to send (adapters/codex/codex_adapter.cpp, kOptOut): the
// direct variants ask the same, so Codex does the same notification work in every variant.
constexpr std::array<std::string_view, 9> kOptOut = {
    "item/agentMessage/delta",  "item/reasoning/summaryTextDelta",   "item/reasoning/summaryPartAdded",
    "item/reasoning/textDelta", "item/commandExecution/outputDelta", "item/fileChange/outputDelta",
    "item/plan/delta",          "item/mcpToolCall/progress",         "thread/status/changed"};

// The environment variable holding the endpoint's token: the adapter's name for it.
constexpr std::string_view kTokenEnv = "METAHARNESS_MODEL_TOKEN";

struct Options {
  int runs = 5;    // measured rounds; every round runs each variant once
  int warmup = 1;  // rounds run first and discarded (cold page cache, first codex start-up)
  int timeout_s = 120;
  fs::path scenario;
  fs::path codex;
  fs::path metaharness;
  fs::path work_root;
  fs::path json_out;
  std::vector<Variant> variants{kAllVariants.begin(), kAllVariants.end()};
  std::string prompt = "Touch the files.";
  std::string model = "gpt-5.5";  // the adapter's default slug (Codex knows it: real tool metadata)
  bool keep = false;
};

// ---------------------------------------------------------------------------------------------
// A child process with piped stdin/stdout (posix_spawn), in its own process group
// ---------------------------------------------------------------------------------------------

class Child {
 public:
  Child() = default;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  ~Child() {
    if (pid_ > 0) kill_and_reap();
    close_fd(stdin_fd_);
    close_fd(stdout_fd_);
  }

  // Returns an error text, or "" when the child runs.
  std::string spawn(const fs::path& program, const std::vector<std::string>& args, const std::vector<std::string>& env,
                    const fs::path& cwd, const fs::path& stderr_file) {
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      return std::string("pipe: ") + std::strerror(errno);
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    // dup2 onto 0/1 clears close-on-exec on the copies; the originals close at exec.
    posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    // Its own process group, so a failed run can be killed whole; default signal handling,
    // since we ignore SIGPIPE here and a child must not inherit that.
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF);

    std::vector<char*> argv;
    std::string program_string = program.string();
    argv.push_back(program_string.data());
    std::vector<std::string> args_copy = args;
    for (auto& a : args_copy)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    std::vector<std::string> env_copy = env;
    std::vector<char*> envp;
    for (auto& e : env_copy)
      envp.push_back(e.data());
    envp.push_back(nullptr);

    int rc = ::posix_spawn(&pid_, program_string.c_str(), &actions, &attr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      pid_ = -1;
      ::close(in[1]);
      ::close(out[0]);
      return "posix_spawn " + program_string + ": " + std::strerror(rc);
    }
    stdin_fd_ = in[1];
    stdout_fd_ = out[0];
    g_running_child = pid_;
    return "";
  }

  int stdout_fd() const { return stdout_fd_; }
  // CPU time (user + system) of the child and every descendant it reaped, once it was reaped.
  double cpu_ms() const { return cpu_ms_; }

  // One whole line per write(2) when it fits the pipe, as a driver would send it.
  bool write_line(std::string_view line) {
    std::string bytes(line);
    bytes.push_back('\n');
    std::string_view rest(bytes);
    while (!rest.empty() && stdin_fd_ >= 0) {
      ssize_t n = ::write(stdin_fd_, rest.data(), rest.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      rest.remove_prefix(static_cast<std::size_t>(n));
    }
    return rest.empty();
  }

  void close_stdin() { close_fd(stdin_fd_); }

  // Waits (bounded) for the exit; returns the wait status. Polls with a 1 ms nap: the exit has
  // no file descriptor to wait on here, and the nap bounds a wait, it orders nothing.
  std::optional<int> wait_exit(Clock::time_point deadline) {
    if (pid_ <= 0) return exit_status_;
    for (;;) {
      int status = 0;
      rusage usage{};
      pid_t r = ::wait4(pid_, &status, WNOHANG, &usage);
      if (r == pid_) {
        pid_ = -1;
        g_running_child = 0;
        exit_status_ = status;
        cpu_ms_ = cpu_ms_of(usage);
        return status;
      }
      if (r < 0 && errno != EINTR) return std::nullopt;
      if (Clock::now() >= deadline) return std::nullopt;
      std::this_thread::sleep_for(1ms);
    }
  }

  // Asks politely first (metaharness stops its run on SIGTERM and kills the vendor's processes;
  // app-server kills its commands), then kills the whole process group and reaps.
  void terminate(std::chrono::milliseconds grace) {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    if (wait_exit(Clock::now() + grace)) return;
    kill_and_reap();
  }

  void kill_and_reap() {
    if (pid_ <= 0) return;
    ::kill(-pid_, SIGKILL);
    ::kill(pid_, SIGKILL);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    g_running_child = 0;
    exit_status_ = status;
  }

 private:
  static void close_fd(int& fd) {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::optional<int> exit_status_;
  double cpu_ms_ = 0;
};

// Splits a pipe into lines; each line carries the time the chunk holding its end was read.
class LineReader {
 public:
  enum class Status { line, eof, timeout, error };

  explicit LineReader(int fd) : fd_(fd) {}

  Status next(std::string& line, Clock::time_point& read_at, Clock::time_point deadline) {
    for (;;) {
      if (auto nl = buffer_.find('\n', scanned_); nl != std::string::npos) {
        line.assign(buffer_, 0, nl);
        buffer_.erase(0, nl + 1);
        scanned_ = 0;
        read_at = chunk_read_at_;
        return Status::line;
      }
      scanned_ = buffer_.size();
      if (eof_) return Status::eof;
      if (g_stop_requested) return Status::error;
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return Status::timeout;
      pollfd p{fd_, POLLIN, 0};
      int ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1000)));
      if (ready < 0 && errno == EINTR) continue;
      if (ready < 0) return Status::error;
      if (ready == 0) continue;
      char chunk[64 * 1024];
      ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::error;
      chunk_read_at_ = Clock::now();
      if (n == 0) {
        eof_ = true;
        eof_at_ = chunk_read_at_;
        continue;
      }
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }

  // Reads and discards until end of file (bounded); returns when EOF was seen.
  std::optional<Clock::time_point> drain(Clock::time_point deadline) {
    std::string line;
    Clock::time_point at;
    for (;;) {
      Status s = next(line, at, deadline);
      if (s == Status::eof) return eof_at_;
      if (s != Status::line) return std::nullopt;
    }
  }

 private:
  int fd_;
  std::string buffer_;
  std::size_t scanned_ = 0;
  bool eof_ = false;
  Clock::time_point chunk_read_at_{};
  Clock::time_point eof_at_{};
};

const json::object* object_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  return v && v->is_object() ? &v->get_object() : nullptr;
}

std::optional<std::string> string_at(const json::object& o, std::string_view key) {
  const json::value* v = o.if_contains(key);
  if (v && v->is_string()) return std::string(v->get_string());
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// One measured run
// ---------------------------------------------------------------------------------------------

struct RunRecord {
  Variant variant = Variant::never_ask;
  int round = 0;  // negative: warm-up
  bool ok = false;
  std::string failure;
  double wall_turn_ms = 0;                 // spawn -> turn/completed read (metaharness: turn.ended read by the client)
  double wall_end_ms = 0;                  // spawn -> stdout EOF (metaharness: stream.closed read by the client)
  double span_ms = 0;                      // first -> last main-loop request at the endpoint (the N call cycles)
  double child_cpu_ms = 0;                 // CPU of the spawned process and its descendants (codex, tools; metaharness)
  double bench_cpu_ms = 0;                 // CPU of this process during the run (driver/client, in-process endpoint)
  double cpu_ms = 0;                       // the two together: all the CPU the run cost, wherever its endpoint ran
  double load_before = 0;                  // 1-minute load average when the run started
  int calls_answered = 0;                  // approvals accepted / tool.decide sent
  int aux_requests = 0;                    // requests the endpoint answered as not main-loop (no tools offered)
  std::vector<double> driver_reaction_us;  // bare driver: requestApproval read -> accept written
  // When the driver saw each call, ms since the spawn: the commandExecution item/started (direct
  // variants) or the first tool.requested of the call (metaharness). Successive differences are
  // the call cycles (call -> approval -> tool -> next model request -> next call).
  std::vector<double> call_seen_ms;
  // Per call, from the driver seeing it to the driver seeing its result (item/started ->
  // item/completed; first tool.requested -> tool.result): the approval and the tool run,
  // without the model round trip.
  std::vector<double> call_latency_ms;
  std::map<std::string, double> seen_by_id, done_by_id;  // ms since the spawn, by call id

  void match_latencies() {
    for (const auto& [id, seen] : seen_by_id)
      if (auto it = done_by_id.find(id); it != done_by_id.end()) call_latency_ms.push_back(it->second - seen);
  }
  // metaharness_ask: every PreToolUse hook run as Codex timed it (hook/completed durationMs, read
  // from metaharness's copy of codex's stdout after the run): the hook's part of the seam.
  std::vector<double> hook_ms;
  // metaharness_ask: the raw samples of its --latency-report, in µs.
  std::map<std::string, std::vector<double>> own_share_us;
  fs::path dir;
};

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

// The three paths metaharness's --latency-report times; see cli/run_verb.cpp.
constexpr std::array<std::string_view, 3> kOwnShares = {"line_to_requested", "decide_to_answer", "line_to_answer"};

class Bench {
 public:
  Bench(Options options, int calls) : o_(std::move(options)), calls_(calls) {}

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
    r.load_before = load_average();
    const double cpu_before = own_cpu_ms();
    if (v == Variant::metaharness_ask)
      run_metaharness(r);
    else
      run_codex_directly(r);
    r.bench_cpu_ms = own_cpu_ms() - cpu_before;
    r.cpu_ms = r.child_cpu_ms + r.bench_cpu_ms;
    r.match_latencies();
    if (r.ok && !o_.keep) fs::remove_all(r.dir, ec);
    return r;
  }

 private:
  Clock::time_point deadline_from(Clock::time_point start) const { return start + std::chrono::seconds(o_.timeout_s); }

  // Every one of f1..fN exists: each call really ran, whoever decided it.
  std::string check_files(const fs::path& work) const {
    for (int i = 1; i <= calls_; ++i)
      if (!fs::exists(work / ("f" + std::to_string(i)))) return "f" + std::to_string(i) + " was not created";
    return "";
  }

  // What the endpoint served, checked. Main-loop requests are the ones that offer tools (the
  // endpoint's default rule): every request of Codex's agent loop carries its tool list, and each
  // is answered with a step (or, past the script, the `exhausted` text). A run must show exactly
  // N + 1 of them, all answered with steps: the prompt, then one after each tool result. Requests
  // without tools would get the `aux` answer; Codex 0.171.0 sends none in such a turn (none was
  // seen in any run), but they would not be model steps of the loop, so they are counted and
  // reported rather than refused. Any other answer (unauthorized, not found, ...) fails the run.
  struct Served {
    std::string answer;
    double received_ms;
  };
  std::string check_requests(const std::vector<Served>& served, RunRecord& r) const {
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
             std::to_string(calls_ + 1) + " scripted";
    if (static_cast<int>(steps.size()) != calls_ + 1)
      return "the endpoint answered " + std::to_string(steps.size()) + " main-loop requests with steps, not " +
             std::to_string(calls_ + 1);
    r.span_ms = steps.back() - steps.front();
    return "";
  }

  // The config.toml the codex adapter writes (adapters/codex/codex_adapter.cpp, plan()), minus
  // its [[hooks.PreToolUse]] section: the direct variants run no hook.
  std::string config_toml(const std::string& base_url, const fs::path& work) const {
    std::ostringstream toml;
    toml << "# Written by mh_codex_seam_bench: the codex adapter's config.toml without its hooks.\n"
         << "model = \"" << o_.model << "\"\n"
         << "model_provider = \"metaharness\"\n"
         << "web_search = \"disabled\"\n\n"
         << "[features]\n"
         << "unified_exec_tty = false\n\n"
         << "[model_providers.metaharness]\n"
         << "name = \"metaharness model endpoint\"\n"
         << "base_url = \"" << base_url << "/v1\"\n"
         << "wire_api = \"responses\"\n"
         << "env_key = \"" << kTokenEnv << "\"\n\n"
         << "[projects." << json::serialize(json::value(work.string())) << "]\n"
         << "trust_level = \"untrusted\"\n";
    return toml.str();
  }

  // LANG, LC_ALL and TZ pass through to codex in the adapter's plan; the same here and for
  // metaharness, so every variant's codex sees the same locale.
  static void pass_locale(std::vector<std::string>& env) {
    for (const char* name : {"LANG", "LC_ALL", "TZ"})
      if (const char* v = std::getenv(name)) env.push_back(std::string(name) + "=" + v);
  }

  void run_codex_directly(RunRecord& r) {
    const fs::path home = r.dir / "home", codex_home = r.dir / "codex-home", tmp = r.dir / "tmp", work = r.dir / "work";
    for (const auto& d : {home, codex_home, tmp, work})
      fs::create_directories(d);

    auto scenario = mh::model::load_scenario_file(o_.scenario);
    if (!scenario) {
      r.failure = "scenario: " + scenario.error().message();
      return;
    }
    // The endpoint keeps the same request log as metaharness's own (a file in the run dir), so
    // the endpoint's work is alike in every variant.
    mh::model::ScriptedEndpoint endpoint(host_.io, std::move(*scenario), {.log_path = r.dir / "model-requests.jsonl"});
    if (auto port = endpoint.start(); !port) {
      r.failure = "endpoint: " + port.error().message();
      return;
    }
    std::ofstream(codex_home / "config.toml") << config_toml(endpoint.base_url(), work);
    fs::permissions(codex_home / "config.toml", fs::perms::owner_read | fs::perms::owner_write);

    std::vector<std::string> env;
    pass_locale(env);
    env.insert(env.end(),
               {"HOME=" + home.string(), "CODEX_HOME=" + codex_home.string(), "PATH=/usr/local/bin:/usr/bin:/bin",
                "TMPDIR=" + tmp.string(), std::string(kTokenEnv) + "=" + endpoint.token()});

    // The adapter's messages, in its order: initialize; on its answer initialized and
    // thread/start; on that answer turn/start with the prompt.
    json::array opt_out;
    for (auto m : kOptOut)
      opt_out.emplace_back(m);
    const std::string initialize = json::serialize(json::object{
        {"id", 1},
        {"method", "initialize"},
        {"params",
         json::object{{"capabilities", json::object{{"experimentalApi", true}, {"optOutNotificationMethods", opt_out}}},
                      {"clientInfo", json::object{{"name", "mh_codex_seam_bench"},
                                                  {"title", "mh_codex_seam_bench"},
                                                  {"version", std::string(mh::build_info::version)}}}}}});
    const bool never = r.variant == Variant::never_ask;
    const std::string thread_start =
        json::serialize(json::object{{"id", 2},
                                     {"method", "thread/start"},
                                     {"params", json::object{{"approvalPolicy", never ? "never" : "untrusted"},
                                                             {"config", json::object{{"bypass_hook_trust", true}}},
                                                             {"cwd", work.string()},
                                                             {"sandbox", "workspace-write"}}}});

    Child child;
    const Clock::time_point started = Clock::now();
    const Clock::time_point deadline = deadline_from(started);
    if (auto error = child.spawn(o_.codex, {"app-server"}, env, work, r.dir / "stderr.txt"); !error.empty()) {
      r.failure = error;
      endpoint.stop();
      return;
    }
    LineReader reader(child.stdout_fd());
    child.write_line(initialize);

    std::string line;
    Clock::time_point read_at;
    std::optional<Clock::time_point> turn_done_at;
    std::string problem;  // the run went on, but does not count
    // --keep: codex's stdout as the driver read it, written out after the run so that keeping it
    // costs the measured turn nothing (metaharness keeps its own, vendor-stdout.jsonl).
    std::vector<std::string> transcript;
    while (!turn_done_at && r.failure.empty()) {
      auto status = reader.next(line, read_at, deadline);
      if (status != LineReader::Status::line) {
        r.failure = g_stop_requested                        ? "stopped by a signal"
                    : status == LineReader::Status::timeout ? "timed out before turn/completed"
                                                            : "stdout ended before turn/completed";
        break;
      }
      if (o_.keep) transcript.push_back(line);
      boost::system::error_code ec;
      json::value v = json::parse(line, ec);
      if (ec || !v.is_object()) continue;
      const json::object& m = v.get_object();
      const json::value* id = m.if_contains("id");
      auto method = string_at(m, "method");
      static const json::object kEmpty;
      const json::object* params_ptr = object_at(m, "params");
      const json::object& params = params_ptr ? *params_ptr : kEmpty;
      if (!method && id) {  // an answer to one of ours
        if (const json::object* error = object_at(m, "error")) {
          r.failure = "codex refused request " + json::serialize(*id) + ": " + json::serialize(*error).substr(0, 300);
          break;
        }
        const json::object* result = object_at(m, "result");
        if (*id == 1) {
          child.write_line(R"({"method":"initialized"})");
          child.write_line(thread_start);
        } else if (*id == 2) {
          const json::object* thread = result ? object_at(*result, "thread") : nullptr;
          auto thread_id = thread ? string_at(*thread, "id") : std::nullopt;
          if (!thread_id) {
            r.failure = "thread/start answered without a thread id";
            break;
          }
          if (auto policy = result ? string_at(*result, "approvalPolicy") : std::nullopt;
              policy != std::string(never ? "never" : "untrusted"))
            problem = "thread/start answered approvalPolicy " + policy.value_or("(none)");
          json::object turn{
              {"id", 3},
              {"method", "turn/start"},
              {"params", json::object{{"input", json::array{json::object{{"text", o_.prompt}, {"type", "text"}}}},
                                      {"threadId", *thread_id}}}};
          child.write_line(json::serialize(turn));
        }
      } else if (method && id) {  // a request of Codex's
        if (*method == "item/commandExecution/requestApproval" && !never) {
          // Never acceptForSession: like metaharness, every call is decided on its own.
          std::string answer = R"({"id":)" + json::serialize(*id) + R"(,"result":{"decision":"accept"}})";
          child.write_line(answer);
          r.driver_reaction_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - read_at).count());
          ++r.calls_answered;
        } else {
          // Nothing else is expected (an approval under never would mean the floor is not one):
          // answer so Codex does not wait, and do not count the run.
          child.write_line(R"({"id":)" + json::serialize(*id) +
                           R"(,"error":{"code":-32000,"message":"mh_codex_seam_bench does not serve this"}})");
          if (problem.empty()) problem = "codex sent an unexpected " + *method;
        }
      } else if (method) {  // a notification
        if (*method == "item/started" || *method == "item/completed") {
          const json::object* item = object_at(params, "item");
          if (!item || string_at(*item, "type") != "commandExecution") continue;
          std::string call = string_at(*item, "id").value_or("");
          if (*method == "item/started") {
            r.call_seen_ms.push_back(ms_between(started, read_at));
            r.seen_by_id.emplace(call, ms_between(started, read_at));
          } else {
            r.done_by_id[call] = ms_between(started, read_at);
            if (auto s = string_at(*item, "status"); s != "completed" && problem.empty())
              problem = "call " + call + " ended " + s.value_or("(no status)");
          }
        } else if (*method == "turn/completed") {
          turn_done_at = read_at;
          const json::object* turn = object_at(params, "turn");
          if (auto s = turn ? string_at(*turn, "status") : std::nullopt; s != "completed" && problem.empty())
            problem = "the turn ended " + s.value_or("(no status)") + ": " + line.substr(0, 300);
        }
      }
    }
    std::optional<Clock::time_point> eof_at;
    std::optional<int> exit_status;
    if (r.failure.empty()) {
      child.close_stdin();  // the turn is over: app-server exits on stdin EOF
      eof_at = reader.drain(deadline);
      if (!eof_at)
        r.failure = "codex did not close its stdout after stdin closed";
      else if (!(exit_status = child.wait_exit(*eof_at + 10s)))
        r.failure = "codex did not exit";
    }
    child.terminate(5s);
    r.child_cpu_ms = child.cpu_ms();
    endpoint.stop();
    if (o_.keep) {
      std::ofstream out(r.dir / "codex-stdout.jsonl");
      for (const auto& l : transcript)
        out << l << "\n";
    }
    if (!r.failure.empty()) return;
    if (!WIFEXITED(*exit_status) || WEXITSTATUS(*exit_status) != 0)
      r.failure = "codex exit status " + std::to_string(WIFEXITED(*exit_status) ? WEXITSTATUS(*exit_status) : -1);
    if (r.failure.empty()) r.failure = problem;
    if (!r.failure.empty()) return;

    r.wall_turn_ms = ms_between(started, *turn_done_at);
    r.wall_end_ms = ms_between(started, *eof_at);
    std::vector<Served> served;
    for (const auto& request : endpoint.requests())
      served.push_back(
          {std::string(mh::model::to_string(request.answer)), static_cast<double>(request.received_at.count())});
    r.failure = check_requests(served, r);
    if (r.failure.empty() && !never && r.calls_answered != calls_)
      r.failure = "answered " + std::to_string(r.calls_answered) + " approvals, not " + std::to_string(calls_);
    if (r.failure.empty()) r.failure = check_files(work);
    r.ok = r.failure.empty();
  }

  void run_metaharness(RunRecord& r) {
    const fs::path run_dir = r.dir / "run", home = r.dir / "home", tmp = r.dir / "tmp";
    const fs::path latency_file = r.dir / "latency.json";
    fs::create_directories(home);
    fs::create_directories(tmp);
    std::vector<std::string> args = {"run",
                                     "codex",
                                     "-p",
                                     o_.prompt,
                                     "--decisions",
                                     "ask",
                                     "--model",
                                     o_.model,
                                     "--model-scenario",
                                     o_.scenario.string(),
                                     "--latency-report",
                                     latency_file.string(),
                                     "--run-dir",
                                     run_dir.string()};
    // metaharness builds codex's environment and config itself; it only needs to find the same
    // binary. Its hook program (mh-codex-hook) is found beside it.
    std::vector<std::string> env;
    pass_locale(env);
    env.insert(env.end(), {"HOME=" + home.string(), "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + tmp.string(),
                           "METAHARNESS_CODEX_BIN=" + o_.codex.string()});

    Child child;
    const Clock::time_point started = Clock::now();
    const Clock::time_point deadline = deadline_from(started);
    if (auto error = child.spawn(o_.metaharness, args, env, r.dir, r.dir / "stderr.txt"); !error.empty()) {
      r.failure = error;
      return;
    }
    LineReader reader(child.stdout_fd());
    std::string line;
    Clock::time_point read_at;
    std::optional<Clock::time_point> turn_ended_at, closed_at;
    std::string close_reason, stop_reason;
    int command_number = 0;
    while (!closed_at) {
      auto status = reader.next(line, read_at, deadline);
      if (status != LineReader::Status::line) {
        r.failure = g_stop_requested                        ? "stopped by a signal"
                    : status == LineReader::Status::timeout ? "timed out before stream.closed"
                                                            : "stdout ended before stream.closed";
        break;
      }
      boost::system::error_code ec;
      json::value v = json::parse(line, ec);
      if (ec || !v.is_object()) continue;
      const json::object& e = v.get_object();
      auto event = string_at(e, "event");
      if (!event) continue;
      if (*event == "tool.requested") {
        auto call = string_at(e, "call_id");
        if (!call) continue;
        // The first announcement of a call is when the client first sees it (the hook's, for a
        // shell command); the decision is asked for with decision_required.
        if (r.seen_by_id.emplace(*call, ms_between(started, read_at)).second)
          r.call_seen_ms.push_back(ms_between(started, read_at));
        const json::value* required = e.if_contains("decision_required");
        if (!required || *required != true) continue;
        std::string decide = R"({"format":"metaharness.command/1","id":"d)" + std::to_string(++command_number) +
                             R"(","command":"tool.decide","call_id":)" + json::serialize(json::value(*call)) +
                             R"(,"decision":{"decision":"allow"}})";
        child.write_line(decide);
        ++r.calls_answered;
      } else if (*event == "tool.result") {
        if (auto call = string_at(e, "call_id")) r.done_by_id[*call] = ms_between(started, read_at);
      } else if (*event == "turn.ended") {
        turn_ended_at = read_at;
        stop_reason = string_at(e, "stop_reason").value_or("");
        // The turn is over and nothing more will be asked: closing the command source ends
        // the run (no --keep-open).
        child.close_stdin();
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
    else if (stop_reason != "completed")
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

    std::vector<Served> served;
    std::ifstream log(run_dir / "model-requests.jsonl");
    for (std::string record; std::getline(log, record);) {
      boost::system::error_code ec;
      json::value v = json::parse(record, ec);
      if (ec || !v.is_object()) continue;
      const auto& o = v.get_object();
      if (string_at(o, "kind") != "request") continue;
      const json::value* received = o.if_contains("received_ms");
      served.push_back({string_at(o, "answer").value_or("?"), received ? received->to_number<double>() : 0.0});
    }
    r.failure = check_requests(served, r);
    if (r.failure.empty()) r.failure = check_files(run_dir / "scratch/work");
    if (r.failure.empty()) r.failure = read_latency_report(latency_file, r);
    if (r.failure.empty()) read_hook_durations(run_dir / "vendor-stdout.jsonl", r);
    r.ok = r.failure.empty();
  }

  static void read_hook_durations(const fs::path& transcript, RunRecord& r) {
    std::ifstream in(transcript);
    for (std::string line; std::getline(in, line);) {
      if (line.find("\"hook/completed\"") == std::string::npos) continue;
      boost::system::error_code ec;
      json::value v = json::parse(line, ec);
      if (ec || !v.is_object()) continue;
      const json::object* params = object_at(v.get_object(), "params");
      const json::object* run = params ? object_at(*params, "run") : nullptr;
      if (!run || string_at(*run, "eventName") != "preToolUse") continue;
      if (const json::value* d = run->if_contains("durationMs"); d && d->is_number())
        r.hook_ms.push_back(d->to_number<double>());
    }
  }

  static std::string read_latency_report(const fs::path& file, RunRecord& r) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    boost::system::error_code ec;
    json::value v = json::parse(text.str(), ec);
    if (ec || !v.is_object()) return "cannot read the latency report " + file.string();
    for (auto name : kOwnShares) {
      const json::object* section = object_at(v.get_object(), name);
      if (!section) return "the latency report lacks " + std::string(name);
      auto& samples = r.own_share_us[std::string(name)];
      if (const json::value* raw = section->if_contains("samples_us"); raw && raw->is_array())
        for (const auto& s : raw->get_array())
          if (s.is_number()) samples.push_back(s.to_number<double>());
    }
    return "";
  }

  Options o_;
  int calls_;
  EndpointHost host_;
};

// ---------------------------------------------------------------------------------------------
// Statistics and the report
// ---------------------------------------------------------------------------------------------

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The q-quantile of sorted values (nearest rank below).
double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  return sorted.empty() ? 0.0 : sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
}

struct Spread {
  double median = 0, min = 0, max = 0;
  std::size_t n = 0;
};

Spread spread_of(const std::vector<double>& v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  s.median = median(v);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  return s;
}

json::object to_json(const Spread& s) {
  return json::object{{"median", s.median}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string spread_text(const Spread& s, int decimals) {
  return fixed(s.median, decimals) + " [" + fixed(s.min, decimals) + ".." + fixed(s.max, decimals) + "]";
}

using Runs = std::vector<const RunRecord*>;

// The call cycles of a set of runs, pooled: the gaps between successive calls as the driver saw
// them.
std::vector<double> call_cycles(const Runs& runs) {
  std::vector<double> gaps;
  for (const RunRecord* r : runs)
    for (std::size_t i = 1; i < r->call_seen_ms.size(); ++i)
      gaps.push_back(r->call_seen_ms[i] - r->call_seen_ms[i - 1]);
  return gaps;
}

std::vector<double> call_latencies(const Runs& runs) {
  std::vector<double> all;
  for (const RunRecord* r : runs)
    all.insert(all.end(), r->call_latency_ms.begin(), r->call_latency_ms.end());
  return all;
}

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

double median_call_cycle(const Runs& runs) {
  return median(call_cycles(runs));
}
double median_call_latency(const Runs& runs) {
  return median(call_latencies(runs));
}

constexpr std::array<Metric, 6> kMetrics = {
    // The issue's definition: the turn's wall time, medians of runs, difference over N.
    Metric{"wall_turn_ms", "spawn -> turn end", true, &median_of<&RunRecord::wall_turn_ms>},
    Metric{"wall_end_ms", "spawn -> end of stream", true, &median_of<&RunRecord::wall_end_ms>},
    // The N call cycles alone, on the endpoint's clock (ms resolution): no start-up, no end.
    Metric{"span_ms", "model request 1 -> N+1", true, &median_of<&RunRecord::span_ms>},
    // The typical call: the median of every call cycle of every run, robust to slow outliers.
    Metric{"call_cycle_ms", "median call cycle", false, &median_call_cycle},
    // The part of a cycle the seam is in (call announced -> its result), median of all calls.
    Metric{"call_latency_ms", "median call latency", false, &median_call_latency},
    // What the seam costs in CPU (the process tree plus the bench's driver and endpoint): on a
    // shared 2-core machine wall time moves with everyone else's load, CPU time far less.
    Metric{"cpu_ms", "CPU of the run", true, &median_of<&RunRecord::cpu_ms>},
};

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

int report(const Options& o, int calls, const std::vector<RunRecord>& records) {
  std::map<Variant, Runs> ok;
  std::map<Variant, int> failed;
  for (const auto& r : records) {
    if (r.round < 0) continue;
    if (r.ok)
      ok[r.variant].push_back(&r);
    else
      ++failed[r.variant];
  }
  auto values = [&](Variant v, double RunRecord::*field) {
    std::vector<double> out;
    for (const RunRecord* r : ok[v])
      out.push_back(r->*field);
    return out;
  };
  auto has = [&](Variant v) { return std::find(o.variants.begin(), o.variants.end(), v) != o.variants.end(); };

  json::object summary;
  summary["calls_per_turn"] = calls;
  summary["rounds"] = o.runs;
  summary["warmup_rounds"] = o.warmup;
  summary["scenario"] = o.scenario.string();
  summary["codex"] = o.codex.string();
  summary["metaharness"] = o.metaharness.string();
  summary["model"] = o.model;
  summary["hardware_concurrency"] = std::thread::hardware_concurrency();

  std::cout << "\nCodex approval seam: " << calls << " sequential exec_command calls per turn, " << o.runs
            << " interleaved rounds (+" << o.warmup << " warm-up)\n";
  std::cout << "times in ms: median [min..max] over the runs that completed; call cycle: median [p10..p90] of every\n"
               "gap between successive calls of every run; call latency: median [p10..p90] over every call of every\n"
               "run of call announced -> its result\n\n";
  std::printf("%-16s %5s  %-22s %-22s %-22s %-20s %-20s\n", "variant", "ok", "spawn -> turn end",
              "spawn -> end of stream", "model request 1->N+1", "call cycle", "call latency");
  json::object variants;
  for (Variant v : o.variants) {
    json::object entry;
    std::vector<std::string> cells;
    for (auto field : {&RunRecord::wall_turn_ms, &RunRecord::wall_end_ms, &RunRecord::span_ms})
      cells.push_back(spread_text(spread_of(values(v, field)), 0));
    entry["wall_turn_ms"] = to_json(spread_of(values(v, &RunRecord::wall_turn_ms)));
    entry["wall_end_ms"] = to_json(spread_of(values(v, &RunRecord::wall_end_ms)));
    entry["span_ms"] = to_json(spread_of(values(v, &RunRecord::span_ms)));
    for (auto [key, pooled] :
         {std::pair{"call_cycle_ms", call_cycles(ok[v])}, std::pair{"call_latency_ms", call_latencies(ok[v])}}) {
      std::sort(pooled.begin(), pooled.end());
      entry[key] = json::object{{"median", median(pooled)},
                                {"p10", quantile_of_sorted(pooled, 0.10)},
                                {"p90", quantile_of_sorted(pooled, 0.90)},
                                {"max", pooled.empty() ? 0.0 : pooled.back()},
                                {"n", pooled.size()}};
      cells.push_back(fixed(median(pooled), 1) + " [" + fixed(quantile_of_sorted(pooled, 0.10), 1) + ".." +
                      fixed(quantile_of_sorted(pooled, 0.90), 1) + "]");
    }
    entry["child_cpu_ms"] = to_json(spread_of(values(v, &RunRecord::child_cpu_ms)));
    entry["bench_cpu_ms"] = to_json(spread_of(values(v, &RunRecord::bench_cpu_ms)));
    entry["cpu_ms"] = to_json(spread_of(values(v, &RunRecord::cpu_ms)));
    entry["load_before"] = to_json(spread_of(values(v, &RunRecord::load_before)));
    entry["completed"] = ok[v].size();
    entry["failed"] = failed[v];
    int aux = 0;
    for (const RunRecord* r : ok[v])
      aux += r->aux_requests;
    entry["aux_requests"] = aux;
    if (v == Variant::bare_driver) {
      std::vector<double> reactions;
      for (const RunRecord* r : ok[v])
        reactions.insert(reactions.end(), r->driver_reaction_us.begin(), r->driver_reaction_us.end());
      entry["driver_reaction_us"] = to_json(spread_of(reactions));
    }
    json::array runs;
    for (const auto& r : records) {
      if (r.variant != v) continue;
      json::object run{{"round", r.round}, {"ok", r.ok}};
      if (!r.ok) run["failure"] = r.failure;
      if (!r.ok) run["dir"] = r.dir.string();
      run["wall_turn_ms"] = r.wall_turn_ms;
      run["wall_end_ms"] = r.wall_end_ms;
      run["span_ms"] = r.span_ms;
      run["child_cpu_ms"] = r.child_cpu_ms;
      run["bench_cpu_ms"] = r.bench_cpu_ms;
      run["cpu_ms"] = r.cpu_ms;
      run["load_before"] = r.load_before;
      run["aux_requests"] = r.aux_requests;
      json::array seen;
      for (double t : r.call_seen_ms)
        seen.push_back(t);
      run["call_seen_ms"] = std::move(seen);
      runs.push_back(std::move(run));
    }
    entry["runs"] = std::move(runs);
    variants[name_of(v)] = std::move(entry);
    std::printf("%-16s %2zu/%-2d  %-22s %-22s %-22s %-20s %-20s\n", std::string(name_of(v)).c_str(), ok[v].size(),
                o.runs, cells[0].c_str(), cells[1].c_str(), cells[2].c_str(), cells[3].c_str(), cells[4].c_str());
  }
  summary["variants"] = std::move(variants);

  // Where the CPU went: on 2 cores, CPU spent beside codex competes with codex.
  std::cout << "\nCPU per run in ms (child: the spawned process and what it reaped; bench: driver/client and, for the\n"
               "direct variants, the in-process endpoint), and the 1-minute load average at the start of each run\n";
  std::printf("%-16s %-22s %-22s %-22s %-16s\n", "variant", "child CPU", "bench CPU", "together", "load");
  for (Variant v : o.variants)
    std::printf("%-16s %-22s %-22s %-22s %-16s\n", std::string(name_of(v)).c_str(),
                spread_text(spread_of(values(v, &RunRecord::child_cpu_ms)), 0).c_str(),
                spread_text(spread_of(values(v, &RunRecord::bench_cpu_ms)), 0).c_str(),
                spread_text(spread_of(values(v, &RunRecord::cpu_ms)), 0).c_str(),
                spread_text(spread_of(values(v, &RunRecord::load_before)), 1).c_str());

  // Added time per call, each comparison with its 95% bootstrap interval: the two seams against
  // the floor, and metaharness against the bare driver (metaharness's own share: its hook
  // process per call and its own path, on top of the approval round trip).
  //
  // Two estimates of each. "unpaired" is the issue's definition: (median of the variant's runs -
  // median of the other's) / N, runs resampled per variant for the interval. "paired" uses the
  // interleaving: the two runs of one round ran seconds apart, under nearly the same load from
  // the rest of the machine, so the median over rounds of the within-round difference (rounds
  // resampled for the interval) is far less moved by load that drifts over minutes.
  //
  // Call latency is not compared with never_ask: under "never" Codex announces a command
  // (item/started) only once it has run, under "untrusted" before it asks for the approval, so
  // the two latencies time different things. Between bare_driver and metaharness_ask it is
  // compared: both end at the result; metaharness's begins at its first tool.requested, which
  // comes from its PreToolUse hook, a few ms before Codex's item/started.
  struct Comparison {
    Variant variant, against;
    std::string_view key;
  };
  const std::array<Comparison, 3> comparisons = {
      Comparison{Variant::bare_driver, Variant::never_ask, "bare_driver_vs_never_ask"},
      Comparison{Variant::metaharness_ask, Variant::never_ask, "metaharness_ask_vs_never_ask"},
      Comparison{Variant::metaharness_ask, Variant::bare_driver, "metaharness_ask_vs_bare_driver"}};
  auto comparable = [](const Comparison& c, const Metric& m) {
    return m.key != "call_latency_ms" || c.against != Variant::never_ask;
  };
  // The runs of one variant by round, for pairing.
  auto by_round = [&](Variant v) {
    std::map<int, const RunRecord*> rounds;
    for (const RunRecord* r : ok[v])
      rounds[r->round] = r;
    return rounds;
  };
  json::object added;
  for (bool paired : {false, true}) {
    if (!paired)
      std::cout << "\nadded ms per call, unpaired: (median(variant) - median(other)) / " << calls
                << " for per-turn figures, difference of the medians for per-call ones; [95% bootstrap interval]\n";
    else
      std::cout << "\nadded ms per call, paired by round: median over rounds of (variant - other in the same round), / "
                << calls << " for per-turn figures; [95% bootstrap interval over rounds]\n";
    std::printf("%-32s %-22s %-22s %-22s %-22s %-22s %-22s\n", "comparison", "spawn -> turn end",
                "spawn -> end of stream", "model request 1->N+1", "median call cycle", "median call latency",
                "CPU of the run");
    for (const auto& c : comparisons) {
      if (!has(c.variant) || !has(c.against)) continue;
      json::object& figures = added[c.key].is_object() ? added[c.key].get_object() : added[c.key].emplace_object();
      std::vector<std::string> cells;
      // Rounds in which both variants completed, as one-run groups for the paired figures.
      std::vector<std::pair<const RunRecord*, const RunRecord*>> pairs;
      auto a_rounds = by_round(c.variant), b_rounds = by_round(c.against);
      for (const auto& [round, a] : a_rounds)
        if (auto b = b_rounds.find(round); b != b_rounds.end()) pairs.emplace_back(a, b->second);
      for (const auto& m : kMetrics) {
        const Runs &a = ok[c.variant], &b = ok[c.against];
        if (!comparable(c, m)) {
          cells.push_back("n/c");
          continue;
        }
        const double divisor = m.per_turn ? calls : 1;
        std::optional<double> point;
        std::optional<std::pair<double, double>> interval;
        if (!paired && !a.empty() && !b.empty()) {
          point = (m.statistic(a) - m.statistic(b)) / divisor;
          interval = bootstrap_interval(std::vector<Runs>{a, b}, [&](const std::vector<Runs>& g) {
            return std::optional<double>((m.statistic(g[0]) - m.statistic(g[1])) / divisor);
          });
        } else if (paired && !pairs.empty()) {
          // Each round's difference, with the metric taken over that round's one run.
          std::vector<double> differences;
          for (const auto& [x, y] : pairs)
            differences.push_back((m.statistic(Runs{x}) - m.statistic(Runs{y})) / divisor);
          point = median(differences);
          if (differences.size() >= 2) {
            std::mt19937_64 random(20261129);
            std::uniform_int_distribution<std::size_t> pick(0, differences.size() - 1);
            std::vector<double> estimates;
            for (int i = 0; i < 2000; ++i) {
              std::vector<double> resampled;
              for (std::size_t k = 0; k < differences.size(); ++k)
                resampled.push_back(differences[pick(random)]);
              estimates.push_back(median(std::move(resampled)));
            }
            std::sort(estimates.begin(), estimates.end());
            interval = std::make_pair(quantile_of_sorted(estimates, 0.025), quantile_of_sorted(estimates, 0.975));
          }
        }
        if (!point) {
          cells.push_back("n/a");
          continue;
        }
        json::object f{{"ms_per_call", *point}};
        std::string cell = fixed(*point, 2);
        if (interval) {
          f["ms_per_call_95"] = json::array{interval->first, interval->second};
          cell += " [" + fixed(interval->first, 2) + ", " + fixed(interval->second, 2) + "]";
        }
        if (paired) f["rounds"] = pairs.size();
        json::object& metric =
            figures[m.key].is_object() ? figures[m.key].get_object() : figures[m.key].emplace_object();
        metric[paired ? "paired" : "unpaired"] = std::move(f);
        cells.push_back(cell);
      }
      std::string title = std::string(name_of(c.variant)) + " - " + std::string(name_of(c.against));
      std::printf("%-32s %-22s %-22s %-22s %-22s %-22s %-22s\n", title.c_str(), cells[0].c_str(), cells[1].c_str(),
                  cells[2].c_str(), cells[3].c_str(), cells[4].c_str(), cells[5].c_str());
    }
  }
  summary["added_per_call"] = std::move(added);

  // metaharness's in-process share, pooled exactly from the raw samples of every run's
  // --latency-report.
  if (has(Variant::metaharness_ask)) {
    std::cout << "\nmetaharness's own share in-process (--latency-report, raw samples of every run pooled), us\n";
    std::printf("%-20s %8s %10s %10s %10s %10s\n", "path", "samples", "p50", "p90", "p99", "max");
    json::object own;
    for (auto name : kOwnShares) {
      std::vector<double> pooled;
      for (const RunRecord* r : ok[Variant::metaharness_ask])
        if (auto it = r->own_share_us.find(std::string(name)); it != r->own_share_us.end())
          pooled.insert(pooled.end(), it->second.begin(), it->second.end());
      std::sort(pooled.begin(), pooled.end());
      json::object s{{"samples", pooled.size()}};
      if (!pooled.empty()) {
        s["p50_us"] = quantile_of_sorted(pooled, 0.50);
        s["p90_us"] = quantile_of_sorted(pooled, 0.90);
        s["p99_us"] = quantile_of_sorted(pooled, 0.99);
        s["max_us"] = pooled.back();
      }
      std::printf("%-20s %8zu %10.1f %10.1f %10.1f %10.1f\n", std::string(name).c_str(), pooled.size(),
                  quantile_of_sorted(pooled, 0.50), quantile_of_sorted(pooled, 0.90), quantile_of_sorted(pooled, 0.99),
                  pooled.empty() ? 0.0 : pooled.back());
      own[name] = std::move(s);
    }
    summary["own_share"] = std::move(own);

    std::vector<double> hooks;
    for (const RunRecord* r : ok[Variant::metaharness_ask])
      hooks.insert(hooks.end(), r->hook_ms.begin(), r->hook_ms.end());
    std::sort(hooks.begin(), hooks.end());
    std::printf(
        "\nPreToolUse hook run (mh-codex-hook) as Codex timed it (hook/completed durationMs), ms: %zu runs, "
        "median %.1f [p10 %.1f .. p90 %.1f], max %.1f\n",
        hooks.size(), median(hooks), quantile_of_sorted(hooks, 0.10), quantile_of_sorted(hooks, 0.90),
        hooks.empty() ? 0.0 : hooks.back());
    summary["hook_run_ms"] = json::object{{"median", median(hooks)},
                                          {"p10", quantile_of_sorted(hooks, 0.10)},
                                          {"p90", quantile_of_sorted(hooks, 0.90)},
                                          {"max", hooks.empty() ? 0.0 : hooks.back()},
                                          {"n", hooks.size()}};
  }

  // One machine-readable line per comparison on the issue's metric, for scripts/bench.sh.
  std::cout << "\n";
  for (const auto& c : comparisons) {
    const json::value* figures = summary.at("added_per_call").get_object().if_contains(c.key);
    const json::value* wall = figures ? figures->get_object().if_contains("wall_turn_ms") : nullptr;
    if (!wall) continue;
    std::cout << "codex_seam: added_per_call " << c.key;
    for (auto kind : {"unpaired", "paired"})
      if (const json::value* f = wall->get_object().if_contains(kind))
        std::cout << " " << kind << " " << fixed(f->at("ms_per_call").to_number<double>(), 2) << " ms";
    std::cout << "\n";
  }

  if (!o.json_out.empty()) {
    std::ofstream out(o.json_out, std::ios::trunc);
    out << json::serialize(summary) << "\n";
    std::cout << "\nsummary: " << o.json_out.string() << "\n";
  }

  int failures = 0;
  for (auto [v, n] : failed)
    failures += n;
  for (Variant v : o.variants)
    if (ok[v].empty()) ++failures;
  if (failures > 0) {
    std::cerr << "mh_codex_seam_bench: " << failures << " run(s) did not complete; their directories are kept:\n";
    for (const auto& r : records)
      if (!r.ok)
        std::cerr << "  " << name_of(r.variant) << " round " << r.round << ": " << r.failure << " (" << r.dir.string()
                  << ")\n";
    return 1;
  }
  return 0;
}

// ---------------------------------------------------------------------------------------------
// Command line
// ---------------------------------------------------------------------------------------------

void usage(std::ostream& out) {
  out << "usage: mh_codex_seam_bench [options]\n"
         "  --runs N            measured rounds, each runs every variant once (default 5)\n"
         "  --warmup N          discarded rounds run first (default 1)\n"
         "  --variants LIST     comma-separated: never_ask,bare_driver,metaharness_ask (default all;\n"
         "                      never_ask is always run: every added time is measured against it)\n"
         "  --scenario FILE     default <source>/bench/scenarios/codex_40_calls.json\n"
         "  --codex FILE        default $METAHARNESS_CODEX_BIN or the pinned native binary in <source>/.vendor\n"
         "  --metaharness FILE  default: metaharness next to this program (mh-codex-hook beside it)\n"
         "  --model NAME        the model slug in config.toml (default gpt-5.5, the adapter's)\n"
         "  --work-dir DIR      where runs happen (default: a new directory under $TMPDIR or /tmp)\n"
         "  --json FILE         the JSON summary (default <work-dir>/codex-seam-bench.json)\n"
         "  --timeout-s N       bound on one run (default 120)\n"
         "  --keep              keep every run's directory (failed runs are always kept)\n";
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  const fs::path source(mh::build_info::source_dir);
  o.scenario = source / "bench/scenarios/codex_40_calls.json";
  // The codex adapter's own resolution (METAHARNESS_CODEX_BIN, else the pinned native binary).
  if (const char* bin = std::getenv("METAHARNESS_CODEX_BIN"); bin && *bin)
    o.codex = bin;
  else
    o.codex = source / ".vendor/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  o.metaharness = (ec ? fs::path(argv[0]).parent_path() : self.parent_path()) / "metaharness";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) {
        std::cerr << "mh_codex_seam_bench: " << arg << " needs a value\n";
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
        std::cerr << "mh_codex_seam_bench: " << arg << " needs a number, got " << *v << "\n";
        return false;
      }
      out = static_cast<int>(n);
      return true;
    };
    if (arg == "--runs") {
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
          std::cerr << "mh_codex_seam_bench: unknown variant " << name << "\n";
          return std::nullopt;
        }
        o.variants.push_back(*variant);
      }
      if (std::find(o.variants.begin(), o.variants.end(), Variant::never_ask) == o.variants.end())
        o.variants.insert(o.variants.begin(), Variant::never_ask);
    } else if (arg == "--scenario" || arg == "--codex" || arg == "--metaharness" || arg == "--work-dir" ||
               arg == "--json" || arg == "--model") {
      auto v = value();
      if (!v) return std::nullopt;
      if (arg == "--scenario")
        o.scenario = *v;
      else if (arg == "--codex")
        o.codex = *v;
      else if (arg == "--metaharness")
        o.metaharness = *v;
      else if (arg == "--work-dir")
        o.work_root = *v;
      else if (arg == "--json")
        o.json_out = *v;
      else
        o.model = *v;
    } else if (arg == "--keep") {
      o.keep = true;
    } else if (arg == "-h" || arg == "--help") {
      usage(std::cout);
      std::exit(0);
    } else {
      std::cerr << "mh_codex_seam_bench: unknown option " << arg << "\n";
      usage(std::cerr);
      return std::nullopt;
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);  // a child that died must not take the bench with it
  struct sigaction stop {};
  stop.sa_handler = on_stop_signal;
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGINT, &stop, nullptr);
  ::sigaction(SIGTERM, &stop, nullptr);
  auto parsed = parse_options(argc, argv);
  if (!parsed) return 2;
  Options o = std::move(*parsed);

  auto scenario = mh::model::load_scenario_file(o.scenario);
  if (!scenario) {
    std::cerr << "mh_codex_seam_bench: the scenario " << o.scenario.string()
              << " is refused: " << scenario.error().message() << "\n";
    return 2;
  }
  if (!scenario->serves(mh::model::Wire::responses)) {
    std::cerr << "mh_codex_seam_bench: the scenario does not serve the responses wire Codex speaks\n";
    return 2;
  }
  // N = the tool calls the scenario makes on the responses wire, one per step.
  int calls = 0;
  for (const auto& step : scenario->steps)
    for (const auto& block : step.responses.content)
      if (block.kind == mh::model::Block::Kind::tool_call) calls += static_cast<int>(step.repeat);
  if (calls == 0) {
    std::cerr << "mh_codex_seam_bench: the scenario makes no tool call\n";
    return 2;
  }
  const bool with_metaharness =
      std::find(o.variants.begin(), o.variants.end(), Variant::metaharness_ask) != o.variants.end();
  const fs::path hook = o.metaharness.parent_path() / "mh-codex-hook";
  for (const auto& [what, path, needed] :
       {std::tuple{"codex", o.codex, true}, std::tuple{"metaharness", o.metaharness, with_metaharness},
        std::tuple{"mh-codex-hook", hook, with_metaharness}}) {
    if (needed && ::access(path.c_str(), X_OK) != 0) {
      std::cerr << "mh_codex_seam_bench: no executable " << what << " at " << path.string() << "\n";
      return 2;
    }
  }
  // Every run has its own working directory: the paths it is given must not depend on ours.
  o.scenario = fs::absolute(o.scenario);
  o.codex = fs::absolute(o.codex);
  o.metaharness = fs::absolute(o.metaharness);
  if (o.work_root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/mh-codex-seam-bench.XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::cerr << "mh_codex_seam_bench: mkdtemp: " << std::strerror(errno) << "\n";
      return 2;
    }
    o.work_root = pattern;
  }
  o.work_root = fs::absolute(o.work_root);
  fs::create_directories(o.work_root);
  if (o.json_out.empty()) o.json_out = o.work_root / "codex-seam-bench.json";
  std::cerr << "mh_codex_seam_bench: " << calls << " calls per turn; runs in " << o.work_root.string() << "\n";

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
                  << (r.ok ? fixed(r.wall_turn_ms, 0) + " ms to turn end, span " + fixed(r.span_ms, 0) + " ms"
                           : "FAILED: " + r.failure)
                  << "\n";
        records.push_back(std::move(r));
        if (g_stop_requested) break;
      }
      if (g_stop_requested) {
        std::cerr << "mh_codex_seam_bench: stopped by a signal\n";
        return 130;
      }
    }
  }
  return report(o, calls, records);
}
