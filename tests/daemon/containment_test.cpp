// The body of a run under the daemon, with the REAL Claude CLI running the Bash calls the
// scripted model asks for (decisions observe: every call runs): what an allowed call starts —
// `env -i` + `setsid`, a double fork, a daemonizing child — is gone after the run's normal end and
// after `halt`; the run is not root under a root daemon, cannot read a file planted outside its
// sandbox or another run's record; a control peer may not name a cwd outside the workspace roots.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "daemon/process/run_cgroup.hpp"
#include "protocol/completeness.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/governed_run.hpp"
#include "tests/support/peer_as_uid.hpp"

namespace mh::test {
namespace {

// Processes whose command line holds `needle` (the unique sleeps the probe starts).
std::vector<int> processes_running(const std::string& needle) {
  std::vector<int> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline");
    std::string cmdline((std::istreambuf_iterator<char>(in)), {});
    if (cmdline.find(needle) != std::string::npos && std::stoi(name) != ::getpid()) found.push_back(std::stoi(name));
  }
  return found;
}

// The daemon's own group of runs' groups (<its cgroup>/mh-<hash of the state dir>), or nullopt
// on a host without cgroup2 (the daemon is our child: it starts in our cgroup).
std::optional<std::filesystem::path> cgroup_parent_of(const std::filesystem::path& state_dir) {
  auto base = daemon::CgroupParent::own_cgroup_dir();
  if (!base) return std::nullopt;
  return *base / daemon::CgroupParent::group_for_state_dir(state_dir);
}

class DaemonContainment : public ::testing::Test {
 protected:
  void SetUp() override { start_daemon(); }
  void TearDown() override {
    if (!token_.empty())
      for (int pid : processes_running("." + token_))
        ::kill(pid, SIGKILL);  // never leave ours behind
  }

  void start_daemon(const std::string& config = "") {
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), config);
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << "daemon stderr: " << daemon->stderr_text();
  }

  std::string submit(const std::string& scenario, const std::string& extra = "", std::string* refusal = nullptr) {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe",)"
                                                    R"("model_scenario":)" +
                                                        scenario + (extra.empty() ? "" : "," + extra) + "}"));
    if (refusal) {
      *refusal = reply ? reply->str("code") : "no reply";
      return reply && reply->str("reply") == "submitted" ? reply->str("run_id") : "";
    }
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }

  std::vector<EventLine> follow(const std::string& id) { return follow_to_end(daemon->socket(), id, 120s); }

  // The attacker (nobody) and the user it attacks, for the tests of a cwd judged as its submitter.
  static constexpr uid_t kNobody = 65534;
  static constexpr uid_t kVictim = 4242;

  // Why a peer of another uid cannot be tested here (nullopt: it can): the cwd check is a root
  // daemon's, which takes the peer's uid, and that peer must pass every directory to the socket.
  std::optional<std::string> why_no_peer_of_another_uid() const {
    if (::geteuid() != 0) return "needs root: the check is a root daemon's, which takes the peer's uid";
    for (auto p = dir.path(); p != p.root_path(); p = p.parent_path()) {
      struct stat st {};
      if (::stat(p.c_str(), &st) != 0) return p.string() + " cannot be read";
      if ((st.st_mode & S_IXOTH) == 0) return p.string() + " does not let another uid pass to the socket";
    }
    return std::nullopt;
  }

  // The three escapes, each a sleep whose argument carries this test's token.
  std::string escapes() {
    token_ = std::to_string(::getpid()) + std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
    return "(env -i setsid sleep 1001." + token_ + " </dev/null >/dev/null 2>&1 &); " + "( (sleep 1002." + token_ +
           " </dev/null >/dev/null 2>&1 &) & ); " +
           "setsid sh -c 'cd /; exec </dev/null >/dev/null 2>&1; exec sleep 1003." + token_ + "' & ";
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
  std::string token_;
};

TEST_F(DaemonContainment, EscapeesOfAnAllowedCallAreGoneAfterTheRunsNormalEnd) {
  std::string id = submit(one_bash_call_scenario(escapes() + "touch started.txt"));
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  std::string record;
  for (const auto& e : events)
    record += e.raw + "\n";
  ASSERT_TRUE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/started.txt"))
      << "the call ran: " << record << read_file(daemon->run_dir(id) / "vendor-stderr.log");
  EXPECT_TRUE(processes_running("." + token_).empty()) << "an escapee outlived the run";
  auto verdict = protocol::check_stream(read_file(daemon->run_dir(id) / "events.jsonl"));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary();
}

TEST_F(DaemonContainment, EscapeesOfAnAllowedCallAreGoneAfterHalt) {
  std::string id = submit(one_bash_call_scenario(escapes() + "touch started.txt; sleep 300"));
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(daemon->run_dir(id) / "scratch/work/started.txt"); }));
  ASSERT_TRUE(eventually([&] { return processes_running("." + token_).size() >= 3; }))
      << "the three escapees run while the call does";
  SocketClient c(daemon->socket());
  c.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  ASSERT_TRUE(c.wait_reply("attached"));
  c.send(R"({"format":"metaharness.command/1","id":"h1","command":"halt","reason":"test"})");
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  EXPECT_TRUE(processes_running("." + token_).empty()) << "an escapee outlived the halt";
}

