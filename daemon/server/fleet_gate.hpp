// What the server asks of the fleet ([fleet], docs/fleet.md), and all it knows of it: a small
// interface the session and the request handlers call, implemented in daemon/fleet/ (FleetHost,
// fleet_host.hpp) and handed to the daemon by whoever starts it (Daemon's FleetStarter). No
// file of daemon/server includes fleet code; the fleet includes the server's headers, never the
// other way round.
//
// The free functions below are what the one-host handlers call: each forwards to the gate when
// this daemon has one, and otherwise answers as a daemon without a [fleet] section does.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/json/object.hpp>
#include <boost/system/result.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/server/socket_api.hpp"

namespace mh::daemon {

class Session;
class Server;

class FleetGate {
 public:
  virtual ~FleetGate() = default;

  // This host's id in the fleet.
  virtual const std::string& host_id() const = 0;
  // Publishes run `id`'s stream to the fleet (any thread). A run published already is left as it is.
  virtual void track(const std::string& id) = 0;
  // Drops the lease (a clean stop: the survivors need not wait out the TTL) and stops the threads.
  virtual void stop() = 0;
  // The daemon has begun to stop (on the registry strand, before it stops accepting runs): this
  // host takes no more placements from the fleet's queue. Never blocks.
  virtual void stop_placing() = 0;

  // The socket requests' fleet side, on the session's strand. Those returning bool answer and
  // return true when the request is the fleet's (a run another host owns, or "fleet": true), and
  // return false to let the one-host handler answer.
  // `submit` with "fleet": true: the spec goes on the fleet's queue.
  virtual boost::asio::awaitable<void> submit(Session& s, const SocketRequest& r, const boost::json::object& run) = 0;
  // `list` with "fleet": true.
  virtual boost::asio::awaitable<void> list(Session& s, const SocketRequest& r) = 0;
  virtual boost::asio::awaitable<bool> get(Session& s, const SocketRequest& r) = 0;
  // `command` / `halt` (kind) for a run another host owns: relayed to its owner.
  virtual boost::asio::awaitable<bool> command(Session& s, const SocketRequest& r, std::string_view kind) = 0;
  // `tail` of a run another host owns (or "fleet": true), and `attach` to one.
  virtual boost::asio::awaitable<bool> tail(Session& s, const SocketRequest& r, bool attach) = 0;
  // A line the client sent on a connection attached to another host's run (Session::Stream's
  // fleet_owner): relayed to the owner; `too_long` for a line over the bound, with the framer's words.
  virtual boost::asio::awaitable<void> attached_line(Session& s, std::string line,
                                                     std::optional<std::string> too_long) = 0;
};

// Starts this daemon as a host of the fleet its config's [fleet] names (blocking; at start,
// before READY), or says why not, naming the key at fault.
using FleetStarter =
    std::function<boost::system::result<std::shared_ptr<FleetGate>, std::string>(std::shared_ptr<Server>)>;

// The one-host handlers' calls: forwarded to s.server().fleet, or answered without a fleet
// (FLEET_UNCONFIGURED for the requests that ask for the fleet by name; false, "not the fleet's",
// for the others).
boost::asio::awaitable<void> submit_to_fleet(Session& s, const SocketRequest& r, const boost::json::object& run);
boost::asio::awaitable<void> fleet_list(Session& s, const SocketRequest& r);
boost::asio::awaitable<bool> fleet_get(Session& s, const SocketRequest& r);
boost::asio::awaitable<bool> fleet_command(Session& s, const SocketRequest& r, std::string_view kind);
boost::asio::awaitable<bool> fleet_tail(Session& s, const SocketRequest& r, bool attach);
boost::asio::awaitable<void> fleet_attached_line(Session& s, std::string line,
                                                 std::optional<std::string> too_long = std::nullopt);

}  // namespace mh::daemon
