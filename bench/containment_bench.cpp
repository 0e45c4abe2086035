// The run body's costs (issue 11), side by side in one invocation. A plain program (each sample
// is a process tree, not a loop body); scripts/bench.sh (bench_containment) runs it.
//
//   end     the end of a run with 500 unrelated processes on the host (500 `sleep`s of this
//           program's own, killed by pid afterwards): the marker sweep (kill_run_processes, which
//           reads every process on the host) against the cgroup end (RunCgroup: cgroup.kill,
//           wait for `populated 0`, rmdir). The same "run" each time: a shell that starts two
//           background sleeps (one `setsid`, one double-forked) and then sleeps itself. Rounds
//           alternate the two, the order flipped every round. Wall and the bench thread's CPU.
//   start   the sandbox's added wall per run start: fork + exec + wait of `/bin/true`, bare
//           against inside the daemon's own bwrap view (daemon::sandboxed), and inside the same
//           view with a network of the run's own (runs.network = "gateway": --unshare-net and
//           mh-exec's relay), the three interleaved.
//   exec    the sandbox's added wall per tool call: one fork + exec of `/bin/true` from a shell
//           inside the sandbox against one outside, as (T(201 execs) - T(1 exec)) / 200.
// Then the machine's load (the 1-minute load average before and after, /proc/pressure/cpu).
// Exit status 1 when a section was cut short (a sample process failed): its figures are partial.
//
// Usage: mh_containment_bench [--rounds N] [--unrelated N] [--json FILE]
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "daemon/process/exec_handoff.hpp"
#include "daemon/process/run_cgroup.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/process/sandbox.hpp"

namespace {

namespace fs = std::filesystem;
namespace json = boost::json;
using namespace mh::daemon;
using Clock = std::chrono::steady_clock;

double thread_cpu_ms() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<std::size_t>(p * (v.size() - 1) + 0.5))];
}

std::string first_line(const fs::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::size_t host_processes() {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator("/proc"))
    if (e.path().filename().string().find_first_not_of("0123456789") == std::string::npos) ++n;
  return n;
}

// fork + exec of argv with `env` (null: ours), stdio to /dev/null except stdout to `out_fd` when
// >= 0, first joining a cgroup when `cgroup_fd` >= 0. The child's pid.
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>* env, int out_fd = -1,
            int cgroup_fd = -1) {
  std::vector<char*> args, envp;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  if (env) {
    for (const auto& e : *env)
      envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
  }
  pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    if (cgroup_fd >= 0 && ::write(cgroup_fd, "0", 1) != 1) ::_exit(126);
    int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(out_fd >= 0 ? out_fd : null, 1);
    ::dup2(null, 2);
    ::setpgid(0, 0);
    if (env)
      ::execve(args[0], args.data(), envp.data());
    else
      ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
}

int reap(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) == -1 && errno == EINTR) {
  }
  return status;
}

// The "run": a shell that starts a setsid'd sleep and a double-forked one, says ready, then
// sleeps itself; every process carries the marker. Returns the shell's pid once it is ready.
pid_t start_run(const std::string& marker_value, int cgroup_fd) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) == -1) throw std::runtime_error("pipe");
  std::vector<std::string> env = {"PATH=/usr/bin:/bin", "MH_BENCH_RUN=" + marker_value};
  std::string script =
      "setsid sleep 1001 </dev/null >/dev/null 2>&1 & ( (sleep 1002 </dev/null >/dev/null 2>&1 &) & ); "
      "echo ready; exec sleep 1000";
  pid_t pid = spawn({"/bin/sh", "-c", script}, &env, pipefd[1], cgroup_fd);
  ::close(pipefd[1]);
  char buffer[16];
  ssize_t n = ::read(pipefd[0], buffer, sizeof buffer);
  ::close(pipefd[0]);
  if (n <= 0) throw std::runtime_error("the run did not say ready");
  return pid;
}

struct EndSample {
  double wall_ms = 0, cpu_ms = 0;
  std::size_t killed = 0;
};

EndSample end_by_sweep(int round) {
  std::string marker = "mh-bench-" + std::to_string(::getpid()) + "-" + std::to_string(round);
  pid_t root = start_run(marker, -1);
  EndSample s;
  double cpu = thread_cpu_ms();
  auto start = Clock::now();
  KillReport report = kill_run_processes_sync(root, {"MH_BENCH_RUN", marker}, std::chrono::seconds(10));
  s.wall_ms = ms_since(start);
  s.cpu_ms = thread_cpu_ms() - cpu;
  s.killed = report.killed.size();
  if (!report.clean()) throw std::runtime_error("the sweep left processes: " + report.summary());
  reap(root);
  return s;
}

