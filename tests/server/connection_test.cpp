// What a Connection (daemon/server/connection.hpp) writes: every line sent arrives whole and in
// the order it was sent, whether send() wrote it at once (the writer asleep, nothing queued) or
// queued it behind a line the socket could not take. A real io_context and a socketpair whose
// sending buffer is small, so that the first big line fills it.
#include "daemon/server/connection.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace {

namespace asio = boost::asio;
namespace daemon = mh::daemon;
using namespace std::chrono_literals;

constexpr auto kBound = 10s;  // an upper bound on every wait, never a pause

class IgnoreLines : public daemon::Connection::Handler {
 public:
  asio::awaitable<void> on_line(std::string) override { co_return; }
  asio::awaitable<void> on_oversized(std::string) override { co_return; }
};

// A connection on one end of a socketpair, served by an io_context on a thread of its own; the
// test reads the other end.
class ConnectionOnAPair : public ::testing::Test {
 protected:
  void SetUp() override {
    int fds[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    const int small = 16 * 1024;  // the kernel doubles it; still far below the big line
    ASSERT_EQ(::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
    peer_ = fds[1];
    connection_ = std::make_shared<daemon::Connection>(
        daemon::local_socket(io_, asio::local::stream_protocol(), fds[0]), 1 << 20);
    connection_->start(std::make_shared<IgnoreLines>());
    thread_ = std::thread([this] { io_.run(); });
  }
  void TearDown() override {
    asio::post(io_, [c = connection_] { c->close_after_flush(); });
    connection_.reset();
    work_.reset();
    ::close(peer_);  // the connection's reader sees the end and lets go
    thread_.join();
  }

  // Runs `f` on the io thread (the connection's executor) and waits for it.
  void on_io(std::function<void()> f) {
    auto done = asio::post(io_, asio::use_future(std::move(f)));
    ASSERT_EQ(done.wait_for(kBound), std::future_status::ready);
  }

  // Reads the peer's end until `bytes` have come, within the bound.
  std::string read_peer(std::size_t bytes) {
    std::string got;
    const auto give_up = std::chrono::steady_clock::now() + kBound;
    char chunk[65536];
    while (got.size() < bytes && std::chrono::steady_clock::now() < give_up) {
      ssize_t n = ::recv(peer_, chunk, sizeof chunk, MSG_DONTWAIT);
      if (n > 0) {
        got.append(chunk, static_cast<std::size_t>(n));
        continue;
      }
      pollfd p{peer_, POLLIN, 0};
      ::poll(&p, 1, 100);  // a wait for bytes, bounded by give_up above
    }
    return got;
  }

  asio::io_context io_{1};
  asio::executor_work_guard<asio::io_context::executor_type> work_ = asio::make_work_guard(io_);
  std::shared_ptr<daemon::Connection> connection_;
  std::thread thread_;
  int peer_ = -1;
};

TEST_F(ConnectionOnAPair, ALineSentWhileNothingIsQueuedArrivesAtOnce) {
  on_io([&] { connection_->send("first"); });
  EXPECT_EQ(read_peer(6), "first\n");
  on_io([&] { connection_->send("second"); });
  EXPECT_EQ(read_peer(7), "second\n");
}

TEST_F(ConnectionOnAPair, LinesSentBehindALineTheSocketCouldNotTakeArriveWholeAndInOrder) {
  // One line far over the socket's buffer (written in part at once, the rest queued), then small
  // lines in the same turn (queued behind it, even once the peer has read some), then, once all of it was read, more
  // small lines (written at once again), and a big one among them.
  const std::string big(1 << 20, 'x');
  std::string expected = big + "\n";
  std::vector<std::string> small;
  for (int i = 0; i < 50; ++i)
    small.push_back("line " + std::to_string(i));
  std::string got;
  on_io([&] {
    connection_->send(big);
    // The peer takes some of it before the writer had a turn: the socket has room again, but
    // what follows must still wait behind the rest of the big line.
    got = read_peer(1);  // all that is there
    for (const auto& line : small)
      connection_->send(line);
  });
  for (const auto& line : small)
    expected += line + "\n";
  got += read_peer(expected.size() - got.size());
  ASSERT_EQ(got.size(), expected.size());
  EXPECT_TRUE(got == expected) << "the bytes differ from what was sent, in content or order";

  std::string more;
  on_io([&] {
    connection_->send("after 1");
    connection_->send(big);
    connection_->send("after 2");
  });
  more = "after 1\n" + big + "\nafter 2\n";
  got = read_peer(more.size());
  ASSERT_EQ(got.size(), more.size());
  EXPECT_TRUE(got == more) << "the bytes differ from what was sent, in content or order";
}

}  // namespace

// The attack (an outside tester's, as an observer): requests pipelined on one connection that
// never reads its answers grew the daemon's outbox without bound (a `list` of a run with a
// 900 KB label, 1,200 times: +1 GB). The connection now reads no further request while its
// answers wait above the outbox's high-water mark: the peer's writes stop at the socket's buffer,
// the daemon holds about one answer past the mark, and once the peer reads, every request is
// answered, in order.
class AnswerBig : public daemon::Connection::Handler {
 public:
  static constexpr std::size_t kAnswer = 100 * 1024;
  std::weak_ptr<daemon::Connection> connection;
  std::atomic<std::size_t> lines{0};
  asio::awaitable<void> on_line(std::string) override {
    ++lines;
    if (auto c = connection.lock()) c->send(std::string(kAnswer, 'a'));
    co_return;
  }
  asio::awaitable<void> on_oversized(std::string) override { co_return; }
};

// A connection answering with AnswerBig on one end of a socketpair, served by an io_context on a
// thread of its own; the test is the peer, on the other end.
struct AnsweringPair {
  AnsweringPair() {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) return;
    end = fds[0];
    peer = fds[1];
    connection =
        std::make_shared<daemon::Connection>(daemon::local_socket(io, asio::local::stream_protocol(), fds[0]), 1 << 20);
    handler->connection = connection;
    connection->start(handler);
    thread = std::thread([this] { io.run(); });
  }
  ~AnsweringPair() {
    if (!thread.joinable()) return;
    asio::post(io, [c = connection] { c->close_after_flush(); });
    connection.reset();
    work.reset();
    ::close(peer);
    thread.join();
  }
  AnsweringPair(const AnsweringPair&) = delete;
  AnsweringPair& operator=(const AnsweringPair&) = delete;

  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work = asio::make_work_guard(io);
  std::shared_ptr<AnswerBig> handler = std::make_shared<AnswerBig>();
  std::shared_ptr<daemon::Connection> connection;
  std::thread thread;
  int end = -1;   // the connection's
  int peer = -1;  // the test's
};

