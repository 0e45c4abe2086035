#include "daemon/server/fleet_gate.hpp"

#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

asio::awaitable<void> submit_to_fleet(Session& s, const SocketRequest& r, const boost::json::object& run) {
  std::shared_ptr<FleetGate> fleet = s.server().fleet;
  if (!fleet) {
    s.refuse("FLEET_UNCONFIGURED", "this daemon has no [fleet] section; submit without \"fleet\"", r.id);
    co_return;
  }
  co_await fleet->submit(s, r, run);
}

asio::awaitable<void> fleet_list(Session& s, const SocketRequest& r) {
  std::shared_ptr<FleetGate> fleet = s.server().fleet;
  if (!fleet) {
    s.refuse("FLEET_UNCONFIGURED", "this daemon has no [fleet] section; list without \"fleet\"", r.id);
    co_return;
  }
  co_await fleet->list(s, r);
}

asio::awaitable<bool> fleet_get(Session& s, const SocketRequest& r) {
  std::shared_ptr<FleetGate> fleet = s.server().fleet;
  if (!fleet) co_return false;
  co_return co_await fleet->get(s, r);
}

asio::awaitable<bool> fleet_command(Session& s, const SocketRequest& r, std::string_view kind) {
  std::shared_ptr<FleetGate> fleet = s.server().fleet;
  if (!fleet) co_return false;
  co_return co_await fleet->command(s, r, kind);
}

asio::awaitable<bool> fleet_tail(Session& s, const SocketRequest& r, bool attach) {
  std::shared_ptr<FleetGate> fleet = s.server().fleet;
  if (!fleet) co_return false;
  co_return co_await fleet->tail(s, r, attach);
}

asio::awaitable<void> fleet_attached_line(Session& s, std::string line, std::optional<std::string> too_long) {
  // Only a fleet's tail sets Session::Stream's fleet_owner, so a gate is there; said by name if not.
  std::shared_ptr<FleetGate> fleet = s.server().fleet;
  if (!fleet) {
    s.refuse("FLEET_UNCONFIGURED", "this daemon has no [fleet] section to relay the line to", std::nullopt);
    co_return;
  }
  co_await fleet->attached_line(s, std::move(line), std::move(too_long));
}

}  // namespace mh::daemon
