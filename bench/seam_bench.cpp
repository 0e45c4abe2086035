// mh_seam_bench: what deciding a Claude Code tool call costs, per call, measured with the REAL
// CLI against the project's scripted model endpoint (issue 3). One invocation runs four variants
// side by side, interleaved round-robin, each a single claude turn of N sequential Bash calls:
//
//   baseline         no hook; Bash pre-approved with --allowedTools Bash (bench drives claude)
//   bare_driver      the bench drives claude itself: initialize registers a PreToolUse hook
//                    callback for every tool; every hook_callback is answered allow at once
//   command_hook     a --settings PreToolUse command hook (matcher "*") that prints an allow
//   metaharness_ask  `metaharness run claude --decisions ask`; the bench is the client and
//                    answers every tool.requested with tool.decide allow at once
//
// Per run it records the wall time from the spawn to the turn's end (`result`; turn.ended for
// metaharness) and to the end of the stream (stdout EOF; stream.closed), the span between the
// first and the last main-loop request the scripted endpoint received (which holds exactly the
// N call cycles and nothing of start-up or shut-down), every call cycle (gap between successive
// calls as the driver sees them) and every call latency (a call seen -> its result seen). The
// added time per call of a variant is (median(variant) - median(baseline)) / N for per-turn
// figures, the difference of the medians for per-call ones; 95% bootstrap intervals say how much
// of a difference is noise. metaharness's own share comes from the --latency-report files it
// writes. Output: a table on stdout and a JSON summary.
//
// Every wait is bounded; a run that does not finish in time is killed and reaped, and the
// program then exits non-zero.
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
#include <vector>

#include "daemon/model/scripted_endpoint.hpp"
#include "metaharness/build_info.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Ctrl-C / SIGTERM: the signal is passed on to the running child (claude exits; metaharness
// stops its run and kills the run's processes), and the bench stops after reaping it, so an
// interrupted bench leaves nothing behind.
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

enum class Variant { baseline, bare_driver, command_hook, metaharness_ask };
constexpr std::array<Variant, 4> kAllVariants = {Variant::baseline, Variant::bare_driver, Variant::command_hook,
                                                 Variant::metaharness_ask};

