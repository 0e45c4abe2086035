// The scripted endpoint's insides, shared by scripted_endpoint.cpp (the endpoint: accepting,
// stopping, the public members) and endpoint_connection.cpp (one HTTP connection: read, decide,
// pace out). State is what both see: the scenario cursor, the log, the acceptor and the live
// connections. Internal to mh_model.
#pragma once

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <mutex>
#include <optional>

#include "daemon/model/scripted_endpoint.hpp"
#include "daemon/model/wire_render.hpp"

namespace mh::model {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

class ConnectionBase;

// The two ways a client reaches the endpoint: plain HTTP, or HTTPS when the endpoint was given a
// certificate (tests put a TLS upstream on loopback behind the model gateway).
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

struct ScriptedEndpoint::State : std::enable_shared_from_this<State> {
  State(net::io_context& io_context, Scenario s, EndpointOptions o)
      : io(io_context), scenario(std::move(s)), options(std::move(o)), acceptor(net::make_strand(io_context)) {
    token = options.token.empty() ? generate_token() : options.token;
  }

  struct Selection {
    Answer answer;
    const Step* step;
    std::optional<std::size_t> index;
  };

  // The answer for a main-loop request: the first step in order that is not used up and whose
  // `when` (if any) the request matches; that step is used once more. Without `when` this is a
  // plain cursor through the steps.
  Selection select_main(const std::map<std::string, std::string>& lower_case_headers) {
    std::lock_guard lock(script_mutex);
    if (served.size() != scenario.steps.size()) served.assign(scenario.steps.size(), 0);
    for (std::size_t index = 0; index < scenario.steps.size(); ++index) {
      const Step& step = scenario.steps[index];
      if (!step.sticky && served[index] >= step.repeat) continue;
      if (step.when && !step.when->matches(lower_case_headers)) continue;
      ++served[index];
      return {Answer::step, &step, index};
    }
    return {Answer::exhausted, &scenario.exhausted, std::nullopt};
  }

  std::chrono::milliseconds since_start() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - started);
  }

  // Registers a new connection unless the endpoint is stopping.
  bool adopt(const std::shared_ptr<ConnectionBase>& connection) {
    std::lock_guard lock(lifecycle_mutex);
    if (stopped) return false;
    std::erase_if(connections, [](const std::weak_ptr<ConnectionBase>& c) { return c.expired(); });
    connections.push_back(connection);
    return true;
  }

  void stop();
  net::awaitable<void> accept_loop();

  net::io_context& io;
  const Scenario scenario;
  const EndpointOptions options;
  std::string token;
  RequestLog log;
  const Clock::time_point started = Clock::now();

  std::mutex script_mutex;
  std::vector<std::uint64_t> served;  // per step: how often it was served

  std::mutex lifecycle_mutex;
  bool running = false;
  bool stopped = false;
  tcp::acceptor acceptor;  // touched only on its strand once accepting
  std::atomic<std::uint16_t> port{0};
  std::vector<std::weak_ptr<ConnectionBase>> connections;
  std::optional<net::ssl::context> tls;  // set by start() when the options name a certificate
};

// What stop() needs of a connection, whichever stream it runs on.
class ConnectionBase {
 public:
  virtual ~ConnectionBase() = default;
  virtual net::any_io_executor executor() = 0;
  // On the connection's strand: ends whatever it is doing.
  virtual void close_now() = 0;
  virtual net::awaitable<void> run() = 0;
};

// One connection: read a request, choose the answer, pace it out; repeat while keep-alive.
// Stream is PlainStream or TlsStream (both instantiated in endpoint_connection.cpp).
template <class Stream>
class Connection : public ConnectionBase, public std::enable_shared_from_this<Connection<Stream>> {
 public:
  using State = ScriptedEndpoint::State;
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

  Connection(std::shared_ptr<State> state, tcp::socket socket)
      : state_(std::move(state)), stream_(make_stream(std::move(socket), *state_)), timer_(stream_.get_executor()) {}

  net::any_io_executor executor() override { return stream_.get_executor(); }

  net::awaitable<void> run() override;

  void close_now() override {
    closing_ = true;
    lowest().close();  // cancels the pending read or write
    timer_.cancel();   // and the pending wait
  }

 private:
  enum class Wait { elapsed, client_gone, stopped };
  enum class Incoming { keep, discard };

  net::awaitable<Wait> wait_watching(std::optional<std::chrono::milliseconds> duration,
                                     Incoming incoming = Incoming::keep);
  net::awaitable<bool> answer(http::request<http::string_body> request);
  net::awaitable<Ending> write_reply(const detail::Reply& reply, const Timing& timing, bool keep_alive, bool head_only);
  net::awaitable<std::optional<Ending>> hold(const detail::Reply& reply, const Timing& timing);
  net::awaitable<void> refuse_malformed(http::request_parser<http::string_body>& parser, const beast::error_code& ec);
  net::awaitable<void> linger_and_close();

  template <class Body>
  void apply_headers(http::response<Body>& response, const detail::Reply& reply, bool keep_alive);

  Ending ending_for(const beast::error_code& ec) const;
  // What a wait that did not run its course means for the answer.
  static Ending as_ending(Wait w) { return w == Wait::stopped ? Ending::stopped : Ending::client_disconnected; }

  detail::Reply decide(const http::request<http::string_body>& request, ServedRequest& entry, Timing& timing);

  static Stream make_stream(tcp::socket socket, State& state) {
    if constexpr (kTls)
      return Stream(std::move(socket), *state.tls);
    else
      return Stream(std::move(socket));
  }
  beast::tcp_stream& lowest() { return beast::get_lowest_layer(stream_); }
  // A read while waiting: on the raw socket for plain HTTP, through TLS otherwise (a TLS record
  // cannot be read past). Both support per-operation cancellation, which the wait relies on.
  auto read_some_watching(net::mutable_buffer buffer) {
    if constexpr (kTls)
      return stream_.async_read_some(buffer, net::as_tuple(net::use_awaitable));
    else
      return lowest().socket().async_read_some(buffer, net::as_tuple(net::use_awaitable));
  }

  std::shared_ptr<State> state_;
  Stream stream_;
  beast::flat_buffer buffer_;
  net::steady_timer timer_;
  bool closing_ = false;
};

}  // namespace mh::model