// stream.closed counts what the run's cgroup saw: CPU time (cpu.stat is on every cgroup2 group),
// the escapees the end killed, and null, never 0, for what a controller not enabled here would
// have counted (these machines offer none of memory and pids to cgroup2).
TEST_F(DaemonContainment, StreamClosedCarriesTheRunsResourcesNullWhereUnknown) {
  std::string id = submit(one_bash_call_scenario(escapes() + "i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done"));
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  const EventLine& closed = events.back();
  ASSERT_EQ(closed.event(), "stream.closed") << closed.raw;
  bool has_cgroup = true;
  for (const auto& e : events)
    if (e.event() == "warning" && e.str("code") == "CGROUP_UNAVAILABLE") has_cgroup = false;
  if (!has_cgroup) {
    EXPECT_FALSE(closed.object.contains("resources")) << "a run without a cgroup counts nothing: " << closed.raw;
    GTEST_SKIP() << "no cgroup per run here: " << closed.raw;
  }
  const json::object* resources =
      closed.object.if_contains("resources") ? closed.object.at("resources").if_object() : nullptr;
  ASSERT_TRUE(resources) << closed.raw;
  ASSERT_TRUE(resources->at("cpu_usec").is_number()) << closed.raw;
  EXPECT_GT(resources->at("cpu_usec").to_number<std::uint64_t>(), 0u) << closed.raw;
  ASSERT_TRUE(resources->at("processes_killed").is_number()) << closed.raw;
  EXPECT_GE(resources->at("processes_killed").to_number<std::uint64_t>(), 3u) << "the three escapees: " << closed.raw;
  // What the controllers enabled for the runs' groups let the group count.
  auto parent = cgroup_parent_of(daemon->state_dir());
  ASSERT_TRUE(parent);
  std::set<std::string> controllers;
  std::istringstream words(read_file(*parent / "cgroup.subtree_control"));
  for (std::string word; words >> word;)
    controllers.insert(word);
  auto enabled = [&](const std::string& c) { return controllers.count(c) > 0; };
  for (const char* key : {"memory_peak_bytes", "oom_kills"})
    EXPECT_EQ(resources->at(key).is_null(), !enabled("memory")) << key << ": " << closed.raw;
  EXPECT_EQ(resources->at("tasks_peak").is_null(), !enabled("pids")) << closed.raw;
  if (enabled("memory")) {
    EXPECT_GT(resources->at("memory_peak_bytes").to_number<std::uint64_t>(), 0u) << closed.raw;
  }
}

// run.limits through a real submit: a value out of bounds is refused MALFORMED naming it; a limit
// whose controller the host does not offer (these machines: memory, pids and cpu are all bound to
// cgroup v1) refuses the run at its start, naming the limit and the controller, never ignored.
TEST_F(DaemonContainment, ARunSpecsLimitsAreBoundedAndRefusedByNameWithoutTheirController) {
  std::string code;
  EXPECT_EQ(submit(one_bash_call_scenario("true"), R"("limits":{"pids_max":0})", &code), "");
  EXPECT_EQ(code, "MALFORMED");
  auto parent = cgroup_parent_of(daemon->state_dir());
  if (!parent || !std::filesystem::exists(*parent)) GTEST_SKIP() << "runs get no cgroup here";
  std::set<std::string> controllers;
  std::istringstream words(read_file(*parent / "cgroup.subtree_control"));
  for (std::string word; words >> word;)
    controllers.insert(word);
  if (controllers.count("memory")) GTEST_SKIP() << "the memory controller is offered here: the limit would apply";
  std::string id = submit(one_bash_call_scenario("touch started.txt"), R"("limits":{"memory_max_bytes":268435456})");
  ASSERT_FALSE(id.empty());
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  EXPECT_EQ(events.back().str("reason"), "error") << events.back().raw;
  bool named = false;
  for (const auto& e : events)
    if (e.event() == "warning" && e.str("code") == "LAUNCH_REFUSED")
      named =
          e.str("message") == "memory.max needs the memory controller, which is not available in " + parent->string();
  EXPECT_TRUE(named) << "the refusal names the limit and the controller";
  EXPECT_FALSE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/started.txt")) << "nothing ran";
  EXPECT_FALSE(std::filesystem::exists(*parent / id)) << "a refused run leaves no group";
}

