// A run with a network namespace of its own (network = "gateway", issue 25), through the real
// sandboxed() path and real bubblewrap: mh-exec relays the run's own 127.0.0.1:41000 to a Unix
// socket in the gate (a server this test runs), and a listener this test opens on the host's
// loopback cannot be reached from inside. That is the network-closed proof at this level. Also:
// the relay is no child of the vendor and leaves it no descriptor; mh-exec refuses a malformed
// relay by name; the arguments and the moved hook channel.
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>

#include <algorithm>
#include <fstream>
#include <thread>

#include "daemon/process/child_process.hpp"
#include "daemon/process/sandbox.hpp"
#include "daemon/process/unique_fd.hpp"
#include "process_test_support.hpp"

namespace mh::daemon::test {
namespace {

// A Unix socket server in the gate: answers each line of each connection with "pong:<line>",
// for `connections` connections, then stops. Blocking, bounded by a poll timeout.
class PongServer {
 public:
  PongServer(const std::filesystem::path& path, int connections) {
    listener_.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof address.sun_path - 1);
    if (::bind(listener_.get(), reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(listener_.get(), 16) != 0)
      throw std::runtime_error("cannot listen on " + path.string());
    ::chmod(path.c_str(), 0666);  // the run's user connects (its uid is not ours under a root test)
    thread_ = std::thread([this, connections] {
      for (int i = 0; i < connections; ++i) {
        pollfd wait{listener_.get(), POLLIN, 0};
        if (::poll(&wait, 1, 30'000) != 1) return;
        UniqueFd peer(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
        std::string line;
        char c;
        while (::read(peer.get(), &c, 1) == 1) {
          if (c != '\n') {
            line.push_back(c);
            continue;
          }
          (void)write_all(peer.get(), "pong:" + line + "\n");
          line.clear();
        }
        ++served_;
      }
    });
  }
  ~PongServer() {
    if (thread_.joinable()) thread_.join();
  }
  int served() {
    if (thread_.joinable()) thread_.join();
    return served_;
  }

 private:
  UniqueFd listener_;
  std::thread thread_;
  int served_ = 0;
};

class SandboxNetworkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(spec_.bwrap.c_str(), X_OK) != 0) GTEST_SKIP() << "no " << spec_.bwrap;
    spec_.exec_helper = MH_TEST_EXEC_HELPER;
    work_ = run_.path() / "work";
    scratch_ = run_.path() / "scratch";
    gate_ = run_.path() / "gate";
    std::filesystem::create_directories(work_);
    std::filesystem::create_directories(scratch_);
    ASSERT_EQ(::mkdir(gate_.c_str(), 0755), 0);
    if (::geteuid() == 0) {  // as a root daemon runs it: an unprivileged uid of its own
      spec_.run_as = SandboxSpec::RunAs{kUid, kUid};
      ::chmod(run_.path().c_str(), 0755);
      for (const auto& dir : {work_, scratch_})
        ASSERT_EQ(::chown(dir.c_str(), kUid, kUid), 0) << dir;
    }
    spec_.own_network = SandboxSpec::OwnNetwork{
        gate_, {SandboxSpec::Relay{kGatewayRelayPort, std::filesystem::path(kGateInView) / "model.sock"}}};
  }

  struct Result {
    std::string out, err;
    protocol::ProcessTermination termination;
  };
  Result run_bash(const std::string& script) {
    auto plan = make_plan("/usr/bin/bash", {"-c", script}, {{"PATH", "/usr/bin:/bin"}}, work_);
    plan.directories = {scratch_};
    plan.run_marker = {"MH_TEST_RUN", marker_};
    auto child = ChildProcess::spawn(strand_, sandboxed(plan, spec_));
    if (!child) throw std::runtime_error(child.error());
    Result r;
    r.out = io_.run(strand_, read_to_eof((*child)->stdout_pipe()), 60s);
    r.err = io_.run(strand_, read_to_eof((*child)->stderr_pipe()), 60s);
    r.termination = io_.run(strand_, (*child)->async_wait(), 60s);
    return r;
  }

