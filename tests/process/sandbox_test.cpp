// The sandbox a run's processes see (real bubblewrap): the run's cwd and scratch writable, the
// system read-only, the host's /tmp and /root and a hidden path invisible, its own passwd, and a
// nested bwrap (as Codex starts) still working inside.
#include "daemon/process/sandbox.hpp"

#include <sys/ipc.h>
#include <sys/shm.h>
#include <sys/stat.h>

#include <fstream>

#include "daemon/process/child_process.hpp"
#include "daemon/process/directory_identity_of.hpp"
#include "daemon/process/exec_handoff.hpp"
#include "process_test_support.hpp"

namespace mh::daemon::test {
namespace {

struct Result {
  std::string out;
  protocol::ProcessTermination termination;
};

class SandboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(spec_.bwrap.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << spec_.bwrap;
    spec_.exec_helper = MH_TEST_EXEC_HELPER;
    work_ = run_.path() / "work";
    scratch_ = run_.path() / "scratch";
    std::filesystem::create_directories(work_);
    std::filesystem::create_directories(scratch_);
  }

  // Runs `script` with /bin/sh inside the sandbox; returns its stdout and termination.
  Result run(const std::string& script) {
    auto plan = make_plan("/bin/sh", {"-c", script}, {{"PATH", "/usr/bin:/bin"}}, work_);
    plan.directories = {scratch_};
    auto child = ChildProcess::spawn(strand_, sandboxed(plan, spec_));
    if (!child) throw std::runtime_error(child.error());
    Result r;
    r.out = io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 30s);
    r.termination = io_.run(strand_, (*child)->async_wait(), 30s);
    return r;
  }

  IoThreads io_{1};
  IoThreads::Strand strand_ = io_.make_strand();
  TempDir run_;       // the run's own directory: scratch and work inside
  TempDir elsewhere;  // the host's /tmp, outside the run
  SandboxSpec spec_;
  std::filesystem::path work_, scratch_;
};

TEST_F(SandboxTest, TheRunWritesItsOwnDirectoriesAndNothingElse) {
  auto r = run("echo a > work.txt && echo cwd-ok; echo b > " + scratch_.string() +
               "/s.txt && echo scratch-ok; "
               "touch /usr/mh-sandbox-probe 2>/dev/null && echo usr-written; "
               "touch /etc/mh-sandbox-probe 2>/dev/null && echo etc-written; "
               "touch /mh-sandbox-probe 2>/dev/null && echo root-written; "
               "echo done");
  EXPECT_EQ(r.out, "cwd-ok\nscratch-ok\ndone\n");
  EXPECT_TRUE(std::filesystem::exists(work_ / "work.txt"));
  EXPECT_TRUE(std::filesystem::exists(scratch_ / "s.txt"));
  EXPECT_FALSE(std::filesystem::exists("/usr/mh-sandbox-probe"));
}

// The operator's cwd as it was checked is what the run gets: a submitter who swaps it for a link
// to a directory of the host's after the check (the plan is made, the spawn not yet) gets the
// spawn refused by name, never that directory bound writable into the run.
TEST_F(SandboxTest, ACwdSwappedForALinkAfterItWasCheckedIsRefusedNotFollowed) {
  const auto outside = elsewhere.path() / "host-directory";
  std::filesystem::create_directories(outside);
  std::ofstream(outside / "host-secret") << "secret";
  auto plan = make_plan("/bin/sh", {"-c", "ls -A; echo done"}, {{"PATH", "/usr/bin:/bin"}}, work_);
  plan.directories = {scratch_};
  const auto contained = sandboxed(plan, spec_);
  std::filesystem::rename(work_, run_.path() / "work-as-checked");
  std::filesystem::create_directory_symlink(outside, work_);
  auto child = ChildProcess::spawn(strand_, contained);
  if (child) {
    std::string seen = io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 30s);
    io_.run(strand_, (*child)->async_wait(), 30s);
    FAIL() << "the link was followed: the run saw " << seen;
  }
  EXPECT_NE(child.error().find("symbolic link"), std::string::npos) << child.error();
  // The same cwd, not swapped, is bound and writable (the other tests' every run).
  std::filesystem::remove(work_);
  std::filesystem::rename(run_.path() / "work-as-checked", work_);
  EXPECT_EQ(run("ls -A; echo done").out, "done\n");
}