// `metaharness submit --limit KEY=VALUE` sends the run spec's `limits`, read by the spec's rules.
TEST_F(DaemonContainment, SubmitsLimitsFromTheCommandLine) {
  const auto scenario = dir.path() / "scenario.json";
  std::ofstream(scenario) << one_bash_call_scenario("true");
  CliProcess submitted({metaharness_binary().string(), "submit", "claude", "-p", "go", "--decisions", "observe",
                        "--model-scenario", scenario.string(), "--limit", "pids_max=64", "--limit",
                        "cpu_max_percent=150", "--socket", daemon->socket().string()});
  submitted.close_stdin();
  auto id_line = submitted.next_line(30s);
  ASSERT_EQ(submitted.finish(30s), 0) << submitted.stderr_text();
  ASSERT_TRUE(id_line);
  follow(*id_line);
  auto spec = protocol::parse_json(read_file(daemon->run_dir(*id_line) / "spec.json"));
  ASSERT_TRUE(spec && spec->is_object());
  EXPECT_EQ(protocol::canonical_json(spec->as_object().at("limits")), R"({"cpu_max_percent":150,"pids_max":64})");
  CliProcess bad({metaharness_binary().string(), "submit", "claude", "-p", "go", "--limit", "swap_max=1", "--socket",
                  daemon->socket().string()});
  bad.close_stdin();
  EXPECT_EQ(bad.finish(30s), 2) << bad.stderr_text();
  EXPECT_NE(bad.stderr_text().find("--limit: unknown limit \"swap_max\""), std::string::npos) << bad.stderr_text();
}

TEST_F(DaemonContainment, TheRunIsNotRootAndSeesNeitherAPlantedFileNorAnotherRun) {
  std::string first = submit(one_bash_call_scenario("true"));
  follow(first);
  std::ofstream(dir.path() / "planted.txt") << "secret";
  std::string probe = "{ id -u; id -un; cat " + (dir.path() / "planted.txt").string() + " && echo planted-read; cat " +
                      (daemon->run_dir(first) / "events.jsonl").string() +
                      " >/dev/null && echo other-run-read; ls -A /root | grep -q . && echo root-listed; "
                      "echo probed; } > probe.txt 2>/dev/null";
  std::string id = submit(one_bash_call_scenario(probe));
  follow(id);
  std::string out = read_file(daemon->run_dir(id) / "scratch/work/probe.txt");
  ASSERT_NE(out.find("probed"), std::string::npos) << out;
  EXPECT_EQ(out.find("planted-read"), std::string::npos) << out;
  EXPECT_EQ(out.find("other-run-read"), std::string::npos) << out;
  EXPECT_EQ(out.find("root-listed"), std::string::npos) << out;
  if (::geteuid() == 0) {
    EXPECT_NE(out.rfind("0\n", 0), 0u) << "the run ran as root: " << out;
    EXPECT_NE(out.find("mh-run"), std::string::npos) << out;
  }
}

TEST_F(DaemonContainment, AControlPeerMayNameACwdOnlyUnderTheWorkspaceRoots) {
  std::filesystem::create_directories(dir.path() / "roots/project");
  std::filesystem::create_directories(dir.path() / "roots2");  // beside the root: `..` reaches it
  daemon.reset();
  start_daemon("[access]\nowner_is_admin = false\nroot_is_admin = false\ncontrol_uids = [" +
               std::to_string(::getuid()) + "]\n[runs]\nworkspace_roots = [\"" + (dir.path() / "roots").string() +
               "\"]\n");
  std::string code;
  EXPECT_EQ(submit(one_bash_call_scenario("true"), R"("cwd":"/root")", &code), "");
  EXPECT_EQ(code, "CWD_OUTSIDE_ROOTS");
  EXPECT_EQ(
      submit(one_bash_call_scenario("true"), R"("cwd":")" + (dir.path() / "roots/../roots2").string() + "\"", &code),
      "");
  EXPECT_EQ(code, "CWD_OUTSIDE_ROOTS") << "`..` does not climb out";
  std::string id =
      submit(one_bash_call_scenario("true"), R"("cwd":")" + (dir.path() / "roots/project").string() + "\"", &code);
  EXPECT_FALSE(id.empty()) << code;
  if (!id.empty()) follow(id);
  // A cwd named through a link is kept as its real path, the one checked and the one the sandbox
  // binds (by a descriptor opened without following links: SandboxTest.ACwdSwapped…).
  std::filesystem::create_directory_symlink(dir.path() / "roots/project", dir.path() / "roots/link");
  std::string linked =
      submit(one_bash_call_scenario("true"), R"("cwd":")" + (dir.path() / "roots/link").string() + "\"", &code);
  ASSERT_FALSE(linked.empty()) << code;
  auto events = follow(linked);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().str("reason"), "completed") << "the run works in its real directory";
  auto spec = protocol::parse_json(read_file(daemon->run_dir(linked) / "spec.json"));
  ASSERT_TRUE(spec && spec->is_object());
  EXPECT_EQ(
      boost::json::serialize(spec->as_object().at("cwd")),
      boost::json::serialize(boost::json::value(std::filesystem::canonical(dir.path() / "roots/project").string())));
}

