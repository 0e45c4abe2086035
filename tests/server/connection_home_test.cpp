// The io threads as a pool of contexts (daemon/server/io_pool.hpp), and where a new connection
// is served (daemon/server/connection_home.hpp): on the context of the run its first request
// names, with nothing of what the peer sent consumed. Real io_contexts and socketpairs; the run
// lookup is a table, so no run is needed.
#include "daemon/server/connection_home.hpp"

#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_future.hpp>
#include <boost/asio/write.hpp>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "daemon/server/io_pool.hpp"
#include "daemon/server/socket_api.hpp"
#include "gtest/gtest.h"

namespace {

namespace asio = boost::asio;
namespace daemon = mh::daemon;
using namespace std::chrono_literals;

constexpr auto kBound = 10s;  // an upper bound on every wait, never a pause

TEST(IoPool, EachContextRunsOnAThreadOfItsOwnAndTheMainOneOnTheCaller) {
  daemon::IoPool pool(3);
  ASSERT_EQ(pool.size(), 3u);
  std::mutex mu;
  std::map<std::size_t, std::thread::id> ran_on;
  std::promise<void> all_ran;
  auto main_waits = asio::make_work_guard(pool.main());  // the daemon's acceptor does this
  for (std::size_t i = 0; i < pool.size(); ++i)
    asio::post(pool.at(i), [&, i] {
      std::lock_guard lock(mu);
      ran_on[i] = std::this_thread::get_id();
      if (ran_on.size() == 3) all_ran.set_value();
    });
  std::thread::id caller;
  std::thread runner([&] {
    caller = std::this_thread::get_id();
    pool.run();
  });
  ASSERT_EQ(all_ran.get_future().wait_for(kBound), std::future_status::ready);
  main_waits.reset();
  pool.stop();
  runner.join();  // run() returns once stopped, with its threads joined
  std::set<std::thread::id> threads;
  for (auto& [i, id] : ran_on)
    threads.insert(id);
  EXPECT_EQ(threads.size(), 3u) << "one thread per context";
  EXPECT_EQ(ran_on[0], caller) << "main() runs on the thread that called run()";
}

TEST(IoPool, NewRunsGoRoundTheContextsInTurn) {
  daemon::IoPool pool(3);
  std::vector<std::size_t> order;
  for (int i = 0; i < 7; ++i)
    order.push_back(*pool.index_of(pool.next_for_run()));
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2, 0, 1, 2, 0}));
  asio::io_context elsewhere;
  EXPECT_FALSE(pool.index_of(elsewhere));
  EXPECT_EQ(daemon::IoPool(0).size(), 1u) << "never fewer than one context";
}

TEST(ConnectionHomeLine, TheRunIdOfARequestLineIsFoundOnlyInARequestThatNamesOne) {
  EXPECT_EQ(daemon::run_id_of_request_line(daemon::request_line("attach", "a", {{"run_id", "r-1"}, {"from_seq", 1}})),
            "r-1");
  EXPECT_EQ(daemon::run_id_of_request_line(daemon::request_line("tail", std::nullopt, {{"run_id", "r-2"}})), "r-2");
  EXPECT_FALSE(daemon::run_id_of_request_line(daemon::request_line("status", "s")));
  EXPECT_FALSE(daemon::run_id_of_request_line(daemon::request_line("attach", "a", {{"run_id", 7}})));
  EXPECT_FALSE(daemon::run_id_of_request_line(daemon::request_line("attach", "a", {{"run_id", ""}})));
  EXPECT_FALSE(daemon::run_id_of_request_line(R"({"format":"metaharness.command/1","type":"halt"})"));
  EXPECT_FALSE(daemon::run_id_of_request_line("not json"));
}

// Two contexts on a thread each: where connections are accepted, and where a run lives.
class ConnectionHome : public ::testing::Test {
 protected:
  void SetUp() override {
    accept_one();
    for (auto* io : {&accepting, &runs}) {
      guards.emplace_back(asio::make_work_guard(*io));
      threads.emplace_back([io] { io->run(); });
    }
  }
  void TearDown() override {
    guards.clear();
    accepting.stop();
    runs.stop();
    for (auto& t : threads)
      t.join();
    if (peer >= 0) ::close(peer);
  }

