// The daemon's HTTP/1.1 listener ([http] listen): Boost.Beast, one coroutine per connection on
// its own strand, one small route table. It serves /metrics today and is shaped for more routes
// on the same listener (a route names its path, its methods and an awaitable handler; the
// request a handler sees carries headers and body).
//
// What it refuses, by status and a line saying why: a path with no route (404, naming the paths
// it serves), a method the route does not take (405, with Allow), a request whose header is too
// large or has too many fields (431) or whose body is too large (413), one the parser cannot read
// (400), a connection beyond max_connections (503). A refusal closes the connection after a
// short linger, so the client reads it instead of a reset. Keep-alive as the client asks; a
// connection that sends nothing (or too slowly) for idle_timeout is closed.
//
// No authentication of its own: a route that needs one checks the request (the viewer's bearer
// token, daemon/viewer/viewer_routes.hpp); /metrics answers whoever can reach the address.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace mh::http {

struct Request {
  std::string method;                                        // as sent: GET, POST, ...
  std::string target;                                        // as sent: the path and the query
  std::string path;                                          // the target before '?'
  std::string query;                                         // the target after '?', or empty
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case, in order
  std::string body;

  // The first field of that name (lower case), if any.
  std::optional<std::string> header(std::string_view lower_name) const;
};

struct Response {
  unsigned status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // more fields
};

// A plain-text answer: `text` and a newline.
Response plain(unsigned status, std::string text);

// Handlers are plain functions returning an awaitable (GCC 12: never a capturing lambda
// coroutine; a capturing lambda may call a coroutine function and return its awaitable).
using Handler = std::function<boost::asio::awaitable<Response>(Request)>;

struct Route {
  std::string path;                  // matched exactly, without the query
  std::vector<std::string> methods;  // e.g. {"GET"}
  Handler handler;
};

struct ListenerOptions {
  std::size_t max_header_bytes = 8 * 1024;  // the request line and every field
  std::size_t max_header_fields = 64;
  std::size_t max_body_bytes = 64 * 1024;
  // From the end of one answer (or the connection's start) to the whole of the next request.
  std::chrono::milliseconds idle_timeout{30000};
  std::chrono::milliseconds write_timeout{10000};
  std::size_t max_connections = 64;
  // After a refusal: how long unread input is drained before the connection closes.
  std::chrono::milliseconds linger{1000};
};

// The address a listener is bound to.
struct BoundAddress {
  std::string address;  // as bound: 127.0.0.1, ::1
  std::uint16_t port = 0;
  // host:port, with [ ] around an IPv6 address: what a client puts in a URL.
  std::string text() const;
};

class Listener {
 public:
  Listener(boost::asio::io_context& io, std::vector<Route> routes, ListenerOptions options = {});
  ~Listener();  // stops
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Binds `address` (an IP address, exactly as given) and `port` (0: any free port) and serves.
  // Returns where it listens, or why it cannot.
  boost::system::result<BoundAddress, std::string> start(const std::string& address, std::uint16_t port);
  // Stops accepting and closes every connection. Any thread; idempotent.
  void stop();

  struct State;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace mh::http
