// One client connection of the gateway: read a request (bounded), check the run's token and the
// wire's routes, ask for a reservation, forward it with the real key, relay the answer chunk by
// chunk while reading its usage; repeat while keep-alive. The upstream connection is kept for the
// client connection's next request when the upstream allows it.
#include <openssl/crypto.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <array>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/parse.hpp>
#include <cctype>

#include "daemon/gateway/gateway_impl.hpp"
#include "daemon/gateway/usage_reader.hpp"
#include "daemon/gateway/wire_error.hpp"

namespace mh::gateway {

namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = asio::ip::tcp;
using UpstreamStream = beast::ssl_stream<beast::tcp_stream>;

namespace {

constexpr std::string_view kServerName = "metaharness-gateway";
constexpr std::chrono::seconds kConnectTimeout{30};
constexpr std::chrono::seconds kUpstreamWriteTimeout{60};
constexpr std::size_t kRelayChunk = 16u << 10;
// The most of a refused request's body that is read (to keep its connection): more is not held.
constexpr std::uint64_t kRefusedBodyBytes = 64u << 10;

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The value of query parameter `name` in `target`, if present.
std::optional<std::string_view> query_parameter(std::string_view target, std::string_view name) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return std::nullopt;
}

// `target` without any `key=` query parameter: the Gemini API takes its key in the URL too, and
// the vendor's (the run's placeholder) must never reach the upstream, in the header or there.
std::string without_key_parameter(std::string_view target) {
  const std::size_t q = target.find('?');
  if (q == std::string_view::npos) return std::string(target);
  std::string out(target.substr(0, q));
  std::string_view query = target.substr(q + 1);
  char separator = '?';
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (!pair.empty() && pair.substr(0, pair.find('=')) != "key") {
      out += separator;
      out += pair;
      separator = '&';
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
    text.remove_suffix(1);
  return text;
}

bool same_secret(std::string_view presented, std::string_view token) {
  // Constant time over the token's length, so timing does not tell how much of a guess was right.
  return presented.size() == token.size() && CRYPTO_memcmp(presented.data(), token.data(), token.size()) == 0;
}

// Headers that concern one hop only (RFC 9110 7.6.1), never passed on in either direction.
bool hop_by_hop(std::string_view lower_name) {
  static constexpr std::array<std::string_view, 9> names = {
      "connection", "keep-alive",        "proxy-connection", "proxy-authenticate", "proxy-authorization", "te",
      "trailer",    "transfer-encoding", "upgrade"};
  for (auto n : names)
    if (lower_name == n) return true;
  return false;
}

// The names a message's Connection header lists: hop-by-hop too.
template <class Fields>
std::vector<std::string> connection_tokens(const Fields& fields) {
  std::vector<std::string> out;
  for (auto it = fields.find(http::field::connection); it != fields.end() && it->name() == http::field::connection;
       ++it) {
    std::string_view value = it->value();
    while (!value.empty()) {
      const std::size_t comma = value.find(',');
      out.push_back(lower(trim(value.substr(0, comma))));
      if (comma == std::string_view::npos) break;
      value.remove_prefix(comma + 1);
    }
  }
  return out;
}

}  // namespace

template <class Protocol>
class Session : public SessionBase, public std::enable_shared_from_this<Session<Protocol>> {
 public:
  using ClientStream = beast::basic_stream<Protocol, asio::any_io_executor>;

  Session(std::shared_ptr<Gateway::State> state, typename Protocol::socket socket)
      : state_(std::move(state)), client_(std::move(socket)) {}

  asio::awaitable<void> run();

  void close_now() override {
    closing_ = true;
    client_.close();
    close_upstream();
  }

 private:
  using Request = http::request<http::string_body>;

