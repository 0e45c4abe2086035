// One connection of the scripted endpoint: read a request, choose the answer (the scenario and
// wire_render decide; this records what was asked and what was said), pace it out, refuse a
// malformed request by name; repeat while keep-alive. Separate from the endpoint's accepting and
// stopping (scripted_endpoint.cpp): this is the HTTP conversation itself.
#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <ctime>

#include "daemon/model/endpoint_impl.hpp"

namespace mh::model {

namespace {

constexpr std::string_view kServerName = "metaharness-scripted-endpoint";
// Request bodies nest deeper than scenario files (tool JSON schemas); the bound only guards the
// recursive destruction of a hostile document.
constexpr std::size_t kMaxBodyDepth = 512;
// After refusing a malformed request, unread input is drained this long before closing, so the
// client reads the refusal instead of a connection reset.
constexpr std::chrono::milliseconds kLingerOnRefusal{1000};

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

// A Gemini API call: POST .../models/{model}:{method} (the prefix is the API version, v1beta
// from the Gemini CLI).
struct GeminiCall {
  std::string model;
  std::string method;  // generateContent, streamGenerateContent, countTokens
};

std::optional<GeminiCall> gemini_call(std::string_view path) {
  const std::size_t models = path.rfind("/models/");
  if (models == std::string_view::npos) return std::nullopt;
  std::string_view rest = path.substr(models + 8);
  const std::size_t colon = rest.find(':');
  if (colon == std::string_view::npos || colon == 0 || rest.find('/') != std::string_view::npos) return std::nullopt;
  std::string_view method = rest.substr(colon + 1);
  if (method != "generateContent" && method != "streamGenerateContent" && method != "countTokens") return std::nullopt;
  return GeminiCall{std::string(rest.substr(0, colon)), std::string(method)};
}

std::optional<Wire> wire_of(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  if (ends_with(path, "/v1/messages")) return Wire::anthropic;
  if (ends_with(path, "/responses")) return Wire::responses;
  if (gemini_call(path)) return Wire::gemini;
  return std::nullopt;
}

// The value of query parameter `name` in `target`, if present (not percent-decoded: a key has
// no characters that need it).
std::optional<std::string> query_parameter(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return std::string(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// `target` with the value of every `key=` query parameter (Gemini's API key in the URL) blanked,
// so the request log never holds a credential.
std::string without_key_parameter(std::string_view target) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q + 1));
  std::string_view query = target.substr(q + 1);
  bool first = true;
  while (true) {
    const std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    if (!first) out += '&';
    first = false;
    if (pair.substr(0, pair.find('=')) == "key")
      out += "key=REDACTED";
    else
      out += pair;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
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

template <class Stream>
template <class Body>
void Connection<Stream>::apply_headers(http::response<Body>& response, const detail::Reply& reply, bool keep_alive) {
  response.set(http::field::server, kServerName);
  for (const auto& [name, value] : reply.headers)
    response.set(name, value);
  response.keep_alive(keep_alive);
}

template <class Stream>
Ending Connection<Stream>::ending_for(const beast::error_code& ec) const {
  if (closing_) return Ending::stopped;
  return is_disconnect(ec) ? Ending::client_disconnected : Ending::write_failed;
}

template <class Stream>
net::awaitable<void> Connection<Stream>::run() {
  auto self = this->shared_from_this();  // the coroutine keeps its connection alive
  const EndpointOptions& options = state_->options;
  if constexpr (kTls) {
    // The handshake is bounded like a request: a client that connects and says nothing is dropped.
    beast::error_code ec;
    lowest().expires_after(options.idle_timeout);
    co_await stream_.async_handshake(net::ssl::stream_base::server, net::redirect_error(net::use_awaitable, ec));
    if (ec) {
      lowest().close();
      co_return;
    }
  }
  while (!closing_) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    parser.header_limit(static_cast<std::uint32_t>(options.max_header_bytes));

    beast::error_code ec;
    lowest().expires_after(options.idle_timeout);
    co_await http::async_read_header(stream_, buffer_, parser, net::redirect_error(net::use_awaitable, ec));
    if (!ec && parser.get()[http::field::expect] == "100-continue") {
      // curl and some SDKs wait for this before sending a large body.
      http::response<http::empty_body> go_on{http::status::continue_, 11};
      lowest().expires_after(options.write_timeout);
      co_await http::async_write(stream_, go_on, net::redirect_error(net::use_awaitable, ec));
    }
    if (!ec) {
      lowest().expires_after(options.idle_timeout);
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
  lowest().socket().shutdown(tcp::socket::shutdown_both, ignored);
  lowest().close();
}

template <class Stream>
net::awaitable<typename Connection<Stream>::Wait> Connection<Stream>::wait_watching(
    std::optional<std::chrono::milliseconds> duration, Incoming incoming) {
  using namespace net::experimental::awaitable_operators;
  const auto deadline = duration ? Clock::now() + *duration : Clock::time_point::max();
  lowest().expires_never();
  for (;;) {
    if (closing_) co_return Wait::stopped;
    timer_.expires_at(deadline);
    // Reading while we wait is how a vanished client shows itself (EOF / reset). Bytes that do
    // arrive (a pipelined request) are kept in buffer_ for the next read.
    auto winner =
        co_await (timer_.async_wait(net::as_tuple(net::use_awaitable)) || read_some_watching(buffer_.prepare(4096)));
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

template <class Stream>
detail::Reply Connection<Stream>::decide(const http::request<http::string_body>& request, ServedRequest& entry,
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
                                            entry.target +
                                            " (it serves POST /v1/messages, POST .../responses and POST "
                                            ".../models/MODEL:generateContent|streamGenerateContent|countTokens)",
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
  // OpenAI clients send a bearer token; Gemini clients x-goog-api-key (the Gemini CLI) or the
  // `key` query parameter (the REST documentation's form).
  std::vector<std::string> presented;
  if (*wire == Wire::anthropic)
    if (auto it = request.find("x-api-key"); it != request.end()) presented.emplace_back(it->value());
  if (*wire == Wire::gemini) {
    if (auto it = request.find("x-goog-api-key"); it != request.end()) presented.emplace_back(it->value());
    if (auto key = query_parameter(request.target(), "key")) presented.push_back(*key);
  }
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
      error.message = *wire == Wire::anthropic ? "x-api-key header is required"
                      : *wire == Wire::gemini
                          ? "Method doesn't allow unregistered callers (callers without established identity). "
                            "Please use API Key or other form of API consumer identity to call this API."
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
  // Gemini says in the path what the other wires say in the body: the model and whether to
  // stream.
  const std::optional<GeminiCall> gemini =
      *wire == Wire::gemini ? gemini_call(std::string_view(entry.target).substr(0, entry.target.find('?')))
                            : std::nullopt;
  if (gemini && gemini->method == "countTokens") {
    // The Gemini CLI may ask how large its history is; an estimate (4 bytes a token) answers it
    // without using up a step.
    entry.answer = Answer::count_tokens;
    detail::Reply reply;
    reply.headers.emplace_back("content-type", "application/json; charset=UTF-8");
    reply.body = json::serialize(json::object{{"totalTokens", (text.size() + 3) / 4}});
    entry.body = std::move(body);
    return reply;
  }
  const json::value* stream = object.if_contains("stream");
  entry.stream = gemini ? gemini->method == "streamGenerateContent" : stream && stream->is_bool() && stream->get_bool();
  const json::value* model = object.if_contains("model");
  const json::value* tools = object.if_contains("tools");
  const bool main_loop =
      scenario.main_loop == MainLoopRule::all_requests || (tools && tools->is_array() && !tools->get_array().empty());

  detail::RenderContext context;
  context.sequence = seq;
  context.model = gemini                        ? gemini->model
                  : model && model->is_string() ? std::string(model->get_string())
                                                : "metaharness-scripted";
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

template <class Stream>
net::awaitable<bool> Connection<Stream>::answer(http::request<http::string_body> request) {
  ServedRequest entry;
  entry.sequence = state_->log.next_sequence();
  entry.received_at = state_->since_start();
  entry.method = std::string(request.method_string());
  entry.target = without_key_parameter(request.target());
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

// The scenario's hold, where an answer has one (before the whole of an answer without a stream,
// between a stream's content and its end): held until the client goes, or for a while, and then
// perhaps a scripted disconnect. nullopt: the answer goes on.
template <class Stream>
net::awaitable<std::optional<Ending>> Connection<Stream>::hold(const detail::Reply& reply, const Timing& timing) {
  if (timing.hold_until_disconnect) {
    const Wait waited = co_await wait_watching(std::nullopt);
    co_return as_ending(waited);
  }
  if (timing.hold.count() > 0) {
    const Wait waited = co_await wait_watching(timing.hold);
    if (waited != Wait::elapsed) co_return as_ending(waited);
  }
  if (reply.disconnect_after_hold) co_return Ending::disconnected_by_scenario;
  co_return std::nullopt;
}

template <class Stream>
net::awaitable<Ending> Connection<Stream>::write_reply(const detail::Reply& reply, const Timing& timing,
                                                       bool keep_alive, bool head_only) {
  const EndpointOptions& options = state_->options;
  auto pause = [this](std::optional<std::chrono::milliseconds> d) { return wait_watching(d); };
  beast::error_code ec;

  if (timing.headers_delay.count() > 0) {
    const Wait waited = co_await pause(timing.headers_delay);
    if (waited != Wait::elapsed) co_return as_ending(waited);
  }

  if (!reply.streaming) {
    // Without a stream the hold delays (or, held until disconnect, withholds) the whole answer.
    if (auto ended = co_await hold(reply, timing)) co_return *ended;
    if (head_only) {
      // A HEAD answer announces the body's length but must not carry it: on a keep-alive
      // connection those bytes would be read as the start of the next response. (Claude
      // Code's runtime sends `HEAD /` as a connection warm-up.)
      http::response<http::empty_body> response{static_cast<http::status>(reply.status), 11};
      apply_headers(response, reply, keep_alive);
      response.content_length(reply.body.size());
      lowest().expires_after(options.write_timeout);
      http::response_serializer<http::empty_body> serializer{response};
      co_await http::async_write_header(stream_, serializer, net::redirect_error(net::use_awaitable, ec));
      co_return ec ? ending_for(ec) : Ending::completed;
    }
    http::response<http::string_body> response{static_cast<http::status>(reply.status), 11};
    apply_headers(response, reply, keep_alive);
    response.body() = reply.body;
    response.prepare_payload();
    lowest().expires_after(options.write_timeout);
    co_await http::async_write(stream_, response, net::redirect_error(net::use_awaitable, ec));
    co_return ec ? ending_for(ec) : Ending::completed;
  }

  http::response<http::empty_body> response{static_cast<http::status>(reply.status), 11};
  apply_headers(response, reply, keep_alive);
  response.chunked(true);
  http::response_serializer<http::empty_body> serializer{response};
  lowest().expires_after(options.write_timeout);
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
      lowest().expires_after(options.write_timeout);
      co_await net::async_write(stream_, http::make_chunk(net::buffer(frame)),
                                net::redirect_error(net::use_awaitable, ec));
      if (ec) co_return ending_for(ec);
    }
    co_return std::nullopt;
  };

  if (auto ended = co_await send_events(reply.content_events)) co_return *ended;
  if (auto ended = co_await hold(reply, timing)) co_return *ended;
  if (auto ended = co_await send_events(reply.final_events)) co_return *ended;
  lowest().expires_after(options.write_timeout);
  co_await net::async_write(stream_, http::make_chunk_last(), net::redirect_error(net::use_awaitable, ec));
  co_return ec ? ending_for(ec) : Ending::completed;
}

template <class Stream>
net::awaitable<void> Connection<Stream>::refuse_malformed(http::request_parser<http::string_body>& parser,
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
  entry.target = without_key_parameter(header.target());
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
  lowest().expires_after(state_->options.write_timeout);
  co_await http::async_write(stream_, response, net::redirect_error(net::use_awaitable, write_ec));
  state_->log.finish(sequence, write_ec ? ending_for(write_ec) : Ending::completed, state_->since_start());
  if (!write_ec) co_await linger_and_close();
}

template <class Stream>
net::awaitable<void> Connection<Stream>::linger_and_close() {
  // Half-close, then discard what the client is still sending for a moment: closing with unread
  // input makes the kernel send a reset that can destroy the refusal before it is read.
  beast::error_code ec;
  lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
  if (ec) co_return;
  buffer_.clear();
  co_await wait_watching(kLingerOnRefusal, Incoming::discard);  // ends early at the client's EOF
}

template class Connection<PlainStream>;
template class Connection<TlsStream>;

}  // namespace mh::model