// The attack (an outside tester's, as uid nobody with the control role): a cwd under the workspace
// roots that the submitter could not reach itself — a repository under another user's 0700
// directory, or another user's process's cwd named through /proc/PID/cwd — was resolved by root
// and bound into the submitter's run, which then read the other user's files. A root daemon now
// resolves and judges the cwd as the submitter: refused FORBIDDEN, naming the cwd as given (not
// what root would resolve it to); a directory the submitter may enter, read and write is taken.
TEST_F(DaemonContainment, APeerBelowAdminMayNameOnlyACwdItCanEnterReadAndWriteItself) {
  if (auto why = why_no_peer_of_another_uid()) GTEST_SKIP() << *why;
  const auto roots = dir.path() / "roots";
  std::filesystem::create_directories(roots / "victim-private/repo");
  std::filesystem::create_directories(roots / "read-only");
  std::filesystem::create_directories(roots / "mine");
  std::ofstream(roots / "victim-private/repo/.env") << "DB_PASSWORD=hunter2\n";
  ASSERT_EQ(::chmod(roots.c_str(), 0755), 0);
  for (const auto& p : {roots / "victim-private", roots / "victim-private/repo", roots / "victim-private/repo/.env"})
    ASSERT_EQ(::chown(p.c_str(), kVictim, kVictim), 0) << p;
  ASSERT_EQ(::chmod((roots / "victim-private").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((roots / "victim-private/repo").c_str(), 0755), 0);
  ASSERT_EQ(::chmod((roots / "read-only").c_str(), 0755), 0);  // root's: nobody may enter and read, not write
  ASSERT_EQ(::chown((roots / "mine").c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chmod((roots / "mine").c_str(), 0700), 0);
  // The victim's process, sitting in its repository.
  const std::string repo = (roots / "victim-private/repo").string();
  const pid_t victim = ::fork();
  ASSERT_GE(victim, 0);
  if (victim == 0) {
    if (::chdir(repo.c_str()) != 0 || ::syscall(SYS_setresgid, kVictim, kVictim, kVictim) != 0 ||
        ::syscall(SYS_setresuid, kVictim, kVictim, kVictim) != 0)
      ::_exit(1);
    for (;;)
      ::pause();
  }
  struct EndVictim {
    pid_t pid;
    ~EndVictim() {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } end_victim{victim};

  daemon.reset();
  start_daemon("[paths]\nsocket_mode = \"0666\"\n[access]\ncontrol_uids = [" + std::to_string(kNobody) +
               "]\n[runs]\nworkspace_roots = [\"" + roots.string() + "\"]\n");
  auto submit_as_nobody = [&](const std::string& cwd) {
    std::string why;
    std::string line = first_line_as(
        kNobody, daemon->socket(),
        socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe","model_scenario":)" +
                                     one_bash_call_scenario("true") + R"(,"cwd":")" + cwd + "\"}"),
        why);
    EXPECT_FALSE(line.empty()) << cwd << ": " << why;
    return line;
  };
  for (const std::string& cwd : {repo, "/proc/" + std::to_string(victim) + "/cwd", (roots / "read-only").string()}) {
    const std::string reply = submit_as_nobody(cwd);
    EXPECT_NE(reply.find(R"("code":"FORBIDDEN")"), std::string::npos) << cwd << ": " << reply;
    EXPECT_EQ(reply.find(R"("reply":"submitted")"), std::string::npos) << cwd << ": " << reply;
    if (cwd.rfind("/proc/", 0) == 0) {
      EXPECT_EQ(reply.find("victim-private"), std::string::npos) << "root's resolution is not told: " << reply;
    }
  }
  const std::string taken = submit_as_nobody((roots / "mine").string());
  ASSERT_NE(taken.find(R"("reply":"submitted")"), std::string::npos) << taken;
  auto parsed = protocol::parse_json(taken);
  ASSERT_TRUE(parsed && parsed->is_object());
  const std::string id(parsed->as_object().at("run_id").as_string());
  follow(id);
  auto spec = protocol::parse_json(read_file(daemon->run_dir(id) / "spec.json"));
  ASSERT_TRUE(spec && spec->is_object());
  EXPECT_EQ(spec->as_object().at("cwd"), boost::json::value((roots / "mine").string()));
}

// The attack that follows the one above (an outside tester's method, as uid nobody with the
// control role): name a cwd the submitter owns, in a directory it may write and another user keeps
// a directory in too (a shared workspace without the sticky bit); once the check as the submitter
// has passed, rename its own directory away and the other user's into its place. No link anywhere,
// so only the directory's identity tells them apart: the run is bound the directory that was
// checked or none. The swap is made while the run is parked (its vendor gone, spawned again on its
// decision), which holds the window between the check and a bind open for as long as the attacker
// likes: the respawn is refused by name and the other user's file never reaches the run.
TEST_F(DaemonContainment, ACwdReplacedByRenameAfterTheCheckIsNeverBoundInItsPlace) {
  if (auto why = why_no_peer_of_another_uid()) GTEST_SKIP() << *why;
  const auto roots = dir.path() / "roots";
  const auto shared = roots / "shared";
  std::filesystem::create_directories(shared / "mine/repo");
  std::filesystem::create_directories(shared / "victim/repo");
  std::ofstream(shared / "victim/repo/.env") << "DB_PASSWORD=hunter2\n";
  ASSERT_EQ(::chmod(roots.c_str(), 0755), 0);
  ASSERT_EQ(::chown(shared.c_str(), kNobody, kNobody), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0755), 0);  // the attacker may write here; no sticky bit
  for (const auto& p : {shared / "mine", shared / "mine/repo"}) {
    ASSERT_EQ(::chown(p.c_str(), kNobody, kNobody), 0) << p;
    ASSERT_EQ(::chmod(p.c_str(), 0755), 0) << p;
  }
  for (const auto& p : {shared / "victim", shared / "victim/repo", shared / "victim/repo/.env"})
    ASSERT_EQ(::chown(p.c_str(), kVictim, kVictim), 0) << p;
  ASSERT_EQ(::chmod((shared / "victim").c_str(), 0700), 0);
  ASSERT_EQ(::chmod((shared / "victim/repo").c_str(), 0755), 0);

  daemon.reset();
  start_daemon("[paths]\nsocket_mode = \"0666\"\n[access]\ncontrol_uids = [" + std::to_string(kNobody) +
               "]\n[runs]\nworkspace_roots = [\"" + roots.string() + "\"]\n");
  const std::string cwd = (shared / "mine/repo").string();
  std::string why;
  const std::string reply =
      first_line_as(kNobody, daemon->socket(),
                    socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"ask",)"
                                             R"("decision_deadline_ms":600000,"park_after_ms":200,"model_scenario":)" +
                                                 one_bash_call_scenario("cat .env") + R"(,"cwd":")" + cwd + "\"}"),
                    why);
  ASSERT_NE(reply.find(R"("reply":"submitted")"), std::string::npos) << reply << why;
  auto parsed = protocol::parse_json(reply);
  ASSERT_TRUE(parsed && parsed->is_object());
  const std::string id(parsed->as_object().at("run_id").as_string());
  auto parked = [&] {
    SocketClient c(daemon->socket());
    auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
    return got && got->str("reply") == "run" && got->str("state") == "parked" && got->object.at("pid").is_null();
  };
  ASSERT_TRUE(eventually(parked, 120s)) << "the run did not park: " << daemon->stderr_text();

  // As the attacker: its directory away, the other user's in its place.
  const pid_t attacker = ::fork();
  ASSERT_GE(attacker, 0);
  if (attacker == 0) {
    if (::syscall(SYS_setresgid, kNobody, kNobody, kNobody) != 0 ||
        ::syscall(SYS_setresuid, kNobody, kNobody, kNobody) != 0)
      ::_exit(2);
    if (::rename((shared / "mine").c_str(), (shared / "was-mine").c_str()) != 0) ::_exit(3);
    if (::rename((shared / "victim").c_str(), (shared / "mine").c_str()) != 0) ::_exit(4);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(attacker, &status, 0), attacker);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the renames as nobody failed: " << status;
  ASSERT_TRUE(std::filesystem::exists(shared / "mine/repo/.env")) << "the other user's repository is at the path";

  SocketClient c(daemon->socket());
  auto decided = c.request(socket_request("command", R"("run_id":")" + id + R"(","command":)" +
                                                         tool_decide("d1", "toolu_probe", R"({"decision":"allow"})")));
  ASSERT_TRUE(decided && decided->str("reply") == "result") << (decided ? decided->raw : daemon->stderr_text());
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  bool refused_by_name = false;
  for (const auto& e : events) {
    EXPECT_EQ(e.raw.find("hunter2"), std::string::npos) << "the other user's file reached the run: " << e.raw;
    if (e.event() == "warning" && e.str("code") == "RESUME_FAILED")
      refused_by_name = e.str("message").find("no longer the directory that was checked") != std::string::npos;
  }
  EXPECT_TRUE(refused_by_name) << "the respawn is refused, naming why";
}

