#include "daemon/http/http_listener.hpp"

#include <algorithm>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <mutex>

#include "daemon/log.hpp"

namespace mh::http {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;

namespace {

constexpr std::string_view kServerName = "metaharness";

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string join(const std::vector<std::string>& items, std::string_view separator) {
  std::string out;
  for (const auto& item : items)
    out += (out.empty() ? "" : std::string(separator)) + item;
  return out;
}

}  // namespace

std::optional<std::string> Request::header(std::string_view lower_name) const {
  for (const auto& [name, value] : headers)
    if (name == lower_name) return value;
  return std::nullopt;
}

Response plain(unsigned status, std::string text) {
  Response r;
  r.status = status;
  r.body = std::move(text) + "\n";
  return r;
}

std::string BoundAddress::text() const {
  bool v6 = address.find(':') != std::string::npos;
  return (v6 ? "[" + address + "]" : address) + ":" + std::to_string(port);
}

class Connection;

struct Listener::State : std::enable_shared_from_this<State> {
  State(asio::io_context& io, std::vector<Route> routes, ListenerOptions options)
      : io(io), acceptor(asio::make_strand(io)), routes(std::move(routes)), options(options) {}

  asio::awaitable<void> accept_loop(std::shared_ptr<State> self);
  // Finds the route and runs it: 404 and 405 here, by name.
  asio::awaitable<Response> answer(Request request);
  std::string served_paths() const {
    std::vector<std::string> paths;
    for (const auto& r : routes)
      paths.push_back(r.path);
    return join(paths, ", ");
  }

  asio::io_context& io;
  tcp::acceptor acceptor;
  const std::vector<Route> routes;
  const ListenerOptions options;
  std::atomic<std::size_t> open{0};
  std::mutex live_mu;  // guards live and stopped: stop() may come from any thread
  std::vector<std::weak_ptr<Connection>> live;
  bool stopped = false;
};

// One client connection, on its own strand.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<Listener::State> state, tcp::socket socket)
      : state_(std::move(state)), stream_(std::move(socket)) {
    ++state_->open;
  }
  ~Connection() { --state_->open; }

  asio::any_io_executor executor() { return stream_.get_executor(); }

  asio::awaitable<void> run(std::shared_ptr<Connection> self);
  // Answers 503 without reading, then closes (beyond max_connections).
  asio::awaitable<void> refuse_busy(std::shared_ptr<Connection> self);

  // On the connection's strand: ends whatever it is doing.
  void close_now() {
    closing_ = true;
    stream_.cancel();
    beast::error_code ignored;
    stream_.socket().close(ignored);
  }

 private:
  // `head`: the answer to a HEAD request, its header only (Content-Length as for a GET).
  template <class Body>
  asio::awaitable<bool> write(bhttp::response<Body>& response, bool head = false) {
    response.set(bhttp::field::server, kServerName);
    response.prepare_payload();
    if (head) response.body().clear();
    stream_.expires_after(state_->options.write_timeout);
    auto [ec, n] = co_await bhttp::async_write(stream_, response, asio::as_tuple(asio::use_awaitable));
    (void)n;
    co_return !ec;
  }
  asio::awaitable<void> refuse(unsigned status, std::string why, unsigned version);
  asio::awaitable<void> linger_and_close();
  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  std::shared_ptr<Listener::State> state_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  bool closing_ = false;
};

asio::awaitable<void> Connection::run(std::shared_ptr<Connection> self) {
  (void)self;
  const ListenerOptions& o = state_->options;
  while (!closing_) {
    bhttp::request_parser<bhttp::string_body> parser;
    parser.header_limit(static_cast<std::uint32_t>(o.max_header_bytes));
    parser.body_limit(o.max_body_bytes);
    // The whole next request must arrive within the idle timeout: a client that trickles a
    // header byte by byte holds the connection no longer than one that sends nothing.
    stream_.expires_after(o.idle_timeout);
    auto [ec, n] = co_await bhttp::async_read(stream_, buffer_, parser, asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (closing_) break;
    if (ec) {
      // End of keep-alive, the idle timeout, or a peer gone: nothing to answer. A request the
      // parser refused is answered by name.
      if (ec == bhttp::error::header_limit)
        co_await refuse(431, "the request header is over " + std::to_string(o.max_header_bytes) + " bytes", 11);
      else if (ec == bhttp::error::body_limit)
        co_await refuse(413, "the request body is over " + std::to_string(o.max_body_bytes) + " bytes", 11);
      else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
               ec != bhttp::error::end_of_stream && parser.got_some())
        co_await refuse(400, "malformed request (" + ec.message() + ")", 11);
      break;
    }
    const auto& message = parser.get();
    std::size_t fields = std::distance(message.begin(), message.end());
    if (fields > o.max_header_fields) {
      co_await refuse(431,
                      "the request has " + std::to_string(fields) + " header fields; at most " +
                          std::to_string(o.max_header_fields) + " are read",
                      message.version());
      break;
    }
    Request request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    const auto question = request.target.find('?');
    request.path = request.target.substr(0, question);
    if (question != std::string::npos) request.query = request.target.substr(question + 1);
    for (const auto& field : message)
      request.headers.emplace_back(lower(field.name_string()), std::string(field.value()));
    request.body = message.body();
    const bool keep_alive = message.keep_alive();
    const unsigned version = message.version();
    const bool head = message.method() == bhttp::verb::head;

    Response answer = co_await state_->answer(std::move(request));
    if (closing_) break;
    bhttp::response<bhttp::string_body> response{static_cast<bhttp::status>(answer.status), version};
    response.set(bhttp::field::content_type, answer.content_type);
    for (const auto& [name, value] : answer.headers)
      response.set(name, value);
    response.body() = std::move(answer.body);
    response.keep_alive(keep_alive);
    if (!co_await write(response, head) || !keep_alive) break;
  }
  if (!closing_) close();
}

