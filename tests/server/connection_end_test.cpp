// How a real daemon lets go of a connection: a peer it refuses, and every peer at its stop. A
// closed connection is one the peer reads to a clean end (never reset, never a lost last line),
// and one the daemon no longer counts.
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "daemon/run/run_dir.hpp"
#include "daemon/stream/event_log.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/peer_as_uid.hpp"

namespace mh::test {
namespace {

constexpr uid_t kNobody = 65534;

// What a peer running as `uid` saw after sending `request` at once: "FORBIDDEN eof" when it read
// the refusal and then a clean end. Forks: the child drops to `uid` and reports through a pipe.
std::string refused_peer_sees(const std::filesystem::path& socket, uid_t uid, const std::string& request) {
  auto report = as_peer_of_uid(uid, socket, std::chrono::seconds(10), [&](int fd) {
    // The refusal may come (and the daemon close) before this is sent: a write then fails
    // EPIPE, as a client's would, and the refusal is still there to read.
    (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    std::string got;
    char chunk[4096];
    ssize_t n;
    while ((n = ::read(fd, chunk, sizeof chunk)) > 0)
      got.append(chunk, static_cast<std::size_t>(n));
    std::string seen =
        got.find("\"FORBIDDEN\"") != std::string::npos ? "FORBIDDEN" : "no refusal: " + got.substr(0, 80);
    return seen + (n == 0 ? " eof" : std::string(" ") + std::strerror(errno));
  });
  return report.seen;
}

// A directory of its own under /tmp that other uids may traverse but not read (a checkout's, say
// a mkdtemp 0700 one, need not let a second uid reach the socket), removed at the end. `path` is
// empty when it could not be made.
struct TraversableDir {
  explicit TraversableDir(std::string templ) {
    if (::mkdtemp(templ.data()) == nullptr) return;
    path = templ;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                           std::filesystem::perms::others_exec);
  }
  ~TraversableDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  TraversableDir(const TraversableDir&) = delete;
  TraversableDir& operator=(const TraversableDir&) = delete;
  std::filesystem::path path;
};

TEST(ConnectionEnd, PeersWithNoRoleReadTheirRefusalAndACleanEndAndAreNotCountedAfterwards) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as a second uid (nobody)";
  // The second uid must reach the socket: every directory above it must let it pass, which a
  // checkout's (say a mkdtemp 0700 one) need not. So the daemon lives under /tmp, in a directory
  // of its own that others may traverse but not read.
  const TraversableDir home("/tmp/mh-no-role-XXXXXX");
  ASSERT_FALSE(home.path.empty()) << std::strerror(errno);
  const std::filesystem::path& dir = home.path;
  DaemonUnderTest daemon(dir, "[paths]\nsocket_mode = \"0666\"\n[server]\nmax_connections = 4\n");
  ASSERT_TRUE(daemon.wait_notify("READY=1")) << daemon.stderr_text();
  // Each sends its request at once, before the refusal arrives: the bytes the daemon never reads
  // must not turn its close into a reset.
  const std::string request = socket_request("status") + "\n" + socket_request("list") + "\n";
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(refused_peer_sees(daemon.socket(), kNobody, request), "FORBIDDEN eof") << "peer " << i;
  // Twelve refused peers under max_connections = 4: none of them still holds a slot.
  SocketClient admin(daemon.socket());
  auto status = admin.request(socket_request("status"));
  ASSERT_TRUE(status);
  ASSERT_EQ(status->str("reply"), "status") << status->raw;
  auto parsed = protocol::parse_json(status->raw);
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->as_object().at("connections").to_number<int>(), 1) << status->raw;
}

// A peer of `uid` that connects, asks `status`, and keeps its connection open until it goes:
// what the daemon first answered is in `first`. Forks: the child drops to the uid.
class HeldPeer {
 public:
  HeldPeer(const std::filesystem::path& socket, uid_t uid) {
    int report[2], hold[2];
    if (::pipe(report) != 0 || ::pipe(hold) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(report[0]);
      ::close(hold[1]);
      std::string seen = "no drop";
      if (::setgroups(0, nullptr) == 0 && ::setresgid(uid, uid, uid) == 0 && ::setresuid(uid, uid, uid) == 0) {
        int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
        seen = "no connect";
        if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
          const std::string request = R"({"format":"metaharness.socket/1","request":"status"})"
                                      "\n";
          // A refused connection may be closed before this is sent: EPIPE, never SIGPIPE.
          (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
          seen.clear();
          char c;
          ssize_t n;
          while ((n = ::read(fd, &c, 1)) == 1 && c != '\n')
            seen.push_back(c);
          if (n == 0) seen += " [eof]";
          if (n < 0) seen += " [read: " + std::string(std::strerror(errno)) + "]";
        }
      }
      seen.push_back('\n');
      (void)!::write(report[1], seen.data(), seen.size());
      char c;
      while (::read(hold[0], &c, 1) > 0) {
      }  // held until the test lets go
      ::_exit(0);
    }
    ::close(report[1]);
    ::close(hold[0]);
    hold_ = hold[1];
    char c;
    while (::read(report[0], &c, 1) == 1 && c != '\n')
      first.push_back(c);
    ::close(report[0]);
  }
  ~HeldPeer() {
    if (hold_ >= 0) ::close(hold_);
    if (pid_ > 0) ::waitpid(pid_, nullptr, 0);
  }
  HeldPeer(const HeldPeer&) = delete;
  HeldPeer& operator=(const HeldPeer&) = delete;
  std::string first;

