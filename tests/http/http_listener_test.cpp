// The daemon's HTTP listener (daemon/http) over loopback: routes, refusals by name, bounded
// requests, keep-alive and the per-connection timeout.
#include "daemon/http/http_listener.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <stdexcept>
#include <thread>

#include "tests/http/http_test_client.hpp"

namespace mh::test {
namespace {

using namespace std::chrono_literals;
namespace asio = boost::asio;

asio::awaitable<http::Response> hello(http::Request r) {
  co_return http::plain(200, "hello " + r.method + " " + r.path + " query=" + r.query + " body=" + r.body);
}

asio::awaitable<http::Response> fails(http::Request) {
  throw std::runtime_error("the handler broke");
  co_return http::plain(200, "never");
}

http::ListenerOptions small_limits() {
  http::ListenerOptions o;
  o.max_header_bytes = 1024;
  o.max_header_fields = 8;
  o.max_body_bytes = 100;
  o.idle_timeout = 1000ms;
  o.linger = 200ms;
  o.max_connections = 4;
  return o;
}

// A listener on 127.0.0.1, any free port, served by its own io thread.
class HttpListenerTest : public ::testing::Test {
 protected:
  void SetUp() override { start(small_limits()); }
  void TearDown() override {
    listener.reset();
    work.reset();
    io.stop();
    if (thread.joinable()) thread.join();
  }

  void start(http::ListenerOptions options) {
    std::vector<http::Route> routes{
        {"/metrics", {"GET"}, hello}, {"/both", {"GET", "POST"}, hello}, {"/fails", {"GET"}, fails}};
    listener = std::make_unique<http::Listener>(io, std::move(routes), options);
    auto bound = listener->start("127.0.0.1", 0);
    ASSERT_TRUE(bound) << bound.error();
    port = bound->port;
    ASSERT_NE(port, 0);
    thread = std::thread([this] { io.run(); });
  }

  HttpTestClient client() { return HttpTestClient("127.0.0.1", port, 10s); }