TEST(DaemonCgroupParent, IsGoneAfterTheDaemonStops) {
  TempDir dir{"cgroup-parent-stop"};
  DaemonUnderTest d(dir.path());
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  auto parent = cgroup_parent_of(d.state_dir());
  if (!parent || !std::filesystem::exists(*parent)) GTEST_SKIP() << "runs get no cgroup here: " << d.stderr_text();
  {
    SocketClient c(d.socket());
    auto reply = c.request(
        socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe","model_scenario":)" +
                                     one_bash_call_scenario("true") + "}"));
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    SocketClient t(d.socket());
    t.send(socket_request("tail", R"("run_id":")" + reply->str("run_id") + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(t.wait_reply("end", 120s));
  }
  d.signal(SIGTERM);
  EXPECT_EQ(d.wait_exit(30s), 0) << d.stderr_text();
  EXPECT_FALSE(std::filesystem::exists(*parent)) << *parent << " outlived the daemon";
}

TEST(DaemonCgroupParent, IsGoneAfterAStartRefusedOnceItWasMade) {
  TempDir dir{"cgroup-parent-refused"};
  // runs.user is checked after the cgroup parent is made, and refused on any host: a non-root
  // daemon may not name one, and no such user exists.
  DaemonUnderTest d(dir.path(), "[runs]\nuser = \"mh-no-such-user-7f3a\"\n");
  EXPECT_EQ(d.wait_exit(30s), 2) << d.stderr_text();
  EXPECT_NE(d.stderr_text().find("runs.user"), std::string::npos) << d.stderr_text();
  auto parent = cgroup_parent_of(d.state_dir());
  if (parent) {
    EXPECT_FALSE(std::filesystem::exists(*parent)) << *parent << " outlived the refused start";
  }
}