  // Whether every process carrying this test's run marker (the hops, the relay) ends within
  // `timeout` on its own, waited for on pidfds.
  bool marked_processes_end(std::chrono::milliseconds timeout) {
    for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
      const std::string name = entry.path().filename().string();
      if (name.find_first_not_of("0123456789") != std::string::npos) continue;
      std::ifstream in(entry.path() / "environ");
      std::string environ((std::istreambuf_iterator<char>(in)), {});
      if (environ.find("MH_TEST_RUN=" + marker_) == std::string::npos) continue;
      UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, std::stoi(name), 0)));
      if (!pidfd) continue;  // gone meanwhile
      pollfd wait{pidfd.get(), POLLIN, 0};
      if (::poll(&wait, 1, static_cast<int>(timeout.count())) != 1) {
        ::kill(std::stoi(name), SIGKILL);  // never leave one behind
        return false;
      }
    }
    return true;
  }

  static constexpr uid_t kUid = 61241;
  std::string marker_ = unique_marker_value("netns");
  IoThreads io_{1};
  IoThreads::Strand strand_ = io_.make_strand();
  TempDir run_;
  SandboxSpec spec_;
  std::filesystem::path work_, scratch_, gate_;
};

// The run reaches the gate's socket through its own loopback, and nothing on the host's: a TCP
// listener on the host's 127.0.0.1 is refused from inside (another namespace's loopback), and
// never sees a connection. The relay is not the vendor's child (a shell's `wait` returns at once)
// and the vendor holds no socket it did not open.
TEST_F(SandboxNetworkTest, TheRunReachesTheGateThroughItsLoopbackAndNothingOnTheHosts) {
  PongServer server(gate_ / "model.sock", 2);
  UniqueFd host(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(host.get(), reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(host.get(), 16), 0);
  socklen_t length = sizeof address;
  ASSERT_EQ(::getsockname(host.get(), reinterpret_cast<sockaddr*>(&address), &length), 0);
  const std::string host_port = std::to_string(ntohs(address.sin_port));

  auto r = run_bash(
      "n=0; for f in /proc/$$/fd/*; do case $(readlink $f) in socket:*) n=$((n+1));; esac; done; "
      "echo inherited-sockets:$n; "
      "wait; echo waited; "
      "for i in 1 2; do exec 3<>/dev/tcp/127.0.0.1/41000 || exit 3; echo ping$i >&3; read -r line <&3; "
      "echo \"$line\"; exec 3<&-; done; "
      "if (exec 4<>/dev/tcp/127.0.0.1/" +
      host_port + ") 2>/dev/null; then echo host-reached; else echo host-unreachable; fi");
  EXPECT_EQ(r.out, "inherited-sockets:0\nwaited\npong:ping1\npong:ping2\nhost-unreachable\n") << r.err;
  EXPECT_EQ(r.termination.code, 0) << r.err;
  EXPECT_EQ(server.served(), 2);
  pollfd pending{host.get(), POLLIN, 0};
  EXPECT_EQ(::poll(&pending, 1, 0), 0) << "a connection reached the host's loopback listener";
  // The relay ends with the vendor (and bwrap's reaper with it): nothing of the run is left.
  EXPECT_TRUE(marked_processes_end(10s)) << "a process of the run outlived its vendor";
}

// Nothing listens at the gate: the vendor's connection is accepted by the relay (so its first
// connect never races the relay's start) and closed at once, as a refused one would be.
TEST_F(SandboxNetworkTest, AGateWithNoServerClosesTheConnection) {
  auto r = run_bash(
      "exec 3<>/dev/tcp/127.0.0.1/41000 || exit 3; echo ping >&3 2>/dev/null; "
      "if read -r line <&3; then echo got:$line; else echo closed; fi");
  EXPECT_EQ(r.out, "closed\n") << r.err;
}

TEST_F(SandboxNetworkTest, MhExecRefusesAMalformedRelayByName) {
  for (const auto& [relay, named] :
       std::vector<std::pair<std::string, std::string>>{{"41000", "is not PORT=SOCKET"},
                                                        {"0=/run/metaharness/model.sock", "names no port"},
                                                        {"70000=/run/metaharness/model.sock", "names no port"},
                                                        {"41000=model.sock", "names no absolute socket path"},
                                                        {"41000=/" + std::string(120, 'x'), "too long"}}) {
    auto plan = make_plan(MH_TEST_EXEC_HELPER, {"--relay", relay, "--", "/bin/true"}, {}, work_);
    auto child = ChildProcess::spawn(strand_, plan);
    ASSERT_TRUE(child) << child.error();
    std::string err = io_.run(strand_, read_to_eof((*child)->stderr_pipe()), 30s);
    auto termination = io_.run(strand_, (*child)->async_wait(), 30s);
    EXPECT_EQ(termination.code, 127) << relay;
    EXPECT_NE(err.find(named), std::string::npos) << relay << ": " << err;
  }
}

TEST(SandboxArgs, AnOwnNetworkUnsharesItBindsTheGateAndRelaysAndMovesTheHookChannel) {
  auto plan = make_plan("/opt/vendor/cli", {"--flag"}, {{"A", "1"}, {"METAHARNESS_HOOK_SOCKET", "@metaharness/hook/r"}},
                        "/srv/run/work");
  plan.hook_channel = adapters::HookChannel{"METAHARNESS_HOOK_SOCKET", "@metaharness/hook/r", {}};
  SandboxSpec spec;
  spec.exec_helper = "/usr/lib/metaharness/mh-exec";
  spec.own_network = SandboxSpec::OwnNetwork{"/srv/run/gate",
                                             {SandboxSpec::Relay{kGatewayRelayPort, "/run/metaharness/model.sock"},
                                              SandboxSpec::Relay{kEgressRelayPort, "/run/metaharness/egress.sock"}}};
  auto out = sandboxed(plan, spec);
  auto has = [&](std::vector<std::string> run) {
    return std::search(out.args.begin(), out.args.end(), run.begin(), run.end()) != out.args.end();
  };
  EXPECT_TRUE(has({"--unshare-net"}));
  EXPECT_TRUE(has({"--ro-bind", "/srv/run/gate", "/run/metaharness"}));
  const std::vector<std::string> tail = {"/usr/lib/metaharness/mh-exec",
                                         "--relay",
                                         "41000=/run/metaharness/model.sock",
                                         "--relay",
                                         "41001=/run/metaharness/egress.sock",
                                         "--",
                                         "/opt/vendor/cli",
                                         "--flag"};
  ASSERT_GE(out.args.size(), tail.size());
  EXPECT_EQ(std::vector<std::string>(out.args.end() - static_cast<long>(tail.size()), out.args.end()), tail);
  ASSERT_TRUE(out.hook_channel);
  EXPECT_EQ(out.hook_channel->address, "/run/metaharness/hook.sock");
  EXPECT_EQ(out.hook_channel->bound_at, "/srv/run/gate/hook.sock");
  ASSERT_TRUE(out.handed_env);
  EXPECT_EQ(*out.handed_env, (std::vector<std::pair<std::string, std::string>>{
                                 {"A", "1"}, {"METAHARNESS_HOOK_SOCKET", "/run/metaharness/hook.sock"}}));

  // network = "host": none of it.
  spec.own_network.reset();
  out = sandboxed(plan, spec);
  EXPECT_FALSE(has({"--unshare-net"}));
  EXPECT_EQ(out.hook_channel->address, "@metaharness/hook/r");
  EXPECT_TRUE(out.hook_channel->bound_at.empty());
}

}  // namespace
}  // namespace mh::daemon::test
