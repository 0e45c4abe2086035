// Issue 24, items 1, 4 and 5, through the daemon as an attacker and a user would meet them, with
// the REAL Claude CLI running the Bash calls the scripted model asks for (decisions observe):
//   - a `control` peer of another uid declaring a variable that loads code (LD_PRELOAD, LD_AUDIT,
//     NODE_OPTIONS, BASH_ENV) is refused at submit, by name, and nothing is created;
//   - a live sandboxed run's bwrap (root here) carries the fixed environment alone, its supervisor
//     none, while its vendor has the declared variables;
//   - an ordinary declared variable still reaches the vendor and the commands it runs;
//   - under a daemon whose umask is 000 a run still makes 0644 files and 0755 directories;
//   - runs that share a uid (runs.user) see nothing of each other's processes (their own PID
//     namespace: not listed, environ unreadable, not signalled), and a SysV segment a run makes
//     does not outlive it (its own IPC namespace).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "tests/support/daemon_harness.hpp"
#include "tests/support/peer_as_uid.hpp"

namespace mh::test {
namespace {

constexpr uid_t kNobody = 65534;

// A directory under /tmp every user may pass through (a checkout's parents need not let them):
// for a daemon whose socket a second uid must reach. Removed at the end.
class PassableDir {
 public:
  PassableDir() {
    char templ[] = "/tmp/mh-i24-XXXXXX";
    if (::mkdtemp(templ)) path_ = templ;
    ::chmod(path_.c_str(), 0711);
  }
  ~PassableDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  PassableDir(const PassableDir&) = delete;
  PassableDir& operator=(const PassableDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string submit_line(const std::string& scenario, const std::string& extra) {
  return socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe",)"
                                  R"("model_scenario":)" +
                                      scenario + (extra.empty() ? "" : "," + extra) + "}");
}

// The issue's attack: the packaged config gives `control` to a whole group; a member (here
// nobody) declares LD_PRELOAD (or its kin) naming its own library. Refused at submit, by name,
// before anything is made.
TEST(RunIsolation, AControlPeerOfAnotherUidIsRefusedEveryVariableThatLoadsCodeByName) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root: a root daemon and a peer of another uid";
  PassableDir home;
  ASSERT_FALSE(home.path().empty()) << std::strerror(errno);
  DaemonUnderTest d(home.path(),
                    "[paths]\nsocket_mode = \"0666\"\n[access]\ncontrol_uids = [" + std::to_string(kNobody) + "]\n");
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  const std::string library = (home.path() / "evil.so").string();
  for (std::string name : {"LD_PRELOAD", "LD_AUDIT", "NODE_OPTIONS", "BASH_ENV"}) {
    std::string why;
    auto line = first_line_as(kNobody, d.socket(),
                              submit_line(one_bash_call_scenario("true"),
                                          R"("vendor_env":{"LANG":"C",")" + name + R"(":")" + library + R"("})"),
                              why);
    ASSERT_FALSE(line.empty()) << why;
    auto reply = to_event_line(line);
    EXPECT_EQ(reply.str("reply"), "refused") << line;
    EXPECT_EQ(reply.str("code"), "VENDOR_ENV_REFUSED") << line;
    EXPECT_EQ(reply.str("reason").rfind("declared vendor environment refused: " + name + " ", 0), 0u) << line;
  }
  std::error_code ec;
  EXPECT_TRUE(std::filesystem::is_empty(d.state_dir() / "runs", ec) || ec) << "a refused submit leaves no run";
}

// Issue 24, items 1 and 5 from the user's side: an ordinary declared variable still reaches the
// vendor (and the commands it runs) after the handover; and the daemon's umask 000 is not the
// run's.
TEST(RunIsolation, ADeclaredVariableReachesTheVendorAndUnderUmask000TheRunMakes0644And0755) {
  TempDir dir{"declared-umask"};
  const mode_t previous = ::umask(0);
  DaemonUnderTest d(dir.path(), "");
  ::umask(previous);
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  SocketClient c(d.socket());
  auto reply = c.request(submit_line(
      one_bash_call_scenario("printf '%s' \"$MH_DECLARED_PROBE\" > seen.txt; mkdir made-dir; echo x > made-file"),
      R"("vendor_env":{"MH_DECLARED_PROBE":"a declared value"})"));
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
  const std::string id = reply->str("run_id");
  auto events = follow_to_end(d.socket(), id, 120s);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().str("reason"), "completed") << events.back().raw;
  const auto work = d.run_dir(id) / "scratch/work";
  EXPECT_EQ(read_file(work / "seen.txt"), "a declared value") << read_file(d.run_dir(id) / "vendor-stderr.log");
  struct stat info {};
  ASSERT_EQ(::stat((work / "made-dir").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0755u);
  ASSERT_EQ(::stat((work / "made-file").c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0644u);
}

// The host pid of a process whose environment holds `entry` whole (NAME=VALUE), or -1.
pid_t process_carrying(const std::string& entry) {
  for (const auto& proc : std::filesystem::directory_iterator("/proc")) {
    const std::string name = proc.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(proc.path() / "environ");
    std::string environ((std::istreambuf_iterator<char>(in)), {});
    if (("\0" + environ).find("\0" + entry + '\0') != std::string::npos) return std::stoi(name);
  }
  return -1;
}

// Issue 24, item 4, as the issue found it: with runs.user every run is one uid, so one run read
// another's /proc/PID/environ (its token) and argv, and could signal it; a SysV segment made in a
// run outlived it. Each run now has its own PID and IPC namespaces.
TEST(RunIsolation, RunsThatShareAUidSeeNoneOfEachOthersProcessesAndLeaveNoSysVSegment) {
  if (::geteuid() != 0) GTEST_SKIP() << "runs.user needs a root daemon";
  TempDir dir{"shared-uid"};
  DaemonUnderTest d(dir.path(), "[runs]\nuser = \"nobody\"\n");
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  const std::string token = "mh-secret-" + std::to_string(::getpid()) + "-" +
                            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
  const key_t key = static_cast<key_t>(0x6d690000 + (::getpid() & 0xffff));
  SocketClient c(d.socket());
  auto first =
      c.request(submit_line(one_bash_call_scenario("perl -e 'defined(shmget(" + std::to_string(key) +
                                                   ", 4096, 01600)) or die' && touch ready.txt; sleep 100; : " + token),
                            R"("vendor_env":{"MH_SECRET_PROBE":")" + token + R"("})"));
  ASSERT_TRUE(first && first->str("reply") == "submitted") << (first ? first->raw : "no reply");
  const std::string first_id = first->str("run_id");
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(d.run_dir(first_id) / "scratch/work/ready.txt"); }, 90s))
      << read_file(d.run_dir(first_id) / "vendor-stderr.log");
  const pid_t victim = process_carrying("MH_SECRET_PROBE=" + token);
  ASSERT_GT(victim, 0) << "the first run's processes carry its secret";
  // Item 1 on a live run: the privileged hop (bwrap, root here) carries the fixed environment
  // alone, not the vendor's (which holds the declared secret); its supervisor carries none.
  int hops = 0, supervisors = 0;
  for (const auto& proc : std::filesystem::directory_iterator("/proc")) {
    const std::string name = proc.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream comm_in(proc.path() / "comm"), env_in(proc.path() / "environ"), cmd_in(proc.path() / "cmdline");
    std::string comm, environ((std::istreambuf_iterator<char>(env_in)), {}),
        cmdline((std::istreambuf_iterator<char>(cmd_in)), {});
    std::getline(comm_in, comm);
    if (comm == "bwrap" && environ.find("METAHARNESS_RUN=" + first_id) != std::string::npos) {
      ++hops;
      EXPECT_EQ(environ.find("MH_SECRET_PROBE"), std::string::npos) << "bwrap (pid " << name << ") holds the vendor's";
      EXPECT_EQ(std::count(environ.begin(), environ.end(), '\0'), 2) << "the marker and the descriptor: " << environ;
    }
    if (cmdline.find("metaharness-supervisor") != std::string::npos &&
        cmdline.find(d.run_dir(first_id).string()) != std::string::npos) {
      ++supervisors;
      EXPECT_EQ(environ, "") << "the supervisor's environment";
    }
  }
  EXPECT_GE(hops, 1) << "the run's bwrap was found";
  EXPECT_EQ(supervisors, 1) << "the run's supervisor was found";
  // The second run, the same uid, looks for the first: its secret split so that its own argv
  // does not hold it whole.
  const std::string half = token.substr(0, token.size() / 2), rest = token.substr(token.size() / 2);
  const std::string pid = std::to_string(victim);
  auto second = c.request(
      submit_line(one_bash_call_scenario(
                      "{ t=" + half + "; t=\"$t\"" + rest +
                      "; for p in $(ls /proc | grep '^[0-9]'); do cat /proc/$p/environ /proc/$p/cmdline 2>/dev/null | "
                      "grep -aqF \"$t\" && echo \"seen in $p\"; done; cat /proc/" +
                      pid + "/environ >/dev/null 2>&1 && echo environ-read; kill -0 " + pid +
                      " 2>/dev/null && echo signalled; ls /proc | grep -c '^[0-9]' >/dev/null && echo "
                      "own-proc-ok; } > probe.txt 2>&1"),
                  ""));
  ASSERT_TRUE(second && second->str("reply") == "submitted") << (second ? second->raw : "no reply");
  const std::string second_id = second->str("run_id");
  auto events = follow_to_end(d.socket(), second_id, 120s);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(read_file(d.run_dir(second_id) / "scratch/work/probe.txt"), "own-proc-ok\n")
      << read_file(d.run_dir(second_id) / "vendor-stderr.log");
  SocketClient h(d.socket());
  h.send(socket_request("attach", R"("run_id":")" + first_id + R"(","from_seq":1)"));
  ASSERT_TRUE(h.wait_reply("attached"));
  h.send(R"({"format":"metaharness.command/1","id":"h1","command":"halt","reason":"test"})");
  auto first_events = follow_to_end(d.socket(), first_id, 120s);
  ASSERT_FALSE(first_events.empty());
  EXPECT_EQ(first_events.back().event(), "stream.closed");
  int left = ::shmget(key, 0, 0);
  if (left >= 0) ::shmctl(left, IPC_RMID, nullptr);  // never leave one behind
  EXPECT_EQ(left, -1) << "the first run's SysV segment outlived it on the host";
}

}  // namespace
}  // namespace mh::test