// The operator's cwd as a root daemon checked it as the submitter (its device and inode) is the
// only directory the run gets at that path: a submitter who renames it away after the check and
// renames another directory into its place (no link anywhere: a rename in a directory it may
// write) gets the spawn refused by name, never the other directory bound writable into the run.
TEST_F(SandboxTest, ACwdReplacedByRenameAfterItWasCheckedIsRefusedNotBound) {
  struct stat checked {};
  ASSERT_EQ(::stat(work_.c_str(), &checked), 0);
  spec_.cwd_identity =
      DirectoryIdentity{static_cast<std::uint64_t>(checked.st_dev), static_cast<std::uint64_t>(checked.st_ino)};
  auto plan = make_plan("/bin/sh", {"-c", "ls -A; echo done"}, {{"PATH", "/usr/bin:/bin"}}, work_);
  plan.directories = {scratch_};
  const auto contained = sandboxed(plan, spec_);
  std::filesystem::rename(work_, run_.path() / "work-as-checked");
  std::filesystem::create_directory(work_);  // another directory, at the checked path
  std::ofstream(work_ / "someone-elses-secret") << "secret";
  auto child = ChildProcess::spawn(strand_, contained);
  if (child) {
    std::string seen = io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 30s);
    io_.run(strand_, (*child)->async_wait(), 30s);
    FAIL() << "the directory renamed into its place was bound: the run saw " << seen;
  }
  EXPECT_NE(child.error().find("no longer the directory that was checked"), std::string::npos) << child.error();
  // The checked directory, back at its path, is bound and writable.
  std::filesystem::remove_all(work_);
  std::filesystem::rename(run_.path() / "work-as-checked", work_);
  EXPECT_EQ(run("ls -A; echo done").out, "done\n");
}

// The checked directory deleted and another made at its path: the file system may give the new
// one the freed inode number (ext4 often does), so the bind also asks the directory's birth.
TEST_F(SandboxTest, ACwdDeletedAndMadeAgainAfterItWasCheckedIsRefusedEvenWithItsInodeNumber) {
  spec_.cwd_identity = identity_of(AT_FDCWD, work_.c_str());
  ASSERT_TRUE(spec_.cwd_identity);
  auto plan = make_plan("/bin/sh", {"-c", "ls -A; echo done"}, {{"PATH", "/usr/bin:/bin"}}, work_);
  plan.directories = {scratch_};
  const auto contained = sandboxed(plan, spec_);
  std::filesystem::remove(work_);
  std::filesystem::create_directory(work_);
  std::ofstream(work_ / "someone-elses-secret") << "secret";
  auto made_again = identity_of(AT_FDCWD, work_.c_str());
  ASSERT_TRUE(made_again);
  const bool same_number =
      made_again->device == spec_.cwd_identity->device && made_again->inode == spec_.cwd_identity->inode;
  if (same_number && made_again->birth_ns == 0)
    GTEST_SKIP() << "this file system keeps no birth: nothing tells them apart";
  std::cout << "the directory made again " << (same_number ? "got" : "did not get") << " the freed inode number\n";
  auto child = ChildProcess::spawn(strand_, contained);
  if (child) {
    std::string seen = io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 30s);
    io_.run(strand_, (*child)->async_wait(), 30s);
    FAIL() << "the directory made again was bound: the run saw " << seen;
  }
  EXPECT_NE(child.error().find("no longer the directory that was checked"), std::string::npos) << child.error();
}