TEST(ConnectionBackpressure, APeerThatAsksAndNeverReadsIsNotReadFromWhileItsAnswersWaitAboveTheMark) {
  AnsweringPair pair;
  ASSERT_TRUE(pair.thread.joinable());
  const int peer = pair.peer;
  auto& handler = pair.handler;
  // What the kernel holds of the answers, besides the outbox: the daemon end's send buffer and
  // the peer's receive buffer.
  int send_buffer = 0, receive_buffer = 0;
  socklen_t size = sizeof(int);
  ASSERT_EQ(::getsockopt(pair.end, SOL_SOCKET, SO_SNDBUF, &send_buffer, &size), 0);
  size = sizeof(int);
  ASSERT_EQ(::getsockopt(peer, SOL_SOCKET, SO_RCVBUF, &receive_buffer, &size), 0);

  // The peer asks without reading, until the socket takes no more and stays full.
  const std::string request = std::string(1023, 'q') + "\n";
  std::size_t asked = 0;
  constexpr std::size_t kCap = 4096;  // requests: far past anything a stopped reader lets through
  while (asked < kCap) {
    ssize_t n = ::send(peer, request.data(), request.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n == static_cast<ssize_t>(request.size())) {
      ++asked;
      continue;
    }
    ASSERT_TRUE(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) << "a partial or failed send: " << n;
    pollfd p{peer, POLLOUT, 0};
    if (::poll(&p, 1, 2000) == 0) break;  // full for 2 s: the daemon reads no more
  }
  EXPECT_LT(asked, kCap) << "the daemon kept reading requests whose answers nobody read";
  const std::size_t handled = handler->lines;
  EXPECT_LE(handled * AnswerBig::kAnswer, daemon::Connection::kAnswersHighWater +
                                              static_cast<std::size_t>(send_buffer + receive_buffer) +
                                              2 * AnswerBig::kAnswer)
      << handled << " requests were answered into an outbox nobody read";

  // The peer reads: every request is answered, in order.
  const std::size_t expected = asked * (AnswerBig::kAnswer + 1);
  std::size_t got = 0;
  std::vector<char> chunk(1 << 16);
  const auto give_up = std::chrono::steady_clock::now() + kBound * 6;
  while (got < expected && std::chrono::steady_clock::now() < give_up) {
    ssize_t n = ::recv(peer, chunk.data(), chunk.size(), MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<std::size_t>(n);
      continue;
    }
    pollfd p{peer, POLLIN, 0};
    ::poll(&p, 1, 100);  // a wait for bytes, bounded by give_up above
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(handler->lines, asked);
}

// A follower that does not read its stream still has its requests read: only answers count
// against the mark, so a decision (or a long command) sent while megabytes of its stream wait
// unread is handed over, never held behind the stream (a client that writes before it reads would
// deadlock otherwise).
TEST(ConnectionBackpressure, AStreamNobodyReadsHoldsNoRequestBack) {
  AnsweringPair pair;
  ASSERT_TRUE(pair.thread.joinable());
  const int peer = pair.peer;
  auto& handler = pair.handler;
  // 4 MiB of a stream, unread.
  auto streamed = asio::post(pair.io, asio::use_future([&] {
                               for (int i = 0; i < 64; ++i)
                                 pair.connection->send_streamed(std::string(64 * 1024, 's'));
                             }));
  ASSERT_EQ(streamed.wait_for(kBound), std::future_status::ready);
  const std::string request = "decide\n";
  ASSERT_EQ(::send(peer, request.data(), request.size(), MSG_NOSIGNAL), static_cast<ssize_t>(request.size()));
  const auto give_up = std::chrono::steady_clock::now() + kBound;
  while (handler->lines == 0 && std::chrono::steady_clock::now() < give_up) {
    pollfd p{peer, 0, 0};
    ::poll(&p, 1, 10);  // a wait for the handler, bounded by give_up above
  }
  EXPECT_EQ(handler->lines, 1u) << "the request waited behind a stream nobody read";
}