  asio::awaitable<bool> handle(Request request);
  asio::awaitable<bool> forward(Request request, std::uint64_t number, bool count_tokens);
  // Writes the upstream request and reads its answer's header; false: none came (why in `failure`).
  asio::awaitable<bool> send_upstream(const Request& upstream_request, http::response_parser<http::buffer_body>& parser,
                                      std::string& failure);
  asio::awaitable<std::optional<std::string>> connect_upstream();
  asio::awaitable<bool> relay(http::response_parser<http::buffer_body>& parser, bool client_keep_alive,
                              unsigned client_version, UsageReader& reader, bool& upstream_complete);
  // Returns only when the client has gone (EOF, reset) or floods; closes the upstream then, so a
  // relay waiting on a silent upstream ends too.
  asio::awaitable<void> watch_client();
  asio::awaitable<bool> answer(unsigned status, std::string body, bool keep_alive, unsigned version);
  asio::awaitable<bool> refuse(unsigned status, std::string_view type, std::string_view message, std::string_view code,
                               bool keep_alive, unsigned version);
  bool token_accepted(const Request& request) const;
  bool allowed(const Request& request) const {
    const std::string_view target = request.target();
    return token_accepted(request) &&
           route_allowed(state_->options.upstream.wire, request.method_string(), target.substr(0, target.find('?')));
  }
  // The credential, then the route: nothing when the request may go on; otherwise its refusal has
  // been written and the value says whether the connection may be kept.
  asio::awaitable<std::optional<bool>> refuse_unless_allowed(const Request& request, bool keep_alive);
  // After a refusal that ends the connection: half-close, then discard what the client is still
  // sending for a moment; closing with unread input makes the kernel send a reset that can destroy
  // the refusal before it is read.
  asio::awaitable<void> linger();
  void close_upstream() {
    if (upstream_) {
      beast::error_code ignored;
      beast::get_lowest_layer(*upstream_).socket().shutdown(tcp::socket::shutdown_both, ignored);
      beast::get_lowest_layer(*upstream_).close();
    }
    upstream_reusable_ = false;
  }

  template <class F>
  auto on_upstream(F&& f) {
    return state_->url.tls ? f(*upstream_) : f(upstream_->next_layer());
  }

  std::shared_ptr<Gateway::State> state_;
  ClientStream client_;
  beast::flat_buffer buffer_;
  std::unique_ptr<UpstreamStream> upstream_;
  beast::flat_buffer upstream_buffer_;
  bool upstream_reusable_ = false;
  bool response_keep_alive_ = false;  // what the relayed answer told the client
  // The worst case reserved for the request being forwarded (none: no budget applies).
  std::optional<Reservation> reserved_;
  bool client_gone_ = false;
  bool closing_ = false;
};

template <class Protocol>
asio::awaitable<void> Session<Protocol>::run() {
  auto self = this->shared_from_this();
  const GatewayOptions& options = state_->options;
  const Wire wire = options.upstream.wire;
  while (!closing_ && !client_gone_) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(options.max_request_body_bytes);
    parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(options.max_header_bytes, UINT32_MAX)));
    beast::error_code ec;
    client_.expires_after(options.idle_timeout);
    co_await http::async_read_header(client_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    bool refused = false;
    if (!ec && !closing_) {
      // The credential and the route are checked as soon as the header is in, before the body is
      // read (or 100-continue invites it): otherwise a client without the run's token (any local
      // process, on the host network) could make this process hold max_request_body_bytes per
      // connection, up to max_connections of them, outside the run's cgroup. A refused request's
      // body is read only when it is small (and the refusal then keeps the connection, as before);
      // a larger one, or one awaiting 100-continue, is refused at once and the connection ended.
      const Request& head = parser.get();
      const std::string_view target = head.target();
      const bool warm_up = head.method() == http::verb::head && target.substr(0, target.find('?')) == "/";
      refused = !warm_up && !allowed(head);
      const auto declared = parser.content_length();
      const bool small = parser.is_done() || (declared && *declared <= kRefusedBodyBytes);
      if (refused && (!small || head[http::field::expect] == "100-continue")) {
        co_await refuse_unless_allowed(head, false);
        co_await linger();
        break;
      }
    }
    if (!ec && !refused && parser.get()[http::field::expect] == "100-continue") {
      http::response<http::empty_body> go_on{http::status::continue_, 11};
      co_await http::async_write(client_, go_on, asio::redirect_error(asio::use_awaitable, ec));
    }
    if (!ec) {
      client_.expires_after(options.idle_timeout);
      co_await http::async_read(client_, buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    }
    if (closing_) break;
    if (ec == http::error::body_limit) {
      co_await refuse(
          413, wire == Wire::anthropic ? "request_too_large" : "invalid_request_error",
          "metaharness gateway: the request body exceeds " + std::to_string(options.max_request_body_bytes) + " bytes",
          "request_too_large", false, 11);
      break;
    }
    if (ec == http::error::header_limit) {
      co_await refuse(
          431, "invalid_request_error",
          "metaharness gateway: the request headers exceed " + std::to_string(options.max_header_bytes) + " bytes",
          "request_header_fields_too_large", false, 11);
      break;
    }
    if (ec) {
      // A client closing (or idling out) between requests ends keep-alive; a request the parser
      // could not accept is refused by name and the connection closed (its framing is lost).
      if (ec.category() == http::make_error_code(http::error::bad_target).category() &&
          ec != http::error::end_of_stream && parser.got_some()) {
        co_await refuse(400, "invalid_request_error", "metaharness gateway: malformed request (" + ec.message() + ")",
                        "malformed_request", false, 11);
        co_await linger();
      }
      break;
    }
    const bool keep_alive = co_await handle(parser.release());
    if (!keep_alive) break;
  }
  close_upstream();
  beast::error_code ignored;
  client_.socket().shutdown(Protocol::socket::shutdown_both, ignored);
  client_.close();
}