  // An answer came, with `status`, and its body names why.
  static void expect_refusal(const HttpTestClient& c, const std::optional<HttpAnswer>& a, unsigned status,
                             std::string_view why) {
    ASSERT_TRUE(a) << c.error();
    EXPECT_EQ(a->status, status);
    EXPECT_NE(a->body.find(why), std::string::npos) << a->body;
  }

  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work{asio::make_work_guard(io)};
  std::unique_ptr<http::Listener> listener;
  std::thread thread;
  std::uint16_t port = 0;
};

TEST_F(HttpListenerTest, ARouteAnswersWithItsHandler) {
  auto c = client();
  ASSERT_TRUE(c.connected()) << c.error();
  auto a = c.get("/metrics?x=1");
  ASSERT_TRUE(a) << c.error();
  EXPECT_EQ(a->status, 200u);
  EXPECT_EQ(a->body, "hello GET /metrics query=x=1 body=\n");
  EXPECT_EQ(a->headers["server"], "metaharness");
  EXPECT_EQ(a->headers["content-type"], "text/plain; charset=utf-8");
}

TEST_F(HttpListenerTest, APathWithNoRouteIs404NamingItAndWhatTheListenerServes) {
  auto c = client();
  auto a = c.get("/nope");
  ASSERT_NO_FATAL_FAILURE(expect_refusal(c, a, 404u, "no route for /nope"));
  EXPECT_NE(a->body.find("/metrics, /both, /fails"), std::string::npos) << a->body;
  EXPECT_TRUE(a->keep_alive) << "a 404 is an answer, not a reason to hang up";
  auto again = c.get("/metrics");
  ASSERT_TRUE(again) << c.error();
  EXPECT_EQ(again->status, 200u);
}

TEST_F(HttpListenerTest, AMethodTheRouteDoesNotTakeIs405WithAllow) {
  auto c = client();
  for (std::string method : {"POST", "PUT", "DELETE", "HEAD"}) {
    auto a = c.request(method, "/metrics");
    ASSERT_TRUE(a) << method << ": " << c.error();
    EXPECT_EQ(a->status, 405u) << method;
    EXPECT_EQ(a->headers["allow"], "GET") << method;
    if (method == "HEAD")
      EXPECT_EQ(a->body, "") << "a HEAD answer is its header only";
    else
      EXPECT_NE(a->body.find("/metrics takes GET, not " + method), std::string::npos) << a->body;
  }
  auto after_head = c.get("/metrics");
  ASSERT_TRUE(after_head) << "the connection is still in step after a HEAD: " << c.error();
  EXPECT_EQ(after_head->status, 200u);
  auto both = c.request("POST", "/both", {}, "abc");
  ASSERT_TRUE(both) << c.error();
  EXPECT_EQ(both->status, 200u);
  EXPECT_EQ(both->body, "hello POST /both query= body=abc\n");
}

TEST_F(HttpListenerTest, KeepAliveServesManyRequestsOnOneConnectionAndCloseEndsIt) {
  auto c = client();
  for (int i = 0; i < 5; ++i) {
    auto a = c.get("/metrics");
    ASSERT_TRUE(a) << i << ": " << c.error();
    EXPECT_EQ(a->status, 200u);
    EXPECT_TRUE(a->keep_alive) << i;
  }
  auto last = c.request("GET", "/metrics", {{"Connection", "close"}});
  ASSERT_TRUE(last) << c.error();
  EXPECT_FALSE(last->keep_alive);
  EXPECT_TRUE(c.closed_by_server()) << c.error();
}

TEST_F(HttpListenerTest, AnHttp10RequestIsAnsweredThenClosed) {
  auto c = client();
  c.send_raw("GET /metrics HTTP/1.0\r\n\r\n");
  auto a = c.read_answer();
  ASSERT_TRUE(a) << c.error();
  EXPECT_EQ(a->status, 200u);
  EXPECT_TRUE(c.closed_by_server()) << c.error();
}

TEST_F(HttpListenerTest, AnOversizedHeaderIsRefused431ByNameAndTheConnectionClosed) {
  auto c = client();
  c.send_raw("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4000, 'a') + "\r\n\r\n");
  auto a = c.read_answer();
  ASSERT_NO_FATAL_FAILURE(expect_refusal(c, a, 431u, "the request header is over 1024 bytes"));
  EXPECT_FALSE(a->keep_alive);
  EXPECT_TRUE(c.closed_by_server()) << c.error();
}

TEST_F(HttpListenerTest, TooManyHeaderFieldsAreRefused431) {
  auto c = client();
  std::string request = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 20; ++i)
    request += "X-" + std::to_string(i) + ": y\r\n";
  c.send_raw(request + "\r\n");
  expect_refusal(c, c.read_answer(), 431u, "21 header fields; at most 8");
  EXPECT_TRUE(c.closed_by_server()) << c.error();
}

TEST_F(HttpListenerTest, AnOversizedBodyIsRefused413) {
  auto c = client();
  expect_refusal(c, c.request("POST", "/both", {}, std::string(1000, 'b')), 413u, "the request body is over 100 bytes");
  EXPECT_TRUE(c.closed_by_server()) << c.error();
}

TEST_F(HttpListenerTest, BytesThatAreNotHttpAreRefused400) {
  auto c = client();
  c.send_raw("NOT HTTP AT ALL\r\n\r\n");
  expect_refusal(c, c.read_answer(), 400u, "malformed request");
}

TEST_F(HttpListenerTest, AConnectionThatSendsNothingIsClosedAtTheIdleTimeout) {
  auto c = client();
  ASSERT_TRUE(c.connected());
  EXPECT_TRUE(c.closed_by_server()) << "the 1 s idle timeout; the client waits up to 10 s: " << c.error();
  auto trickle = client();
  trickle.send_raw("GET /metrics HTTP/1.1\r\n");  // and never the rest
  EXPECT_TRUE(trickle.closed_by_server()) << "an unfinished request is bounded too: " << trickle.error();
}

TEST_F(HttpListenerTest, AHandlerThatFailsIsAnswered500) {
  auto c = client();
  expect_refusal(c, c.get("/fails"), 500u, "/fails failed");
}

// Connections that stay open while the test holds them.
class HttpListenerLongIdle : public HttpListenerTest {
 protected:
  void SetUp() override {
    auto o = small_limits();
    o.idle_timeout = 60s;
    start(o);
  }
};

TEST_F(HttpListenerLongIdle, ConnectionsBeyondTheBoundAreRefused503) {
  std::vector<std::unique_ptr<HttpTestClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<HttpTestClient>("127.0.0.1", port, 10s));
    auto a = held.back()->get("/metrics");  // each is served, so each is counted open
    ASSERT_TRUE(a) << i;
  }
  auto extra = client();
  expect_refusal(extra, extra.get("/metrics"), 503u, "at its 4 connections");
}

TEST(HttpListenerStart, AnAddressThatIsNotAnIpOrIsTakenIsRefusedByName) {
  asio::io_context io;
  http::Listener bad(io, {});
  auto named = bad.start("localhost", 0);
  ASSERT_FALSE(named);
  EXPECT_EQ(named.error(), "\"localhost\" is not an IP address");
  http::Listener first(io, {});
  auto bound = first.start("127.0.0.1", 0);
  ASSERT_TRUE(bound) << bound.error();
  EXPECT_EQ(bound->text(), "127.0.0.1:" + std::to_string(bound->port));
  http::Listener second(io, {});
  auto taken = second.start("127.0.0.1", bound->port);
  ASSERT_FALSE(taken);
  EXPECT_NE(taken.error().find("cannot listen on 127.0.0.1:" + std::to_string(bound->port)), std::string::npos)
      << taken.error();
  EXPECT_EQ((http::BoundAddress{"::1", 9464}.text()), "[::1]:9464");
}

}  // namespace
}  // namespace mh::test
