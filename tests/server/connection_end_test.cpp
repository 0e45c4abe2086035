// How a real daemon lets go of a connection: a peer it refuses, and every peer at its stop. A
// closed connection is one the peer reads to a clean end (never reset, never a lost last line),
// and one the daemon no longer counts.
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

TEST(ConnectionEnd, PeersWithNoRoleReadTheirRefusalAndACleanEndAndAreNotCountedAfterwards) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to connect as a second uid (nobody)";
  // The second uid must reach the socket: every directory above it must let it pass, which a
  // checkout's (say a mkdtemp 0700 one) need not. So the daemon lives under /tmp, in a directory
  // of its own that others may traverse but not read.
  char templ[] = "/tmp/mh-no-role-XXXXXX";
  ASSERT_NE(::mkdtemp(templ), nullptr) << std::strerror(errno);
  const std::filesystem::path dir(templ);
  struct RemoveAtEnd {
    std::filesystem::path path;
    ~RemoveAtEnd() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } remove_at_end{dir};
  std::filesystem::permissions(dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_exec |
                                        std::filesystem::perms::others_exec);
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