// An argument naming a path to open carries the checked identity between its prefix and the
// path; one that does not parse is not taken for a path.
TEST(OpenedPathArg, CarriesTheCheckedIdentityAndRefusesWhatDoesNotParse) {
  const DirectoryIdentity identity{2049, 1234567, 1733600000123456789};
  auto parsed = parse_opened_path_arg(opened_path_arg("/srv/work", identity));
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->path, "/srv/work");
  EXPECT_EQ(parsed->identity, identity);
  auto plain = parse_opened_path_arg(opened_path_arg("/srv/work", std::nullopt));
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->path, "/srv/work");
  EXPECT_FALSE(plain->identity);
  const std::string prefix(kOpenedPathArgPrefix);
  auto without_birth = parse_opened_path_arg(prefix + "2049:1234567/srv/work");
  ASSERT_TRUE(without_birth && without_birth->identity);
  EXPECT_EQ(without_birth->identity->birth_ns, 0u) << "an argument written before births were kept";
  EXPECT_TRUE(without_birth->identity->admits(identity)) << "a birth it did not know is not asked";
  EXPECT_FALSE(identity.admits(DirectoryIdentity{2049, 1234567, 1})) << "an inode number given to a newer directory";
  for (const std::string& bad : {prefix + "2049/srv", prefix + "a:1/srv", prefix + "1:2", prefix + "1:2x/s",
                                 prefix + "1:2:/s", prefix + "1:2:3:4/s", prefix + ":1:2/s"})
    EXPECT_FALSE(parse_opened_path_arg(bad)) << bad;
  EXPECT_FALSE(parse_opened_path_arg("/srv/work"));
}

TEST_F(SandboxTest, TheHostsTmpRootAndAPlantedFileAreInvisible) {
  std::ofstream(elsewhere.path() / "planted") << "secret";
  auto r = run("cat " + (elsewhere.path() / "planted").string() +
               " 2>/dev/null && echo planted-read; "
               "ls -A /tmp | grep -v '^" +
               run_.path().filename().string() +
               "$' | grep -q . && echo tmp-not-empty; "
               "ls -A /root 2>/dev/null | grep -q . && echo root-listed; "
               "ls -A /home 2>/dev/null | grep -q . && echo home-listed; "
               "echo done");
  EXPECT_EQ(r.out, "done\n");
}

// A path the daemon hides (its state, config, socket) stays hidden even under a bound path, and
// a writable path inside it stays writable.
TEST_F(SandboxTest, AHiddenPathUnderABoundOneIsEmptyAndTheRunsOwnDirectoryInsideItStays) {
  std::ofstream(run_.path() / "events.jsonl") << "the run's own record";
  spec_.read_only.push_back(run_.path());  // as if the run's parent were visible
  spec_.hidden.push_back(run_.path());
  auto r = run("ls -A " + run_.path().string() + " | sort | tr '\\n' ' '; echo; echo x > w && echo cwd-ok");
  EXPECT_EQ(r.out, "scratch work \ncwd-ok\n") << "only the run's writable directories, re-bound";
}

// The daemon's state directory hidden under a bound path, the run's scratch deep inside it, and
// the run not root: the directories between the cover and the scratch are remade reachable.
TEST_F(SandboxTest, ARunThatIsNotRootReachesItsScratchDeepInsideAHiddenPath) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs a root daemon to run the run as another uid";
  const auto state = run_.path() / "state";
  const auto deep = state / "runs" / "r1" / "scratch";
  std::filesystem::create_directories(deep);
  ASSERT_EQ(::chown(deep.c_str(), 61235, 61235), 0);
  // A bound directory keeps its host mode inside: one the run must pass through must let it.
  ::chmod(run_.path().c_str(), 0711);
  spec_.read_only.push_back(run_.path());
  spec_.hidden.push_back(state);
  spec_.run_as = SandboxSpec::RunAs{61235, 61235};
  auto plan = make_plan("/bin/sh", {"-c", "echo x > " + (deep / "f").string() + " && echo wrote"},
                        {{"PATH", "/usr/bin:/bin"}}, deep);
  plan.directories = {deep};
  auto child = ChildProcess::spawn(strand_, sandboxed(plan, spec_));
  ASSERT_TRUE(child) << child.error();
  EXPECT_EQ(io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 30s), "wrote\n");
}

TEST_F(SandboxTest, TheRunsOwnPasswdNamesItsUser) {
  std::ofstream(run_.path() / "passwd") << "mh-run:x:61234:61234:metaharness run:/nonexistent:/bin/sh\n";
  spec_.passwd_file = run_.path() / "passwd";
  auto r = run("cat /etc/passwd");
  EXPECT_EQ(r.out, "mh-run:x:61234:61234:metaharness run:/nonexistent:/bin/sh\n");
}

