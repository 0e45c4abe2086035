#include "daemon/server/session.hpp"

#include <boost/asio/post.hpp>

#include "daemon/run/disk_floor.hpp"
#include "daemon/server/fleet_gate.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/run_access.hpp"
#include "daemon/server/server.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

Session::Session(std::shared_ptr<Server> server, std::shared_ptr<Connection> connection, PeerCredentials peer,
                 Role role)
    : server_(std::move(server)), connection_(std::move(connection)), peer_(peer), role_(role) {}

asio::awaitable<void> Session::on_line(std::string line) {
  LineKind kind = classify_line(line);
  if (kind == LineKind::request) {
    auto request = read_request(line);
    if (!request) {
      connection_->send(refusal_line(request.error()));
      co_return;
    }
    co_await dispatch(std::move(*request));
    co_return;
  }
  if (!stream_.fleet_owner.empty()) {  // attached to another host's run: the line goes to its owner
    co_await fleet_attached_line(*this, std::move(line));
    co_return;
  }
  if (!stream_.attached) {
    if (kind == LineKind::command) {
      auto cmd = protocol::read_command_line(line);
      refuse("NOT_ATTACHED", "a command needs a run: attach to one first (or send a command request)",
             cmd ? std::optional<std::string>(cmd->id) : std::nullopt);
    } else {
      auto refused = read_request(line);  // names what was wrong with the line
      connection_->send(
          refusal_line(refused ? SocketRefusal{"UNKNOWN_FORMAT", "unreadable line", std::nullopt} : refused.error()));
    }
    co_return;
  }
  // Attached: every other line is a command for the run, recorded in its stream either way.
  auto cmd = protocol::read_command_line(line);
  // A command whose result the run could not record is not admitted: refused by name on the
  // socket before the run acts on it (daemon/run/disk_floor.hpp; docs/socket-api.md, DISK_FULL).
  // A halt goes through: stopping the run matters more than recording that it was asked to.
  if (cmd && !std::holds_alternative<protocol::cmd::Halt>(cmd->payload)) {
    if (auto full =
            disk_full_problem(stream_.attached->run_dir(), kCommandFloorBytes, "the run needs to record a command")) {
      refuse("DISK_FULL", "the run's record cannot take command " + cmd->id + ": " + *full, cmd->id);
      co_return;
    }
  }
  if (cmd)
    stream_.attached->command(std::move(*cmd), peer_.identity(), unrecorded_result_sender(),
                              std::chrono::steady_clock::now());
  else
    stream_.attached->unreadable_command(cmd.error(), unrecorded_result_sender());
}

asio::awaitable<void> Session::on_oversized(std::string message) {
  if (!stream_.fleet_owner.empty()) {
    // Attached to another host's run: its owner answers, before the next line is relayed.
    co_await fleet_attached_line(*this, "", std::move(message));
  } else if (stream_.attached) {
    stream_.attached->unreadable_command(
        protocol::LineRefusal{protocol::LineRefusalKind::TooLong, std::move(message), std::nullopt},
        unrecorded_result_sender());
  } else {
    refuse("LINE_TOO_LONG", std::move(message), std::nullopt);
  }
}

asio::awaitable<void> Session::dispatch(SocketRequest r) {
  const RequestDef* def = find_request(r.name);
  if (!def) {  // read_request refuses a name outside the table; this only keeps the lookup total
    refuse("UNKNOWN_REQUEST", "unknown request \"" + r.name + "\"; the vocabulary is " + request_vocabulary(), r.id);
    co_return;
  }
  if (role_ < def->needs) {
    forbid("request " + r.name + " needs the " + std::string(to_string(def->needs)) + " role; uid " +
               std::to_string(peer_.uid) + " has " + std::string(to_string(role_)),
           r.id);
    co_return;
  }
  co_await def->run(*this, r);
}

void Session::reply(std::string_view reply, const std::optional<std::string>& id, const json::object& fields) {
  connection_->send(reply_line(reply, id, fields));
}

void Session::refuse(std::string_view code, std::string reason, const std::optional<std::string>& id) {
  connection_->send(refusal_line(code, std::move(reason), id));
}

void Session::forbid(std::string reason, const std::optional<std::string>& id) {
  refuse("FORBIDDEN", std::move(reason), id);
  connection_->close_after_flush();
}

std::optional<std::string> Session::run_id_of(const SocketRequest& r) {
  const json::value* v = r.body.if_contains("run_id");
  if (!v || !v->is_string()) {
    refuse("MALFORMED", "request " + r.name + " needs a \"run_id\" string", r.id);
    return std::nullopt;
  }
  return std::string(v->get_string());
}

asio::awaitable<std::optional<RunEntry>> Session::find_run(const SocketRequest& r, bool to_control) {
  auto id = run_id_of(r);
  if (!id) co_return std::nullopt;
  auto find = [server = server_, id = *id] { return server->registry.lookup(id); };
  auto e = co_await server_->on_registry(std::move(find));
  if (!e || e->dir.empty()) {
    refuse("UNKNOWN_RUN", "no run \"" + protocol::excerpt(*id, 80) + "\" on this daemon", r.id);
    co_return std::nullopt;
  }
  if (to_control && !may_control(role_, peer_.uid, *e)) {
    forbid("run " + *id + " belongs to uid " + std::to_string(e->owner_uid) +
               "; controlling another user's run needs the admin role",
           r.id);
    co_return std::nullopt;
  }
  co_return e;
}

Run::ResultCallback Session::unrecorded_result_sender() {
  auto connection = connection_;
  return [connection](const protocol::ev::CommandResult& r, bool recorded) {
    if (recorded) return;
    asio::post(connection->executor(), [connection, r] { connection->send(result_line(std::nullopt, r, false)); });
  };
}

std::string result_line(const std::optional<std::string>& id, const protocol::ev::CommandResult& r, bool recorded) {
  return reply_line("result", id, result_fields(r, recorded));
}

}  // namespace mh::daemon
