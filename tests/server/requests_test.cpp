// The request table, a session's dispatch through it, and a connection's framing, each driven
// over a socketpair on a real io_context (no daemon process, no run).
#include "daemon/server/requests.hpp"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <future>
#include <map>
#include <set>
#include <thread>

#include "daemon/server/connection.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"
#include "daemon/server/socket_api.hpp"
#include "tests/support/cli_process.hpp"

namespace mh::test {
namespace {

namespace asio = boost::asio;
using daemon::Role;

TEST(ServerRequests, TheTableNamesEveryRequestOnceWithTheRoleItNeedsAndAHandler) {
  // docs/socket-api.md, "Access".
  const std::map<std::string, Role> documented = {
      {"list", Role::observe},   {"get", Role::observe},    {"tail", Role::observe},    {"status", Role::observe},
      {"submit", Role::control}, {"attach", Role::control}, {"command", Role::control}, {"halt", Role::control},
      {"shutdown", Role::admin}, {"viewer", Role::observe}, {"budget", Role::observe}};
  std::map<std::string, Role> table;
  std::set<daemon::RequestHandler> handlers;
  for (const auto& def : daemon::request_table()) {
    EXPECT_FALSE(def.name.empty());
    EXPECT_NE(def.needs, Role::none) << def.name;
    EXPECT_NE(def.run, nullptr) << def.name;
    EXPECT_TRUE(table.emplace(std::string(def.name), def.needs).second) << "twice: " << def.name;
    handlers.insert(def.run);
    EXPECT_EQ(daemon::find_request(def.name), &def);
  }
  EXPECT_EQ(table, documented);
  EXPECT_EQ(handlers.size(), table.size()) << "one handler per request";
  EXPECT_EQ(daemon::find_request("fly"), nullptr);
  EXPECT_EQ(daemon::request_vocabulary(),
            "submit, list, get, attach, tail, command, halt, status, shutdown, viewer, budget");
}

TEST(ServerRequests, AnUnknownRequestIsRefusedNamingTheTablesVocabulary) {
  auto unknown = daemon::read_request(R"({"format":"metaharness.socket/1","request":"fly","id":"f"})");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, "UNKNOWN_REQUEST");
  EXPECT_EQ(unknown.error().id, "f");
  for (const auto& def : daemon::request_table())
    EXPECT_NE(unknown.error().reason.find(std::string(def.name)), std::string::npos) << def.name;
  EXPECT_NE(unknown.error().reason.find(daemon::request_vocabulary()), std::string::npos) << unknown.error().reason;
  for (const auto& def : daemon::request_table()) {
    auto known =
        daemon::read_request(R"({"format":"metaharness.socket/1","request":")" + std::string(def.name) + "\"}");
    ASSERT_TRUE(known) << def.name;
    EXPECT_EQ(known->name, def.name);
  }
}

// The daemon's side of a socketpair, served on a real io_context by one thread.
class TestServer final : public daemon::Server {
 public:
  explicit TestServer(daemon::DaemonConfig c) : Server(std::move(c)) {}
  void begin_shutdown(const std::string& why) override { shutdown.set_value(why); }
  std::promise<std::string> shutdown;

 protected:
  void drained() override {}
};

daemon::DaemonConfig test_config(const std::filesystem::path& dir) {
  daemon::DaemonConfig c;
  c.state_dir = dir;
  c.socket = dir / "s";
  c.threads = 1;
  c.max_line_bytes = 64;
  return c;
}

// The client's end: lines with bounded waits.
class Peer {
 public:
  explicit Peer(int fd) : fd_(fd) {}
  ~Peer() { ::close(fd_); }
  void send(const std::string& bytes) { ASSERT_EQ(::write(fd_, bytes.data(), bytes.size()), ssize_t(bytes.size())); }
  void close_write() { ::shutdown(fd_, SHUT_WR); }
  // The next line; nullopt at EOF or after the timeout.
  std::optional<std::string> line(std::chrono::milliseconds timeout = 10s) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      if (auto nl = buffer_.find('\n'); nl != std::string::npos) {
        std::string out = buffer_.substr(0, nl);
        buffer_.erase(0, nl + 1);
        return out;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) != 1) return std::nullopt;
      char chunk[4096];
      ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n == 0) eof_ = true;
      if (n < 0) error_ = errno;
      if (n <= 0) return std::nullopt;
      buffer_.append(chunk, static_cast<std::size_t>(n));
    }
  }
  // A clean end of stream: the daemon shut its side after its last line.
  bool eof() const { return eof_; }
  // The errno of a failed read (ECONNRESET when the daemon dropped the connection unflushed).
  int error() const { return error_; }

 private:
  int fd_;
  std::string buffer_;
  bool eof_ = false;
  int error_ = 0;
};