// Every file and directory the daemon makes has its mode whatever the umask it was started with:
// 000 does not widen them (every user reading a run's record and model requests), 077 does not
// narrow them. Directories 0750, files 0640; the plan's files their own (tighter) mode; the
// sandbox's passwd and group files 0644 (the run's own uid reads them; they hold names only);
// the supervisor's spec 0600 (it holds the vendor's environment).
class DaemonFileModes : public ::testing::TestWithParam<mode_t> {};

TEST_P(DaemonFileModes, AreExplicitWhateverTheUmask) {
  TempDir dir{"modes-" + std::to_string(GetParam())};
  mode_t before = ::umask(GetParam());
  // A daily budget, so the stop writes daily-spend.json too.
  auto d = std::make_unique<DaemonUnderTest>(dir.path(), "[budgets.daily]\ninput_tokens = 50000000\n");
  ::umask(before);  // the daemon has ours; the test's own files need not
  ASSERT_TRUE(d->wait_notify("READY=1")) << d->stderr_text();
  std::string id;
  {
    SocketClient c(d->socket());
    auto reply = c.request(
        socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe","model_scenario":)" +
                                     one_bash_call_scenario("true") + "}"));
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    id = reply->str("run_id");
    SocketClient t(d->socket());
    t.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(t.wait_reply("end", 120s));
  }
  d->signal(SIGTERM);  // the stop writes daily-spend.json
  ASSERT_EQ(d->wait_exit(30s), 0) << d->stderr_text();

  auto mode_of = [](const std::filesystem::path& p) {
    struct stat info {};
    EXPECT_EQ(::lstat(p.c_str(), &info), 0) << p;
    return info.st_mode & 07777;
  };
  const auto state = d->state_dir(), run = d->run_dir(id);
  for (const auto& p : {state, state / "runs", run})
    EXPECT_EQ(mode_of(p), 0750u) << p;
  std::size_t files = 0;
  for (const auto& parent : {state, run})
    for (const auto& entry : std::filesystem::directory_iterator(parent)) {
      if (!entry.is_regular_file()) continue;
      ++files;
      const std::string name = entry.path().filename().string();
      // The supervisor's spec carries the vendor's environment (the model token): its owner only.
      mode_t want = name == "sandbox-passwd" || name == "sandbox-group" ? 0644
                    : name == "supervisor-spec.json"                    ? 0600
                                                                        : 0640;
      EXPECT_EQ(mode_of(entry.path()), want) << entry.path();
    }
  EXPECT_TRUE(std::filesystem::exists(run / "model-requests.jsonl"));
  EXPECT_TRUE(std::filesystem::exists(state / "daily-spend.json"));
  EXPECT_GE(files, 6u) << "the run's record, spec, plan, model requests, logs, the day's spend";
  // What the plan made in the run's scratch: its directories 0750, its files their own mode.
  auto plan = protocol::parse_json(read_file(run / "plan.json"));
  ASSERT_TRUE(plan && plan->is_object());
  std::size_t made = 0;
  for (const auto& p : plan->as_object().at("directories").as_array()) {
    EXPECT_EQ(mode_of(std::string(p.as_string())), 0750u) << p;
    ++made;
  }
  for (const auto& f : plan->as_object().at("files").as_array()) {
    const auto& file = f.as_object();
    EXPECT_EQ(mode_of(std::string(file.at("path").as_string())), file.at("mode").to_number<mode_t>()) << f;
  }
  EXPECT_GE(made, 1u);
}

INSTANTIATE_TEST_SUITE_P(Umask, DaemonFileModes, ::testing::Values(mode_t(0), mode_t(077)));

// The daemon's status names what a run's body gets on this host (docs/containment.md), and a
// part configured off is named with its reason, as each run's warning names it.
TEST(DaemonContainmentFacts, StatusNamesEachPartAndWhatIsLeftOutWithItsReason) {
  auto status_of = [](DaemonUnderTest& d) {
    SocketClient c(d.socket());
    auto reply = c.request(socket_request("status"));
    EXPECT_TRUE(reply && reply->str("reply") == "status") << (reply ? reply->raw : "no reply");
    EXPECT_TRUE(reply && reply->object.contains("containment")) << (reply ? reply->raw : "");
    return reply && reply->object.contains("containment") ? reply->object.at("containment").as_object()
                                                          : json::object{};
  };
  {
    TempDir dir{"facts-default"};
    DaemonUnderTest d(dir.path());
    ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
    auto facts = status_of(d);
    auto parent = cgroup_parent_of(d.state_dir());
    bool cgroup = parent && std::filesystem::exists(*parent);
    EXPECT_EQ(facts.at("end"), cgroup ? "cgroup" : "marker-sweep") << json::serialize(facts);
    if (cgroup) {
      EXPECT_EQ(std::string(facts.at("cgroup").as_object().at("dir").as_string()), parent->string())
          << json::serialize(facts);
    }
    EXPECT_EQ(facts.at("sandbox"), ::access("/usr/bin/bwrap", X_OK) == 0 ? "bwrap" : "none");
    EXPECT_EQ(facts.at("identity"), ::geteuid() == 0 ? "uid-per-run" : "daemon-user");
  }
  TempDir dir{"facts-none"};
  DaemonUnderTest d(dir.path(), "[runs]\ncgroup_root = \"none\"\nsandbox = \"none\"\n");
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  auto facts = status_of(d);
  EXPECT_EQ(facts.at("end"), "marker-sweep") << json::serialize(facts);
  EXPECT_TRUE(facts.at("cgroup").is_null());
  EXPECT_EQ(facts.at("sandbox"), "none");
  const auto& unavailable = facts.at("unavailable").as_object();
  EXPECT_EQ(unavailable.at("cgroup"), "runs.cgroup_root is \"none\"");
  EXPECT_EQ(unavailable.at("sandbox"), "runs.sandbox is \"none\"");
}

