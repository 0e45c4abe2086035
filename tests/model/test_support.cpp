#include "tests/model/test_support.hpp"

#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cctype>
#include <fstream>
#include <sstream>

namespace mh::model::testing {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;
using tcp = net::ip::tcp;

Scenario scenario_from(std::string_view json_text) {
  auto scenario = parse_scenario(json_text);
  if (!scenario) {
    ADD_FAILURE() << "scenario refused: " << scenario.error().message();
    return Scenario{};
  }
  return std::move(*scenario);
}

std::string scenario_file_text(std::string_view name) {
  const std::string path = std::string(MH_SOURCE_DIR) + "/tests/scenarios/model/" + std::string(name);
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ADD_FAILURE() << "cannot read " << path;
    return {};
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// ---------------------------------------------------------------------------------------------
// RunningEndpoint
// ---------------------------------------------------------------------------------------------

RunningEndpoint::RunningEndpoint(Scenario scenario, EndpointOptions options)
    : io_(std::make_unique<net::io_context>()),
      endpoint_(std::make_unique<ScriptedEndpoint>(*io_, std::move(scenario), std::move(options))) {
  auto started = endpoint_->start();
  if (!started) {
    ADD_FAILURE() << "endpoint did not start: " << started.error().message();
    joined_ = true;
    return;
  }
  std::packaged_task<void()> task([this] { io_->run(); });
  finished_ = task.get_future();
  thread_ = std::thread(std::move(task));
}

bool RunningEndpoint::stop_and_join(std::chrono::milliseconds timeout) {
  if (joined_) return true;
  endpoint_->stop();
  const bool in_time = finished_.wait_for(timeout) == std::future_status::ready;
  if (!in_time) io_->stop();  // do not hang the suite; the caller reports the failure
  thread_.join();
  joined_ = true;
  return in_time;
}

RunningEndpoint::~RunningEndpoint() {
  EXPECT_TRUE(stop_and_join()) << "the endpoint's io_context did not finish after stop()";
  endpoint_.reset();  // before the io_context it uses
}

bool RunningEndpoint::wait_until_ended(std::size_t count, std::chrono::milliseconds timeout) const {
  return endpoint_->wait_for(
      [count](const std::vector<ServedRequest>& requests) {
        if (requests.size() < count) return false;
        for (const auto& r : requests)
          if (r.ending == Ending::in_progress) return false;
        return true;
      },
      timeout);
}

// ---------------------------------------------------------------------------------------------
// Client
// ---------------------------------------------------------------------------------------------

std::string Response::header(std::string_view name) const {
  auto it = headers.find(std::string(name));
  return it == headers.end() ? std::string() : it->second;
}

struct Client::Impl {
  explicit Impl(std::uint16_t p) : port(p), stream(io) {}

  // Runs the io_context until `done` or `timeout`; on timeout the socket is closed so the
  // pending operation completes (with an error) before we return.
  bool run(bool& done, std::chrono::milliseconds timeout) {
    io.restart();
    io.run_for(timeout);
    if (!done) {
      stream.close();
      io.restart();
      io.run();
      return false;
    }
    return true;
  }

  void reset_parser() {
    parser.emplace();
    parser->body_limit(std::numeric_limits<std::uint64_t>::max());
  }

  std::uint16_t port;
  net::io_context io;
  beast::tcp_stream stream;
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> parser;
};

Client::Client(std::uint16_t port) : impl_(std::make_unique<Impl>(port)) {}
Client::~Client() {
  close();
}

bool Client::connect(std::chrono::milliseconds timeout) {
  bool done = false;
  beast::error_code result;
  impl_->stream.async_connect(tcp::endpoint(net::ip::make_address_v4("127.0.0.1"), impl_->port),
                              [&](beast::error_code ec) {
                                result = ec;
                                done = true;
                              });
  return impl_->run(done, timeout) && !result;
}

bool Client::send_raw(std::string_view bytes, std::chrono::milliseconds timeout) {
  bool done = false;
  beast::error_code result;
  net::async_write(impl_->stream, net::buffer(bytes.data(), bytes.size()), [&](beast::error_code ec, std::size_t) {
    result = ec;
    done = true;
  });
  return impl_->run(done, timeout) && !result;
}

bool Client::send(std::string_view method, std::string_view target, const Headers& headers, std::string_view body,
                  std::chrono::milliseconds timeout) {
  http::request<http::string_body> request{http::string_to_verb(method), target, 11};
  if (request.method() == http::verb::unknown) request.method_string(method);
  request.set(http::field::host, "127.0.0.1:" + std::to_string(impl_->port));
  for (const auto& [name, value] : headers)
    request.set(name, value);
  request.body() = std::string(body);
  request.prepare_payload();
  bool done = false;
  beast::error_code result;
  http::async_write(impl_->stream, request, [&](beast::error_code ec, std::size_t) {
    result = ec;
    done = true;
  });
  return impl_->run(done, timeout) && !result;
}

namespace {

void copy_header(const http::response<http::string_body>& from, Response& to) {
  to.status = from.result_int();
  to.headers.clear();
  for (const auto& field : from) {
    std::string name(field.name_string());
    for (char& c : name)
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    to.headers[name] = std::string(field.value());
  }
}

}  // namespace

bool Client::read_until(std::string_view marker, std::chrono::milliseconds timeout) {
  if (!impl_->parser) {
    impl_->reset_parser();
    partial_ = Response{};
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    auto& parser = *impl_->parser;
    if (parser.is_header_done()) {
      copy_header(parser.get(), partial_);
      partial_.body = parser.get().body();
      if (!marker.empty() && partial_.body.find(marker) != std::string::npos) return true;
    }
    if (parser.is_done()) {
      partial_.complete = true;
      impl_->parser.reset();
      return marker.empty();
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      partial_.error = "timed out";
      return false;
    }
    bool done = false;
    beast::error_code result;
    http::async_read_some(impl_->stream, impl_->buffer, parser, [&](beast::error_code ec, std::size_t) {
      result = ec;
      done = true;
    });
    if (!impl_->run(done, left)) {
      partial_.error = "timed out";
      return false;
    }
    if (result) {
      partial_.error = result.message();
      impl_->parser.reset();
      return false;
    }
  }
}

Response Client::finish_response(std::chrono::milliseconds timeout) {
  read_until("", timeout);
  return partial_;
}

Response Client::read_response(std::chrono::milliseconds timeout, bool head_request) {
  impl_->reset_parser();
  impl_->parser->skip(head_request);
  partial_ = Response{};
  return finish_response(timeout);
}

bool Client::wait_for_close(std::chrono::milliseconds timeout) {
  bool done = false;
  beast::error_code result;
  char scratch[256];
  // Anything still arriving is discarded; only the end of the connection counts.
  std::function<void(beast::error_code, std::size_t)> on_read;
  on_read = [&](beast::error_code ec, std::size_t) {
    if (ec) {
      result = ec;
      done = true;
      return;
    }
    impl_->stream.socket().async_read_some(net::buffer(scratch), on_read);
  };
  impl_->stream.socket().async_read_some(net::buffer(scratch), on_read);
  return impl_->run(done, timeout) && result;
}

void Client::close() {
  beast::error_code ignored;
  impl_->stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  impl_->stream.close();
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

std::vector<SseEvent> parse_sse(std::string_view body) {
  std::vector<SseEvent> events;
  std::size_t at = 0;
  while (at < body.size()) {
    const std::size_t end = body.find("\n\n", at);
    if (end == std::string_view::npos) {
      ADD_FAILURE() << "unterminated SSE frame: " << body.substr(at);
      break;
    }
    std::string_view frame = body.substr(at, end - at);
    at = end + 2;
    if (frame.substr(0, 6) == "data: " && frame.find('\n') == std::string_view::npos) {
      // A nameless event (Gemini's alt=sse stream): a bare data line.
      events.push_back(SseEvent{"", parse(frame.substr(6))});
      continue;
    }
    const std::size_t newline = frame.find('\n');
    if (frame.substr(0, 7) != "event: " || newline == std::string_view::npos ||
        frame.substr(newline + 1, 6) != "data: ") {
      ADD_FAILURE() << "malformed SSE frame: " << frame;
      continue;
    }
    SseEvent event;
    event.name = std::string(frame.substr(7, newline - 7));
    event.data = parse(frame.substr(newline + 7));
    events.push_back(std::move(event));
  }
  return events;
}

std::vector<std::string> event_names(const std::vector<SseEvent>& events) {
  std::vector<std::string> names;
  for (const auto& e : events)
    names.push_back(e.name);
  return names;
}

json::value parse(std::string_view text) {
  beast::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec) ADD_FAILURE() << "not JSON (" << ec.message() << "): " << text.substr(0, 200);
  return v;
}

Response exchange(std::uint16_t port, std::string_view method, std::string_view target, const Headers& headers,
                  std::string_view body, std::chrono::milliseconds timeout) {
  Client client(port);
  Response failed;
  if (!client.connect(timeout)) {
    failed.error = "connect failed";
    return failed;
  }
  if (!client.send(method, target, headers, body, timeout)) {
    failed.error = "send failed";
    return failed;
  }
  return client.read_response(timeout);
}

Headers anthropic_headers(const std::string& token) {
  return {{"x-api-key", token},
          {"anthropic-version", "2023-06-01"},
          {"content-type", "application/json"},
          {"user-agent", "claude-cli/2.1.197 (external, sdk-cli)"},
          {"x-claude-code-session-id", "session-under-test"}};
}

Headers openai_headers(const std::string& token) {
  return {{"authorization", "Bearer " + token},
          {"content-type", "application/json"},
          {"accept", "text/event-stream"},
          {"originator", "codex_exec"},
          {"session-id", "thread-under-test"}};
}

std::string anthropic_body(bool stream, bool with_tools) {
  json::object body{{"model", "claude-test-model"},
                    {"max_tokens", 1024},
                    {"stream", stream},
                    {"messages", json::array{json::object{{"role", "user"}, {"content", "hi"}}}}};
  if (with_tools)
    body["tools"] = json::array{json::object{{"name", "Bash"}, {"input_schema", json::object{{"type", "object"}}}}};
  return json::serialize(body);
}

std::string responses_body(bool stream, bool with_tools) {
  json::object body{{"model", "gpt-test-model"},
                    {"stream", stream},
                    {"input", json::array{json::object{
                                  {"type", "message"},
                                  {"role", "user"},
                                  {"content", json::array{json::object{{"type", "input_text"}, {"text", "hi"}}}}}}}};
  if (with_tools) body["tools"] = json::array{json::object{{"type", "function"}, {"name", "exec_command"}}};
  return json::serialize(body);
}

}  // namespace mh::model::testing
