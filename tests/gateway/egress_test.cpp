// The run's CONNECT proxy: the address rule as a table, and the proxy itself between a raw client
// and an echo listener of the test's own (loopback, so reachable only with the test-only option).
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <array>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <condition_variable>
#include <future>
#include <mutex>
#include <thread>

#include "daemon/gateway/egress_proxy.hpp"

namespace mh::gateway {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

TEST(EgressAddress, OnlyAddressesOutOnTheNetworkAreAllowed) {
  for (auto refused : {"127.0.0.1", "127.8.9.10", "::1", "169.254.169.254", "169.254.1.1", "fe80::1", "0.0.0.0",
                       "::", "224.0.0.1", "239.255.255.250", "255.255.255.255", "ff02::1", "fd00:ec2::254",
                       "::ffff:127.0.0.1", "::ffff:169.254.169.254", "100.100.100.200", "64:ff9b::7f00:1"})
    EXPECT_FALSE(egress_address_allowed(asio::ip::make_address(refused))) << refused;
  for (auto allowed : {"93.184.216.34", "1.1.1.1", "2606:4700:4700::1111", "::ffff:93.184.216.34"})
    EXPECT_TRUE(egress_address_allowed(asio::ip::make_address(allowed))) << allowed;
}

TEST(EgressAddress, TheHostsOwnAddressesAreRefused) {
  struct ifaddrs* list = nullptr;
  ASSERT_EQ(::getifaddrs(&list), 0);
  std::size_t checked = 0;
  for (auto* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    const asio::ip::address_v4 own(ntohl(in->sin_addr.s_addr));
    EXPECT_FALSE(egress_address_allowed(own)) << i->ifa_name << " " << own.to_string();
    ++checked;
  }
  ::freeifaddrs(list);
  EXPECT_GT(checked, 0u);
}

// An echo listener and an EgressProxy on one io thread; the proxy on a TCP port of loopback.
class EgressTest : public ::testing::Test {
 protected:
  void start(std::vector<std::string> allowed_extra, bool allow_loopback) {
    echo_ = std::make_unique<tcp::acceptor>(io_, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
    echo_port_ = echo_->local_endpoint().port();
    asio::co_spawn(io_, echo_loop(), asio::detached);
    std::vector<std::string> allowed = std::move(allowed_extra);
    allowed.push_back("127.0.0.1:" + std::to_string(echo_port_));
    allowed.push_back("LocalHost:" + std::to_string(echo_port_));
    EgressHooks hooks;
    hooks.denied = [this](const std::string& destination, const std::string& why) {
      std::lock_guard lock(mutex_);
      denied_.emplace_back(destination, why);
    };
    EgressOptions options;
    options.allow_loopback_for_tests = allow_loopback;
    proxy_ = std::make_unique<EgressProxy>(io_, std::move(allowed), std::move(hooks), options);
    tcp::acceptor acceptor(io_, tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
    proxy_port_ = acceptor.local_endpoint().port();
    proxy_->serve(std::move(acceptor));
    std::packaged_task<void()> task([this] { io_.run(); });
    finished_ = task.get_future();
    thread_ = std::thread(std::move(task));
  }

  ~EgressTest() override {
    if (!thread_.joinable()) return;
    proxy_->stop();
    asio::post(io_, [this] {
      boost::system::error_code ignored;
      echo_->close(ignored);
    });
    const bool in_time = finished_.wait_for(10s) == std::future_status::ready;
    EXPECT_TRUE(in_time) << "the proxy's io_context did not finish after stop()";
    if (!in_time) io_.stop();
    thread_.join();
  }

  asio::awaitable<void> echo_loop() {
    for (;;) {
      boost::system::error_code ec;
      auto socket = co_await echo_->async_accept(asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      asio::co_spawn(io_, echo(std::move(socket)), asio::detached);
    }
  }
  static asio::awaitable<void> echo(tcp::socket socket) {
    std::array<char, 1024> data{};
    for (;;) {
      boost::system::error_code ec;
      const std::size_t n =
          co_await socket.async_read_some(asio::buffer(data), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      co_await asio::async_write(socket, asio::buffer(data.data(), n), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
    }
  }

  // A blocking client with socket timeouts: every wait is bounded.
  struct Raw {
    asio::io_context io;
    tcp::socket socket{io};
    std::string read_buffer;
    explicit Raw(std::uint16_t port) {
      socket.connect(tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), port));
      timeval limit{10, 0};
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
      ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
    }
    void send(std::string_view text) { asio::write(socket, asio::buffer(text)); }
    // The response header (status line and fields), up to the blank line.
    std::string header() {
      boost::system::error_code ec;
      const std::size_t n = asio::read_until(socket, asio::dynamic_buffer(read_buffer), "\r\n\r\n", ec);
      if (ec) return "(" + ec.message() + ")";
      std::string head = read_buffer.substr(0, n);
      read_buffer.erase(0, n);
      return head;
    }
    std::string exactly(std::size_t count) {
      boost::system::error_code ec;
      while (read_buffer.size() < count && !ec) {
        std::array<char, 1024> chunk{};
        const std::size_t n = socket.read_some(asio::buffer(chunk), ec);
        read_buffer.append(chunk.data(), n);
      }
      std::string out = read_buffer.substr(0, count);
      read_buffer.erase(0, std::min(count, read_buffer.size()));
      return out;
    }
  };

  std::string connect_line(const std::string& destination) {
    return "CONNECT " + destination + " HTTP/1.1\r\nHost: " + destination + "\r\n\r\n";
  }

  std::vector<std::pair<std::string, std::string>> denied() {
    std::lock_guard lock(mutex_);
    return denied_;
  }

  asio::io_context io_;
  std::unique_ptr<tcp::acceptor> echo_;
  std::uint16_t echo_port_ = 0;
  std::unique_ptr<EgressProxy> proxy_;
  std::uint16_t proxy_port_ = 0;
  std::thread thread_;
  std::future<void> finished_;
  std::mutex mutex_;
  std::vector<std::pair<std::string, std::string>> denied_;
};

TEST_F(EgressTest, AListedDestinationIsReachedAndCounted) {
  start({}, /*allow_loopback=*/true);
  const std::string destination = "127.0.0.1:" + std::to_string(echo_port_);
  for (int i = 0; i < 2; ++i) {
    Raw client(proxy_port_);
    // The first bytes ride right behind the CONNECT, as a TLS client's hello does.
    client.send(connect_line(destination) + "early");
    const std::string head = client.header();
    EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
    EXPECT_EQ(client.exactly(5), "early");
    client.send("ping through the proxy");
    EXPECT_EQ(client.exactly(22), "ping through the proxy");
  }
  EXPECT_EQ(proxy_->counts().allowed.at(destination), 2u);
  EXPECT_TRUE(proxy_->counts().denied.empty());
  EXPECT_TRUE(denied().empty());
}

TEST_F(EgressTest, AListedDestinationOnLoopbackIsRefusedByTheAddressRule) {
  start({}, /*allow_loopback=*/false);
  for (const std::string& destination :
       {"127.0.0.1:" + std::to_string(echo_port_), "localhost:" + std::to_string(echo_port_)}) {
    Raw client(proxy_port_);
    client.send(connect_line(destination));
    const std::string head = client.header();
    EXPECT_EQ(head.rfind("HTTP/1.1 403", 0), 0u) << head;
  }
  const auto told = denied();
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[0].first, "127.0.0.1:" + std::to_string(echo_port_));
  EXPECT_NE(told[0].second.find("resolves to 127.0.0.1"), std::string::npos) << told[0].second;
  EXPECT_EQ(told[1].first, "localhost:" + std::to_string(echo_port_));
  EXPECT_TRUE(proxy_->counts().allowed.empty());
}

TEST_F(EgressTest, AnUnlistedDestinationIsRefusedToldOnceAndCounted) {
  start({"example.com:443"}, /*allow_loopback=*/true);
  for (int i = 0; i < 3; ++i) {
    Raw client(proxy_port_);
    client.send(connect_line("Evil.Example:443"));
    EXPECT_EQ(client.header().rfind("HTTP/1.1 403", 0), 0u);
  }
  {
    Raw client(proxy_port_);
    client.send(connect_line("127.0.0.1:1"));  // loopback but unlisted: the list decides first
    EXPECT_EQ(client.header().rfind("HTTP/1.1 403", 0), 0u);
  }
  const auto told = denied();
  ASSERT_EQ(told.size(), 2u);
  EXPECT_EQ(told[0].first, "evil.example:443");
  EXPECT_EQ(told[0].second, "not in the run's egress list");
  const EgressCounts counts = proxy_->counts();
  EXPECT_EQ(counts.denied.at("evil.example:443"), 3u);
  EXPECT_EQ(counts.denied.at("127.0.0.1:1"), 1u);
}

TEST_F(EgressTest, OnlyConnectIsServedAndGarbageIsRefused) {
  start({}, /*allow_loopback=*/true);
  {
    Raw client(proxy_port_);
    client.send("GET http://example.com/ HTTP/1.1\r\nHost: example.com\r\n\r\n");
    const std::string head = client.header();
    EXPECT_EQ(head.rfind("HTTP/1.1 405", 0), 0u) << head;
    EXPECT_NE(head.find("Allow: CONNECT"), std::string::npos) << head;
  }
  for (auto target : {"no-port", "host:99999", "[::1:443", "a b:1"}) {
    Raw client(proxy_port_);
    client.send(std::string("CONNECT ") + target + " HTTP/1.1\r\n\r\n");
    const std::string head = client.header();
    EXPECT_EQ(head.rfind("HTTP/1.1 400", 0), 0u) << target << ": " << head;
  }
  {
    Raw client(proxy_port_);
    client.send("CONNECT x:1 HTTP/1.1\r\nX-Pad: " + std::string(16 << 10, 'a') + "\r\n\r\n");
    EXPECT_EQ(client.header().rfind("HTTP/1.1 431", 0), 0u);
  }
  // Still serving.
  Raw client(proxy_port_);
  client.send(connect_line("127.0.0.1:" + std::to_string(echo_port_)));
  EXPECT_EQ(client.header().rfind("HTTP/1.1 200", 0), 0u);
}

}  // namespace
}  // namespace mh::gateway