template <class Protocol>
asio::awaitable<void> Session<Protocol>::linger() {
  beast::error_code ec;
  client_.socket().shutdown(Protocol::socket::shutdown_send, ec);
  if (ec) co_return;
  std::array<char, 4096> discard{};
  client_.expires_after(std::chrono::seconds(1));
  for (std::size_t total = 0; total < (1u << 20);) {
    const std::size_t n =
        co_await client_.async_read_some(asio::buffer(discard), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;  // the client's EOF (usual), or the second passed
    total += n;
  }
}

template <class Protocol>
bool Session<Protocol>::token_accepted(const Request& request) const {
  const std::string& token = state_->options.token;
  bool presented = false;
  bool matched = false;
  if (auto it = request.find("x-api-key"); it != request.end()) {
    presented = true;
    matched = matched || same_secret(trim(it->value()), token);
  }
  if (auto it = request.find(http::field::authorization); it != request.end()) {
    presented = true;
    std::string_view value = trim(it->value());
    if (value.size() > 7 && lower(value.substr(0, 7)) == "bearer ")
      matched = matched || same_secret(trim(value.substr(7)), token);
  }
  if (state_->options.upstream.wire == Wire::gemini) {
    // The Gemini CLI sends its key as x-goog-api-key; the REST form is ?key=.
    if (auto it = request.find("x-goog-api-key"); it != request.end()) {
      presented = true;
      matched = matched || same_secret(trim(it->value()), token);
    }
    if (auto key = query_parameter(request.target(), "key")) {
      presented = true;
      matched = matched || same_secret(*key, token);
    }
  }
  return presented && matched;
}

template <class Protocol>
asio::awaitable<bool> Session<Protocol>::handle(Request request) {
  const Wire wire = state_->options.upstream.wire;
  const bool keep_alive = request.keep_alive();
  const unsigned version = request.version();
  const std::string_view target = request.target();
  const std::string path(target.substr(0, target.find('?')));

  // Claude Code's runtime opens a connection with `HEAD /` as a warm-up: answered here, empty,
  // never forwarded and never reported (it carries no credential and asks nothing of the model).
  if (request.method() == http::verb::head && path == "/") {
    http::response<http::empty_body> response{http::status::ok, version};
    response.set(http::field::server, kServerName);
    response.content_length(0);
    response.keep_alive(keep_alive);
    beast::error_code ec;
    client_.expires_after(state_->options.idle_timeout);
    co_await http::async_write(client_, response, asio::redirect_error(asio::use_awaitable, ec));
    co_return !ec && keep_alive;
  }
  if (auto kept = co_await refuse_unless_allowed(request, keep_alive)) co_return *kept;
  // A compressed body cannot be read for its worst case: refused where a budget applies. Every
  // Content-Encoding field is looked at: a first "identity" must not hide a second "gzip" (both
  // are forwarded, and the upstream would decode the body the reservation could not read).
  if (state_->hooks.reserve)
    for (auto [it, end] = request.equal_range(http::field::content_encoding); it != end; ++it)
      if (const auto& field = *it; lower(trim(field.value())) != "identity")
        co_return co_await refuse(415, "invalid_request_error",
                                  "metaharness gateway: a compressed request body (content-encoding: " +
                                      std::string(field.value().substr(0, 64)) +
                                      ") cannot be metered before it is sent; send it uncompressed",
                                  "unsupported_content_encoding", keep_alive, version);
  const std::uint64_t number = ++state_->requests;
  const std::optional<GeminiRoute> gemini = wire == Wire::gemini ? gemini_route(path) : std::nullopt;
  const bool count_tokens = gemini ? gemini->method == "countTokens" : path.ends_with("/count_tokens");
  // What the body says of its spend is read where a budget applies, and on the Responses wire
  // always: a background response is spent after its answer (which carries no usage) and would
  // never be metered.
  if (!count_tokens && (state_->hooks.reserve || wire == Wire::openai_responses)) {
    json::parse_options parse_options;
    parse_options.max_depth = 512;
    beast::error_code parse_ec;
    const json::value body = json::parse(request.body(), parse_ec, {}, parse_options);
    const json::object* object = parse_ec ? nullptr : body.if_object();
    // A coroutine, so the message it builds lives until the refusal is written.
    auto unmeterable = [&](std::string why) -> asio::awaitable<bool> {
      const std::string message =
          "metaharness gateway: " + why + ", so its spend cannot be metered; it is not forwarded";
      co_return co_await refuse(400, "invalid_request_error", message, "unmeterable_request", keep_alive, version);
    };
    if (wire == Wire::openai_responses && object)
      if (const json::value* background = object->if_contains("background");
          background && background->is_bool() && background->get_bool())
        co_return co_await unmeterable("a background response is spent after its answer, which carries no usage");
    if (state_->hooks.reserve) {
      // A body the gateway cannot read, or a max_tokens it cannot read as a count ("32000",
      // 32000.0, 3.2e4), would reserve no output at all while a lenient upstream spends it: the
      // worst case must be read, or the request is not forwarded (as a compressed body is not).
      if (!object) co_return co_await unmeterable("the request body is not a JSON object the gateway can read");
      Reservation reservation;
      reservation.request = number;
      reservation.input_bytes = request.body().size();
      if (const json::value* model = object->if_contains("model"); model && model->is_string())
        reservation.model = std::string(model->get_string());
      if (gemini) reservation.model = gemini->model;  // Gemini names the model in the path
      const char* max_name = wire == Wire::anthropic          ? "max_tokens"
                             : wire == Wire::openai_responses ? "max_output_tokens"
                                                              : "generationConfig.maxOutputTokens";
      const json::value* max = nullptr;
      if (wire == Wire::gemini) {
        // generationConfig itself must be an object when present, or its limit cannot be read.
        if (const json::value* config = object->if_contains("generationConfig"); config && !config->is_null()) {
          if (!config->is_object()) co_return co_await unmeterable("generationConfig is not an object");
          max = config->get_object().if_contains("maxOutputTokens");
        }
      } else {
        max = object->if_contains(max_name);
      }
      if (max && !max->is_null()) {
        if (max->is_uint64())
          reservation.max_tokens = max->get_uint64();
        else if (max->is_int64() && max->get_int64() >= 0)
          reservation.max_tokens = static_cast<std::uint64_t>(max->get_int64());
        else
          co_return co_await unmeterable(std::string(max_name) + " is not a whole number of tokens");
      }
      const ReservationAnswer answer = co_await state_->hooks.reserve(reservation);
      if (closing_) {
        // Stopped while asking: what was reserved is settled as nothing sent.
        if (answer.allowed && state_->hooks.usage) state_->hooks.usage(RequestUsage{.request = number});
        co_return false;
      }
      if (!answer.allowed)
        co_return co_await refuse(400, "invalid_request_error", answer.reason, "budget_exceeded", keep_alive, version);
      reserved_ = reservation;
    }
  }
  const bool keep = co_await forward(std::move(request), number, count_tokens);
  reserved_.reset();
  co_return keep;
}

template <class Protocol>
asio::awaitable<std::optional<bool>> Session<Protocol>::refuse_unless_allowed(const Request& request, bool keep_alive) {
  const Wire wire = state_->options.upstream.wire;
  const unsigned version = request.version();
  const std::string method(request.method_string());
  const std::string_view target = request.target();
  const std::string path(target.substr(0, target.find('?')));
  if (!token_accepted(request))
    co_return co_await refuse(401, wire == Wire::anthropic ? "authentication_error" : "invalid_request_error",
                              "metaharness gateway: this credential is not accepted here", "invalid_api_key",
                              keep_alive, version);
  if (!route_allowed(wire, method, path)) {
    state_->refused(method, path);
    co_return co_await refuse(
        403, wire == Wire::anthropic ? "permission_error" : "invalid_request_error",
        "metaharness gateway: " + method + " " + path + " is not one of the model routes this run may use",
        "route_not_allowed", keep_alive, version);
  }
  co_return std::nullopt;
}

template <class Protocol>
asio::awaitable<bool> Session<Protocol>::forward(Request request, std::uint64_t number, bool count_tokens) {
  using namespace asio::experimental::awaitable_operators;
  const Wire wire = state_->options.upstream.wire;
  const bool keep_alive = request.keep_alive();
  const unsigned version = request.version();

  // The upstream's request: the vendor's, less its credentials and this hop's headers, plus the
  // real key. Accept-Encoding is set to identity so the answer's usage can be read on the way.
  const std::string target =
      wire == Wire::gemini ? without_key_parameter(request.target()) : std::string(request.target());
  Request up{request.method(), state_->url.base_path + target, 11};
  const std::vector<std::string> listed = connection_tokens(request);
  for (const auto& field : request) {
    const std::string name = lower(field.name_string());
    if (hop_by_hop(name) || name == "host" || name == "x-api-key" || name == "authorization" ||
        name == "x-goog-api-key" || name == "content-length" || name == "expect" || name == "accept-encoding" ||
        name == state_->key_header || std::find(listed.begin(), listed.end(), name) != listed.end())
      continue;
    up.insert(field.name_string(), field.value());
  }
  up.set(http::field::host, state_->url.host_header());
  const std::string key = state_->key_for_request();
  if (!key.empty()) up.set(state_->key_header, state_->key_header == "authorization" ? "Bearer " + key : key);
  up.set(http::field::accept_encoding, "identity");
  up.keep_alive(true);
  up.body() = std::move(request.body());
  up.prepare_payload();
  request = {};

  RequestUsage usage;
  usage.request = number;
  http::response_parser<http::buffer_body> parser;
  parser.body_limit(boost::none);  // relayed, never held: the bound is on what is kept (UsageReader)
  parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(state_->options.max_header_bytes, UINT32_MAX)));
  std::string failure;
  bool answered = false;
  bool relayed = false;
  bool upstream_complete = false;
  std::optional<UsageReader> reader;

  auto exchange = [&]() -> asio::awaitable<void> {
    answered = co_await send_upstream(up, parser, failure);
    if (!answered) co_return;
    usage.status = static_cast<int>(parser.get().result_int());
    reader.emplace(wire, parser.get()[http::field::content_type]);
    relayed = co_await relay(parser, keep_alive, version, *reader, upstream_complete);
  };
  co_await (exchange() || watch_client());

  bool keep = false;
  if (!answered) {
    usage.failure = failure;
    close_upstream();
    if (!client_gone_ && !closing_)
      state_->log("gateway: upstream '" + state_->options.upstream.name + "' (" + state_->url.host_header() +
                  "): " + failure);
    if (!client_gone_ && !closing_)
      keep = co_await refuse(502, wire == Wire::anthropic ? "api_error" : "server_error",
                             "metaharness gateway: the upstream cannot be reached (" + failure + ")",
                             "upstream_unreachable", keep_alive, version);
  } else {
    if (!upstream_complete) close_upstream();
    if (reader) {
      reader->finish();
      const RequestUsage& read = reader->usage();
      if (!count_tokens) {
        usage.model = read.model;
        usage.input_tokens = read.input_tokens;
        usage.output_tokens = read.output_tokens;
        usage.cache_read_tokens = read.cache_read_tokens;
        usage.cache_creation_tokens = read.cache_creation_tokens;
      }
      usage.complete = upstream_complete && relayed && (count_tokens ? usage.status == 200 : read.complete);
    }
    // An answer the gateway could not read to its end (the client left before its usage came, it
    // was too large for the usage reader, the upstream broke off) was spent all the same, by an
    // amount nobody knows: where a budget applies it is settled at the worst case it reserved, so
    // a run cannot spend past its budget one cut answer at a time. Unknown is not zero, and not
    // less than what was granted.
    if (reserved_ && !count_tokens && !usage.complete && usage.status >= 200 && usage.status < 300) {
      usage.output_tokens = std::max(usage.output_tokens.value_or(0), reserved_->max_tokens);
      if (!usage.input_tokens) usage.input_tokens = reserved_->input_bytes;  // the bound it reserved
      if (usage.model.empty()) usage.model = reserved_->model;
    }
    keep = relayed && response_keep_alive_ && !client_gone_ && !closing_;
  }
  if (state_->hooks.usage) state_->hooks.usage(usage);
  co_return keep;
}

