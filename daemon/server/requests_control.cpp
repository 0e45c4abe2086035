// The requests that command a run without attaching to it: command (any metaharness.command/1)
// and halt. Each answers with the command's `result` once its command.result exists.
#include "daemon/run/disk_floor.hpp"
#include "daemon/server/fleet_gate.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/run_access.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

namespace {

// Hands the command to the run and answers with its result (run_access.hpp).
asio::awaitable<void> deliver(Session& s, const SocketRequest& r, const RunEntry& e, protocol::Command cmd) {
  // As an attached command (session.cpp): one the run could not record is refused by name; a
  // halt goes through.
  auto full = std::holds_alternative<protocol::cmd::Halt>(cmd.payload)
                  ? std::nullopt
                  : disk_full_problem(e.dir, kCommandFloorBytes, "the run needs to record a command");
  if (full) {
    s.refuse("DISK_FULL", "the run's record cannot take command " + cmd.id + ": " + *full, r.id);
    co_return;
  }
  DeliveredResult answer = co_await deliver_command(e, std::move(cmd), s.peer().identity());
  s.connection().send(result_line(r.id, answer.result, answer.recorded));
}

}  // namespace

asio::awaitable<void> handle_command(Session& s, const SocketRequest& r) {
  if (co_await fleet_command(s, r, "command")) co_return;  // a run another host owns
  auto e = co_await s.find_run(r, true);
  if (!e) co_return;
  const json::value* c = r.body.if_contains("command");
  if (!c || !c->is_object()) {
    s.refuse("MALFORMED", "a command request needs a \"command\" object (metaharness.command/1)", r.id);
    co_return;
  }
  auto read = protocol::read_command_line(protocol::canonical_json(*c));
  if (!read) {
    s.refuse(
        "MALFORMED",
        "the command is refused (" + std::string(protocol::to_string(read.error().kind)) + "): " + read.error().message,
        r.id);
    co_return;
  }
  co_await deliver(s, r, *e, std::move(*read));
}

asio::awaitable<void> handle_halt(Session& s, const SocketRequest& r) {
  if (co_await fleet_command(s, r, "halt")) co_return;  // a run another host owns
  auto e = co_await s.find_run(r, true);
  if (!e) co_return;
  std::optional<std::string> reason;
  if (const json::value* v = r.body.if_contains("reason"); v && v->is_string()) reason = std::string(v->get_string());
  protocol::Command cmd{
      "socket-halt-" + std::to_string(++s.server().command_counter),
      protocol::cmd::Halt{reason.value_or("halted over the socket by uid " + std::to_string(s.peer().uid))}};
  co_await deliver(s, r, *e, std::move(cmd));
}

}  // namespace mh::daemon