EndSample end_by_cgroup(const CgroupParent& parent, int round) {
  auto group = parent.create("bench-" + std::to_string(round), {});
  if (!group) throw std::runtime_error(group.error());
  pid_t root = start_run("cgroup-" + std::to_string(round), (*group)->procs_fd());
  EndSample s;
  double cpu = thread_cpu_ms();
  auto start = Clock::now();
  auto killed = (*group)->kill();
  bool empty = (*group)->wait_empty_sync(std::chrono::seconds(10));
  auto removed = (*group)->remove();
  s.wall_ms = ms_since(start);
  s.cpu_ms = thread_cpu_ms() - cpu;
  s.killed = (*group)->facts().processes_killed.value_or(0);
  if (!killed || !empty || !removed) throw std::runtime_error("the cgroup end failed");
  reap(root);
  return s;
}

// Wall of fork + exec + wait of argv.
double run_once_ms(const std::vector<std::string>& argv) {
  auto start = Clock::now();
  pid_t pid = spawn(argv, nullptr);
  int status = reap(pid);
  double ms = ms_since(start);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) throw std::runtime_error("exit status of " + argv[0]);
  return ms;
}

// The handover mh-exec (a sandboxed start's last hop) insists on: the vendor's environment in a
// sealed memfd named by METAHARNESS_EXEC_ENV_FD (daemon/process/exec_handoff.hpp), as ChildProcess
// makes one for each spawn. Made once here and inherited by every start (mh-exec reads it with
// pread, so one descriptor serves them all); the daemon's per-spawn memfd is a few microseconds,
// left out of the figures. Without it every sandboxed start exits 127 and no start is measured.
void hand_over_environment() {
  int fd = ::memfd_create("mh-bench-vendor-env", MFD_ALLOW_SEALING);  // inherited: no CLOEXEC
  if (fd < 0) throw std::runtime_error(std::string("memfd_create: ") + std::strerror(errno));
  if (fd <= 2) {
    int moved = ::fcntl(fd, F_DUPFD, 3);
    ::close(fd);
    fd = moved;
  }
  const std::string bytes = std::string("PATH=/usr/bin:/bin") + '\0';
  if (fd < 0 || ::write(fd, bytes.data(), bytes.size()) != static_cast<ssize_t>(bytes.size()) ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) == -1)
    throw std::runtime_error(std::string("the handed environment's memfd: ") + std::strerror(errno));
  ::setenv(kHandedEnvFdVar, std::to_string(fd).c_str(), 1);
}