// Under a root daemon the run is somebody else: an unprivileged uid that owns only the run's own
// directories. It writes those, cannot write the system, and cannot read root's files.
TEST_F(SandboxTest, UnderARootDaemonTheRunIsAnUnprivilegedUser) {
  if (::geteuid() != 0) GTEST_SKIP() << "the daemon is not root here: the run keeps the daemon's user";
  constexpr uid_t kUid = 61234;
  // Only the run's own directories are its; the run directory above them stays root's (0700), so
  // only a bwrap that builds the view as root can reach them.
  ::chmod(run_.path().c_str(), 0700);
  for (const auto& dir : {work_, scratch_})
    ASSERT_EQ(::chown(dir.c_str(), kUid, kUid), 0) << dir;
  std::ofstream(run_.path() / "passwd") << "mh-run:x:61234:61234:metaharness run:/nonexistent:/bin/sh\n";
  spec_.passwd_file = run_.path() / "passwd";
  const std::string script =
      "id -u; id -un; echo x > mine && echo wrote-cwd; cat /etc/shadow >/dev/null 2>&1 && echo read-shadow; "
      "echo y > " +
      (scratch_ / "s").string() +
      " && echo wrote-scratch-by-path; "
      "grep -E '^Cap(Prm|Eff|Inh|Amb)' /proc/self/status | grep -v '0000000000000000' ; echo done";
  // Sandboxed: bwrap builds the view as root, then the run drops to its uid inside.
  spec_.run_as = SandboxSpec::RunAs{kUid, kUid};
  auto r = run(script);
  EXPECT_EQ(r.out, "61234\nmh-run\nwrote-cwd\nwrote-scratch-by-path\ndone\n") << "and no capability left in any set";
  struct stat info {};
  ASSERT_EQ(::stat((work_ / "mine").c_str(), &info), 0);
  EXPECT_EQ(info.st_uid, kUid);
  // Without a sandbox the child drops to the uid itself, before exec.
  ::chmod(run_.path().c_str(), 0755);
  auto plan = make_plan("/bin/sh", {"-c", "id -u; echo y > mine2 && echo wrote"}, {{"PATH", "/usr/bin:/bin"}}, work_);
  auto child = ChildProcess::spawn(strand_, plan, {.identity = SpawnOptions::Identity{kUid, kUid}});
  ASSERT_TRUE(child) << child.error();
  EXPECT_EQ(io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 30s), "61234\nwrote\n");
}

// Codex starts its own bwrap for each command: a nested sandbox must work inside ours.
TEST_F(SandboxTest, ANestedBwrapRunsInside) {
  auto r =
      run("bwrap --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64 "
          "--proc /proc --dev /dev --unshare-pid -- /bin/echo nested-ok");
  EXPECT_EQ(r.out, "nested-ok\n");
  EXPECT_EQ(r.termination.kind, protocol::ProcessKind::exited);
  EXPECT_EQ(r.termination.code, 0);
}

// The attack with the denylist out of the way (the plan is made here, not submitted): the
// plan's environment preloads a library that marks who loaded it. Under a root daemon bwrap (root,
// in the host's mount namespace) and setpriv (root, before the drop) run first: neither may load
// it. The vendor, the run's uid after the drop, does, and sees its ordinary values.
TEST_F(SandboxTest, NothingOfThePlansEnvironmentReachesAProgramBeforeTheDrop) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs a root daemon: bwrap and setpriv run as root only then";
  constexpr uid_t kUid = 61236;
  ::chmod(run_.path().c_str(), 0755);
  for (const auto& dir : {work_, scratch_})
    ASSERT_EQ(::chown(dir.c_str(), kUid, kUid), 0) << dir;
  // Inside the scratch, so the run can load it too (the test shows the library works).
  const auto library = scratch_ / "preload.so";
  std::filesystem::copy_file(MH_TEST_PRELOAD_MARKER, library);
  ::chmod(library.c_str(), 0755);
  const auto markers = scratch_ / "markers";
  std::filesystem::create_directories(markers);
  ::chmod(markers.c_str(), 0777);
  spec_.run_as = SandboxSpec::RunAs{kUid, kUid};
  auto plan = make_plan("/bin/sh", {"-c", "id -u; echo \"$MH_ORDINARY\""},
                        {{"PATH", "/usr/bin:/bin"},
                         {"LD_PRELOAD", library.string()},
                         {"MH_PRELOAD_MARKER_DIR", markers.string()},
                         {"MH_ORDINARY", "an ordinary value"}},
                        work_);
  plan.directories = {scratch_};
  plan.run_marker = {"MH_TEST_RUN", unique_marker_value("preload")};
  auto child = ChildProcess::spawn(strand_, sandboxed(plan, spec_));
  ASSERT_TRUE(child) << child.error();
  EXPECT_EQ(io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 30s), "61236\nan ordinary value\n");
  io_.run(strand_, (*child)->async_wait(), 30s);
  std::vector<std::string> as_root, as_run;
  for (const auto& entry : std::filesystem::directory_iterator(markers)) {
    std::string name = entry.path().filename().string();
    (name.rfind("uid-0-", 0) == 0 ? as_root : as_run).push_back(name);
  }
  EXPECT_TRUE(as_root.empty()) << "loaded as root by " << ::testing::PrintToString(as_root);
  EXPECT_FALSE(as_run.empty()) << "the run's own programs load it (the library works)";
}

