#include "tests/http/http_test_client.hpp"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cctype>

namespace mh::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

struct HttpTestClient::Impl {
  asio::io_context io;
  beast::tcp_stream stream{io};
  beast::flat_buffer buffer;
  std::chrono::milliseconds timeout;
  bool connected = false;

  // Runs the io_context until the operation started before it completes: the stream's own
  // timeout bounds every operation, so run() always returns.
  void run() {
    io.restart();
    io.run();
  }
};

HttpTestClient::HttpTestClient(const std::string& address, std::uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>()) {
  impl_->timeout = timeout;
  boost::system::error_code ec;
  auto ip = asio::ip::make_address(address, ec);
  if (ec) {
    error_ = "not an address: " + address;
    return;
  }
  impl_->stream.expires_after(timeout);
  impl_->stream.async_connect(tcp::endpoint(ip, port), [&](boost::system::error_code e) { ec = e; });
  impl_->run();
  impl_->connected = !ec;
  if (ec) error_ = "connect: " + ec.message();
}

HttpTestClient::~HttpTestClient() = default;

bool HttpTestClient::connected() const {
  return impl_->connected;
}

std::optional<HttpAnswer> HttpTestClient::request(const std::string& method, const std::string& target,
                                                  const std::vector<std::pair<std::string, std::string>>& headers,
                                                  const std::string& body) {
  bhttp::request<bhttp::string_body> req{bhttp::string_to_verb(method), target, 11};
  if (req.method() == bhttp::verb::unknown) req.method_string(method);
  req.set(bhttp::field::host, "127.0.0.1");
  for (const auto& [name, value] : headers)
    req.set(name, value);
  req.body() = body;
  if (!body.empty() || method == "POST") req.prepare_payload();
  boost::system::error_code ec;
  impl_->stream.expires_after(impl_->timeout);
  bhttp::async_write(impl_->stream, req, [&](boost::system::error_code e, std::size_t) { ec = e; });
  impl_->run();
  if (ec) {
    error_ = "write: " + ec.message();
    return std::nullopt;
  }
  return read_answer(method == "HEAD");
}

void HttpTestClient::send_raw(const std::string& bytes) {
  boost::system::error_code ec;
  impl_->stream.expires_after(impl_->timeout);
  asio::async_write(impl_->stream, asio::buffer(bytes), [&](boost::system::error_code e, std::size_t) { ec = e; });
  impl_->run();
  if (ec) error_ = "write: " + ec.message();
}

std::optional<HttpAnswer> HttpTestClient::read_answer(bool head) {
  bhttp::response_parser<bhttp::string_body> parser;
  parser.body_limit(64u << 20);
  parser.skip(head);
  boost::system::error_code ec;
  impl_->stream.expires_after(impl_->timeout);
  bhttp::async_read(impl_->stream, impl_->buffer, parser, [&](boost::system::error_code e, std::size_t) { ec = e; });
  impl_->run();
  if (ec) {
    error_ = "read: " + ec.message();
    return std::nullopt;
  }
  const auto& res = parser.get();
  HttpAnswer a;
  a.status = res.result_int();
  a.body = res.body();
  a.keep_alive = res.keep_alive();
  for (const auto& field : res) {
    std::string name(field.name_string());
    for (char& c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    a.headers[name] = std::string(field.value());
  }
  return a;
}

bool HttpTestClient::closed_by_server() {
  const auto deadline = std::chrono::steady_clock::now() + impl_->timeout;
  char discard[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    boost::system::error_code ec;
    impl_->stream.expires_after(left);
    impl_->stream.async_read_some(asio::buffer(discard), [&](boost::system::error_code e, std::size_t) { ec = e; });
    impl_->run();
    if (ec == asio::error::eof || ec == asio::error::connection_reset) return true;
    if (ec) {
      error_ = "waiting for the close: " + ec.message();
      return false;  // the timeout
    }
  }
}

std::pair<std::string, std::uint16_t> split_host_port(const std::string& text) {
  auto colon = text.rfind(':');
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return {host, static_cast<std::uint16_t>(std::stoul(text.substr(colon + 1)))};
}

std::optional<HttpAnswer> http_get(const std::string& host_port, const std::string& target,
                                   std::chrono::milliseconds timeout) {
  auto [host, port] = split_host_port(host_port);
  HttpTestClient client(host, port, timeout);
  if (!client.connected()) return std::nullopt;
  return client.get(target);
}

}  // namespace mh::test