  // A new connection, accepted on `accepting`, and its peer's end.
  void accept_one() {
    if (peer >= 0) ::close(peer);
    int pair[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    daemon::local_socket accepted(asio::make_strand(accepting));
    accepted.assign(asio::local::stream_protocol(), pair[0]);
    homing = std::make_shared<daemon::HomingSocket>(std::move(accepted));
    peer = pair[1];
    read_buffer.consume(read_buffer.size());
  }

  // The lookup: the runs this host has, and how often it was asked.
  daemon::RunContextLookup lookup() {
    return [this](std::string id) { return look_up(this, std::move(id)); };
  }
  static asio::awaitable<asio::io_context*> look_up(ConnectionHome* self, std::string id) {
    ++self->lookups;
    auto it = self->known.find(id);
    co_return it == self->known.end() ? nullptr : it->second;
  }

  // home_connection, started on the accepted socket's strand as the daemon does (a future needs
  // a result it can default-construct).
  std::future<std::optional<daemon::local_socket>> start_homing() {
    auto strand = homing->socket().get_executor();
    return asio::co_spawn(strand, homed(homing, lookup()), asio::use_future);
  }
  static asio::awaitable<std::optional<daemon::local_socket>> homed(std::shared_ptr<daemon::HomingSocket> h,
                                                                    daemon::RunContextLookup l) {
    co_return co_await daemon::home_connection(std::move(h), std::move(l));
  }
  // The socket the accepted one ends up as.
  std::optional<daemon::local_socket> home() {
    auto done = start_homing();
    if (done.wait_for(kBound) != std::future_status::ready) return std::nullopt;
    return done.get();
  }

  static asio::execution_context* context_of(daemon::local_socket& s) {
    return &asio::query(s.get_executor(), asio::execution::context);
  }

  void send(const std::string& bytes) {
    ASSERT_EQ(::write(peer, bytes.data(), bytes.size()), static_cast<ssize_t>(bytes.size()));
  }

  // What the connection would read first: every byte the peer sent is still there.
  std::string read_line(daemon::local_socket& s) {
    auto n = asio::read_until(s, read_buffer, '\n');
    std::string line(asio::buffers_begin(read_buffer.data()), asio::buffers_begin(read_buffer.data()) + n);
    read_buffer.consume(n);
    return line;
  }
  asio::streambuf read_buffer;  // what read_line read past its line

  asio::io_context accepting{1}, runs{1};
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  std::vector<std::thread> threads;
  std::shared_ptr<daemon::HomingSocket> homing;
  int peer = -1;
  std::map<std::string, asio::io_context*> known{{"r-here", &runs}};
  std::atomic<int> lookups{0};
};

TEST_F(ConnectionHome, AnAttachToALocalRunMovesTheConnectionToTheRunsContextWithNothingConsumed) {
  const std::string attach = daemon::request_line("attach", "a", {{"run_id", "r-here"}, {"from_seq", 1}}) + "\n";
  const std::string next = R"({"format":"metaharness.command/1","type":"halt"})"
                           "\n";
  send(attach + next);
  auto homed = home();
  ASSERT_TRUE(homed);
  EXPECT_EQ(context_of(*homed), &runs);
  EXPECT_EQ(lookups.load(), 1);
  // The moved socket is the same connection: it reads the first line, then the next, and writes.
  EXPECT_EQ(read_line(*homed), attach);
  EXPECT_EQ(read_line(*homed), next);
  const std::string reply = "ok\n";
  asio::write(*homed, asio::buffer(reply));
  char got[3] = {};
  EXPECT_EQ(::read(peer, got, 3), 3);
  EXPECT_EQ(std::string(got, 3), reply);
}

TEST_F(ConnectionHome, AFirstLineNamingNoLocalRunIsServedWhereItWasAccepted) {
  for (const std::string& first :
       {daemon::request_line("status", "s"), daemon::request_line("attach", "a", {{"run_id", "r-elsewhere"}}),
        std::string("{]")}) {
    SCOPED_TRACE(first);
    accept_one();
    send(first + "\n");
    auto homed = home();
    ASSERT_TRUE(homed);
    EXPECT_EQ(context_of(*homed), &accepting);
    EXPECT_EQ(read_line(*homed), first + "\n");
  }
  EXPECT_EQ(lookups.load(), 1) << "only the attach named a run to look up";
}

TEST_F(ConnectionHome, AFirstLineNotYetWholeIsServedWhereItWasAcceptedAndReadWhole) {
  const std::string attach = daemon::request_line("attach", "a", {{"run_id", "r-here"}});
  send(attach.substr(0, 10));
  auto homed = home();
  ASSERT_TRUE(homed);
  EXPECT_EQ(context_of(*homed), &accepting);
  EXPECT_EQ(lookups.load(), 0);
  send(attach.substr(10) + "\n");
  EXPECT_EQ(read_line(*homed), attach + "\n");
}

TEST_F(ConnectionHome, APeerThatHangsUpFirstIsServedWhereItWasAcceptedAndReadsTheEnd) {
  ::close(peer);
  peer = -1;
  auto homed = home();
  ASSERT_TRUE(homed);
  EXPECT_EQ(context_of(*homed), &accepting);
  char byte;
  boost::system::error_code ec;
  homed->read_some(asio::buffer(&byte, 1), ec);
  EXPECT_EQ(ec, asio::error::eof);
}

TEST_F(ConnectionHome, TheStopCutsTheWaitForAFirstLineShort) {
  auto done = start_homing();
  homing->cancel();  // after the wait began (the strand runs them in order)
  ASSERT_EQ(done.wait_for(kBound), std::future_status::ready);
  auto homed = done.get();
  ASSERT_TRUE(homed);
  EXPECT_EQ(context_of(*homed), &accepting);
  EXPECT_TRUE(homed->is_open()) << "served (then finished by the stop), not dropped";
  EXPECT_EQ(lookups.load(), 0);
}

TEST_F(ConnectionHome, AStopBeforeTheWaitBeganIsNotLost) {
  homing->cancel();  // the daemon stops as the connection is accepted
  auto homed = home();
  ASSERT_TRUE(homed) << "it did not wait for a first line that never comes";
  EXPECT_EQ(context_of(*homed), &accepting);
}

}  // namespace