std::string_view name_of(Variant v) {
  switch (v) {
    case Variant::baseline:
      return "baseline";
    case Variant::bare_driver:
      return "bare_driver";
    case Variant::command_hook:
      return "command_hook";
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

// The conventional cheapest shell form of a command hook: drain the hook input (so the CLI's
// write never meets a closed pipe), print the allow. One /bin/sh plus one cat per call, which
// is what a real command hook costs at the very least (real ones are usually python or node
// scripts, costing tens of milliseconds more), so it is the strictest yardstick for
// "at most half of a command hook's".
constexpr std::string_view kDefaultHookCommand =
    R"(cat >/dev/null; printf '%s\n' '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}')";

struct Options {
  int runs = 7;    // measured rounds; every round runs each variant once
  int warmup = 1;  // rounds run first and discarded (cold page cache, first Bun start-up)
  int timeout_s = 180;
  fs::path scenario;
  fs::path claude;
  fs::path metaharness;
  fs::path work_root;
  fs::path json_out;
  std::vector<Variant> variants{kAllVariants.begin(), kAllVariants.end()};
  std::string hook_command{kDefaultHookCommand};
  std::string prompt = "Touch the files.";
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

  pid_t pid() const { return pid_; }
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

  // Waits (bounded) for the exit; returns the wait status.
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

  // Asks politely first (metaharness stops its run on SIGTERM and kills the vendor's processes),
  // then kills the whole process group and reaps.
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

// ---------------------------------------------------------------------------------------------
// One measured run
// ---------------------------------------------------------------------------------------------

struct LatencySummary {
  std::uint64_t samples = 0;
  double p50_us = 0, p90_us = 0, p99_us = 0, max_us = 0;
};

struct RunRecord {
  Variant variant = Variant::baseline;
  int round = 0;  // negative: warm-up
  bool ok = false;
  std::string failure;
  double wall_result_ms = 0;  // spawn -> `result` (metaharness: turn.ended read by the client)
  double wall_end_ms = 0;     // spawn -> stdout EOF (metaharness: stream.closed read by the client)
  double span_ms = 0;         // first -> last main-loop request at the endpoint (the N call cycles)
  double child_cpu_ms = 0;    // CPU of the spawned process and its descendants (claude, tools; metaharness)
  double bench_cpu_ms = 0;    // CPU of this process during the run (driver/client, in-process endpoint)
  double load_before = 0;     // 1-minute load average when the run started
  int calls_answered = 0;     // hook_callbacks answered / tool.decide sent
  std::vector<double> driver_reaction_us;  // bare driver: hook_callback read -> answer written
  // When the driver saw each call, ms since the spawn: the assistant tool_use record (direct
  // variants) or the tool.requested event (metaharness). Successive differences are the call
  // cycles (tool_use -> hook -> tool -> next model request -> next tool_use), at microsecond
  // resolution and free of start-up and shut-down.
  std::vector<double> call_seen_ms;
  // Per call, from the driver seeing it to the driver seeing its result (assistant tool_use ->
  // user tool_result; tool.requested -> tool.result): the CLI's hook, permission and tool run,
  // without the model round trip that makes most of a cycle's noise.
  std::vector<double> call_latency_ms;
  std::map<std::string, double> seen_by_id, done_by_id;  // ms since the spawn, by tool_use id

  void match_latencies() {
    for (const auto& [id, seen] : seen_by_id)
      if (auto it = done_by_id.find(id); it != done_by_id.end()) call_latency_ms.push_back(it->second - seen);
  }
  std::optional<LatencySummary> line_to_requested, decide_to_answer;  // metaharness_ask
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
      run_claude_directly(r);
    r.bench_cpu_ms = own_cpu_ms() - cpu_before;
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

  // The span of the N call cycles: main-loop request 1 (the prompt) to request N+1 (after the
  // last tool result). `step_received_ms` holds the arrival time of every step-answered request.
  std::string span_from(const std::vector<double>& step_received_ms, RunRecord& r) const {
    if (static_cast<int>(step_received_ms.size()) != calls_ + 1)
      return "the endpoint answered " + std::to_string(step_received_ms.size()) +
             " main-loop requests with steps, not " + std::to_string(calls_ + 1);
    r.span_ms = step_received_ms.back() - step_received_ms.front();
    return "";
  }

  void run_claude_directly(RunRecord& r) {
    const fs::path home = r.dir / "home", config = home / ".claude", tmp = r.dir / "tmp", work = r.dir / "work";
    for (const auto& d : {home, config, tmp, work})
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

    std::vector<std::string> args = {
        "-p", "--input-format",     "stream-json", "--output-format", "stream-json", "--verbose", "--setting-sources",
        "",   "--strict-mcp-config"};
    if (r.variant == Variant::baseline) args.insert(args.end(), {"--allowedTools", "Bash"});
    if (r.variant == Variant::command_hook) {
      json::object hook{{"type", "command"}, {"command", o_.hook_command}, {"timeout", 60}};
      json::object matcher{{"matcher", "*"}, {"hooks", json::array{hook}}};
      json::object settings{{"hooks", json::object{{"PreToolUse", json::array{matcher}}}}};
      fs::path settings_file = r.dir / "settings.json";
      std::ofstream(settings_file) << json::serialize(settings) << "\n";
      args.insert(args.end(), {"--settings", settings_file.string()});
    }
    std::vector<std::string> env = {"HOME=" + home.string(),
                                    "CLAUDE_CONFIG_DIR=" + config.string(),
                                    "PATH=/usr/local/bin:/usr/bin:/bin",
                                    "TMPDIR=" + tmp.string(),
                                    "ANTHROPIC_BASE_URL=" + endpoint.base_url(),
                                    "ANTHROPIC_AUTH_TOKEN=" + endpoint.token(),
                                    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"};

    const json::object user_line{
        {"type", "user"},
        {"session_id", ""},
        {"message",
         json::object{{"role", "user"}, {"content", json::array{json::object{{"type", "text"}, {"text", o_.prompt}}}}}},
        {"parent_tool_use_id", nullptr}};
    const std::string user = json::serialize(user_line);
    // The same registration metaharness makes: one callback for every tool.
    const std::string initialize =
        R"({"type":"control_request","request_id":"init_1","request":{"subtype":"initialize","hooks":{"PreToolUse":[{"matcher":"*","hookCallbackIds":["h"],"timeout":60}]}}})";

    Child child;
    const Clock::time_point started = Clock::now();
    const Clock::time_point deadline = deadline_from(started);
    if (auto error = child.spawn(o_.claude, args, env, work, r.dir / "stderr.txt"); !error.empty()) {
      r.failure = error;
      return;
    }
    LineReader reader(child.stdout_fd());
    bool initialized = r.variant != Variant::bare_driver;
    // Like metaharness, the bare driver sends the prompt once the seam is installed.
    if (!initialized)
      child.write_line(initialize);
    else
      child.write_line(user);

    std::string line;
    Clock::time_point read_at;
    std::optional<Clock::time_point> result_at;
    std::string result_problem;
    while (!result_at) {
      auto status = reader.next(line, read_at, deadline);
      if (status != LineReader::Status::line) {
        r.failure = g_stop_requested                        ? "stopped by a signal"
                    : status == LineReader::Status::timeout ? "timed out before the result"
                                                            : "stdout ended before the result";
        break;
      }
      boost::system::error_code ec;
      json::value v = json::parse(line, ec);
      if (ec || !v.is_object()) continue;
      const json::object& record = v.get_object();
      const json::value* type = record.if_contains("type");
      if (!type || !type->is_string()) continue;
      if (type->get_string() == "control_request") {
        const json::value* request = record.if_contains("request");
        const json::value* id = record.if_contains("request_id");
        if (!request || !request->is_object() || !id || !id->is_string()) continue;
        const json::value* subtype = request->get_object().if_contains("subtype");
        if (!subtype || !subtype->is_string() || subtype->get_string() != "hook_callback") continue;
        std::string answer =
            R"({"type":"control_response","response":{"subtype":"success","request_id":)" + json::serialize(*id) +
            R"(,"response":{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}}})";
        child.write_line(answer);
        r.driver_reaction_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - read_at).count());
        ++r.calls_answered;
      } else if (type->get_string() == "assistant") {
        const json::value* message = record.if_contains("message");
        const json::value* content =
            message && message->is_object() ? message->get_object().if_contains("content") : nullptr;
        if (content && content->is_array())
          for (const auto& block : content->get_array())
            if (block.is_object() && block.get_object().if_contains("type") &&
                block.get_object().at("type") == "tool_use") {
              r.call_seen_ms.push_back(ms_between(started, read_at));
              if (const json::value* id = block.get_object().if_contains("id"); id && id->is_string())
                r.seen_by_id[std::string(id->get_string())] = ms_between(started, read_at);
            }
      } else if (type->get_string() == "user") {
        const json::value* message = record.if_contains("message");
        const json::value* content =
            message && message->is_object() ? message->get_object().if_contains("content") : nullptr;
        if (content && content->is_array())
          for (const auto& block : content->get_array())
            if (block.is_object() && block.get_object().if_contains("tool_use_id") &&
                block.get_object().at("tool_use_id").is_string())
              r.done_by_id[std::string(block.get_object().at("tool_use_id").get_string())] =
                  ms_between(started, read_at);
      } else if (type->get_string() == "control_response" && !initialized) {
        initialized = true;
        child.write_line(user);
      } else if (type->get_string() == "result") {
        result_at = read_at;
        const json::value* subtype = record.if_contains("subtype");
        const json::value* is_error = record.if_contains("is_error");
        const json::value* denials = record.if_contains("permission_denials");
        if (!subtype || *subtype != "success" || !is_error || *is_error != false)
          result_problem = "the turn did not succeed: " + line.substr(0, 300);
        else if (denials && denials->is_array() && !denials->get_array().empty())
          result_problem = "some calls were denied: " + json::serialize(*denials).substr(0, 300);
      }
    }
    std::optional<Clock::time_point> eof_at;
    if (result_at) {
      child.close_stdin();  // the turn is over: claude exits 0
      eof_at = reader.drain(deadline);
      if (!eof_at) r.failure = "claude did not close its stdout after stdin closed";
    }
    if (r.failure.empty() && !child.wait_exit(eof_at ? *eof_at + 10s : deadline)) r.failure = "claude did not exit";
    child.kill_and_reap();
    r.child_cpu_ms = child.cpu_ms();
    endpoint.stop();
    if (!r.failure.empty()) return;

    r.wall_result_ms = ms_between(started, *result_at);
    r.wall_end_ms = ms_between(started, *eof_at);
    std::vector<double> received;
    for (const auto& request : endpoint.requests())
      if (request.answer == mh::model::Answer::step)
        received.push_back(static_cast<double>(request.received_at.count()));
    r.failure = result_problem;
    if (r.failure.empty()) r.failure = span_from(received, r);
    if (r.failure.empty() && r.variant == Variant::bare_driver && r.calls_answered != calls_)
      r.failure = "answered " + std::to_string(r.calls_answered) + " hook_callbacks, not " + std::to_string(calls_);
    if (r.failure.empty()) r.failure = check_files(work);
    r.ok = r.failure.empty();
  }

  void run_metaharness(RunRecord& r) {
    const fs::path run_dir = r.dir / "run", home = r.dir / "home", tmp = r.dir / "tmp";
    const fs::path latency_file = r.dir / "latency.json";
    fs::create_directories(home);
    fs::create_directories(tmp);
    std::vector<std::string> args = {"run",
                                     "claude",
                                     "-p",
                                     o_.prompt,
                                     "--decisions",
                                     "ask",
                                     "--model-scenario",
                                     o_.scenario.string(),
                                     "--latency-report",
                                     latency_file.string(),
                                     "--run-dir",
                                     run_dir.string()};
    // metaharness builds claude's environment itself (the same variables as the direct runs);
    // it only needs to find the same binary.
    std::vector<std::string> env = {"HOME=" + home.string(), "PATH=/usr/local/bin:/usr/bin:/bin",
                                    "TMPDIR=" + tmp.string(), "METAHARNESS_CLAUDE_BIN=" + o_.claude.string()};

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
    std::string close_reason;
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
      const json::value* event = e.if_contains("event");
      if (!event || !event->is_string()) continue;
      if (*event == "tool.requested") {
        const json::value* required = e.if_contains("decision_required");
        const json::value* call = e.if_contains("call_id");
        if (!required || *required != true || !call || !call->is_string()) continue;
        r.call_seen_ms.push_back(ms_between(started, read_at));
        r.seen_by_id[std::string(call->get_string())] = ms_between(started, read_at);
        std::string decide = R"({"format":"metaharness.command/1","id":"d)" + std::to_string(++command_number) +
                             R"(","command":"tool.decide","call_id":)" + json::serialize(*call) +
                             R"(,"decision":{"decision":"allow"}})";
        child.write_line(decide);
        // Once every call is decided nothing more is needed: the run ends after the turn.
        if (++r.calls_answered == calls_) child.close_stdin();
      } else if (*event == "tool.result") {
        if (const json::value* call = e.if_contains("call_id"); call && call->is_string())
          r.done_by_id[std::string(call->get_string())] = ms_between(started, read_at);
      } else if (*event == "turn.ended") {
        turn_ended_at = read_at;
      } else if (*event == "stream.closed") {
        closed_at = read_at;
        if (const json::value* reason = e.if_contains("reason"); reason && reason->is_string())
          close_reason = std::string(reason->get_string());
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
    else if (close_reason != "completed")
      r.failure = "stream.closed reason " + close_reason;
    else if (!WIFEXITED(*status) || WEXITSTATUS(*status) != 0)
      r.failure = "metaharness exit status " + std::to_string(WIFEXITED(*status) ? WEXITSTATUS(*status) : -1);
    else if (r.calls_answered != calls_)
      r.failure = "decided " + std::to_string(r.calls_answered) + " calls, not " + std::to_string(calls_);
    if (!r.failure.empty()) return;
    r.wall_result_ms = ms_between(started, *turn_ended_at);
    r.wall_end_ms = ms_between(started, *closed_at);

    std::vector<double> received;
    std::ifstream log(run_dir / "model-requests.jsonl");
    for (std::string record; std::getline(log, record);) {
      boost::system::error_code ec;
      json::value v = json::parse(record, ec);
      if (ec || !v.is_object()) continue;
      const auto& o = v.get_object();
      if (o.if_contains("kind") && o.at("kind") == "request" && o.if_contains("answer") && o.at("answer") == "step")
        received.push_back(o.at("received_ms").to_number<double>());
    }
    r.failure = span_from(received, r);
    if (r.failure.empty()) r.failure = check_files(run_dir / "scratch/work");
    if (r.failure.empty()) r.failure = read_latency_report(latency_file, r);
    r.ok = r.failure.empty();
  }

  static std::string read_latency_report(const fs::path& file, RunRecord& r) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    boost::system::error_code ec;
    json::value v = json::parse(text.str(), ec);
    if (ec || !v.is_object()) return "cannot read the latency report " + file.string();
    auto summary = [](const json::value* s) -> std::optional<LatencySummary> {
      if (!s || !s->is_object()) return std::nullopt;
      const auto& o = s->get_object();
      LatencySummary l;
      l.samples = o.at("samples").to_number<std::uint64_t>();
      if (l.samples == 0) return l;
      l.p50_us = o.at("p50_us").to_number<double>();
      l.p90_us = o.at("p90_us").to_number<double>();
      l.p99_us = o.at("p99_us").to_number<double>();
      l.max_us = o.at("max_us").to_number<double>();
      return l;
    };
    r.line_to_requested = summary(v.get_object().if_contains("line_to_requested"));
    r.decide_to_answer = summary(v.get_object().if_contains("decide_to_answer"));
    if (!r.line_to_requested || !r.decide_to_answer) return "the latency report lacks a section";
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

std::vector<double> call_latencies(const Runs& runs) {
  std::vector<double> all;
  for (const RunRecord* r : runs)
    all.insert(all.end(), r->call_latency_ms.begin(), r->call_latency_ms.end());
  return all;
}

double median_call_latency(const Runs& runs) {
  return median(call_latencies(runs));
}

constexpr std::array<Metric, 5> kMetrics = {
    // The issue's definition: the turn's wall time, medians of runs, difference over N.
    Metric{"wall_result_ms", "spawn -> result", true, &median_of<&RunRecord::wall_result_ms>},
    Metric{"wall_end_ms", "spawn -> end of stream", true, &median_of<&RunRecord::wall_end_ms>},
    // The N call cycles alone, on the endpoint's clock (ms resolution): no start-up, no end.
    Metric{"span_ms", "model request 1 -> N+1", true, &median_of<&RunRecord::span_ms>},
    // The typical call: the median of every call cycle of every run, robust to the slow outlier
    // calls (the first call, the CLI's garbage collections) that dominate the noise of sums.
    Metric{"call_cycle_ms", "median call cycle", false, &median_call_cycle},
    // The part of a cycle the seam is in (tool_use seen -> its result seen), median of all calls.
    Metric{"call_latency_ms", "median call latency", false, &median_call_latency},
};

std::optional<double> added_per_call(const Metric& m, const Runs& variant, const Runs& baseline, int calls) {
  if (variant.empty() || baseline.empty()) return std::nullopt;
  double difference = m.statistic(variant) - m.statistic(baseline);
  return m.per_turn ? difference / calls : difference;
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
  auto at = [&](double q) {
    return estimates[static_cast<std::size_t>(q * static_cast<double>(estimates.size() - 1))];
  };
  return std::make_pair(at(0.025), at(0.975));
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
  auto added = [&](const Metric& m, Variant v) { return added_per_call(m, ok[v], ok[Variant::baseline], calls); };

  json::object summary;
  summary["calls_per_turn"] = calls;
  summary["rounds"] = o.runs;
  summary["warmup_rounds"] = o.warmup;
  summary["scenario"] = o.scenario.string();
  summary["claude"] = o.claude.string();
  summary["metaharness"] = o.metaharness.string();
  summary["command_hook"] = o.hook_command;
  summary["hardware_concurrency"] = std::thread::hardware_concurrency();

  std::cout << "\nClaude call seam: " << calls << " sequential Bash calls per turn, " << o.runs
            << " interleaved rounds (+" << o.warmup << " warm-up)\n";
  std::cout << "times in ms: median [min..max] over the runs that completed; call cycle: median [p10..p90] of every\n"
               "gap between successive calls of every run; call latency: median [p10..p90] over every call of every\n"
               "run of tool_use seen -> tool_result seen\n\n";
  std::printf("%-16s %5s  %-22s %-22s %-22s %-20s %-20s\n", "variant", "ok", "spawn -> result",
              "spawn -> end of stream", "model request 1->N+1", "call cycle", "call latency");
  json::object variants;
  for (Variant v : o.variants) {
    json::object entry;
    std::vector<std::string> cells;
    for (auto field : {&RunRecord::wall_result_ms, &RunRecord::wall_end_ms, &RunRecord::span_ms})
      cells.push_back(spread_text(spread_of(values(v, field)), 0));
    entry["wall_result_ms"] = to_json(spread_of(values(v, &RunRecord::wall_result_ms)));
    entry["wall_end_ms"] = to_json(spread_of(values(v, &RunRecord::wall_end_ms)));
    entry["span_ms"] = to_json(spread_of(values(v, &RunRecord::span_ms)));
    std::vector<double> cycles = call_cycles(ok[v]);
    std::sort(cycles.begin(), cycles.end());
    auto quantile = [&](double q) {
      return cycles.empty() ? 0.0 : cycles[static_cast<std::size_t>(q * static_cast<double>(cycles.size() - 1))];
    };
    double cycle_mean = 0;
    for (double c : cycles)
      cycle_mean += c;
    if (!cycles.empty()) cycle_mean /= static_cast<double>(cycles.size());
    entry["call_cycle_ms"] = json::object{{"median", median(cycles)},
                                          {"p10", quantile(0.10)},
                                          {"p90", quantile(0.90)},
                                          {"mean", cycle_mean},
                                          {"max", cycles.empty() ? 0.0 : cycles.back()},
                                          {"n", cycles.size()}};
    cells.push_back(fixed(median(cycles), 1) + " [" + fixed(quantile(0.10), 1) + ".." + fixed(quantile(0.90), 1) + "]");
    std::vector<double> latencies = call_latencies(ok[v]);
    std::sort(latencies.begin(), latencies.end());
    auto latency_quantile = [&](double q) {
      return latencies.empty() ? 0.0
                               : latencies[static_cast<std::size_t>(q * static_cast<double>(latencies.size() - 1))];
    };
    entry["call_latency_ms"] = json::object{{"median", median(latencies)},
                                            {"p10", latency_quantile(0.10)},
                                            {"p90", latency_quantile(0.90)},
                                            {"n", latencies.size()}};
    cells.push_back(fixed(median(latencies), 1) + " [" + fixed(latency_quantile(0.10), 1) + ".." +
                    fixed(latency_quantile(0.90), 1) + "]");
    entry["child_cpu_ms"] = to_json(spread_of(values(v, &RunRecord::child_cpu_ms)));
    entry["bench_cpu_ms"] = to_json(spread_of(values(v, &RunRecord::bench_cpu_ms)));
    entry["load_before"] = to_json(spread_of(values(v, &RunRecord::load_before)));
    entry["completed"] = ok[v].size();
    entry["failed"] = failed[v];
    json::object added_json;
    for (const auto& m : kMetrics)
      if (auto a = added(m, v)) added_json[m.key] = *a;
    entry["added_ms_per_call_vs_baseline"] = std::move(added_json);
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
      run["wall_result_ms"] = r.wall_result_ms;
      run["wall_end_ms"] = r.wall_end_ms;
      run["span_ms"] = r.span_ms;
      run["child_cpu_ms"] = r.child_cpu_ms;
      run["bench_cpu_ms"] = r.bench_cpu_ms;
      run["load_before"] = r.load_before;
      json::array seen;
      for (double t : r.call_seen_ms)
        seen.push_back(t);
      run["call_seen_ms"] = std::move(seen);
      if (r.line_to_requested) run["line_to_requested_p50_us"] = r.line_to_requested->p50_us;
      if (r.line_to_requested) run["line_to_requested_p99_us"] = r.line_to_requested->p99_us;
      if (r.decide_to_answer) run["decide_to_answer_samples"] = r.decide_to_answer->samples;
      if (r.decide_to_answer && r.decide_to_answer->samples)
        run["decide_to_answer_p50_us"] = r.decide_to_answer->p50_us;
      if (r.decide_to_answer && r.decide_to_answer->samples)
        run["decide_to_answer_p99_us"] = r.decide_to_answer->p99_us;
      runs.push_back(std::move(run));
    }
    entry["runs"] = std::move(runs);
    variants[name_of(v)] = std::move(entry);
    std::printf("%-16s %2zu/%-2d  %-22s %-22s %-22s %-20s %-20s\n", std::string(name_of(v)).c_str(), ok[v].size(),
                o.runs, cells[0].c_str(), cells[1].c_str(), cells[2].c_str(), cells[3].c_str(), cells[4].c_str());
  }
  summary["variants"] = std::move(variants);

  // Where the CPU went: on 2 cores, CPU spent beside claude competes with claude.
  std::cout << "\nCPU per run in ms (child: the spawned process and what it reaped; bench: driver/client and, for the\n"
               "direct variants, the in-process endpoint), and the 1-minute load average at the start of each run\n";
  std::printf("%-16s %-22s %-22s %-16s\n", "variant", "child CPU", "bench CPU", "load");
  for (Variant v : o.variants)
    std::printf("%-16s %-22s %-22s %-16s\n", std::string(name_of(v)).c_str(),
                spread_text(spread_of(values(v, &RunRecord::child_cpu_ms)), 0).c_str(),
                spread_text(spread_of(values(v, &RunRecord::bench_cpu_ms)), 0).c_str(),
                spread_text(spread_of(values(v, &RunRecord::load_before)), 1).c_str());

  std::cout << "\nadded ms per call vs baseline: (median(variant) - median(baseline)) / " << calls
            << "; call cycle and latency: difference of the medians\n";
  std::printf("%-16s %-18s %-24s %-22s %-18s %-18s\n", "variant", "spawn -> result", "spawn -> end of stream",
              "model request 1->N+1", "median call cycle", "median call latency");
  for (Variant v : o.variants) {
    if (v == Variant::baseline) continue;
    std::vector<std::string> cells;
    for (const auto& m : kMetrics) {
      auto a = added(m, v);
      cells.push_back(a ? fixed(*a, 2) : "n/a");
    }
    std::printf("%-16s %-18s %-24s %-22s %-18s %-18s\n", std::string(name_of(v)).c_str(), cells[0].c_str(),
                cells[1].c_str(), cells[2].c_str(), cells[3].c_str(), cells[4].c_str());
  }

  // Goal 1: metaharness ask within 1 ms of the bare driver, and at most half a command hook's.
  // Judged on the issue's own definition (spawn -> result); the other metrics, and the 95%
  // bootstrap intervals, say how much of the verdict is the noise of this many runs.
  json::object goals;
  bool goal1_pass = true, goal1_known = true;
  std::cout << "\ngoal 1: metaharness ask added/call at most 1 ms above the bare driver's, and <= 0.5 x the command "
               "hook's\n";
  json::object goal1;
  const Runs &base = ok[Variant::baseline], &bare = ok[Variant::bare_driver], &command = ok[Variant::command_hook],
             &mh = ok[Variant::metaharness_ask];
  for (const auto& m : kMetrics) {
    auto mh_added = added(m, Variant::metaharness_ask);
    auto bare_added = added(m, Variant::bare_driver);
    auto command_added = added(m, Variant::command_hook);
    if (!mh_added || !bare_added || !command_added) {
      if (m.key == "wall_result_ms") goal1_known = false;
      continue;
    }
    double difference = *mh_added - *bare_added;
    double ratio = *command_added > 0 ? *mh_added / *command_added : 0;
    // "Within 1 ms" bounds what metaharness adds on top of the bare driver; measuring it below
    // the bare driver is noise in metaharness's favour, not a failure.
    bool pass = difference <= 1.0 && *command_added > 0 && ratio <= 0.5;
    auto difference_interval = bootstrap_interval(std::vector<Runs>{mh, bare}, [&](const std::vector<Runs>& g) {
      return std::optional<double>((m.statistic(g[0]) - m.statistic(g[1])) / (m.per_turn ? calls : 1));
    });
    auto ratio_interval = bootstrap_interval(std::vector<Runs>{mh, command, base}, [&](const std::vector<Runs>& g) {
      double b = m.statistic(g[2]);
      double c = m.statistic(g[1]) - b;
      return c > 0 ? std::optional<double>((m.statistic(g[0]) - b) / c) : std::nullopt;
    });
    json::object g{{"metaharness_added_ms", *mh_added},       {"bare_driver_added_ms", *bare_added},
                   {"command_hook_added_ms", *command_added}, {"metaharness_minus_bare_ms", difference},
                   {"metaharness_over_command_hook", ratio},  {"pass", pass}};
    if (difference_interval)
      g["metaharness_minus_bare_ms_95"] = json::array{difference_interval->first, difference_interval->second};
    if (ratio_interval)
      g["metaharness_over_command_hook_95"] = json::array{ratio_interval->first, ratio_interval->second};
    std::printf("  %-24s difference %+6.2f ms", std::string(m.title).c_str(), difference);
    if (difference_interval)
      std::printf(" (95%% %+.2f..%+.2f)", difference_interval->first, difference_interval->second);
    std::printf("  ratio %5.2f", ratio);
    if (ratio_interval) std::printf(" (95%% %.2f..%.2f)", ratio_interval->first, ratio_interval->second);
    std::printf("  %s%s\n", pass ? "PASS" : "FAIL", m.key == "wall_result_ms" ? "  <- judged" : "");
    if (m.key == "wall_result_ms") goal1_pass = pass;
    goal1[m.key] = std::move(g);
  }
  goal1["judged_on"] = "wall_result_ms";
  goals["added_per_call"] = std::move(goal1);

  // Goal 2: metaharness's own share, from its in-process latency reports. Each report holds
  // per-run percentiles, not samples: the pooled p50 is given as the median of the per-run p50s,
  // and the pooled p99 is bounded above by the largest per-run p99 (with N samples a run, a
  // run's p99 is its maximum); the goal is judged on that bound. decide_to_answer only has a
  // sample when the hook_callback was already waiting when the tool.decide arrived.
  bool goal2_pass = true, goal2_known = false;
  json::object goal2;
  std::cout << "\ngoal 2: metaharness's own share (in-process), p50 <= 100 us, p99 <= 1000 us\n";
  for (auto [key, field] : {std::pair{"line_to_requested", &RunRecord::line_to_requested},
                            std::pair{"decide_to_answer", &RunRecord::decide_to_answer}}) {
    std::vector<double> p50, p99, maxima;
    std::uint64_t samples = 0;
    for (const RunRecord* r : mh) {
      const auto& l = r->*field;
      if (!l || l->samples == 0) continue;
      samples += l->samples;
      p50.push_back(l->p50_us);
      p99.push_back(l->p99_us);
      maxima.push_back(l->max_us);
    }
    if (p50.empty()) {
      std::printf("  %-18s no samples\n", key);
      goal2[key] = json::object{{"samples", 0}};
      continue;
    }
    goal2_known = true;
    Spread s50 = spread_of(p50), s99 = spread_of(p99);
    bool pass = s50.median <= 100.0 && s99.max <= 1000.0;
    goal2_pass = goal2_pass && pass;
    std::printf("  %-18s samples %4llu  per-run p50 %s us  per-run p99 %s us  %s\n", key,
                static_cast<unsigned long long>(samples), spread_text(s50, 1).c_str(), spread_text(s99, 1).c_str(),
                pass ? "PASS" : "FAIL");
    goal2[key] = json::object{{"samples", samples},
                              {"runs_with_samples", p50.size()},
                              {"per_run_p50_us", to_json(s50)},
                              {"per_run_p99_us", to_json(s99)},
                              {"max_us", spread_of(maxima).max},
                              {"pass", pass}};
  }
  goals["own_share"] = std::move(goal2);
  goals["added_per_call_pass"] = goal1_known && goal1_pass;
  goals["own_share_pass"] = goal2_known && goal2_pass;
  summary["goals"] = std::move(goals);

  // One machine-readable line per goal, for scripts/bench.sh.
  auto verdict = [](bool known, bool pass) { return !known ? "n/a" : pass ? "PASS" : "FAIL"; };
  std::cout << "\nseam: goal added_per_call " << verdict(goal1_known, goal1_pass) << "\n";
  std::cout << "seam: goal own_share " << verdict(goal2_known, goal2_pass) << "\n";

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
    std::cerr << "mh_seam_bench: " << failures << " run(s) did not complete; their directories are kept:\n";
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
  out << "usage: mh_seam_bench [options]\n"
         "  --runs N            measured rounds, each runs every variant once (default 7)\n"
         "  --warmup N          discarded rounds run first (default 1)\n"
         "  --variants LIST     comma-separated: baseline,bare_driver,command_hook,metaharness_ask (default all)\n"
         "  --scenario FILE     default <source>/bench/scenarios/claude_40_calls.json\n"
         "  --claude FILE       default $METAHARNESS_CLAUDE_BIN or <source>/.vendor/.../claude\n"
         "  --metaharness FILE  default: metaharness next to this program\n"
         "  --work-dir DIR      where runs happen (default: a new directory under $TMPDIR or /tmp)\n"
         "  --json FILE         the JSON summary (default <work-dir>/seam-bench.json)\n"
         "  --hook-command CMD  the command hook's command (default: sh printing the allow)\n"
         "  --timeout-s N       bound on one run (default 180)\n"
         "  --keep              keep every run's directory (failed runs are always kept)\n";
}

std::optional<Options> parse_options(int argc, char** argv) {
  Options o;
  const fs::path source(mh::build_info::source_dir);
  o.scenario = source / "bench/scenarios/claude_40_calls.json";
  if (const char* bin = std::getenv("METAHARNESS_CLAUDE_BIN"); bin && *bin)
    o.claude = bin;
  else
    o.claude = source / ".vendor/node_modules/@anthropic-ai/claude-code-linux-x64/claude";
  std::error_code ec;
  fs::path self = fs::read_symlink("/proc/self/exe", ec);
  o.metaharness = (ec ? fs::path(argv[0]).parent_path() : self.parent_path()) / "metaharness";
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= argc) {
        std::cerr << "mh_seam_bench: " << arg << " needs a value\n";
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
        std::cerr << "mh_seam_bench: " << arg << " needs a number, got " << *v << "\n";
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
          std::cerr << "mh_seam_bench: unknown variant " << name << "\n";
          return std::nullopt;
        }
        o.variants.push_back(*variant);
      }
      // The baseline is what every added time is measured against.
      if (std::find(o.variants.begin(), o.variants.end(), Variant::baseline) == o.variants.end())
        o.variants.insert(o.variants.begin(), Variant::baseline);
    } else if (arg == "--scenario" || arg == "--claude" || arg == "--metaharness" || arg == "--work-dir" ||
               arg == "--json" || arg == "--hook-command") {
      auto v = value();
      if (!v) return std::nullopt;
      if (arg == "--scenario")
        o.scenario = *v;
      else if (arg == "--claude")
        o.claude = *v;
      else if (arg == "--metaharness")
        o.metaharness = *v;
      else if (arg == "--work-dir")
        o.work_root = *v;
      else if (arg == "--json")
        o.json_out = *v;
      else
        o.hook_command = *v;
    } else if (arg == "--keep") {
      o.keep = true;
    } else if (arg == "-h" || arg == "--help") {
      usage(std::cout);
      std::exit(0);
    } else {
      std::cerr << "mh_seam_bench: unknown option " << arg << "\n";
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
    std::cerr << "mh_seam_bench: the scenario " << o.scenario.string() << " is refused: " << scenario.error().message()
              << "\n";
    return 2;
  }
  // N = the tool calls the scenario makes, one per step.
  int calls = 0;
  for (const auto& step : scenario->steps)
    for (const auto& block : step.anthropic.content)
      if (block.kind == mh::model::Block::Kind::tool_call) calls += static_cast<int>(step.repeat);
  if (calls == 0) {
    std::cerr << "mh_seam_bench: the scenario makes no tool call\n";
    return 2;
  }
  for (const auto& [what, path] : {std::pair{"claude", o.claude}, std::pair{"metaharness", o.metaharness}}) {
    bool needed = std::string_view(what) == "claude" ||
                  std::find(o.variants.begin(), o.variants.end(), Variant::metaharness_ask) != o.variants.end();
    if (needed && ::access(path.c_str(), X_OK) != 0) {
      std::cerr << "mh_seam_bench: no executable " << what << " at " << path.string() << "\n";
      return 2;
    }
  }
  // Every run has its own working directory: the paths it is given must not depend on ours.
  o.scenario = fs::absolute(o.scenario);
  o.claude = fs::absolute(o.claude);
  o.metaharness = fs::absolute(o.metaharness);
  if (o.work_root.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/mh-seam-bench.XXXXXX";
    if (!::mkdtemp(pattern.data())) {
      std::cerr << "mh_seam_bench: mkdtemp: " << std::strerror(errno) << "\n";
      return 2;
    }
    o.work_root = pattern;
  }
  o.work_root = fs::absolute(o.work_root);
  fs::create_directories(o.work_root);
  if (o.json_out.empty()) o.json_out = o.work_root / "seam-bench.json";
  std::cerr << "mh_seam_bench: " << calls << " calls per turn; runs in " << o.work_root.string() << "\n";

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
                  << (r.ok ? fixed(r.wall_result_ms, 0) + " ms to result, span " + fixed(r.span_ms, 0) + " ms"
                           : "FAILED: " + r.failure)
                  << "\n";
        records.push_back(std::move(r));
        if (g_stop_requested) break;
      }
      if (g_stop_requested) {
        std::cerr << "mh_seam_bench: stopped by a signal\n";
        return 130;
      }
    }
  }
  return report(o, calls, records);
}
