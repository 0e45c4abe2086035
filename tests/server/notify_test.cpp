// The STATUS line to systemd never waits on a listener that does not read.
#include "daemon/server/notify.hpp"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "tests/support/cli_process.hpp"

namespace mh::test {
namespace {

// A bound datagram socket standing in for systemd's notify socket, named in NOTIFY_SOCKET while
// it lives.
class Listener {
 public:
  explicit Listener(const std::string& name) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, name.data(), name.size());
    socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (name[0] == '@')
      a.sun_path[0] = '\0';
    else
      ++len;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), len), 0) << std::strerror(errno);
    ::setenv("NOTIFY_SOCKET", name.c_str(), 1);
  }
  ~Listener() {
    ::unsetenv("NOTIFY_SOCKET");
    ::close(fd_);
  }
  std::string next() {
    char buf[256];
    ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  }

 private:
  int fd_ = -1;
};

TEST(ServerNotify, AStatusReachesAPathOrAnAbstractListener) {
  TempDir dir("notify");
  {
    Listener path((dir.path() / "n.sock").string());
    EXPECT_TRUE(daemon::notify_without_waiting("STATUS=1 active run(s), 0 closed"));
    EXPECT_EQ(path.next(), "STATUS=1 active run(s), 0 closed");
  }
  {
    Listener abstract("@metaharness-notify-test-" + std::to_string(::getpid()));
    EXPECT_TRUE(daemon::notify_without_waiting("STATUS=2"));
    EXPECT_EQ(abstract.next(), "STATUS=2");
  }
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(daemon::notify_without_waiting("STATUS=3")) << "no listener";
}

// sd_notify would block here until somebody read: on the registry's strand, the daemon with it.
TEST(ServerNotify, AListenerThatDoesNotReadGetsItsQueueFullAndTheRestIsDroppedWithoutWaiting) {
  TempDir dir("notify-full");
  Listener listener((dir.path() / "n.sock").string());
  int sent = 0;
  while (sent < 100000 && daemon::notify_without_waiting("STATUS=" + std::to_string(sent)))
    ++sent;
  EXPECT_GT(sent, 0);
  EXPECT_LT(sent, 100000) << "a datagram queue is bounded";
  EXPECT_FALSE(daemon::notify_without_waiting("STATUS=dropped"));
  EXPECT_EQ(listener.next(), "STATUS=0") << "the queue keeps what came first";
  EXPECT_TRUE(daemon::notify_without_waiting("STATUS=after")) << "room again once read";
}

}  // namespace
}  // namespace mh::test
