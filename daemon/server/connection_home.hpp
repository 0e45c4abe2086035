// Where a new connection is served: on the io context of the run its first request names.
//
// The daemon runs one io_context per thread (io_pool.hpp). A decision hops between the run's
// strand and the strand of the connection that decides it four times; on one context those hops
// stay on one thread, across two contexts each wakes the other thread. A client's attach (or
// tail, command, halt, get: any request with a "run_id") is the first line on its connection
// (the Python client opens one connection per request or stream), so the first line says where
// the connection belongs: it is peeked (recv with MSG_PEEK, nothing consumed), the run is
// looked up, and the socket moves to that run's context before the connection starts. The
// connection then reads the line as usual.
//
// Anything else stays where it was accepted (the main context): a first line that names no run
// of this host, is not a request, is incomplete within the peek's bound, or a peer that hangs up
// first. A connection that later attaches to a run elsewhere is served correctly across the two
// contexts, only with the hops' wake-ups. Placement never refuses or changes an answer.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/server/connection.hpp"

namespace mh::daemon {

class Server;

// The "run_id" of a request line, when the line is a request that names one.
std::optional<std::string> run_id_of_request_line(std::string_view line);

// A socket waiting for its first line, so the daemon's stop can cut the wait short (cancel()).
class HomingSocket : public std::enable_shared_from_this<HomingSocket> {
 public:
  explicit HomingSocket(local_socket socket);
  // On the socket's strand only.
  local_socket& socket() { return socket_; }
  // Any thread: the wait ends now (or does not begin) and the connection is served where it
  // was accepted.
  void cancel();
  // On the strand: cancel() has run.
  bool cancelled() const { return cancelled_; }

 private:
  boost::asio::any_io_executor strand_;  // fixed: the socket itself moves away once homed
  local_socket socket_;
  bool cancelled_ = false;
};

// The io_context of a run of this host, by id; nullptr when there is none (unknown, closed, or
// on another host of the fleet).
using RunContextLookup = std::function<boost::asio::awaitable<boost::asio::io_context*>(std::string run_id)>;
// The daemon's: the registry's entry, looked up on the registry strand.
RunContextLookup registry_run_context(std::shared_ptr<Server> server);

// On the socket's strand: waits for the first line (or the peer's end, or cancel()), and returns
// the socket on the context where the connection is to be served — moved there, or as it was.
boost::asio::awaitable<local_socket> home_connection(std::shared_ptr<HomingSocket> homing, RunContextLookup lookup);

}  // namespace mh::daemon