json::object summary_of(const std::vector<double>& v) {
  return json::object{{"median", median(v)}, {"p90", percentile(v, 0.9)}, {"n", v.size()}};
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 25, unrelated = 500;
  std::string json_out;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--rounds" && i + 1 < argc)
      rounds = std::stoi(argv[++i]);
    else if (a == "--unrelated" && i + 1 < argc)
      unrelated = std::stoi(argv[++i]);
    else if (a == "--json" && i + 1 < argc)
      json_out = argv[++i];
    else {
      std::cerr << "usage: mh_containment_bench [--rounds N] [--unrelated N] [--json FILE]\n";
      return 2;
    }
  }
  bool failed = false;  // a section cut short: its figures are partial or empty, and the exit status says so
  json::object out;
  out["load_before"] = first_line("/proc/loadavg");
  out["cpu_pressure_before"] = first_line("/proc/pressure/cpu");

  // --- end ---------------------------------------------------------------------------------
  auto base = CgroupParent::own_cgroup_dir();
  std::optional<CgroupParent> parent;
  if (base)
    if (auto p = CgroupParent::open(*base, "mh-bench-" + std::to_string(::getpid()))) parent.emplace(std::move(*p));
  std::vector<pid_t> sleepers;
  for (int i = 0; i < unrelated; ++i)
    sleepers.push_back(spawn({"/bin/sleep", "3600"}, nullptr));
  std::vector<double> sweep_wall, sweep_cpu, cgroup_wall, cgroup_cpu;
  std::size_t sweep_killed = 0, cgroup_killed = 0, processes = host_processes();
  try {
    for (int r = -1; r < rounds; ++r) {  // round -1 warms both up, unrecorded
      bool sweep_first = r % 2 == 0;
      for (int k = 0; k < 2; ++k) {
        if ((k == 0) == sweep_first) {
          EndSample s = end_by_sweep(r + 1);
          if (r >= 0) sweep_wall.push_back(s.wall_ms), sweep_cpu.push_back(s.cpu_ms), sweep_killed = s.killed;
        } else if (parent) {
          EndSample s = end_by_cgroup(*parent, r + 1);
          if (r >= 0) cgroup_wall.push_back(s.wall_ms), cgroup_cpu.push_back(s.cpu_ms), cgroup_killed = s.killed;
        }
      }
    }
  } catch (const std::exception& e) {
    std::cerr << "mh_containment_bench: " << e.what() << "\n";
    failed = true;
  }
  for (pid_t pid : sleepers)
    ::kill(pid, SIGKILL);
  for (pid_t pid : sleepers)
    reap(pid);
  if (parent) (void)parent->remove();
  out["end"] = json::object{
      {"host_processes", processes},
      {"unrelated", unrelated},
      {"marker_sweep",
       json::object{{"wall_ms", summary_of(sweep_wall)}, {"cpu_ms", summary_of(sweep_cpu)}, {"killed", sweep_killed}}},
      {"cgroup", parent ? json::value(json::object{{"wall_ms", summary_of(cgroup_wall)},
                                                   {"cpu_ms", summary_of(cgroup_cpu)},
                                                   {"killed", cgroup_killed}})
                        : json::value("no writable cgroup2 here")}};

  // --- start and exec ----------------------------------------------------------------------
  SandboxSpec spec;
  if (::access(spec.bwrap.c_str(), X_OK) == 0) {
    hand_over_environment();
    fs::path scratch = fs::temp_directory_path() / ("mh-bench-sandbox-" + std::to_string(::getpid()));
    fs::create_directories(scratch / "work");
    mh::adapters::LaunchPlan plan;
    plan.program = "/bin/true";
    plan.cwd = scratch / "work";
    plan.directories = {scratch};
    // The same view with a network of the run's own (issue 25: runs.network = "gateway"): bwrap's
    // --unshare-net, the gate bound in, and mh-exec's relay onto the run's loopback before the exec.
    SandboxSpec net_spec = spec;
    fs::create_directories(scratch / "gate");
    net_spec.own_network = SandboxSpec::OwnNetwork{
        scratch / "gate", {SandboxSpec::Relay{kGatewayRelayPort, fs::path(kGateInView) / "model.sock"}}};
    auto inside = [&](const std::string& program, std::vector<std::string> args, const SandboxSpec& with = {}) {
      mh::adapters::LaunchPlan p = plan;
      p.program = program;
      p.args = std::move(args);
      auto s = sandboxed(p, with.own_network ? with : spec);
      std::vector<std::string> argv = {s.program.string()};
      argv.insert(argv.end(), s.args.begin(), s.args.end());
      return argv;
    };
    auto loop = [](int n) {
      return std::vector<std::string>{
          "-c", "i=0; while [ $i -lt " + std::to_string(n) + " ]; do /bin/true; i=$((i+1)); done"};
    };
    std::vector<std::string> bare_true = {"/bin/true"}, boxed_true = inside("/bin/true", {}),
                             netted_true = inside("/bin/true", {}, net_spec);
    std::vector<std::string> bare_1 = {"/bin/sh"}, bare_201 = {"/bin/sh"};
    for (auto& a : loop(1))
      bare_1.push_back(a);
    for (auto& a : loop(201))
      bare_201.push_back(a);
    auto boxed_1 = inside("/bin/sh", loop(1)), boxed_201 = inside("/bin/sh", loop(201));
    std::vector<double> start_bare, start_boxed, start_netted, exec_bare, exec_boxed;
    try {
      // Three starts per round, their order rotated round by round, so load falls on each alike.
      for (int r = -1; r < rounds * 2; ++r)
        for (int k = 0; k < 3; ++k) {
          int which = (k + (r < 0 ? 0 : r)) % 3;
          double ms = run_once_ms(which == 0 ? bare_true : which == 1 ? boxed_true : netted_true);
          if (r >= 0) (which == 0 ? start_bare : which == 1 ? start_boxed : start_netted).push_back(ms);
        }
      for (int r = -1; r < rounds; ++r) {
        bool bare_first = r % 2 == 0;
        for (int k = 0; k < 2; ++k) {
          bool bare = (k == 0) == bare_first;
          double one = run_once_ms(bare ? bare_1 : boxed_1);
          double many = run_once_ms(bare ? bare_201 : boxed_201);
          if (r >= 0) (bare ? exec_bare : exec_boxed).push_back((many - one) / 200.0);
        }
      }
    } catch (const std::exception& e) {
      std::cerr << "mh_containment_bench: " << e.what() << "\n";
      failed = true;
    }
    fs::remove_all(scratch);
    out["start"] = json::object{{"bare_wall_ms", summary_of(start_bare)},
                                {"sandboxed_wall_ms", summary_of(start_boxed)},
                                {"added_ms", median(start_boxed) - median(start_bare)},
                                {"own_network_wall_ms", summary_of(start_netted)},
                                {"own_network_added_ms", median(start_netted) - median(start_boxed)}};
    out["exec"] = json::object{{"bare_wall_ms", summary_of(exec_bare)},
                               {"sandboxed_wall_ms", summary_of(exec_boxed)},
                               {"added_ms", median(exec_boxed) - median(exec_bare)}};
  } else {
    out["start"] = out["exec"] = "no bwrap here";
  }
  out["load_after"] = first_line("/proc/loadavg");
  out["cpu_pressure_after"] = first_line("/proc/pressure/cpu");

  std::string text = json::serialize(out);
  std::cout << text << "\n";
  if (!json_out.empty()) std::ofstream(json_out) << text << "\n";
  return failed ? 1 : 0;
}
