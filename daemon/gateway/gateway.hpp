// The run's model gateway (issue 25, docs/gateway.md): the only door from a run to its model.
// The vendor is pointed at it with a per-run placeholder token worth nothing anywhere else; the
// gateway checks that token, forwards only its wire's own model routes, adds the real key (held
// only here, read from the upstream's credential file and read again when the file changes),
// streams the answer back chunk by chunk, and reads each answer's own usage as it passes.
//
// One Gateway per run, hosted by the run's supervisor (root, outside the run's PID namespace,
// outliving the daemon). It serves whatever acceptors it is given: a Unix socket bound into the
// run's view (relayed to the run's own loopback by mh-exec), or a TCP port on the host's loopback
// (network = "host"). Budgets are asked before a request is forwarded (hooks.reserve) and settled
// after (hooks.settle), so concurrent runs of one uid cannot overrun a daily budget together.
//
// What the gateway answers itself, never forwarding: 401 (no or another token), 403 (a route
// outside the wire's), 400 budget_exceeded (hooks.reserve refused), 413/431 (bounds), 415 (a
// compressed body where a budget applies: it cannot be metered), 502 (upstream unreachable, TLS
// verification failed), all in the wire's own error shape; and `HEAD /` (Claude Code's connection
// warm-up) with an empty 200. Everything the upstream answers, 429 included, is relayed as it is.
// The vendor's Accept-Encoding is replaced by identity so the answer's usage can be read.
//
// Threading: everything runs on the io_context given (one thread in the supervisor). Destroy the
// Gateway before its io_context.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

namespace mh::gateway {

namespace asio = boost::asio;

// The model APIs a gateway forwards. A vendor speaks one; an upstream serves one.
enum class Wire { anthropic, openai_responses, gemini };
std::optional<Wire> wire_from_name(std::string_view name);  // "anthropic" | "openai-responses" | "gemini"
std::string_view wire_name(Wire wire);
// The header that carries the key when the upstream names none: Anthropic "x-api-key", OpenAI
// "authorization" (sent as "Bearer <key>"), Gemini "x-goog-api-key".
std::string_view default_key_header(Wire wire);
// The wire's own model routes, the only ones forwarded with the key (method and path, the path
// without its query and after the upstream's base path is taken off): Anthropic POST /v1/messages
// and /v1/messages/count_tokens; OpenAI POST /v1/responses (and /responses); Gemini POST
// /v1beta/models/MODEL:generateContent, :streamGenerateContent and :countTokens (and /v1/...).
bool route_allowed(Wire wire, std::string_view method, std::string_view path);
// A Gemini model route's parts: the model (one plain path segment) and the method.
struct GeminiRoute {
  std::string model;
  std::string method;  // generateContent | streamGenerateContent | countTokens
};
std::optional<GeminiRoute> gemini_route(std::string_view path);

// One [upstreams.NAME] as the gateway uses it.
struct Upstream {
  std::string name;
  Wire wire = Wire::anthropic;
  std::string url;                   // https://host[:port][/base], or http://127.0.0.1:port (loopback only)
  std::filesystem::path credential;  // the file holding the key; read again when it changes
  // Set instead of `credential`: the key itself (empty: an endpoint that takes none — a run's raw
  // model_endpoint that names no token; no key header is added) (the supervisor's own scripted endpoint for a
  // run's model_scenario, whose token exists only in that process).
  std::optional<std::string> key;
  std::optional<std::filesystem::path> ca_file;  // else the system's store
  std::string header;                            // which header carries the key; empty: the wire's default
};

// What a request may spend at most, asked before it is forwarded.
struct Reservation {
  std::uint64_t request = 0;      // this gateway's request number, from 1
  std::string model;              // the request body's "model" (Gemini: the path's) ("" when none)
  std::uint64_t max_tokens = 0;   // its max_tokens / max_output_tokens / generationConfig.
                                  // maxOutputTokens (0 when it names none)
  std::uint64_t input_bytes = 0;  // the request body's size: a bound on its input
};
struct ReservationAnswer {
  bool allowed = true;
  std::string reason;  // when refused: what the vendor is told (in the wire's own error shape)
};

// What one forwarded request spent, read from the answer itself.
struct RequestUsage {
  std::uint64_t request = 0;
  int status = 0;  // the upstream's HTTP status (0: no answer)
  std::string model;
  std::optional<std::uint64_t> input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens;
  bool complete = false;  // the answer ended as its wire says it ends (message_stop, response.completed,
                          // Gemini: a finishReason)
  std::string failure;    // no answer came (status 0): why (the upstream refused the connection, TLS, …)
};

struct GatewayHooks {
  // Empty: nothing is reserved (no budget applies to the run). Otherwise asked before every
  // model request is forwarded; a refusal is answered by the gateway itself and never forwarded.
  std::function<asio::awaitable<ReservationAnswer>(const Reservation&)> reserve;
  // Once per forwarded request, when its answer has ended (or failed): settles its reservation.
  std::function<void(const RequestUsage&)> usage;
  // A method and path outside the wire's routes, refused 403: once per (method, path).
  std::function<void(const std::string& method, const std::string& path)> refused_route;
  // Whatever the gateway wants said in the supervisor's log (an upstream it cannot reach, …).
  std::function<void(const std::string&)> log;
};

struct GatewayOptions {
  Upstream upstream;
  std::string token;  // the run's placeholder: the only credential this gateway accepts
  std::size_t max_request_body_bytes = 32u << 20;
  std::size_t max_header_bytes = 64u << 10;
  std::chrono::milliseconds idle_timeout{300'000};
  // Connections served at once; past it a new one is closed unanswered (and told once to the log),
  // so a run cannot exhaust the supervisor's descriptors. Vendors hold a handful.
  std::size_t max_connections = 256;
};

class Gateway {
 public:
  Gateway(asio::io_context& io, GatewayOptions options, GatewayHooks hooks);
  ~Gateway();
  Gateway(const Gateway&) = delete;
  Gateway& operator=(const Gateway&) = delete;

  // Reads the credential once (refused by name when it cannot be read or is empty) and makes the
  // TLS context (refused when ca_file cannot be used). Call before serving.
  std::optional<std::string> prepare();
  // Serves every connection accepted on these until stop().
  void serve(asio::local::stream_protocol::acceptor acceptor);
  void serve(asio::ip::tcp::acceptor acceptor);
  void stop();

  // The credential's value now, as last read (rotation): the supervisor that hosts the gateway
  // redacts it from what it writes. Nothing outside that process ever asks for it.
  std::string current_key() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
};

// A fresh placeholder for run `run_id`: "mh-run-<id>-<32 hex digits>".
std::string placeholder_token(std::string_view run_id);

}  // namespace mh::gateway
