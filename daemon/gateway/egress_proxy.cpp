// The run's CONNECT proxy: one coroutine per client connection (read the CONNECT, decide, connect,
// splice both ways). All on the io_context given; counts() may be read from another thread.
#include "daemon/gateway/egress_proxy.hpp"

#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <charconv>
#include <mutex>
#include <set>

#include "daemon/gateway/serve_acceptor.hpp"

namespace mh::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// A run trying many destinations must not grow the proxy's memory: past this many distinct
// refused destinations, further ones are counted under one name.
constexpr std::size_t kMaxDestinations = 1024;
constexpr std::string_view kOtherDestinations = "(other destinations)";

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

struct Destination {
  std::string host;  // lower case, no brackets
  std::string port;
  std::string name() const { return (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" + port; }
};

// "host:port" or "[v6]:port"; the port 1..65535 in digits.
std::optional<Destination> parse_destination(std::string_view text) {
  Destination d;
  std::string_view port;
  if (!text.empty() && text.front() == '[') {
    const std::size_t close = text.find(']');
    if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') return std::nullopt;
    d.host = lower(text.substr(1, close - 1));
    port = text.substr(close + 2);
  } else {
    const std::size_t colon = text.rfind(':');
    if (colon == std::string_view::npos || text.substr(0, colon).find(':') != std::string_view::npos)
      return std::nullopt;
    d.host = lower(text.substr(0, colon));
    port = text.substr(colon + 1);
  }
  unsigned value = 0;
  const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (d.host.empty() || ec != std::errc{} || end != port.data() + port.size() || value == 0 || value > 65535)
    return std::nullopt;
  for (char c : d.host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_'))
      return std::nullopt;
  d.port = std::to_string(value);
  return d;
}

}  // namespace

class EgressSessionBase {
 public:
  virtual ~EgressSessionBase() = default;
  virtual void close_now() = 0;
};

struct EgressProxy::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io_context, std::vector<std::string> allowed_list, EgressHooks h, EgressOptions o)
      : io(io_context), hooks(std::move(h)), options(o) {
    for (const auto& entry : allowed_list)
      if (auto d = parse_destination(entry)) allowed.insert(d->name());
  }

  // Counts a refusal and tells the first one of each destination.
  void deny(const std::string& destination, const std::string& why) {
    bool first = false;
    {
      std::lock_guard lock(mutex);
      std::string key = destination;
      if (!counts.denied.contains(key) && counts.denied.size() >= kMaxDestinations) key = kOtherDestinations;
      first = counts.denied[key]++ == 0;
    }
    if (first && hooks.denied) hooks.denied(destination, why);
    if (hooks.attempt) hooks.attempt(destination, false, why);
  }
  void allow(const std::string& destination) {
    {
      std::lock_guard lock(mutex);
      ++counts.allowed[destination];
    }
    if (hooks.attempt) hooks.attempt(destination, true, "");
  }
  void log(const std::string& line) const {
    if (hooks.log) hooks.log(line);
  }

  asio::io_context& io;
  EgressHooks hooks;
  const EgressOptions options;
  std::set<std::string> allowed;
  mutable std::mutex mutex;
  EgressCounts counts;
  bool stopped = false;  // the rest on the io thread only
  std::vector<std::weak_ptr<EgressSessionBase>> sessions;
  std::vector<std::function<void()>> acceptor_closers;
};

namespace {

template <class Protocol>
class EgressSession : public EgressSessionBase, public std::enable_shared_from_this<EgressSession<Protocol>> {
 public:
  using ClientStream = beast::basic_stream<Protocol, asio::any_io_executor>;

  EgressSession(std::shared_ptr<EgressProxy::State> state, typename Protocol::socket socket)
      : state_(std::move(state)), client_(std::move(socket)), destination_(client_.get_executor()) {}

  void close_now() override {
    beast::error_code ignored;
    client_.close();
    destination_.close(ignored);
  }

  asio::awaitable<void> run() {
    auto self = this->shared_from_this();
    co_await serve();
    close_now();
  }

