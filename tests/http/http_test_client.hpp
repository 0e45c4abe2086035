// A tiny blocking HTTP/1.1 client for tests (Beast over one TCP connection): requests in turn on
// the same connection (keep-alive), raw bytes for requests a client should not send, and a bounded
// wait for the server to close. Every wait is bounded by the client's timeout.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mh::test {

struct HttpAnswer {
  unsigned status = 0;
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case
  bool keep_alive = false;
};

class HttpTestClient {
 public:
  HttpTestClient(const std::string& address, std::uint16_t port,
                 std::chrono::milliseconds timeout = std::chrono::seconds(10));
  ~HttpTestClient();
  bool connected() const;
  const std::string& error() const { return error_; }  // the last failure, in words

  // One request and its answer (nullopt: no answer within the timeout, or the connection failed).
  std::optional<HttpAnswer> request(const std::string& method, const std::string& target,
                                    const std::vector<std::pair<std::string, std::string>>& headers = {},
                                    const std::string& body = "");
  std::optional<HttpAnswer> get(const std::string& target) { return request("GET", target); }
  void send_raw(const std::string& bytes);
  // `head`: the answer to a HEAD request (a header, no body whatever its Content-Length says).
  std::optional<HttpAnswer> read_answer(bool head = false);
  // Whether the server closes the connection (EOF or reset) within the timeout, reading and
  // discarding what comes first.
  bool closed_by_server();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
  std::string error_;
};

// "ADDRESS:PORT" (as <state_dir>/http.addr holds it) split; IPv6 in brackets.
std::pair<std::string, std::uint16_t> split_host_port(const std::string& text);
// One GET on a fresh connection.
std::optional<HttpAnswer> http_get(const std::string& host_port, const std::string& target,
                                   std::chrono::milliseconds timeout = std::chrono::seconds(10));

}  // namespace mh::test
