// ScriptedEndpoint: a loopback HTTP server that plays a metaharness.scenario/1 to a real vendor
// CLI as if it were the model provider. It speaks the Anthropic Messages API
// (`POST …/v1/messages`, Claude Code), the OpenAI Responses API (`POST …/responses`, Codex) and
// the Gemini API (`POST …/models/M:streamGenerateContent|generateContent|countTokens`, Gemini
// CLI), streaming (SSE) or not, checks a per-run token, and records every request it served.
//
//   boost::asio::io_context io;
//   mh::model::ScriptedEndpoint endpoint(io, mh::model::load_scenario_file(path).value(), {});
//   std::uint16_t port = endpoint.start().value();       // listening on 127.0.0.1:port
//   std::thread runner([&] { io.run(); });
//   // ANTHROPIC_BASE_URL=endpoint.base_url(), ANTHROPIC_API_KEY=endpoint.token()
//   // codex: base_url = endpoint.openai_base_url(), env_key holding endpoint.token()
//   // gemini --acp: GOOGLE_GEMINI_BASE_URL=endpoint.base_url(), GEMINI_API_KEY=endpoint.token()
//   endpoint.wait_for([](auto& rs) { return rs.size() >= 2; }, 10s);
//   endpoint.stop(); runner.join();
//
// Threading: the server runs on the given io_context (any number of threads may run it; every
// connection has its own strand). All public members are thread-safe. Asio and Beast stay out
// of this header; only the io_context is named.
#pragma once

#include <boost/system/result.hpp>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "daemon/model/request_log.hpp"
#include "daemon/model/scenario.hpp"

namespace boost::asio {
class io_context;
}

namespace mh::model {

struct EndpointOptions {
  std::uint16_t port = 0;          // 0: an ephemeral port
  std::string token;               // the credential clients must send; empty: generate one
  std::filesystem::path log_path;  // append JSONL records here too; empty: memory only
  // Rewrites each line of log_path before it is written: a run's secrets (what a vendor sent
  // may echo its token), so its model-requests.jsonl holds none. Called under the log's lock.
  std::function<void(std::string&)> redact_log_line;
  std::size_t max_body_bytes = 32u << 20;
  std::size_t max_header_bytes = 64u << 10;
  std::chrono::milliseconds idle_timeout{120'000};  // a keep-alive connection with no request
  std::chrono::milliseconds write_timeout{30'000};  // one write the client does not drain
  // Both set: the endpoint speaks HTTPS with this certificate chain and key (PEM files), and
  // base_url() says https:// (tests put a TLS upstream on loopback behind the model gateway).
  std::filesystem::path tls_cert;
  std::filesystem::path tls_key;
};

class ScriptedEndpoint {
 public:
  ScriptedEndpoint(boost::asio::io_context& io, Scenario scenario, EndpointOptions options = {});
  ~ScriptedEndpoint();  // stops
  ScriptedEndpoint(const ScriptedEndpoint&) = delete;
  ScriptedEndpoint& operator=(const ScriptedEndpoint&) = delete;

  // Binds 127.0.0.1 and starts accepting. The port is known when this returns. Fails (as a
  // value) when the port is taken, the log file cannot be opened or the TLS certificate or key
  // cannot be used; calling it twice fails.
  boost::system::result<std::uint16_t> start();
  // Stops accepting and closes every connection (held streams included); idempotent. The
  // io_context's run() returns once the closing handlers have run.
  void stop();

  std::uint16_t port() const;
  std::string base_url() const;         // "http://127.0.0.1:PORT" (ANTHROPIC_BASE_URL); https with TLS
  std::string openai_base_url() const;  // base_url() + "/v1" (codex provider base_url)
  const std::string& token() const;

  std::vector<ServedRequest> requests() const;  // a snapshot, in the order answers were chosen
  // Waits (bounded) until `predicate(requests)` holds; see RequestLog::wait_for.
  bool wait_for(const std::function<bool(const std::vector<ServedRequest>&)>& predicate,
                std::chrono::milliseconds timeout) const;

  struct State;  // shared with the connections; defined in endpoint_impl.hpp

 private:
  std::shared_ptr<State> state_;
};

// A fresh random token ("mh-" + 32 hex digits).
std::string generate_token();

// Serves `scenario` on a private io_context until SIGINT or SIGTERM (`metaharness model serve`).
// `on_listening` runs once, when the port is bound. Returns how many requests were served, or
// why the endpoint could not start.
boost::system::result<std::size_t> serve_until_signal(Scenario scenario, EndpointOptions options,
                                                      const std::function<void(const ScriptedEndpoint&)>& on_listening);

}  // namespace mh::model
