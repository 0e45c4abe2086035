// Test support for the scripted endpoint: an endpoint running on its own thread, and a small
// Beast HTTP client whose every wait is bounded (a timeout is a failure, never a way to
// synchronise).
#pragma once

#include <boost/json/value.hpp>
#include <chrono>
#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/model/scripted_endpoint.hpp"

namespace boost::asio {
class io_context;
}

namespace mh::model::testing {

using namespace std::chrono_literals;

// Parses a scenario that the test expects to be valid (fails the test otherwise).
Scenario scenario_from(std::string_view json_text);
// The text of tests/scenarios/model/<name>.
std::string scenario_file_text(std::string_view name);

// A ScriptedEndpoint served by a background thread; stops and joins (bounded) on destruction.
class RunningEndpoint {
 public:
  explicit RunningEndpoint(Scenario scenario, EndpointOptions options = {});
  explicit RunningEndpoint(std::string_view scenario_json, EndpointOptions options = {})
      : RunningEndpoint(scenario_from(scenario_json), std::move(options)) {}
  ~RunningEndpoint();

  ScriptedEndpoint& endpoint() { return *endpoint_; }
  std::uint16_t port() const { return endpoint_->port(); }
  const std::string& token() const { return endpoint_->token(); }
  std::string base_url() const { return endpoint_->base_url(); }
  std::string openai_base_url() const { return endpoint_->openai_base_url(); }
  std::vector<ServedRequest> requests() const { return endpoint_->requests(); }
  // Waits until at least `count` requests have been recorded and every one of them has ended.
  bool wait_until_ended(std::size_t count, std::chrono::milliseconds timeout = 10s) const;
  // Stops the endpoint and reports whether its thread finished within `timeout`.
  bool stop_and_join(std::chrono::milliseconds timeout = 10s);

 private:
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<ScriptedEndpoint> endpoint_;
  std::thread thread_;
  std::future<void> finished_;
  bool joined_ = false;
};

struct Response {
  bool complete = false;  // a whole response arrived in time
  std::string error;      // why not
  unsigned status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string header(std::string_view name) const;
};

struct SseEvent {
  std::string name;
  boost::json::value data;
};
// Splits an SSE body into events; a frame that is not `event:`/`data:` (or a bare `data:`, whose
// event has no name) with JSON data fails the test.
std::vector<SseEvent> parse_sse(std::string_view body);
std::vector<std::string> event_names(const std::vector<SseEvent>& events);

using Headers = std::vector<std::pair<std::string, std::string>>;

// One connection; requests and responses in order (keep-alive).
class Client {
 public:
  explicit Client(std::uint16_t port);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool connect(std::chrono::milliseconds timeout = 5s);
  bool send(std::string_view method, std::string_view target, const Headers& headers, std::string_view body,
            std::chrono::milliseconds timeout = 10s);
  bool send_raw(std::string_view bytes, std::chrono::milliseconds timeout = 10s);
  // `head_request`: the answer to a HEAD request has a Content-Length but no body.
  Response read_response(std::chrono::milliseconds timeout = 10s, bool head_request = false);
  // Streaming: reads the header, then body bytes until `marker` is in the body (true) or the
  // response ends / fails / times out (false). `partial()` holds what arrived.
  bool read_until(std::string_view marker, std::chrono::milliseconds timeout = 10s);
  const Response& partial() const { return partial_; }
  // Reads to the end of the current response.
  Response finish_response(std::chrono::milliseconds timeout = 10s);
  // True when the server closes the connection within `timeout` (EOF or reset).
  bool wait_for_close(std::chrono::milliseconds timeout = 5s);
  void close();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Response partial_;
};

// connect + send + read + close.
Response exchange(std::uint16_t port, std::string_view method, std::string_view target, const Headers& headers,
                  std::string_view body, std::chrono::milliseconds timeout = 10s);
Headers anthropic_headers(const std::string& token);
Headers openai_headers(const std::string& token);
// A main-loop request body (it carries a tool) for each wire.
std::string anthropic_body(bool stream, bool with_tools = true);
std::string responses_body(bool stream, bool with_tools = true);

boost::json::value parse(std::string_view text);

}  // namespace mh::model::testing