// Whoever the daemon is (root or not), the first hop's environment is the fixed one: the run
// marker and the handed descriptor's name, nothing of the plan's.
TEST_F(SandboxTest, TheFirstHopsEnvironmentIsTheMarkerAndTheDescriptorAlone) {
  auto plan = make_plan("/bin/sh", {"-c", "read x; echo \"$MH_DECLARED\""},
                        {{"PATH", "/usr/bin:/bin"}, {"MH_DECLARED", "declared"}}, work_);
  plan.directories = {scratch_};
  const std::string marker = unique_marker_value("hop-env");
  plan.run_marker = {"MH_TEST_RUN", marker};
  auto sandboxed_plan = sandboxed(plan, spec_);
  EXPECT_EQ(sandboxed_plan.env, (std::vector<std::pair<std::string, std::string>>{{"MH_TEST_RUN", marker}}));
  ASSERT_TRUE(sandboxed_plan.handed_env);
  EXPECT_EQ(*sandboxed_plan.handed_env, plan.env);
  auto child = ChildProcess::spawn(strand_, sandboxed_plan);
  ASSERT_TRUE(child) << child.error();
  std::ifstream in("/proc/" + std::to_string((*child)->pid()) + "/environ");
  std::string environ((std::istreambuf_iterator<char>(in)), {});
  io_.run(strand_, (*child)->write_stdin("go\n"), 30s);
  EXPECT_EQ(io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 30s), "declared\n");
  std::vector<std::string> entries;
  for (std::size_t at = 0; at < environ.size();) {
    std::size_t end = environ.find('\0', at);
    entries.push_back(environ.substr(at, end - at));
    at = end == std::string::npos ? environ.size() : end + 1;
  }
  ASSERT_EQ(entries.size(), 2u) << environ;
  EXPECT_EQ(entries[0], "MH_TEST_RUN=" + marker);
  EXPECT_EQ(entries[1].rfind("METAHARNESS_EXEC_ENV_FD=", 0), 0u) << entries[1];
}