// A configured cgroup_root that is not a cgroup2 directory refuses the start, naming the key;
// "none" is the way to run without (and then every run warns CGROUP_UNAVAILABLE).
TEST(DaemonContainmentFacts, AConfiguredCgroupRootThatIsNotCgroup2RefusesTheStart) {
  TempDir dir{"cgroup-root-not-cgroup2"};
  std::filesystem::create_directories(dir.path() / "not-a-cgroup");
  DaemonUnderTest d(dir.path(), "[runs]\ncgroup_root = \"" + (dir.path() / "not-a-cgroup").string() + "\"\n");
  EXPECT_EQ(d.wait_exit(30s), 2) << d.stderr_text();
  EXPECT_NE(d.stderr_text().find("runs.cgroup_root: " + (dir.path() / "not-a-cgroup").string() +
                                 " is not on a cgroup2 mount"),
            std::string::npos)
      << d.stderr_text();
}

// Supervision (on by default) launches every run through the supervisor: a start without one is
// refused, naming the key, and supervise = false starts without it.
TEST(DaemonContainmentFacts, ASupervisorThatIsNotThereRefusesTheStartNamingTheKey) {
  TempDir dir{"no-supervisor"};
  const auto missing = dir.path() / "no-such-supervisor";
  std::filesystem::create_directories(dir.path() / "a");
  std::filesystem::create_directories(dir.path() / "b");
  DaemonUnderTest refused(dir.path() / "a", "[runs]\nsupervisor = \"" + missing.string() + "\"\n");
  EXPECT_EQ(refused.wait_exit(30s), 2) << refused.stderr_text();
  EXPECT_NE(refused.stderr_text().find("runs.supervisor: " + missing.string() + " is not an executable file"),
            std::string::npos)
      << refused.stderr_text();
  DaemonUnderTest unsupervised(dir.path() / "b",
                               "[runs]\nsupervise = false\nsupervisor = \"" + missing.string() + "\"\n");
  EXPECT_TRUE(unsupervised.wait_notify("READY=1")) << unsupervised.stderr_text();
}

