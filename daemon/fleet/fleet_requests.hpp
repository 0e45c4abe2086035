// The socket requests' fleet side (fleet_requests.cpp), reached from the one-host handlers
// through FleetGate (daemon/server/fleet_gate.hpp), whose FleetHost forwards here: each answers
// and returns true when the request is the fleet's (a run another host owns, or "fleet": true),
// false to let the one-host handler answer. And the owner's side of a relayed command.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <optional>
#include <string>

#include "daemon/fleet/command_relay.hpp"
#include "daemon/server/socket_api.hpp"

namespace mh::daemon {

class FleetHost;
class Session;
class Server;
struct DaemonConfig;

// Whether this host would treat `uid` as an admin (root with root_is_admin, the daemon's own
// user with owner_is_admin, an admin uid or a member of an admin group). A peer host is trusted
// as a control peer at most: a spec or a routed command that claims such a uid is refused
// (docs/fleet.md, Trust), since this host cannot tell a real admin from a forged claim.
bool admin_uid_here(const DaemonConfig& config, std::uint32_t uid);
// Why a peer host's claim to act for `uid` is refused here ("" when it is not).
std::string peer_uid_problem(const DaemonConfig& config, std::uint32_t uid);

// `submit` with "fleet": true: the spec goes on the fleet's queue.
boost::asio::awaitable<void> queue_submit(std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r,
                                          const boost::json::object& run);
// `list` with "fleet": true.
boost::asio::awaitable<void> list_fleet(std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r);
boost::asio::awaitable<bool> get_remote(std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r);
// `tail` of a run another host owns (or "fleet": true), and `attach` to one: its stream from
// the fleet, its pending decisions and its commands relayed to the owner (relay_attached_line).
boost::asio::awaitable<bool> tail_remote(std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r,
                                         bool attach);
// A line the client sent on a connection attached to another host's run: relayed to the owner,
// which handles it as an attached line there (a command, or an unreadable line; `too_long` for a
// line over the bound, with the framer's words); its result is in the stream, or sent here when
// it could not be recorded.
boost::asio::awaitable<void> relay_attached_line(std::shared_ptr<FleetHost> host, Session& s, std::string line,
                                                 std::optional<std::string> too_long);
// `command` / `halt` (kind) for a run another host owns: relayed to its owner, whose answer (the
// same `result` line, or its refusal) goes back to the client.
boost::asio::awaitable<bool> relay_command(std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r,
                                           std::string_view kind);
// The owner's side: one relayed command, answered through `responder` (on the daemon's io).
// A run this host is still making from the queue is waited for (FleetHost::until_made), not
// refused UNKNOWN_RUN.
void serve_fleet_command(std::shared_ptr<Server> server, std::shared_ptr<FleetHost> host, std::string body,
                         fleet::Responder responder);

}  // namespace mh::daemon