std::string field(const std::string& line, std::string_view key) {
  auto v = protocol::parse_json(line);
  if (!v || !v->is_object()) return "";
  auto* f = v->get_object().if_contains(key);
  return f && f->is_string() ? std::string(f->get_string()) : "";
}

class ServerSession : public ::testing::Test {
 protected:
  void SetUp() override {
    server = std::make_shared<TestServer>(test_config(dir.path()));
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    daemon::local_socket socket(asio::make_strand(server->io));
    socket.assign(asio::local::stream_protocol(), pair[0]);
    connection = std::make_shared<daemon::Connection>(std::move(socket), server->config.max_line_bytes);
    peer = std::make_unique<Peer>(pair[1]);
    work.emplace(server->io.get_executor());
    thread = std::thread([io = &server->io] { io->run(); });
  }
  void TearDown() override {
    work.reset();
    server->io.stop();
    thread.join();
  }

  void serve(Role role) {
    connection->start(std::make_shared<daemon::Session>(
        server, connection, daemon::PeerCredentials{::geteuid(), ::getegid(), ::getpid()}, role));
  }
  // Serves the peer, which at once sends `lines`.
  void serve(Role role, const std::string& lines) {
    serve(role);
    peer->send(lines);
  }

  static std::string request(std::string_view name, std::string_view id) {
    return daemon::request_line(name, std::string(id)) + "\n";
  }

