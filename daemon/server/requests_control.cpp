// The requests that command a run without attaching to it: command (any metaharness.command/1)
// and halt. Each answers with the command's `result` once its command.result exists.
#include "daemon/server/requests.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

namespace {

// Hands the command to the run and answers with its result: the one recorded in the stream, or
// TOO_LATE (not recorded) for a run that has closed.
asio::awaitable<void> deliver(Session& s, const SocketRequest& r, const RunEntry& e, protocol::Command cmd) {
  std::pair<protocol::ev::CommandResult, bool> answer;
  if (!e.run) {
    answer = {protocol::ev::CommandResult{
                  cmd.id, protocol::CommandOutcome::refused(protocol::RefusalCode::TOO_LATE, "the run has closed")},
              false};
  } else {
    auto run = e.run;
    auto peer = s.peer().identity();
    auto send_command = [run, cmd, peer](auto done) mutable {
      run->command(std::move(cmd), peer, [done](const protocol::ev::CommandResult& result, bool recorded) {
        done(std::make_pair(result, recorded));
      });
    };
    answer = co_await await_callback<std::pair<protocol::ev::CommandResult, bool>>(std::move(send_command));
  }
  s.connection().send(result_line(r.id, answer.first, answer.second));
}

}  // namespace

asio::awaitable<void> handle_command(Session& s, const SocketRequest& r) {
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
