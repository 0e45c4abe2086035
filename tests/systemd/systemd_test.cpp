// The Debian package end to end under a real systemd 252 as PID 1, booted in its own PID and mount
// namespaces over a tmpfs-backed overlay of the root filesystem (boot.sh; ../shared/notes/
// real-systemd.md): dpkg -i, vendor install, socket activation, READY and STATUS, a governed run of
// the real Claude CLI decided by a member of the group metaharness, journald's priorities,
// `systemctl restart` and `stop` leaving a run that is still open to its supervisor, the next
// daemon adopting it, and root's `metaharness status`.
//
// The cgroup layout of these machines is hybrid (v1 controllers, an empty unified v2 hierarchy)
// and the test records what it found (cgroup_layout); a production Debian 12 host is pure cgroup v2.
// The vendor CLIs are not downloaded: the checkout's .vendor/ (./run setup) is bound read-only
// where `vendor install` puts them, which `vendor install` then finds on pin and leaves alone.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "tests/systemd/package_support.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;

// Whether a followed run's stream reaches a tool.requested: the run then waits for its decision.
bool reaches_tool_requested(CliProcess& follow) {
  return bool(follow.wait_for([](const EventLine& e) { return e.event() == "tool.requested"; }, 180s));
}

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

// The parent pid and command name of a process, from /proc (nullopt when it is gone).
std::optional<std::pair<int, std::string>> stat_of(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto open = text.find('('), close = text.rfind(')');
  if (open == std::string::npos || close == std::string::npos) return std::nullopt;
  std::istringstream rest(text.substr(close + 2));
  char state;
  int ppid;
  rest >> state >> ppid;
  return std::make_pair(ppid, text.substr(open + 1, close - open - 1));
}

std::vector<int> children_of(int parent) {
  std::vector<int> out;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    auto s = stat_of(std::stoi(name));
    if (s && s->first == parent) out.push_back(std::stoi(name));
  }
  return out;
}

// The cgroup directories systemd makes at the top of each hierarchy (the host's cgroupfs is the
// namespace's too, so they outlive it); the host's own are never touched.
bool made_by_systemd(const fs::path& top) {
  std::string n = top.filename().string();
  return n == "init.scope" || n == "system.slice" || n == "user.slice" || n == "machine.slice" ||
         n.ends_with(".mount") || n.ends_with(".swap");
}

std::set<fs::path> cgroup_dirs() {
  std::set<fs::path> out;
  std::error_code ec;
  for (fs::recursive_directory_iterator it("/sys/fs/cgroup", ec), end; !ec && it != end; it.increment(ec))
    if (it->is_directory(ec) && it.depth() >= 1) out.insert(it->path());
  return out;
}

// systemd as PID 1 of its own namespaces; every command inside goes through nsenter.
class BootedSystemd {
 public:
  explicit BootedSystemd(const fs::path& work) : base_("/var/tmp/mh-systemd-" + std::to_string(::getpid())) {
    cgroups_before_ = cgroup_dirs();
    log_ = work / "systemd-console.log";
    // systemd's own output goes to a file, never to a pipe nobody reads.
    unshare_ = std::make_unique<CliProcess>(std::vector<std::string>{
        "/bin/sh", "-c", "exec /usr/bin/unshare --pid --fork --mount --propagation private \"$0\" \"$1\" >\"$2\" 2>&1",
        (source_dir() / "tests/systemd/boot.sh").string(), base_.string(), log_.string()});
    // The namespace's init: the unshare's child, once boot.sh has exec'd systemd.
    eventually(
        [&] {
          for (int child : children_of(unshare_->pid()))
            if (auto s = stat_of(child); s && s->second == "systemd") init_ = child;
          return init_ > 0;
        },
        60s);
  }

  ~BootedSystemd() {
    // The namespace's init: every process in it dies with it, and the mounts with the last one.
    if (init_ > 0) ::kill(init_, SIGKILL);
    if (unshare_) unshare_->finish(30s);
    std::error_code ec;
    fs::remove(base_, ec);  // the empty mount point on the host
    std::vector<fs::path> made;
    for (const auto& dir : cgroup_dirs()) {
      if (cgroups_before_.count(dir)) continue;
      fs::path rel = fs::relative(dir, "/sys/fs/cgroup");
      auto it = rel.begin();
      if (it == rel.end() || ++it == rel.end() || !made_by_systemd(*it)) continue;
      made.push_back(dir);
    }
    std::sort(made.begin(), made.end(), [](const fs::path& a, const fs::path& b) { return a.string() > b.string(); });
    for (const auto& dir : made)
      ::rmdir(dir.c_str());  // only empty cgroups go; a busy one says EBUSY and stays
  }