  // The daemon shut its side after its last line: end of stream, no reset.
  void expect_clean_end() {
    EXPECT_FALSE(peer->line()) << "nothing after the last answer";
    EXPECT_EQ(peer->error(), 0) << std::strerror(peer->error());
    EXPECT_TRUE(peer->eof());
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::shared_ptr<TestServer> server;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  std::shared_ptr<daemon::Connection> connection;
  std::unique_ptr<Peer> peer;
  std::thread thread;
};

TEST_F(ServerSession, ARequestBeyondThePeersRoleIsRefusedForbiddenNamingTheRoleAndTheConnectionCloses) {
  serve(Role::observe, request("status", "s1") + request("submit", "x1") + request("status", "s2"));
  auto status = peer->line();
  ASSERT_TRUE(status);
  EXPECT_EQ(field(*status, "reply"), "status") << *status;
  EXPECT_EQ(field(*status, "id"), "s1");
  auto refused = peer->line();
  ASSERT_TRUE(refused);
  EXPECT_EQ(field(*refused, "code"), "FORBIDDEN") << *refused;
  EXPECT_EQ(field(*refused, "id"), "x1");
  EXPECT_NE(field(*refused, "reason").find("request submit needs the control role"), std::string::npos) << *refused;
  EXPECT_NE(field(*refused, "reason").find("has observe"), std::string::npos) << *refused;
  expect_clean_end();  // nothing after FORBIDDEN: the second status is not served
}

TEST_F(ServerSession, ShutdownNeedsAdminAndAnAdminsShutdownIsAnsweredThenBegun) {
  serve(Role::admin);
  auto began = server->shutdown.get_future();
  peer->send(request("shutdown", "d1"));
  auto reply = peer->line();
  ASSERT_TRUE(reply);
  EXPECT_EQ(field(*reply, "reply"), "shutting_down") << *reply;
  ASSERT_EQ(began.wait_for(10s), std::future_status::ready);
  EXPECT_NE(began.get().find("a shutdown request from uid " + std::to_string(::geteuid())), std::string::npos);
}

TEST_F(ServerSession, AControllerMayNotShutDown) {
  serve(Role::control, request("shutdown", "d1"));
  auto refused = peer->line();
  ASSERT_TRUE(refused);
  EXPECT_EQ(field(*refused, "code"), "FORBIDDEN") << *refused;
  EXPECT_NE(field(*refused, "reason").find("needs the admin role"), std::string::npos) << *refused;
  EXPECT_EQ(server->shutdown.get_future().wait_for(0s), std::future_status::timeout);
}

TEST_F(ServerSession, AnUnknownRequestIsRefusedByNameAndTheConnectionStaysUsable) {
  serve(Role::observe, R"({"format":"metaharness.socket/1","request":"fly","id":"f1"})"
                       "\n" +
                           request("get", "g1") + request("status", "s1"));
  auto unknown = peer->line();
  ASSERT_TRUE(unknown);
  EXPECT_EQ(field(*unknown, "code"), "UNKNOWN_REQUEST") << *unknown;
  EXPECT_NE(field(*unknown, "reason").find(daemon::request_vocabulary()), std::string::npos) << *unknown;
  auto no_id = peer->line();
  ASSERT_TRUE(no_id);
  EXPECT_EQ(field(*no_id, "code"), "MALFORMED") << *no_id;
  EXPECT_NE(field(*no_id, "reason").find("request get needs a \"run_id\" string"), std::string::npos) << *no_id;
  auto status = peer->line();
  ASSERT_TRUE(status);
  EXPECT_EQ(field(*status, "reply"), "status") << *status;
}

// A handler that records what the connection hands it, and on "hold" keeps the connection open.
class Recorder : public daemon::Connection::Handler {
 public:
  explicit Recorder(std::shared_ptr<daemon::Connection> c) : connection(std::move(c)) {}
  asio::awaitable<void> on_line(std::string line) override {
    if (line == "hold") connection->hold();
    connection->send("line " + line);
    co_return;
  }
  asio::awaitable<void> on_oversized(std::string message) override {
    connection->send("oversized " + message);
    co_return;
  }
  std::shared_ptr<daemon::Connection> connection;
};

// The connection alone, under a handler that only echoes: the framing and the half-close.
class ServerConnection : public ServerSession {
 protected:
  void record() { connection->start(std::make_shared<Recorder>(connection)); }
  // The peer sends `bytes` to a recording connection and half-closes.
  void send_and_half_close(const std::string& bytes) {
    record();
    peer->send(bytes);
    peer->close_write();
  }
};

TEST_F(ServerConnection, ALineOverTheBoundIsHandedOverAsSoonAsItCrossesItAndTheNextLineIsRead) {
  record();
  peer->send(std::string(100, 'x'));  // the bound is 64, and no newline yet
  auto oversized = peer->line();
  ASSERT_TRUE(oversized) << "answered before its newline";
  EXPECT_EQ(oversized->rfind("oversized line 1 is over the 64-byte bound", 0), 0u) << *oversized;
  peer->send(std::string(50, 'x') + "\n\n  \nnext\n");
  auto next = peer->line();
  ASSERT_TRUE(next);
  EXPECT_EQ(*next, "line next") << "the rest of the long line is discarded and blank lines skipped";
}

TEST_F(ServerConnection, AHalfClosedPeerIsAnsweredAndTheConnectionClosesOnceNothingHoldsIt) {
  send_and_half_close("hold\nunterminated");
  EXPECT_EQ(peer->line(), "line hold");
  auto unterminated = peer->line();
  ASSERT_TRUE(unterminated);
  EXPECT_EQ(field(*unterminated, "code"), "UNTERMINATED_LINE") << *unterminated;
  // The half-close has been read (it is what finished the unterminated line); the hold keeps the
  // connection open for what is still being answered, and its release closes it.
  auto c = connection;
  asio::post(c->executor(), [c] {
    c->send("last");
    c->release();
  });
  auto last = peer->line();
  ASSERT_TRUE(last) << "a held connection stays open after the peer half-closed";
  EXPECT_EQ(*last, "last");
  expect_clean_end();
}

TEST_F(ServerConnection, AHalfClosedPeerWithNothingPendingIsClosedAfterItsAnswers) {
  send_and_half_close("one\n");
  EXPECT_EQ(peer->line(), "line one");
  expect_clean_end();
}

TEST_F(ServerConnection, ARefusedPeerThatHadAlreadySentARequestReadsTheRefusalAndThenACleanEnd) {
  // A peer with no role writes its request at once and then reads. Closing a Unix socket with
  // unread bytes in it resets the peer (ECONNRESET), so the daemon reads what it had sent before
  // it lets go: the peer sees the refusal and then end of stream.
  peer->send(request("status", "s1") + request("status", "s2"));
  auto c = connection;
  std::promise<void> started;
  asio::post(c->executor(), [c, &started] {
    c->start_refused(daemon::refusal_line("FORBIDDEN", "no role", std::nullopt));
    started.set_value();
  });
  started.get_future().wait();
  auto refused = peer->line();
  ASSERT_TRUE(refused);
  EXPECT_EQ(field(*refused, "code"), "FORBIDDEN") << *refused;
  expect_clean_end();
}

TEST_F(ServerConnection, AForbiddenRequestFollowedByMoreLinesStillEndsCleanly) {
  serve(Role::observe, request("submit", "x1") + request("status", "s1") + request("status", "s2"));
  auto refused = peer->line();
  ASSERT_TRUE(refused);
  EXPECT_EQ(field(*refused, "code"), "FORBIDDEN") << *refused;
  expect_clean_end();
}

}  // namespace
}  // namespace mh::test