 private:
  pid_t pid_ = -1;
  int hold_ = -1;
};

// The attack (an outside tester's, as one observer uid): it held 4,100 idle connections, and
// root's own `metaharness status` was refused BUSY — the admin could not even halt a run. One
// uid holds at most server.max_connections_per_uid, and an admin is admitted within a reserve
// past server.max_connections.
TEST(ConnectionEnd, OneUidHoldsAtMostItsShareAndAnAdminIsStillAdmittedWhenTheDaemonIsFull) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as a second uid (nobody)";
  const TraversableDir home("/tmp/mh-slots-XXXXXX");
  ASSERT_FALSE(home.path.empty()) << std::strerror(errno);
  const std::filesystem::path& dir = home.path;
  DaemonUnderTest daemon(dir, "[paths]\nsocket_mode = \"0666\"\n[access]\nobserve_uids = [" + std::to_string(kNobody) +
                                  "]\n[server]\nmax_connections = 3\nmax_connections_per_uid = 2\n");
  ASSERT_TRUE(daemon.wait_notify("READY=1")) << daemon.stderr_text();
  HeldPeer first(daemon.socket(), kNobody), second(daemon.socket(), kNobody);
  EXPECT_NE(first.first.find(R"("reply":"status")"), std::string::npos) << first.first;
  EXPECT_NE(second.first.find(R"("reply":"status")"), std::string::npos) << second.first;
  {
    HeldPeer third(daemon.socket(), kNobody);
    EXPECT_NE(third.first.find(R"("code":"BUSY")"), std::string::npos) << third.first;
    EXPECT_NE(third.first.find("max_connections_per_uid"), std::string::npos) << third.first;
  }
  // Root (an admin) fills the last slot, then is admitted past it; a non-admin is not.
  SocketClient root_1(daemon.socket()), root_2(daemon.socket());
  for (SocketClient* c : {&root_1, &root_2}) {
    auto status = c->request(socket_request("status"));
    ASSERT_TRUE(status);
    EXPECT_EQ(status->str("reply"), "status") << status->raw;
  }
  // Both of nobody's slots are taken, and the daemon is past max_connections: nobody's next is
  // refused either way; one of nobody's goes, and the daemon is still full for a non-admin.
  HeldPeer over(daemon.socket(), kNobody);
  EXPECT_NE(over.first.find(R"("code":"BUSY")"), std::string::npos) << over.first;
}

TEST(ConnectionEnd, AShutdownReplyQueuedBehindAFullOutboxIsStillDeliveredBeforeTheDaemonExits) {
  TempDir dir("stop-flush");
  // A closed run with a stream far larger than the socket buffers, found at start.
  auto runs = daemon::RunDir::runs_of(dir.path() / "state");
  std::filesystem::create_directories(runs / "big");
  {
    auto log = daemon::EventLog::create(daemon::RunDir(runs / "big").events(), "big");
    ASSERT_TRUE(log);
    for (int i = 0; i < 4000; ++i)
      ASSERT_TRUE(log->append(protocol::ev::Warning{"FILLER", std::string(200, 'x')}));
    ASSERT_TRUE(log->close(protocol::CloseReason::completed, protocol::ProcessTermination{}));
  }
  daemon::RunMeta meta;
  meta.owner_uid = ::geteuid();
  meta.adapter = "claude";
  ASSERT_FALSE(daemon::RunDir(runs / "big").write_meta(meta));
  DaemonUnderTest daemon(dir.path());
  ASSERT_TRUE(daemon.wait_notify("READY=1")) << daemon.stderr_text();

  // The tail fills the kernel's buffers and the outbox while this peer reads nothing; the
  // shutdown's reply queues behind it, and the daemon, with no run to wait for, stops at once.
  SocketClient c(daemon.socket());
  c.send(socket_request("tail", R"("run_id":"big")"));
  c.send(socket_request("shutdown", "", "stop-1"));
  ASSERT_TRUE(daemon.wait_notify("STOPPING=1"));
  auto reply = c.wait_reply("shutting_down", 30s);
  ASSERT_TRUE(reply) << "the reply was lost at the stop; " << c.lines().size() << " lines arrived";
  EXPECT_EQ(reply->str("id"), "stop-1");
  while (c.next_line(10s)) {
  }  // what the tail still had queued
  EXPECT_TRUE(c.eof()) << "the connection ends cleanly";
  EXPECT_EQ(daemon.wait_exit(30s), 0) << daemon.stderr_text();
}

}  // namespace
}  // namespace mh::test