// Issue 24, item 4: two sandboxed runs of one uid (runs.user, or a daemon that is not root). The
// second sees nothing of the first: not in its /proc, its environ unreadable, no signal reaches
// it; and a SysV segment the first made does not outlive it on the host.
TEST_F(SandboxTest, RunsOfOneUidSeeNoneOfEachOthersProcessesAndLeaveNoSysVSegment) {
  constexpr uid_t kUid = 61239;
  if (::geteuid() == 0) {
    spec_.run_as = SandboxSpec::RunAs{kUid, kUid};
    ::chmod(run_.path().c_str(), 0755);
    for (const auto& dir : {work_, scratch_})
      ASSERT_EQ(::chown(dir.c_str(), kUid, kUid), 0) << dir;
  }
  const std::string token = unique_marker_value("pidns");
  const key_t key = static_cast<key_t>(0x6d680000 + (::getpid() & 0xffff));
  // The first run: its secret in its environment and its argv; a SysV segment; then it waits.
  auto first_plan = make_plan("/bin/sh",
                              {"-c", "perl -e 'defined(shmget(" + std::to_string(key) +
                                         ", 4096, 01600)) or die \"shmget: $!\"' && echo ready; read x; : " + token},
                              {{"PATH", "/usr/bin:/bin"}, {"MH_SECRET", token}}, work_);
  first_plan.directories = {scratch_};
  auto first = ChildProcess::spawn(strand_, sandboxed(first_plan, spec_));
  ASSERT_TRUE(first) << first.error();
  auto line = io_.run(
      strand_,
      [&]() -> asio::awaitable<std::string> {
        asio::streambuf buffer;
        co_await asio::async_read_until((*first)->stdout_pipe(), buffer, '\n', asio::use_awaitable);
        co_return std::string(asio::buffers_begin(buffer.data()), asio::buffers_end(buffer.data()));
      }(),
      30s);
  ASSERT_EQ(line, "ready\n");
  // Its shell, as the host numbers it: a child of the sandbox whose environ carries the secret.
  pid_t shell = -1;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "environ");
    std::string environ((std::istreambuf_iterator<char>(in)), {});
    if (environ.find("MH_SECRET=" + token) != std::string::npos) shell = std::stoi(name);
  }
  ASSERT_GT(shell, 0) << "the first run's shell is on the host";
  // The second run looks for it: the token split, so its own argv does not hold it whole.
  const std::string half = token.substr(0, token.size() / 2), rest = token.substr(token.size() / 2);
  const std::string pid = std::to_string(shell);
  auto r = run("t=" + half + "; t=\"$t\"" + rest +
               "; for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do "
               "grep -qF \"$t\" \"$f\" 2>/dev/null && echo \"seen in $f\"; done; "
               "cat /proc/" +
               pid +
               "/environ >/dev/null 2>&1 && echo environ-read; "
               "kill -0 " +
               pid +
               " 2>/dev/null && echo signalled; "
               "grep -q PATH=/usr/bin /proc/self/environ && echo own-proc-ok");
  EXPECT_EQ(r.out, "own-proc-ok\n");
  io_.run(strand_, (*first)->write_stdin("go\n"), 30s);
  EXPECT_EQ(io_.run(strand_, (*first)->async_wait(), 30s).code, 0);
  int left = ::shmget(key, 0, 0);
  if (left >= 0) ::shmctl(left, IPC_RMID, nullptr);  // never leave one behind
  EXPECT_EQ(left, -1) << "the first run's SysV segment outlived it on the host";
}

TEST(SandboxArgs, TheVendorIsStartedByTheLastHopAfterTheDrop) {
  auto plan = make_plan("/opt/vendor/cli", {"--flag"}, {{"A", "1"}}, "/srv/run/work");
  SandboxSpec spec;
  spec.exec_helper = "/usr/lib/metaharness/mh-exec";
  spec.run_as = SandboxSpec::RunAs{61237, 61237};
  auto out = sandboxed(plan, spec);
  const std::vector<std::string> tail = {"--",
                                         "/usr/bin/setpriv",
                                         "--reuid=61237",
                                         "--regid=61237",
                                         "--clear-groups",
                                         "--inh-caps=-all",
                                         "--",
                                         "/usr/lib/metaharness/mh-exec",
                                         "--",
                                         "/opt/vendor/cli",
                                         "--flag"};
  ASSERT_GE(out.args.size(), tail.size());
  EXPECT_EQ(std::vector<std::string>(out.args.end() - static_cast<long>(tail.size()), out.args.end()), tail);
  EXPECT_TRUE(out.env.empty()) << "no marker in this plan: nothing at all";
  ASSERT_TRUE(out.handed_env);
  EXPECT_EQ(*out.handed_env, plan.env);
}

TEST(SandboxArgs, TheLayoutIsSystemThenFreshThenWritableThenTheDirectory) {
  auto plan = make_plan("/bin/true", {}, {}, "/srv/run/work");
  plan.directories = {"/srv/run/scratch", "/srv/run/scratch/home"};
  auto args = sandbox_args(plan, SandboxSpec{});
  auto at = [&](const std::string& a) { return std::find(args.begin(), args.end(), a) - args.begin(); };
  ASSERT_LT(at("/usr"), static_cast<long>(args.size()));
  EXPECT_LT(at("/usr"), at("--proc"));
  EXPECT_LT(at("--tmpfs"), at("/srv/run/work"));
  EXPECT_EQ(std::count(args.begin(), args.end(), "/srv/run/scratch/home"), 0) << "inside a bound scratch";
  EXPECT_EQ(args[args.size() - 2], "--chdir");
  EXPECT_EQ(args.back(), "/srv/run/work");
}

}  // namespace
}  // namespace mh::daemon::test