  // systemd's private bus, which systemctl talks to: it exists a moment after PID 1 does.
  bool wait_for_manager(std::chrono::milliseconds timeout) const {
    return init_ > 0 && eventually([&] { return inside("test -S /run/systemd/private").status == 0; }, timeout);
  }

  int init() const { return init_; }
  std::string console() const { return fs::exists(log_) ? read_file(log_) : ""; }
  // The overlay, as the namespace's mount view (nsenter -m without -r) sees it.
  fs::path root() const { return base_ / "root"; }

  // A shell command inside (its root, its PID namespace), with a clean environment.
  std::vector<std::string> inside_argv(const std::string& command) const {
    return {"/usr/bin/nsenter",
            "-t",
            std::to_string(init_),
            "-m",
            "-p",
            "-r",
            "-w",
            "/usr/bin/env",
            "-i",
            "PATH=/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG=C.UTF-8",
            "/bin/sh",
            "-c",
            command};
  }
  Output inside(const std::string& command, std::chrono::milliseconds timeout = 60s) const {
    return run_command(inside_argv(command), timeout);
  }
  // A command in the namespace's mounts but with the host's root: to bring files in.
  Output in_mounts(std::vector<std::string> argv, std::chrono::milliseconds timeout = 60s) const {
    argv.insert(argv.begin(), {"/usr/bin/nsenter", "-t", std::to_string(init_), "-m"});
    return run_command(std::move(argv), timeout);
  }

