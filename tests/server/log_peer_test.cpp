// The daemon layer's one logging path, and its one reading of a socket peer's credentials.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "daemon/log.hpp"
#include "daemon/peer.hpp"

namespace mh::test {
namespace {

// Captures what is written to stderr while `f` runs.
template <class F>
std::string stderr_of(F f) {
  int pipes[2];
  EXPECT_EQ(::pipe2(pipes, O_CLOEXEC | O_NONBLOCK), 0);
  int saved = ::dup(STDERR_FILENO);
  ::dup2(pipes[1], STDERR_FILENO);
  f();
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  ::close(pipes[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(pipes[0], buf, sizeof buf)) > 0;)
    out.append(buf, static_cast<std::size_t>(n));
  ::close(pipes[0]);
  return out;
}

TEST(DaemonLog, ALineCarriesItsJournaldPriorityAndTheLevelDropsWhatIsAboveIt) {
  int before = daemon::log_level();
  daemon::set_log_level(4);
  std::string out = stderr_of([] {
    daemon::log(daemon::LogPriority::error, "run r1: the disk is full");
    daemon::log(daemon::LogPriority::warning, "leftover processes");
    daemon::log(daemon::LogPriority::info, "ready");
    daemon::log(daemon::LogPriority::debug, "detail");
  });
  daemon::set_log_level(before);
  EXPECT_EQ(out, "<3>metaharness: run r1: the disk is full\n<4>metaharness: leftover processes\n");
}

TEST(DaemonPeer, TheCredentialsOfASocketPeerAreTheKernelsAndNoneForASocketWithoutOne) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  auto peer = daemon::peer_credentials(pair[0]);
  ::close(pair[0]);
  ::close(pair[1]);
  ASSERT_TRUE(peer);
  EXPECT_EQ(peer->uid, ::geteuid());
  EXPECT_EQ(peer->gid, ::getegid());
  EXPECT_EQ(peer->pid, ::getpid());
  EXPECT_EQ(peer->identity().uid, ::geteuid());
  EXPECT_EQ(peer->identity().pid, ::getpid());
  int pipes[2];
  ASSERT_EQ(::pipe(pipes), 0);
  EXPECT_FALSE(daemon::peer_credentials(pipes[0])) << "a pipe has no peer credentials";
  ::close(pipes[0]);
  ::close(pipes[1]);
}

}  // namespace
}  // namespace mh::test
