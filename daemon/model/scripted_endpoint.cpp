// The scripted endpoint's server: Beast HTTP/1.1 over loopback, one coroutine per connection on
// its own strand. Decisions (which answer, which bytes) are made by the scenario and
// wire_render; this file only reads requests, paces the answer and records what happened.
// One connection's conversation is endpoint_connection.cpp; what the two share, endpoint_impl.hpp.
#include "daemon/model/scripted_endpoint.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <iostream>
#include <random>

#include "daemon/model/endpoint_impl.hpp"

namespace mh::model {

net::awaitable<void> ScriptedEndpoint::State::accept_loop() {
  auto self = shared_from_this();
  for (;;) {
    beast::error_code ec;
    auto socket = co_await acceptor.async_accept(net::make_strand(io), net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      if (ec == net::error::operation_aborted || !acceptor.is_open()) co_return;
      // A failed accept concerns that peer only (it reset first) or is a passing shortage
      // (EMFILE); pause briefly so a persistent one cannot spin a core.
      net::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(net::redirect_error(net::use_awaitable, ec));
      continue;
    }
    // Answers go out event by event: Nagle's algorithm would hold each small write back for the
    // client's delayed ACK (some 40 ms), which no real provider's stream shows.
    socket.set_option(tcp::no_delay(true), ec);
    std::shared_ptr<ConnectionBase> connection;
    if (tls)
      connection = std::make_shared<Connection<TlsStream>>(self, tcp::socket(std::move(socket)));
    else
      connection = std::make_shared<Connection<PlainStream>>(self, tcp::socket(std::move(socket)));
    if (!adopt(connection)) continue;  // stopping: the socket closes with the connection
    net::co_spawn(connection->executor(), connection->run(), [](std::exception_ptr failure) {
      // Every expected failure is an error code; an exception here is a bug in this file. Report
      // it and drop the connection rather than take the run down.
      if (!failure) return;
      try {
        std::rethrow_exception(failure);
      } catch (const std::exception& e) {
        std::cerr << "metaharness scripted endpoint: connection failed: " << e.what() << "\n";
      }
    });
  }
}

void ScriptedEndpoint::State::stop() {
  std::vector<std::shared_ptr<ConnectionBase>> live;
  bool accepting = false;
  {
    std::lock_guard lock(lifecycle_mutex);
    if (stopped) return;
    stopped = true;
    accepting = running;
    for (auto& weak : connections)
      if (auto c = weak.lock()) live.push_back(std::move(c));
    connections.clear();
  }
  if (accepting) {
    net::post(acceptor.get_executor(), [self = shared_from_this()] {
      beast::error_code ignored;
      self->acceptor.close(ignored);
    });
  }
  for (auto& connection : live)
    net::post(connection->executor(), [connection] { connection->close_now(); });
}

ScriptedEndpoint::ScriptedEndpoint(net::io_context& io, Scenario scenario, EndpointOptions options)
    : state_(std::make_shared<State>(io, std::move(scenario), std::move(options))) {}

ScriptedEndpoint::~ScriptedEndpoint() {
  stop();
}

boost::system::result<std::uint16_t> ScriptedEndpoint::start() {
  State& s = *state_;
  std::lock_guard lock(s.lifecycle_mutex);
  if (s.running || s.stopped) return boost::system::error_code(net::error::already_started);
  if (!s.options.log_path.empty() && !s.log.open_file(s.options.log_path, s.options.redact_log_line))
    return boost::system::error_code(errno ? errno : EIO, boost::system::generic_category());
  if (!s.options.tls_cert.empty() || !s.options.tls_key.empty()) {
    if (s.options.tls_cert.empty() || s.options.tls_key.empty())
      return boost::system::error_code(EINVAL, boost::system::generic_category());
    net::ssl::context context(net::ssl::context::tls_server);
    beast::error_code tls_ec;
    context.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                            net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 | net::ssl::context::no_tlsv1_1,
                        tls_ec);
    if (!tls_ec) context.use_certificate_chain_file(s.options.tls_cert.string(), tls_ec);
    if (!tls_ec) context.use_private_key_file(s.options.tls_key.string(), net::ssl::context::pem, tls_ec);
    if (tls_ec) return tls_ec;
    s.tls.emplace(std::move(context));
  }
  beast::error_code ec;
  const tcp::endpoint where{net::ip::make_address_v4("127.0.0.1"), s.options.port};
  s.acceptor.open(where.protocol(), ec);
  if (!ec) s.acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(where, ec);
  if (!ec) s.acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    beast::error_code ignored;
    s.acceptor.close(ignored);
    return ec;
  }
  s.port = s.acceptor.local_endpoint().port();
  s.running = true;
  net::co_spawn(s.acceptor.get_executor(), s.accept_loop(), net::detached);
  return s.port.load();
}

void ScriptedEndpoint::stop() {
  state_->stop();
}

std::uint16_t ScriptedEndpoint::port() const {
  return state_->port.load();
}

std::string ScriptedEndpoint::base_url() const {
  return (state_->tls ? "https://127.0.0.1:" : "http://127.0.0.1:") + std::to_string(port());
}

std::string ScriptedEndpoint::openai_base_url() const {
  return base_url() + "/v1";
}

const std::string& ScriptedEndpoint::token() const {
  return state_->token;
}

std::vector<ServedRequest> ScriptedEndpoint::requests() const {
  return state_->log.snapshot();
}

bool ScriptedEndpoint::wait_for(const std::function<bool(const std::vector<ServedRequest>&)>& predicate,
                                std::chrono::milliseconds timeout) const {
  return state_->log.wait_for(predicate, timeout);
}

std::string generate_token() {
  std::random_device random;
  static constexpr char hex[] = "0123456789abcdef";
  std::string token = "mh-";
  for (int i = 0; i < 4; ++i) {
    std::uint32_t word = random();
    for (int j = 0; j < 8; ++j, word >>= 4)
      token.push_back(hex[word & 0xF]);
  }
  return token;
}

boost::system::result<std::size_t> serve_until_signal(
    Scenario scenario, EndpointOptions options, const std::function<void(const ScriptedEndpoint&)>& on_listening) {
  net::io_context io;
  // Installed before the port is announced, so a supervisor that signals as soon as it reads
  // the announcement cannot kill us by the default disposition.
  net::signal_set signals(io, SIGINT, SIGTERM);
  ScriptedEndpoint endpoint(io, std::move(scenario), std::move(options));
  auto started = endpoint.start();
  if (!started) return started.error();
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) endpoint.stop();
  });
  on_listening(endpoint);
  io.run();
  return endpoint.requests().size();
}

}  // namespace mh::model