  // `systemctl show` of one unit as a map.
  std::map<std::string, std::string> show(const std::string& unit) const {
    std::map<std::string, std::string> out;
    std::istringstream in(inside("systemctl show " + unit).out);
    for (std::string line; std::getline(in, line);)
      if (auto eq = line.find('='); eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
    return out;
  }

 private:
  fs::path base_, log_;
  std::set<fs::path> cgroups_before_;
  std::unique_ptr<CliProcess> unshare_;
  int init_ = -1;
};

// The machine's ability to do it at all: the one reason to skip.
std::optional<std::string> cannot_unshare() {
  if (::geteuid() != 0) return "not root: booting systemd in its own namespaces needs root";
  auto probe = run_command({"/usr/bin/unshare", "--pid", "--fork", "--mount", "--propagation", "private", "/bin/true"});
  if (probe.status != 0) return "this machine cannot unshare PID and mount namespaces: " + probe.err;
  return std::nullopt;
}

std::string cgroup_layout(const BootedSystemd& sd) {
  std::string top = trim(sd.inside("stat -fc %T /sys/fs/cgroup").out);
  if (top == "cgroup2fs") return "unified (pure cgroup v2)";
  std::string unified = trim(sd.inside("stat -fc %T /sys/fs/cgroup/unified 2>/dev/null || true").out);
  if (unified == "cgroup2fs") return "hybrid (v1 controllers, a unified v2 hierarchy at /sys/fs/cgroup/unified)";
  return "legacy (cgroup v1 only; /sys/fs/cgroup is " + top + ")";
}

std::vector<json::object> journal(const BootedSystemd& sd) {
  std::vector<json::object> out;
  std::istringstream in(sd.inside("journalctl -u metaharness.service -o json --no-pager").out);
  for (std::string line; std::getline(in, line);)
    if (auto v = protocol::parse_json(line); v && v->is_object()) out.push_back(v->as_object());
  return out;
}

std::string field(const json::object& o, const char* key) {
  auto* v = o.if_contains(key);
  return v && v->is_string() ? std::string(v->as_string()) : "";
}

// The journal entry whose MESSAGE starts with `prefix` after the daemon's "metaharness: ", once
// journald has it.
std::optional<json::object> journal_entry(const BootedSystemd& sd, const std::string& prefix) {
  std::optional<json::object> found;
  eventually(
      [&] {
        for (auto& e : journal(sd))
          if (field(e, "MESSAGE").rfind("metaharness: " + prefix, 0) == 0) found = e;
        return found.has_value();
      },
      30s);
  return found;
}

TEST(SystemdPackage, InstalledUnderARealSystemdTheSocketStartsTheDaemonRunsAreGovernedAndOutliveRestartAndStop) {
  if (auto why = cannot_unshare()) GTEST_SKIP() << *why;
  const fs::path vendor = source_dir() / ".vendor";
  ASSERT_TRUE(fs::exists(vendor / "node_modules")) << "the pinned vendor CLIs (./run setup) are needed in " << vendor;
  TempDir work("systemd");
  std::string build_log;
  const fs::path deb = build_package(work.path(), build_log);
  ASSERT_FALSE(deb.empty()) << build_log;

  BootedSystemd sd(work.path());
  ASSERT_GT(sd.init(), 0) << "systemd did not start; its console:\n" << sd.console();
  ASSERT_TRUE(sd.wait_for_manager(120s)) << "systemd's bus did not appear; its console:\n" << sd.console();
  auto state = sd.inside("systemctl is-system-running --wait", 180s);
  std::string running = trim(state.out);
  // degraded: a unit of the host's own failed in here (e.g. one that needs hardware); ours are
  // checked one by one below.
  ASSERT_TRUE(running == "running" || running == "degraded")
      << running << " " << state.err << "\nfailed units: " << sd.inside("systemctl --failed --no-legend").out;
  if (running == "degraded")
    std::cout << "systemd is degraded by the host's units: " << sd.inside("systemctl --failed --no-legend").out << "\n";
  const std::string layout = cgroup_layout(sd);
  ::testing::Test::RecordProperty("cgroup_layout", layout);
  std::cout << "cgroup layout inside: " << layout << " (a production Debian 12 host is pure cgroup v2)\n";

  // --- dpkg -i ------------------------------------------------------------------------------
  ASSERT_EQ(sd.in_mounts({"/bin/cp", deb.string(), (sd.root() / "var/tmp/metaharness.deb").string()}).status, 0);
  for (auto scenario : {"bash_marker"})
    ASSERT_EQ(
        sd.in_mounts({"/bin/cp", (source_dir() / "tests/scenarios/claude" / (std::string(scenario) + ".json")).string(),
                      (sd.root() / "var/tmp" / (std::string(scenario) + ".json")).string()})
            .status,
        0);
  // This machine's image is a container's: its /usr/sbin/policy-rc.d answers 101 ("start no
  // service at install"), which deb-systemd-invoke obeys. A host has none; the overlay drops it
  // (the deletion lands in the tmpfs, the host's file stays).
  if (sd.inside("test -e /usr/sbin/policy-rc.d").status == 0) {
    std::cout << "removing the image's /usr/sbin/policy-rc.d inside the overlay (a host has none)\n";
    ASSERT_EQ(sd.inside("rm /usr/sbin/policy-rc.d").status, 0);
  }
  auto install = sd.inside("dpkg -i /var/tmp/metaharness.deb 2>&1", 300s);
  ASSERT_EQ(install.status, 0) << install.out;
  EXPECT_TRUE(has(install.out, "metaharness vendor install")) << "postinst names the next step: " << install.out;
  // sysusers and tmpfiles did their part, and the socket is enabled and listening; the daemon is not
  // running yet.
  EXPECT_TRUE(has(sd.inside("getent passwd metaharness").out, ":/var/lib/metaharness:"));
  EXPECT_EQ(trim(sd.inside("stat -c '%U:%G %a' /var/lib/metaharness /var/lib/metaharness/runs").out),
            "metaharness:metaharness 750\nmetaharness:metaharness 750");
  EXPECT_EQ(trim(sd.inside("systemctl is-enabled metaharness.socket").out), "enabled");
  EXPECT_EQ(trim(sd.inside("systemctl is-active metaharness.socket").out), "active");
  EXPECT_EQ(trim(sd.inside("systemctl is-active metaharness.service").out), "inactive");

  // --- the vendor CLIs: the checkout's, read-only, where vendor install puts them -----------
  const fs::path target = sd.root() / "var/lib/metaharness/vendor";
  ASSERT_EQ(sd.in_mounts({"/bin/mkdir", "-p", target.string()}).status, 0);
  auto bind = sd.in_mounts({"/bin/mount", "--bind", "-o", "ro", fs::canonical(vendor).string(), target.string()});
  ASSERT_EQ(bind.status, 0) << bind.err;
  auto vendor_install = sd.inside("metaharness vendor install 2>&1");
  EXPECT_EQ(vendor_install.status, 0) << vendor_install.out;
  EXPECT_TRUE(has(vendor_install.out, "vendor install: nothing to do")) << vendor_install.out;
  auto doctor = sd.inside("metaharness doctor claude 2>&1");
  EXPECT_EQ(doctor.status, 0) << doctor.out;
  EXPECT_TRUE(has(doctor.out, "claude: on pin")) << doctor.out;

  // --- socket activation: the first connection starts the daemon; READY and STATUS -----------
  ASSERT_EQ(sd.inside("systemctl start metaharness.socket").status, 0);
  auto status = sd.inside("metaharness status --json", 90s);
  ASSERT_EQ(status.status, 0) << "root's status: " << status.out << status.err;
  auto status_json = protocol::parse_json(status.out);
  ASSERT_TRUE(status_json && status_json->is_object()) << status.out;
  EXPECT_EQ(field(status_json->as_object(), "reply"), "status");
  auto service = sd.show("metaharness.service");
  // Type=notify: active/running only once READY=1 arrived.
  EXPECT_EQ(service["ActiveState"], "active");
  EXPECT_EQ(service["SubState"], "running");
  EXPECT_EQ(service["NRestarts"], "0");
  const std::string main_pid = service["MainPID"];
  auto creds = sd.inside("grep -E '^(Uid|NoNewPrivs):' /proc/" + main_pid + "/status; id -u metaharness");
  std::string uid = trim(creds.out.substr(creds.out.rfind('\n') + 1));
  EXPECT_TRUE(has(creds.out, "Uid:\t" + uid + "\t")) << "the daemon runs as metaharness: " << creds.out;
  EXPECT_TRUE(has(creds.out, "NoNewPrivs:\t1")) << creds.out;
  EXPECT_TRUE(journal_entry(sd, "listening on the socket systemd passed")) << "socket activation";

  // --- a governed run, submitted and decided by a member of the group metaharness ------------
  ASSERT_EQ(sd.inside("useradd --no-create-home --shell /usr/sbin/nologin --groups metaharness mh-alice").status, 0);
  const std::string alice = "setpriv --reuid=mh-alice --regid=mh-alice --init-groups -- ";
  auto submitted =
      sd.inside(alice +
                    "metaharness submit claude -p 'leave a marker' --model-scenario /var/tmp/bash_marker.json "
                    "--decisions ask --decision-deadline-ms 300000",
                90s);
  ASSERT_EQ(submitted.status, 0) << submitted.out << submitted.err;
  const std::string run1 = trim(submitted.out);
  CliProcess follow1(sd.inside_argv(alice + "metaharness tail -f --json " + run1));
  auto asked = follow1.wait_for(
      [](const EventLine& e) {
        const auto* required = e.object.if_contains("decision_required");
        return e.event() == "tool.requested" && required && required->is_bool() && required->as_bool();
      },
      180s);
  ASSERT_TRUE(asked) << "no call asked for a decision; stderr: " << follow1.stderr_text() << "\nthe daemon's journal:\n"
                     << sd.inside("journalctl -o cat --no-pager -n 80").out << "\nthe run's stream:\n"
                     << sd.inside("cat /var/lib/metaharness/runs/" + run1 + "/events.jsonl").out;
  auto decided = sd.inside(alice + "metaharness decide " + run1 + " " + asked->str("call_id") + " allow");
  EXPECT_EQ(decided.status, 0) << decided.out << decided.err;
  auto closed1 = follow1.wait_for_event("stream.closed", 180s);
  ASSERT_TRUE(closed1) << follow1.stderr_text();
  EXPECT_EQ(closed1->str("reason"), "completed");
  EXPECT_EQ(follow1.finish(30s), 0);
  EXPECT_EQ(sd.inside("test -f /var/lib/metaharness/runs/" + run1 + "/scratch/work/marker.txt").status, 0)
      << "the allowed Bash call ran";
  EXPECT_TRUE(
      eventually([&] { return has(sd.show("metaharness.service")["StatusText"], "0 active run(s), 1 closed"); }, 30s))
      << "STATUS: " << sd.show("metaharness.service")["StatusText"];

  // --- journald: the daemon's priority prefixes are read as priorities -------------------------
  auto refused = sd.inside("setpriv --reuid=nobody --regid=nogroup --groups=metaharness -- metaharness status 2>&1");
  EXPECT_EQ(refused.status, 1) << "a peer that may connect but has no role is refused: " << refused.out;
  EXPECT_TRUE(has(refused.out, "FORBIDDEN") || has(refused.out, "has no role")) << refused.out;
  auto ready = journal_entry(sd, "ready: ");
  ASSERT_TRUE(ready);
  EXPECT_EQ(field(*ready, "PRIORITY"), "6");
  auto notice = journal_entry(sd, "refused a connection from uid 65534");
  ASSERT_TRUE(notice);
  EXPECT_EQ(field(*notice, "PRIORITY"), "5");
  for (const auto& e : journal(sd))
    EXPECT_NE(field(e, "MESSAGE").rfind("<", 0), 0u) << field(e, "MESSAGE");
  auto at_notice = sd.inside("journalctl -u metaharness.service -p notice -o cat --no-pager");
  EXPECT_TRUE(has(at_notice.out, "refused a connection from uid 65534")) << at_notice.out;
  EXPECT_FALSE(has(at_notice.out, "ready: ")) << "-p notice leaves info out: " << at_notice.out;
  auto errors = sd.inside("journalctl -u metaharness.service -p err -o cat --no-pager -q");
  EXPECT_EQ(trim(errors.out), "") << "no error in a clean run";

  // --- systemctl restart with a run waiting for a decision: the next daemon adopts it ----------
  // Its model is a scripted endpoint of its own (a transient unit), so it is there while no daemon
  // is; the package's config supervises runs and leaves them to their supervisors at a stop.
  ASSERT_EQ(sd.inside("systemd-run --unit=mh-model --quiet /usr/bin/metaharness model serve "
                      "--scenario /var/tmp/bash_marker.json --token restart-token")
                .status,
            0);
  std::string model_url;
  ASSERT_TRUE(eventually(
      [&] {
        auto printed = protocol::parse_json(trim(sd.inside("journalctl -u mh-model -o cat --no-pager -q").out));
        if (!printed || !printed->is_object()) return false;
        model_url = field(printed->as_object(), "base_url");
        return !model_url.empty();
      },
      60s));
  auto adoptee = sd.inside(
      "MH_MODEL_TOKEN=restart-token metaharness submit claude -p 'leave a marker' "
      "--model-endpoint " +
          model_url + " --model-token-env MH_MODEL_TOKEN --decisions ask --decision-deadline-ms 300000",
      90s);
  ASSERT_EQ(adoptee.status, 0) << adoptee.out << adoptee.err;
  const std::string run3 = trim(adoptee.out);
  {
    CliProcess before(sd.inside_argv("metaharness tail -f --json " + run3));
    ASSERT_TRUE(reaches_tool_requested(before)) << before.stderr_text();
  }
  const std::string pid_before = sd.show("metaharness.service")["MainPID"];
  auto restart = sd.inside("systemctl restart metaharness.service", 90s);
  EXPECT_EQ(restart.status, 0) << restart.err;
  EXPECT_NE(sd.show("metaharness.service")["MainPID"], pid_before) << "a new daemon";
  EXPECT_TRUE(eventually([&] { return bool(journal_entry(sd, "adopted 1 of the 1 run(s)")); }, 60s))
      << sd.inside("journalctl -u metaharness.service -o cat --no-pager -n 30").out;
  CliProcess follow3(sd.inside_argv("metaharness tail -f --json " + run3));
  auto adopted = follow3.wait_for(
      [](const EventLine& e) { return e.event() == "warning" && e.str("code") == "RUN_ADOPTED"; }, 120s);
  ASSERT_TRUE(adopted) << follow3.stderr_text() << "\nthe run's stream:\n"
                       << sd.inside("cat /var/lib/metaharness/runs/" + run3 + "/events.jsonl").out << "\nthe journal:\n"
                       << sd.inside("journalctl -o cat --no-pager -n 80").out << "\nsupervisor.log:\n"
                       << sd.inside("cat /var/lib/metaharness/runs/" + run3 + "/supervisor.log").out;
  auto decided3 = sd.inside("metaharness decide " + run3 + " toolu_marker allow");
  EXPECT_EQ(decided3.status, 0) << decided3.out << decided3.err;
  auto closed3 = follow3.wait_for_event("stream.closed", 180s);
  ASSERT_TRUE(closed3) << follow3.stderr_text();
  EXPECT_EQ(closed3->str("reason"), "completed") << closed3->raw;
  EXPECT_EQ(follow3.finish(30s), 0);
  auto check3 = sd.inside("metaharness check-stream /var/lib/metaharness/runs/" + run3 + "/events.jsonl");
  EXPECT_EQ(check3.status, 0) << "the adopted stream is complete: " << check3.out << check3.err;
  EXPECT_EQ(sd.inside("test -f /var/lib/metaharness/runs/" + run3 + "/scratch/work/marker.txt").status, 0)
      << "the call decided after the restart ran";
  sd.inside("systemctl stop mh-model");

  // --- systemctl stop with a run still waiting: the run stays with its supervisor; the next
  // start adopts it, and a halt then closes it ------------------------------------------------
  auto pending = sd.inside(
      "metaharness submit claude -p 'leave a marker' --model-scenario /var/tmp/bash_marker.json --decisions ask "
      "--decision-deadline-ms 300000",
      90s);
  ASSERT_EQ(pending.status, 0) << pending.out << pending.err;
  const std::string run2 = trim(pending.out);
  {
    CliProcess follow2(sd.inside_argv("metaharness tail -f --json " + run2));
    ASSERT_TRUE(reaches_tool_requested(follow2)) << follow2.stderr_text();
    auto stop = sd.inside("systemctl stop metaharness.service", 90s);
    EXPECT_EQ(stop.status, 0) << stop.err;
    follow2.finish(60s);
  }
  auto stopped = sd.show("metaharness.service");
  EXPECT_EQ(stopped["ActiveState"], "inactive");
  EXPECT_EQ(stopped["Result"], "success") << "the daemon exited cleanly on SIGTERM";
  auto last = sd.inside("tail -n 1 /var/lib/metaharness/runs/" + run2 + "/events.jsonl");
  auto last_event = protocol::parse_json(last.out);
  ASSERT_TRUE(last_event && last_event->is_object()) << last.out;
  EXPECT_NE(field(last_event->as_object(), "event"), "stream.closed") << "the stop left the run open: " << last.out;
  EXPECT_FALSE(processes_with_env("METAHARNESS_RUN=" + run2).empty()) << "the run's vendor outlived the stop";
  auto stopping = journal_entry(sd, "stopping (SIGTERM): ");
  ASSERT_TRUE(stopping) << "the stop is in the journal";
  EXPECT_TRUE(has(field(*stopping, "MESSAGE"), "left to their supervisors"))
      << "the stop says what it did with the runs: " << field(*stopping, "MESSAGE");
  auto restarted = sd.inside("metaharness status", 90s);  // the socket starts the daemon again
  EXPECT_EQ(restarted.status, 0) << restarted.out << restarted.err;
  auto halted = sd.inside("metaharness halt " + run2 + " --reason done", 60s);
  EXPECT_EQ(halted.status, 0) << halted.out << halted.err;
  EXPECT_TRUE(eventually(
      [&] {
        auto tail =
            protocol::parse_json(sd.inside("tail -n 1 /var/lib/metaharness/runs/" + run2 + "/events.jsonl").out);
        return tail && tail->is_object() && field(tail->as_object(), "event") == "stream.closed";
      },
      90s));
  auto check = sd.inside("metaharness check-stream /var/lib/metaharness/runs/" + run2 + "/events.jsonl");
  EXPECT_EQ(check.status, 0) << "the stream is complete: " << check.out << check.err;
  EXPECT_TRUE(eventually([&] { return processes_with_env("METAHARNESS_RUN=" + run2).empty(); }, 30s))
      << "a process of the run outlived its halt";

  EXPECT_EQ(sd.show("metaharness.service")["ActiveState"], "active");
}

}  // namespace
}  // namespace mh::test