 private:
  asio::awaitable<void> serve() {
    const EgressOptions& options = state_->options;
    http::request_parser<http::empty_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(options.max_header_bytes));
    beast::error_code ec;
    client_.expires_after(options.request_timeout);
    co_await http::async_read_header(client_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    if (ec == http::error::header_limit) {
      co_await reply(431, "the request headers exceed " + std::to_string(options.max_header_bytes) + " bytes");
      co_return;
    }
    if (ec) {
      if (parser.got_some()) co_await reply(400, "malformed request (" + ec.message() + ")");
      co_return;
    }
    const auto& request = parser.get();
    if (request.method() != http::verb::connect) {
      co_await reply(405, "only CONNECT is served (plain HTTP through this proxy is not offered)", "CONNECT");
      co_return;
    }
    const auto destination = parse_destination(request.target());
    if (!destination) {
      co_await reply(400, "CONNECT needs host:port, not '" + std::string(request.target().substr(0, 256)) + "'");
      co_return;
    }
    const std::string name = destination->name();
    if (!state_->allowed.contains(name)) {
      const std::string why = "not in the run's egress list";
      state_->deny(name, why);
      co_await reply(403, name + " is " + why);
      co_return;
    }
    tcp::resolver resolver(client_.get_executor());
    auto results = co_await resolver.async_resolve(destination->host, destination->port,
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec || results.empty()) {
      state_->log("egress: cannot resolve " + name + ": " + ec.message());
      co_await reply(502, "cannot resolve " + destination->host);
      co_return;
    }
    for (const auto& entry : results) {
      const auto address = entry.endpoint().address();
      const bool test_loopback = options.allow_loopback_for_tests && address.is_loopback();
      if (!test_loopback && !egress_address_allowed(address)) {
        const std::string why = "resolves to " + address.to_string() +
                                ", which a run may not reach (loopback, link-local, metadata, multicast or this host)";
        state_->deny(name, why);
        co_await reply(403, name + " " + why);
        co_return;
      }
    }
    beast::tcp_stream upstream(client_.get_executor());
    upstream.expires_after(options.connect_timeout);
    co_await upstream.async_connect(results, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      co_await reply(502, "cannot connect to " + name + ": " + ec.message());
      co_return;
    }
    upstream.expires_never();
    destination_ = upstream.release_socket();
    state_->allow(name);

    static constexpr std::string_view established = "HTTP/1.1 200 Connection established\r\n\r\n";
    client_.expires_never();
    co_await asio::async_write(client_.socket(), asio::buffer(established),
                               asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;
    // Bytes the client sent right behind its CONNECT (a TLS ClientHello) were read with it.
    if (buffer_.size() > 0) {
      co_await asio::async_write(destination_, buffer_.data(), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) co_return;
      buffer_.consume(buffer_.size());
    }
    using namespace asio::experimental::awaitable_operators;
    co_await (pump(client_.socket(), destination_) && pump(destination_, client_.socket()));
  }

  // One direction of the splice: until EOF (passed on as a half-close) or an error (both closed).
  template <class From, class To>
  asio::awaitable<void> pump(From& from, To& to) {
    std::array<char, 16u << 10> chunk{};
    for (;;) {
      auto [read_ec, n] = co_await from.async_read_some(asio::buffer(chunk), asio::as_tuple(asio::use_awaitable));
      if (n > 0) {
        auto [write_ec, written] =
            co_await asio::async_write(to, asio::buffer(chunk.data(), n), asio::as_tuple(asio::use_awaitable));
        if (write_ec) {
          close_now();
          co_return;
        }
      }
      if (read_ec == asio::error::eof) {
        beast::error_code ignored;
        to.shutdown(asio::socket_base::shutdown_send, ignored);
        co_return;
      }
      if (read_ec) {
        close_now();
        co_return;
      }
    }
  }

  asio::awaitable<void> reply(unsigned status, const std::string& reason, std::string_view allow = {}) {
    http::response<http::string_body> response{static_cast<http::status>(status), 11};
    response.set(http::field::server, "metaharness-egress");
    response.set(http::field::content_type, "text/plain; charset=utf-8");
    if (!allow.empty()) response.set(http::field::allow, allow);
    response.keep_alive(false);
    response.body() = "metaharness egress: " + reason + "\n";
    response.prepare_payload();
    beast::error_code ec;
    client_.expires_after(state_->options.request_timeout);
    co_await http::async_write(client_, response, asio::redirect_error(asio::use_awaitable, ec));
    beast::error_code ignored;
    client_.socket().shutdown(asio::socket_base::shutdown_send, ignored);
  }

  std::shared_ptr<EgressProxy::State> state_;
  ClientStream client_;
  beast::flat_buffer buffer_;
  tcp::socket destination_;
};

// One connection accepted: served, unless the run already holds as many as it may.
template <class Socket>
void take_connection(const std::shared_ptr<EgressProxy::State>& state, Socket socket) {
  using Protocol = typename Socket::protocol_type;
  std::erase_if(state->sessions, [](const auto& s) { return s.expired(); });
  if (state->sessions.size() >= state->options.max_connections) {
    // A run opening connections without end must not exhaust the supervisor's descriptors.
    boost::system::error_code ignored;
    socket.close(ignored);
    return;
  }
  auto session = std::make_shared<EgressSession<Protocol>>(state, std::move(socket));
  state->sessions.push_back(session);
  asio::co_spawn(state->io, session->run(), [state](std::exception_ptr failure) {
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      state->log(std::string("egress: connection failed: ") + e.what());
    }
  });
}

template <class Acceptor>
void serve_on(const std::shared_ptr<EgressProxy::State>& state, Acceptor acceptor) {
  serve_acceptor(
      state, std::move(acceptor),
      [](const std::shared_ptr<EgressProxy::State>& s, typename Acceptor::protocol_type::socket socket) {
        take_connection(s, std::move(socket));
      },
      [](EgressProxy::State&) { return std::optional<std::string>(); });
}

}  // namespace

EgressProxy::EgressProxy(asio::io_context& io, std::vector<std::string> allowed, EgressHooks hooks,
                         EgressOptions options)
    : state_(std::make_shared<State>(io, std::move(allowed), std::move(hooks), options)) {}

EgressProxy::~EgressProxy() {
  stop();
}

void EgressProxy::serve(asio::local::stream_protocol::acceptor acceptor) {
  serve_on(state_, std::move(acceptor));
}

void EgressProxy::serve(asio::ip::tcp::acceptor acceptor) {
  serve_on(state_, std::move(acceptor));
}

void EgressProxy::stop() {
  asio::post(state_->io, [state = state_] {
    if (state->stopped) return;
    state->stopped = true;
    for (auto& close : state->acceptor_closers)
      close();
    state->acceptor_closers.clear();
    for (auto& weak : state->sessions)
      if (auto s = weak.lock()) s->close_now();
    state->sessions.clear();
  });
}

EgressCounts EgressProxy::counts() const {
  std::lock_guard lock(state_->mutex);
  return state_->counts;
}

}  // namespace mh::gateway