asio::awaitable<void> Connection::refuse_busy(std::shared_ptr<Connection> self) {
  (void)self;
  co_await refuse(
      503, "the listener is at its " + std::to_string(state_->options.max_connections) + " connections; retry", 11);
}

asio::awaitable<void> Connection::refuse(unsigned status, std::string why, unsigned version) {
  bhttp::response<bhttp::string_body> response{static_cast<bhttp::status>(status), version};
  response.set(bhttp::field::content_type, "text/plain; charset=utf-8");
  response.body() = "metaharness: " + why + "\n";
  response.keep_alive(false);
  if (co_await write(response)) co_await linger_and_close();
  if (!closing_) close();
}

// Half-close, then discard what the client is still sending for a moment: closing with unread
// input makes the kernel send a reset that can destroy the refusal before it is read.
asio::awaitable<void> Connection::linger_and_close() {
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  stream_.expires_after(state_->options.linger);
  char discard[4096];
  for (;;) {
    auto [read_ec, n] = co_await stream_.async_read_some(asio::buffer(discard), asio::as_tuple(asio::use_awaitable));
    (void)n;
    if (read_ec || closing_) co_return;  // EOF, the linger's end, or a stop
  }
}

asio::awaitable<Response> Listener::State::answer(Request request) {
  const Route* route = nullptr;
  for (const auto& r : routes)
    if (r.path == request.path) route = &r;
  if (!route)
    co_return plain(404, "metaharness: no route for " + request.path + "; this listener serves " + served_paths());
  if (std::find(route->methods.begin(), route->methods.end(), request.method) == route->methods.end()) {
    Response r =
        plain(405, "metaharness: " + route->path + " takes " + join(route->methods, ", ") + ", not " + request.method);
    r.headers.emplace_back("Allow", join(route->methods, ", "));
    co_return r;
  }
  try {
    co_return co_await route->handler(std::move(request));
  } catch (const std::exception& e) {
    daemon::log(daemon::LogPriority::error, "http: " + route->path + " failed: " + e.what());
  }
  co_return plain(500, "metaharness: " + route->path + " failed; the daemon's log says why");
}

asio::awaitable<void> Listener::State::accept_loop(std::shared_ptr<State> self) {
  (void)self;
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::make_strand(io), asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (!acceptor.is_open() || ec == asio::error::operation_aborted) co_return;
      // A passing shortage (EMFILE) or a peer that reset first: pause so it cannot spin a core.
      daemon::log(daemon::LogPriority::warning, "http: accept failed: " + ec.message());
      asio::steady_timer pause(acceptor.get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    const bool busy = open.load() >= options.max_connections;
    auto connection = std::make_shared<Connection>(shared_from_this(), std::move(socket));
    {
      std::lock_guard lock(live_mu);
      if (stopped) co_return;
      std::erase_if(live, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
      live.push_back(connection);
    }
    auto executor = connection->executor();
    if (busy)
      asio::co_spawn(executor, connection->refuse_busy(connection), asio::detached);
    else
      asio::co_spawn(executor, connection->run(connection), asio::detached);
  }
}

Listener::Listener(asio::io_context& io, std::vector<Route> routes, ListenerOptions options)
    : state_(std::make_shared<State>(io, std::move(routes), options)) {}

Listener::~Listener() {
  stop();
}

boost::system::result<BoundAddress, std::string> Listener::start(const std::string& address, std::uint16_t port) {
  using Result = boost::system::result<BoundAddress, std::string>;
  boost::system::error_code ec;
  const auto ip = asio::ip::make_address(address, ec);
  if (ec) return Result(boost::system::in_place_error, "\"" + address + "\" is not an IP address");
  const tcp::endpoint where{ip, port};
  State& s = *state_;
  s.acceptor.open(where.protocol(), ec);
  if (!ec) s.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) s.acceptor.bind(where, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    s.acceptor.close(ignored);
    return Result(boost::system::in_place_error,
                  "cannot listen on " + BoundAddress{address, port}.text() + ": " + ec.message());
  }
  const auto bound = s.acceptor.local_endpoint(ec);
  asio::co_spawn(s.acceptor.get_executor(), s.accept_loop(state_), asio::detached);
  return BoundAddress{bound.address().to_string(), bound.port()};
}

void Listener::stop() {
  std::vector<std::shared_ptr<Connection>> open;
  {
    std::lock_guard lock(state_->live_mu);
    if (state_->stopped) return;
    state_->stopped = true;
    for (auto& weak : state_->live)
      if (auto c = weak.lock()) open.push_back(std::move(c));
    state_->live.clear();
  }
  asio::post(state_->acceptor.get_executor(), [state = state_] {
    boost::system::error_code ignored;
    state->acceptor.close(ignored);
  });
  for (auto& c : open)
    asio::post(c->executor(), [c] { c->close_now(); });
}

}  // namespace mh::http
