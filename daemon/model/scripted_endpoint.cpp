// The scripted endpoint's server: Beast HTTP/1.1 over loopback, one coroutine per connection on
// its own strand. Decisions (which answer, which bytes) are made by the scenario and
// wire_render; this file only reads requests, paces the answer and records what happened.
#include "daemon/model/scripted_endpoint.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <iostream>
#include <mutex>
#include <random>

#include "daemon/model/wire_render.hpp"

namespace mh::model {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kServerName = "metaharness-scripted-endpoint";
// Request bodies nest deeper than scenario files (tool JSON schemas); the bound only guards the
// recursive destruction of a hostile document.
constexpr std::size_t kMaxBodyDepth = 512;
// After refusing a malformed request, unread input is drained this long before closing, so the
// client reads the refusal instead of a connection reset.
constexpr std::chrono::milliseconds kLingerOnRefusal{1000};

class Connection;

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Headers that carry credentials (or may) are never recorded.
bool is_secret_header(std::string_view lower_name) {
  static constexpr std::array<std::string_view, 6> markers = {"auth", "key", "token", "secret", "cookie", "password"};
  return std::any_of(markers.begin(), markers.end(),
                     [&](std::string_view m) { return lower_name.find(m) != std::string_view::npos; });
}

std::optional<Wire> wire_of(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  if (ends_with(path, "/v1/messages")) return Wire::anthropic;
  if (ends_with(path, "/responses")) return Wire::responses;
  return std::nullopt;
}

std::optional<std::string> bearer_token(std::string_view authorization) {
  constexpr std::string_view scheme = "bearer ";
  if (authorization.size() < scheme.size() || lower(authorization.substr(0, scheme.size())) != scheme)
    return std::nullopt;
  std::string_view rest = authorization.substr(scheme.size());
  while (!rest.empty() && rest.front() == ' ')
    rest.remove_prefix(1);
  while (!rest.empty() && rest.back() == ' ')
    rest.remove_suffix(1);
  return std::string(rest);
}

template <class Fields>
void record_headers(const Fields& fields, ServedRequest& entry) {
  for (const auto& field : fields) {
    std::string name = lower(field.name_string());
    if (is_secret_header(name)) continue;
    auto [it, inserted] = entry.headers.emplace(name, std::string(field.value()));
    if (!inserted) it->second.append(", ").append(field.value());
  }
}

bool is_disconnect(const beast::error_code& ec) {
  return ec == net::error::broken_pipe || ec == net::error::connection_reset || ec == net::error::connection_aborted ||
         ec == net::error::eof || ec == net::error::not_connected || ec == http::error::end_of_stream;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Shared state: the scenario cursor, the log, the acceptor and the live connections.
// ---------------------------------------------------------------------------------------------

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
  bool adopt(const std::shared_ptr<Connection>& connection) {
    std::lock_guard lock(lifecycle_mutex);
    if (stopped) return false;
    std::erase_if(connections, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
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
  std::vector<std::weak_ptr<Connection>> connections;
};

namespace {

// ---------------------------------------------------------------------------------------------
// One connection: read a request, choose the answer, pace it out; repeat while keep-alive.
// ---------------------------------------------------------------------------------------------

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using State = ScriptedEndpoint::State;

  Connection(std::shared_ptr<State> state, tcp::socket socket)
      : state_(std::move(state)), stream_(std::move(socket)), timer_(stream_.get_executor()) {}

  net::any_io_executor executor() { return stream_.get_executor(); }

  net::awaitable<void> run();

  // On the connection's strand: ends whatever it is doing.
  void close_now() {
    closing_ = true;
    stream_.close();  // cancels the pending read or write
    timer_.cancel();  // and the pending wait
  }

 private:
  enum class Wait { elapsed, client_gone, stopped };
  enum class Incoming { keep, discard };

  net::awaitable<Wait> wait_watching(std::optional<std::chrono::milliseconds> duration,
                                     Incoming incoming = Incoming::keep);
  net::awaitable<bool> answer(http::request<http::string_body> request);
  net::awaitable<Ending> write_reply(const detail::Reply& reply, const Timing& timing, bool keep_alive, bool head_only);
  net::awaitable<void> refuse_malformed(http::request_parser<http::string_body>& parser, const beast::error_code& ec);
  net::awaitable<void> linger_and_close();

  template <class Body>
  void apply_headers(http::response<Body>& response, const detail::Reply& reply, bool keep_alive) {
    response.set(http::field::server, kServerName);
    for (const auto& [name, value] : reply.headers)
      response.set(name, value);
    response.keep_alive(keep_alive);
  }

  Ending ending_for(const beast::error_code& ec) const {
    if (closing_) return Ending::stopped;
    return is_disconnect(ec) ? Ending::client_disconnected : Ending::write_failed;
  }

  detail::Reply decide(const http::request<http::string_body>& request, ServedRequest& entry, Timing& timing);

  std::shared_ptr<State> state_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  net::steady_timer timer_;
  bool closing_ = false;
};

net::awaitable<void> Connection::run() {
  auto self = shared_from_this();  // the coroutine keeps its connection alive
  const EndpointOptions& options = state_->options;
  while (!closing_) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    parser.header_limit(static_cast<std::uint32_t>(options.max_header_bytes));

    beast::error_code ec;
    stream_.expires_after(options.idle_timeout);
    co_await http::async_read_header(stream_, buffer_, parser, net::redirect_error(net::use_awaitable, ec));
    if (!ec && parser.get()[http::field::expect] == "100-continue") {
      // curl and some SDKs wait for this before sending a large body.
      http::response<http::empty_body> go_on{http::status::continue_, 11};
      stream_.expires_after(options.write_timeout);
      co_await http::async_write(stream_, go_on, net::redirect_error(net::use_awaitable, ec));
    }
    if (!ec) {
      stream_.expires_after(options.idle_timeout);
      co_await http::async_read(stream_, buffer_, parser, net::redirect_error(net::use_awaitable, ec));
    }
    if (closing_) break;
    if (ec) {
      // A client closing (or idling out) between requests is the normal end of keep-alive; a
      // request the parser could not accept is answered and recorded.
      const bool parse_error = ec.category() == http::make_error_code(http::error::bad_target).category() &&
                               ec != http::error::end_of_stream;
      if (parse_error && parser.got_some()) co_await refuse_malformed(parser, ec);
      break;
    }
    const bool keep_alive = co_await answer(parser.release());
    if (!keep_alive) break;
  }
  beast::error_code ignored;
  stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
  stream_.close();
}

net::awaitable<Connection::Wait> Connection::wait_watching(std::optional<std::chrono::milliseconds> duration,
                                                           Incoming incoming) {
  using namespace net::experimental::awaitable_operators;
  const auto deadline = duration ? Clock::now() + *duration : Clock::time_point::max();
  stream_.expires_never();
  for (;;) {
    if (closing_) co_return Wait::stopped;
    timer_.expires_at(deadline);
    // Reading while we wait is how a vanished client shows itself (EOF / reset). Bytes that do
    // arrive (a pipelined request) are kept in buffer_ for the next read.
    auto winner = co_await (timer_.async_wait(net::as_tuple(net::use_awaitable)) ||
                            stream_.socket().async_read_some(buffer_.prepare(4096), net::as_tuple(net::use_awaitable)));
    if (closing_) co_return Wait::stopped;
    if (winner.index() == 0) {
      auto [ec] = std::get<0>(winner);
      if (!ec) co_return Wait::elapsed;
      co_return Wait::stopped;  // only close_now() cancels the timer
    }
    auto [ec, bytes] = std::get<1>(winner);
    if (ec) co_return Wait::client_gone;
    if (incoming == Incoming::discard) continue;
    buffer_.commit(bytes);
    if (buffer_.size() > state_->options.max_header_bytes + state_->options.max_body_bytes)
      co_return Wait::client_gone;  // a client flooding us mid-answer is not a client to wait for
  }
}

detail::Reply Connection::decide(const http::request<http::string_body>& request, ServedRequest& entry,
                                 Timing& timing) {
  const Scenario& scenario = state_->scenario;
  const std::uint64_t seq = entry.sequence;
  auto wire_error = [&](Wire wire, Answer answer, unsigned status, std::string message) {
    entry.answer = answer;
    HttpError error;
    error.status = status;
    error.message = std::move(message);
    return detail::render_error(wire, error, seq);
  };

  const std::optional<Wire> wire = wire_of(entry.target);
  entry.wire = wire;
  if (!wire) {
    entry.answer = Answer::not_found;
    return detail::render_neutral_error(404, "not_found_error",
                                        "metaharness scripted endpoint: no such endpoint " + entry.method + " " +
                                            entry.target + " (it serves POST /v1/messages and POST .../responses)",
                                        seq);
  }
  if (request.method() != http::verb::post) {
    detail::Reply reply =
        wire_error(*wire, Answer::method_not_allowed, 405,
                   "metaharness scripted endpoint: " + entry.method + " is not allowed here; use POST");
    reply.headers.emplace_back("allow", "POST");
    return reply;
  }

  // The credential: Anthropic clients send x-api-key (API key) or a bearer token (auth token);
  // OpenAI clients send a bearer token.
  std::vector<std::string> presented;
  if (*wire == Wire::anthropic)
    if (auto it = request.find("x-api-key"); it != request.end()) presented.emplace_back(it->value());
  if (auto it = request.find(http::field::authorization); it != request.end())
    if (auto token = bearer_token(it->value())) presented.push_back(*token);
  if (presented.empty()) {
    entry.credential = Credential::missing;
  } else {
    entry.credential = std::find(presented.begin(), presented.end(), state_->token) != presented.end()
                           ? Credential::matched
                           : Credential::mismatched;
  }
  if (entry.credential != Credential::matched) {
    HttpError error;
    error.status = 401;
    if (entry.credential == Credential::missing)
      error.message = *wire == Wire::anthropic
                          ? "x-api-key header is required"
                          : "You didn't provide an API key. Provide it in an Authorization header (Bearer).";
    entry.answer = Answer::unauthorized;
    return detail::render_error(*wire, error, seq);
  }

  if (!scenario.serves(*wire))
    return wire_error(
        *wire, Answer::wire_not_served, 404,
        "metaharness scripted endpoint: this scenario does not serve the " + std::string(to_string(*wire)) + " wire");

  if (auto it = request.find(http::field::content_encoding); it != request.end() && lower(it->value()) != "identity")
    return wire_error(*wire, Answer::unsupported_encoding, 415,
                      "metaharness scripted endpoint: compressed request bodies are not supported (content-encoding: " +
                          std::string(it->value()) + ")");

  // The body: a JSON object, recorded as parsed.
  const std::string& text = request.body();
  if (text.empty()) {
    entry.body_error = "empty body";
    return wire_error(*wire, Answer::bad_request, 400, "metaharness scripted endpoint: the request body is empty");
  }
  json::parse_options parse_options;
  parse_options.max_depth = kMaxBodyDepth;
  beast::error_code parse_ec;
  json::value body = json::parse(text, parse_ec, {}, parse_options);
  if (parse_ec) {
    entry.body_error = "not JSON: " + parse_ec.message();
    return wire_error(*wire, Answer::bad_request, 400,
                      "metaharness scripted endpoint: the request body is not JSON (" + parse_ec.message() + ")");
  }
  if (!body.is_object()) {
    entry.body_error = "not a JSON object";
    entry.body = std::move(body);
    return wire_error(*wire, Answer::bad_request, 400,
                      "metaharness scripted endpoint: the request body is not a JSON object");
  }
  const json::object& object = body.get_object();
  const json::value* stream = object.if_contains("stream");
  entry.stream = stream && stream->is_bool() && stream->get_bool();
  const json::value* model = object.if_contains("model");
  const json::value* tools = object.if_contains("tools");
  const bool main_loop =
      scenario.main_loop == MainLoopRule::all_requests || (tools && tools->is_array() && !tools->get_array().empty());

  detail::RenderContext context;
  context.sequence = seq;
  context.model = model && model->is_string() ? std::string(model->get_string()) : "metaharness-scripted";
  context.stream = entry.stream;
  context.created_at = static_cast<std::int64_t>(std::time(nullptr));
  entry.body = std::move(body);

  const Step* step = &scenario.aux;
  entry.answer = Answer::aux;
  if (main_loop) {
    State::Selection selection = state_->select_main(entry.headers);
    entry.answer = selection.answer;
    entry.step = selection.index;
    step = selection.step;
  }
  entry.step_name = step->name;
  const StepForm& form = step->form(*wire);
  timing = form.timing;
  return detail::render_step(*wire, form, context);
}

net::awaitable<bool> Connection::answer(http::request<http::string_body> request) {
  ServedRequest entry;
  entry.sequence = state_->log.next_sequence();
  entry.received_at = state_->since_start();
  entry.method = std::string(request.method_string());
  entry.target = std::string(request.target());
  entry.body_bytes = request.body().size();
  record_headers(request, entry);

  Timing timing;
  detail::Reply reply = decide(request, entry, timing);
  entry.status = reply.disconnect_after_hold && !reply.streaming ? 0 : reply.status;
  const std::uint64_t sequence = entry.sequence;
  const bool keep_alive = request.keep_alive();
  const bool head_only = request.method() == http::verb::head;
  request = {};  // the body now lives in the log entry only
  state_->log.add(std::move(entry));

  const Ending ending = co_await write_reply(reply, timing, keep_alive, head_only);
  state_->log.finish(sequence, ending, state_->since_start());
  co_return keep_alive&& ending == Ending::completed;
}

net::awaitable<Ending> Connection::write_reply(const detail::Reply& reply, const Timing& timing, bool keep_alive,
                                               bool head_only) {
  const EndpointOptions& options = state_->options;
  auto pause = [this](std::optional<std::chrono::milliseconds> d) { return wait_watching(d); };
  auto as_ending = [](Wait w) { return w == Wait::stopped ? Ending::stopped : Ending::client_disconnected; };
  beast::error_code ec;

  if (timing.headers_delay.count() > 0) {
    const Wait waited = co_await pause(timing.headers_delay);
    if (waited != Wait::elapsed) co_return as_ending(waited);
  }

  if (!reply.streaming) {
    // Without a stream the hold delays (or, held until disconnect, withholds) the whole answer.
    if (timing.hold_until_disconnect) {
      const Wait waited = co_await pause(std::nullopt);
      co_return as_ending(waited);
    }
    if (timing.hold.count() > 0) {
      const Wait waited = co_await pause(timing.hold);
      if (waited != Wait::elapsed) co_return as_ending(waited);
    }
    if (reply.disconnect_after_hold) co_return Ending::disconnected_by_scenario;
    if (head_only) {
      // A HEAD answer announces the body's length but must not carry it: on a keep-alive
      // connection those bytes would be read as the start of the next response. (Claude
      // Code's runtime sends `HEAD /` as a connection warm-up.)
      http::response<http::empty_body> response{static_cast<http::status>(reply.status), 11};
      apply_headers(response, reply, keep_alive);
      response.content_length(reply.body.size());
      stream_.expires_after(options.write_timeout);
      http::response_serializer<http::empty_body> serializer{response};
      co_await http::async_write_header(stream_, serializer, net::redirect_error(net::use_awaitable, ec));
      co_return ec ? ending_for(ec) : Ending::completed;
    }
    http::response<http::string_body> response{static_cast<http::status>(reply.status), 11};
    apply_headers(response, reply, keep_alive);
    response.body() = reply.body;
    response.prepare_payload();
    stream_.expires_after(options.write_timeout);
    co_await http::async_write(stream_, response, net::redirect_error(net::use_awaitable, ec));
    co_return ec ? ending_for(ec) : Ending::completed;
  }

  http::response<http::empty_body> response{static_cast<http::status>(reply.status), 11};
  apply_headers(response, reply, keep_alive);
  response.chunked(true);
  http::response_serializer<http::empty_body> serializer{response};
  stream_.expires_after(options.write_timeout);
  co_await http::async_write_header(stream_, serializer, net::redirect_error(net::use_awaitable, ec));
  if (ec) co_return ending_for(ec);

  bool first_event = true;
  auto send_events = [&](const std::vector<detail::SseEvent>& events) -> net::awaitable<std::optional<Ending>> {
    for (const detail::SseEvent& event : events) {
      if (!first_event && timing.event_delay.count() > 0) {
        const Wait waited = co_await pause(timing.event_delay);
        if (waited != Wait::elapsed) co_return as_ending(waited);
      }
      first_event = false;
      const std::string frame = detail::sse_frame(event);
      stream_.expires_after(options.write_timeout);
      co_await net::async_write(stream_, http::make_chunk(net::buffer(frame)),
                                net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return ending_for(ec);
    }
    co_return std::nullopt;
  };

  if (auto ended = co_await send_events(reply.content_events)) co_return *ended;
  if (timing.hold_until_disconnect) {
    const Wait waited = co_await pause(std::nullopt);
    co_return as_ending(waited);
  }
  if (timing.hold.count() > 0) {
    const Wait waited = co_await pause(timing.hold);
    if (waited != Wait::elapsed) co_return as_ending(waited);
  }
  if (reply.disconnect_after_hold) co_return Ending::disconnected_by_scenario;
  if (auto ended = co_await send_events(reply.final_events)) co_return *ended;
  stream_.expires_after(options.write_timeout);
  co_await net::async_write(stream_, http::make_chunk_last(), net::redirect_error(net::use_awaitable, ec));
  co_return ec ? ending_for(ec) : Ending::completed;
}

net::awaitable<void> Connection::refuse_malformed(http::request_parser<http::string_body>& parser,
                                                  const beast::error_code& ec) {
  ServedRequest entry;
  entry.sequence = state_->log.next_sequence();
  entry.received_at = state_->since_start();
  unsigned status = 400;
  std::string message = "metaharness scripted endpoint: malformed request (" + ec.message() + ")";
  entry.answer = Answer::bad_request;
  if (ec == http::error::body_limit) {
    status = 413;
    entry.answer = Answer::body_too_large;
    message = "metaharness scripted endpoint: the request body exceeds " +
              std::to_string(state_->options.max_body_bytes) + " bytes";
  } else if (ec == http::error::header_limit) {
    status = 431;
    entry.answer = Answer::headers_too_large;
    message = "metaharness scripted endpoint: the request headers exceed " +
              std::to_string(state_->options.max_header_bytes) + " bytes";
  }
  entry.body_error = ec.message();
  // Whatever the parser took in before it gave up is recorded: a body over the limit is refused
  // while its header is being finished, so the header is all there.
  const auto& header = parser.get();
  entry.method = std::string(header.method_string());
  entry.target = std::string(header.target());
  entry.wire = wire_of(entry.target);
  record_headers(header, entry);
  if (auto it = header.find(http::field::content_length); it != header.end()) {
    std::size_t length = 0;
    const std::string_view text = it->value();
    if (std::from_chars(text.data(), text.data() + text.size(), length).ec == std::errc{}) entry.body_bytes = length;
  }
  detail::Reply reply = entry.wire
                            ? detail::render_error(*entry.wire, HttpError{status, message}, entry.sequence)
                            : detail::render_neutral_error(status, "invalid_request_error", message, entry.sequence);
  entry.status = status;
  const std::uint64_t sequence = entry.sequence;
  state_->log.add(std::move(entry));

  http::response<http::string_body> response{static_cast<http::status>(status), 11};
  apply_headers(response, reply, false);
  response.body() = reply.body;
  response.prepare_payload();
  beast::error_code write_ec;
  stream_.expires_after(state_->options.write_timeout);
  co_await http::async_write(stream_, response, net::redirect_error(net::use_awaitable, write_ec));
  state_->log.finish(sequence, write_ec ? ending_for(write_ec) : Ending::completed, state_->since_start());
  if (!write_ec) co_await linger_and_close();
}

net::awaitable<void> Connection::linger_and_close() {
  // Half-close, then discard what the client is still sending for a moment: closing with unread
  // input makes the kernel send a reset that can destroy the refusal before it is read.
  beast::error_code ec;
  stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  buffer_.clear();
  co_await wait_watching(kLingerOnRefusal, Incoming::discard);  // ends early at the client's EOF
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Accepting and stopping
// ---------------------------------------------------------------------------------------------

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
    auto connection = std::make_shared<Connection>(self, tcp::socket(std::move(socket)));
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
  std::vector<std::shared_ptr<Connection>> live;
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
  if (!s.options.log_path.empty() && !s.log.open_file(s.options.log_path))
    return boost::system::error_code(errno ? errno : EIO, boost::system::generic_category());
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
  return "http://127.0.0.1:" + std::to_string(port());
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