// The default part whose probe fails is left out, with its reason in `status` and in every run's
// warning; the same directory configured refuses the start. The daemon is started inside a
// cgroup of the test's own that may have no child group (cgroup.max.descendants 0), so its
// default parent cannot be made there.
TEST(DaemonContainmentFacts, ADefaultCgroupThatCannotWorkIsLeftOutAndEveryRunSaysSoAConfiguredOneRefuses) {
  auto base = daemon::CgroupParent::own_cgroup_dir();
  if (!base || ::access((*base / "cgroup.procs").c_str(), W_OK) != 0) GTEST_SKIP() << "no writable cgroup2 here";
  const std::filesystem::path cage = *base / ("mh-test-nochild-" + std::to_string(::getpid()));
  ASSERT_EQ(::mkdir(cage.c_str(), 0750), 0) << cage;
  // The cage goes whichever way the test ends (an assertion that fails halfway included): declared
  // before the daemons, it is removed after they are gone and it is empty.
  struct RemoveCage {
    std::filesystem::path path;
    ~RemoveCage() { ::rmdir(path.c_str()); }
  } remove_cage{cage};
  std::ofstream(cage / "cgroup.max.descendants") << "0\n";
  auto move_self = [](const std::filesystem::path& group) {
    std::ofstream procs(group / "cgroup.procs");
    procs << ::getpid() << "\n";
    procs.flush();
    return bool(procs);
  };
  TempDir dir{"cgroup-default-fails"};
  std::unique_ptr<DaemonUnderTest> d;
  ASSERT_TRUE(move_self(cage));
  try {
    d = std::make_unique<DaemonUnderTest>(dir.path());  // born in the cage
  } catch (...) {
    move_self(*base);
    throw;
  }
  ASSERT_TRUE(move_self(*base));
  ASSERT_TRUE(d->wait_notify("READY=1")) << d->stderr_text();
  std::string why;
  {
    SocketClient c(d->socket());
    auto reply = c.request(socket_request("status"));
    ASSERT_TRUE(reply && reply->object.contains("containment")) << (reply ? reply->raw : "no reply");
    const auto& facts = reply->object.at("containment").as_object();
    EXPECT_EQ(facts.at("end"), "marker-sweep") << reply->raw;
    why = std::string(facts.at("unavailable").as_object().at("cgroup").as_string());
    EXPECT_EQ(why.rfind("cannot create " + cage.string() + "/mh-", 0), 0u) << why;
    auto reply2 = c.request(
        socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe","model_scenario":)" +
                                     one_bash_call_scenario("true") + "}"));
    ASSERT_TRUE(reply2 && reply2->str("reply") == "submitted") << (reply2 ? reply2->raw : "no reply");
    SocketClient t(d->socket());
    t.send(socket_request("tail", R"("run_id":")" + reply2->str("run_id") + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(t.wait_reply("end", 120s));
    bool warned = false;
    for (const auto& e : t.lines())
      if (e.event() == "warning" && e.str("code") == "CGROUP_UNAVAILABLE")
        warned = e.str("message").find(why) != std::string::npos;
    EXPECT_TRUE(warned) << "the run names what it lacks and why";
    auto closed = t.events_named("stream.closed");
    ASSERT_EQ(closed.size(), 1u);
    EXPECT_EQ(closed[0].str("reason"), "completed") << closed[0].raw;
    EXPECT_FALSE(closed[0].object.contains("resources")) << "no cgroup counted it: " << closed[0].raw;
  }
  {
    TempDir configured_dir{"cgroup-configured-fails"};
    DaemonUnderTest configured(configured_dir.path(), "[runs]\ncgroup_root = \"" + cage.string() + "\"\n");
    EXPECT_EQ(configured.wait_exit(30s), 2) << configured.stderr_text();
    EXPECT_NE(configured.stderr_text().find("runs.cgroup_root: cannot create " + cage.string() + "/mh-"),
              std::string::npos)
        << configured.stderr_text();
  }
  d->signal(SIGTERM);
  EXPECT_EQ(d->wait_exit(30s), 0) << d->stderr_text();
  d.reset();
  EXPECT_EQ(::rmdir(cage.c_str()), 0) << cage << ": " << std::strerror(errno) << " (the daemon left it populated)";
}

// A root daemon without the sandbox: its runs (each its own uid) still reach their scratch
// through the 0750 tree (the state directory and runs/ 0711 there, the run directory the run's
// group), and list nothing of it.
// The first directory above `path` another user cannot pass through (no o+x), if any.
std::optional<std::filesystem::path> closed_to_others(std::filesystem::path path) {
  for (path = path.parent_path(); !path.empty() && path != path.root_path(); path = path.parent_path()) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !(st.st_mode & S_IXOTH)) return path;
  }
  return std::nullopt;
}

TEST(DaemonUnsandboxed, ARootDaemonsRunReachesItsScratchAndListsNoOtherRun) {
  if (::geteuid() != 0) GTEST_SKIP() << "not root";
  TempDir dir{"unsandboxed-root"};
  // Without a sandbox the run's own uid reaches its scratch and the vendor binary through the
  // host's directories as they are: a checkout in a 0700 directory (a mktemp -d clone) shuts it out.
  for (const auto& needed : {dir.path() / "state", source_dir() / ".vendor/node_modules"})
    if (auto closed = closed_to_others(std::filesystem::weakly_canonical(needed)))
      GTEST_SKIP() << *closed << " is closed to other users (no o+x): a run as its own uid without a sandbox "
                   << "cannot reach " << needed;
  DaemonUnderTest d(dir.path(), "[runs]\nsandbox = \"none\"\n");
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  SocketClient c(d.socket());
  auto probe =
      "touch started.txt; ls " + (d.state_dir() / "runs").string() + " >listed.txt 2>&1 || echo refused >listed.txt";
  auto reply = c.request(
      socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"observe","model_scenario":)" +
                                   one_bash_call_scenario(probe) + "}"));
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
  const std::string id = reply->str("run_id");
  SocketClient t(d.socket());
  t.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
  bool ended = bool(t.wait_reply("end", 45s));
  std::string record;
  for (const auto& l : t.lines())
    record += l.raw.substr(0, 400) + "\n";
  ASSERT_TRUE(ended) << record << read_file(d.run_dir(id) / "vendor-stderr.log");
  auto closed = t.events_named("stream.closed");
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].str("reason"), "completed") << record << read_file(d.run_dir(id) / "vendor-stderr.log");
  EXPECT_TRUE(std::filesystem::exists(d.run_dir(id) / "scratch/work/started.txt")) << "the run reached its scratch";
  EXPECT_EQ(read_file(d.run_dir(id) / "scratch/work/listed.txt"), "refused\n") << "runs/ is not listable";
  struct stat info {};
  for (const auto& p : {d.state_dir(), d.state_dir() / "runs"}) {
    ASSERT_EQ(::stat(p.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 07777, 0711u) << p;
  }
}

}  // namespace
}  // namespace mh::test
