// One client's requests: what the lines of one connection mean. A request line is read
// (socket_api.hpp), looked up in the one request table (requests.hpp), checked against the
// peer's role and handed to its handler. While the connection is attached to a run, every other
// line is a command for that run.
//
// The session lives on its connection's strand, as long as its connection reads or a stream it
// started runs. Handlers reach the daemon through server() and answer through the helpers below.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <optional>
#include <string>

#include "daemon/config/config.hpp"
#include "daemon/peer.hpp"
#include "daemon/server/connection.hpp"
#include "daemon/server/registry.hpp"
#include "daemon/server/socket_api.hpp"

namespace mh::daemon {

class Server;

class Session : public Connection::Handler, public std::enable_shared_from_this<Session> {
 public:
  Session(std::shared_ptr<Server> server, std::shared_ptr<Connection> connection, PeerCredentials peer, Role role);

  boost::asio::awaitable<void> on_line(std::string line) override;
  boost::asio::awaitable<void> on_oversized(std::string message) override;

  Server& server() { return *server_; }
  const std::shared_ptr<Server>& server_ptr() { return server_; }
  Connection& connection() { return *connection_; }
  const std::shared_ptr<Connection>& connection_ptr() { return connection_; }
  const PeerCredentials& peer() const { return peer_; }
  Role role() const { return role_; }

  // Answers.
  void reply(std::string_view reply, const std::optional<std::string>& id, const json::object& fields = {});
  void refuse(std::string_view code, std::string reason, const std::optional<std::string>& id);
  // FORBIDDEN, and the connection closes once it is sent.
  void forbid(std::string reason, const std::optional<std::string>& id);

  // The request's "run_id", or a MALFORMED refusal (nullopt).
  std::optional<std::string> run_id_of(const SocketRequest& r);
  // The run a request names, or its refusal (nullopt): UNKNOWN_RUN; FORBIDDEN when it is to be
  // controlled by a peer that neither owns it nor is admin.
  boost::asio::awaitable<std::optional<RunEntry>> find_run(const SocketRequest& r, bool to_control);
  // A command result that could not be recorded (the stream had closed) goes back to this client
  // as a `result` line; a recorded one is in the stream already.
  Run::ResultCallback unrecorded_result_sender();

  // The one stream a connection may carry (tail or attach), and the run it controls when attached.
  struct Stream {
    bool active = false;
    std::string run_id;
    std::shared_ptr<Run> attached;
    std::string fleet_owner;  // attached to a run of this host of the fleet (fleet_gate.hpp)
  };
  Stream& stream() { return stream_; }

 private:
  boost::asio::awaitable<void> dispatch(SocketRequest r);

  std::shared_ptr<Server> server_;
  std::shared_ptr<Connection> connection_;
  PeerCredentials peer_;
  Role role_;
  Stream stream_;
};

// A `result` line: the command's id, its outcome, and whether it is the command.result in the stream.
std::string result_line(const std::optional<std::string>& id, const protocol::ev::CommandResult& r, bool recorded);

}  // namespace mh::daemon