template <class Protocol>
asio::awaitable<std::optional<std::string>> Session<Protocol>::connect_upstream() {
  const UpstreamUrl& url = state_->url;
  auto executor = co_await asio::this_coro::executor;
  tcp::resolver resolver(executor);
  beast::error_code ec;
  auto results = co_await resolver.async_resolve(url.host, url.port, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return "cannot resolve " + url.host + ": " + ec.message();
  if (!url.tls) {
    // Plain http only to loopback, whatever the name resolves to (prepare() checked the name).
    for (const auto& entry : results)
      if (!entry.endpoint().address().is_loopback())
        co_return url.host + " resolves to " + entry.endpoint().address().to_string() +
            ", off loopback: plain http refused";
  }
  auto stream = std::make_unique<UpstreamStream>(executor, *state_->tls);
  beast::tcp_stream& lowest = beast::get_lowest_layer(*stream);
  lowest.expires_after(kConnectTimeout);
  co_await lowest.async_connect(results, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) co_return "cannot connect: " + ec.message();
  lowest.socket().set_option(tcp::no_delay(true), ec);
  if (url.tls) {
    boost::system::error_code address_ec;
    asio::ip::make_address(url.host, address_ec);
    // SNI names a host, never an address (RFC 6066).
    if (address_ec && !SSL_set_tlsext_host_name(stream->native_handle(), url.host.c_str()))
      co_return std::string("cannot set the TLS server name");
    stream->set_verify_callback(asio::ssl::host_name_verification(url.host));
    lowest.expires_after(kConnectTimeout);
    co_await stream->async_handshake(asio::ssl::stream_base::client, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return "TLS handshake with " + url.host + " failed: " + ec.message();
  }
  upstream_ = std::move(stream);
  upstream_buffer_.clear();
  co_return std::nullopt;
}

template <class Protocol>
asio::awaitable<bool> Session<Protocol>::send_upstream(const Request& upstream_request,
                                                       http::response_parser<http::buffer_body>& parser,
                                                       std::string& failure) {
  // A kept upstream connection may have been closed by the upstream while idle: a request that
  // fails on it before any answer came is sent once more on a fresh one.
  for (int attempt = 0; attempt < 2; ++attempt) {
    const bool fresh = !upstream_reusable_;
    if (fresh) {
      close_upstream();
      upstream_.reset();
      if (auto refused = co_await connect_upstream()) {
        failure = *refused;
        co_return false;
      }
    }
    upstream_reusable_ = false;
    beast::error_code ec;
    beast::get_lowest_layer(*upstream_).expires_after(kUpstreamWriteTimeout);
    co_await on_upstream([&](auto& stream) {
      return http::async_write(stream, upstream_request, asio::redirect_error(asio::use_awaitable, ec));
    });
    if (!ec) {
      beast::get_lowest_layer(*upstream_).expires_after(state_->options.idle_timeout);
      co_await on_upstream([&](auto& stream) {
        return http::async_read_header(stream, upstream_buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
      });
    }
    if (!ec) co_return true;
    if (client_gone_ || closing_) {
      failure = "the client went away";
      co_return false;
    }
    if (fresh || parser.got_some()) {
      failure = ec.message();
      co_return false;
    }
  }
  failure = "no answer";
  co_return false;
}

template <class Protocol>
asio::awaitable<bool> Session<Protocol>::relay(http::response_parser<http::buffer_body>& parser, bool client_keep_alive,
                                               unsigned client_version, UsageReader& reader, bool& upstream_complete) {
  const auto& upstream_header = parser.get();
  http::response<http::empty_body> response{upstream_header.result(), client_version};
  const std::vector<std::string> listed = connection_tokens(upstream_header);
  for (const auto& field : upstream_header) {
    const std::string name = lower(field.name_string());
    if (hop_by_hop(name) || name == "content-length" || std::find(listed.begin(), listed.end(), name) != listed.end())
      continue;
    response.insert(field.name_string(), field.value());
  }
  const unsigned status = upstream_header.result_int();
  const bool bodiless = status == 204 || status == 304 || (status >= 100 && status < 200);
  // HTTP/1.1 clients get the body chunked as it comes; an HTTP/1.0 client gets it until close.
  const bool chunked = client_version == 11 && !bodiless;
  const bool keep_alive = client_keep_alive && (chunked || bodiless);
  response_keep_alive_ = keep_alive;
  response.keep_alive(keep_alive);
  if (chunked) response.chunked(true);
  http::response_serializer<http::empty_body> serializer{response};
  beast::error_code ec;
  client_.expires_after(state_->options.idle_timeout);
  co_await http::async_write_header(client_, serializer, asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    client_gone_ = true;
    co_return false;
  }

  std::array<char, kRelayChunk> chunk{};
  while (!parser.is_done()) {
    parser.get().body().data = chunk.data();
    parser.get().body().size = chunk.size();
    beast::get_lowest_layer(*upstream_).expires_after(state_->options.idle_timeout);
    // read_some, not read: an SSE event is passed on as soon as it arrives, not once a buffer fills.
    co_await on_upstream([&](auto& stream) {
      return http::async_read_some(stream, upstream_buffer_, parser, asio::redirect_error(asio::use_awaitable, ec));
    });
    if (ec == http::error::need_buffer) ec = {};
    if (ec) {
      // The upstream broke off mid-answer: the client's answer is cut too (no last chunk), so it
      // sees a truncated answer rather than a complete-looking one.
      close_upstream();
      co_return false;
    }
    const std::size_t n = chunk.size() - parser.get().body().size;
    if (n == 0) continue;
    const std::string_view bytes(chunk.data(), n);
    reader.feed(bytes);
    client_.expires_after(state_->options.idle_timeout);
    if (chunked)
      co_await asio::async_write(client_, http::make_chunk(asio::buffer(bytes)),
                                 asio::redirect_error(asio::use_awaitable, ec));
    else
      co_await asio::async_write(client_, asio::buffer(bytes), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      client_gone_ = true;
      close_upstream();
      co_return false;
    }
  }
  upstream_complete = true;
  upstream_reusable_ = parser.get().keep_alive();
  if (!upstream_reusable_) close_upstream();
  if (chunked) {
    client_.expires_after(state_->options.idle_timeout);
    co_await asio::async_write(client_, http::make_chunk_last(), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      client_gone_ = true;
      co_return false;
    }
  }
  co_return true;
}

template <class Protocol>
asio::awaitable<void> Session<Protocol>::watch_client() {
  const std::size_t bound = state_->options.max_header_bytes + state_->options.max_request_body_bytes;
  for (;;) {
    auto [ec, n] =
        co_await client_.socket().async_read_some(buffer_.prepare(4096), asio::as_tuple(asio::use_awaitable));
    if (ec == asio::error::operation_aborted) co_return;  // the exchange ended first
    if (ec || buffer_.size() + n > bound) {
      client_gone_ = true;
      close_upstream();
      co_return;
    }
    // A pipelined request: kept for the next read.
    buffer_.commit(n);
  }
}

template <class Protocol>
asio::awaitable<bool> Session<Protocol>::answer(unsigned status, std::string body, bool keep_alive, unsigned version) {
  http::response<http::string_body> response{static_cast<http::status>(status), version};
  response.set(http::field::server, kServerName);
  response.set(http::field::content_type, "application/json");
  response.keep_alive(keep_alive);
  response.body() = std::move(body);
  response.prepare_payload();
  beast::error_code ec;
  client_.expires_after(state_->options.idle_timeout);
  co_await http::async_write(client_, response, asio::redirect_error(asio::use_awaitable, ec));
  co_return !ec && keep_alive;
}

template <class Protocol>
asio::awaitable<bool> Session<Protocol>::refuse(unsigned status, std::string_view type, std::string_view message,
                                                std::string_view code, bool keep_alive, unsigned version) {
  co_return co_await answer(status, wire_error_body(state_->options.upstream.wire, type, message, code, status),
                            keep_alive, version);
}

namespace {

template <class Protocol>
void spawn(const std::shared_ptr<Gateway::State>& state, typename Protocol::socket socket) {
  if constexpr (std::is_same_v<Protocol, tcp>) {
    // The answer is relayed chunk by chunk: Nagle's algorithm would hold small SSE writes back.
    boost::system::error_code ignored;
    socket.set_option(tcp::no_delay(true), ignored);
  }
  auto session = std::make_shared<Session<Protocol>>(state, std::move(socket));
  if (!state->adopt(session)) return;
  asio::co_spawn(state->io, session->run(), [state](std::exception_ptr failure) {
    // Every expected failure is an error code; an exception is a bug here. Told, and only this
    // connection is lost.
    if (!failure) return;
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      state->log(std::string("gateway: connection failed: ") + e.what());
    }
  });
}

}  // namespace

void spawn_session(const std::shared_ptr<Gateway::State>& state, asio::ip::tcp::socket socket) {
  spawn<asio::ip::tcp>(state, std::move(socket));
}

void spawn_session(const std::shared_ptr<Gateway::State>& state, asio::local::stream_protocol::socket socket) {
  spawn<asio::local::stream_protocol>(state, std::move(socket));
}

}  // namespace mh::gateway
