// The socket API's requests, in one table: each name, the role it needs, and its handler.
// Adding a request is one row here (and its handler); socket_api.cpp refuses a name outside
// the table, naming the table's vocabulary, and the session checks the role before the handler
// runs.
//
// Handlers, by concern: requests_runs.cpp (submit, list, get, status, shutdown),
// requests_control.cpp (command, halt), stream_pump.cpp (tail, attach), daemon/viewer/requests_viewer.cpp
// (viewer: a token for the viewer page).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "daemon/config/config.hpp"
#include "daemon/peer.hpp"
#include "daemon/server/socket_api.hpp"

namespace mh::daemon {

class Session;
class Server;
class RunDir;
struct RunOptions;

// The options every run of this daemon gets: its config's graces and bounds, its containment and
// (runs.supervise) its supervision.
RunOptions run_options(Server& server, const RunDir& dir);
// The supervisor binary: runs.supervisor, else metaharness-supervisor beside this executable.
std::filesystem::path supervisor_binary(const DaemonConfig& config);

// A submit refused: the socket refusal code and why.
struct SubmitRefusal {
  std::string code;
  std::string reason;
};
struct SubmittedRun {
  std::string run_id;
  std::filesystem::path run_dir;
};
using SubmitResult = boost::system::result<SubmittedRun, SubmitRefusal>;
// A new run from a socket API "run" object, for a peer with `role`: checked, admitted, created
// and started. `run_id`: the id a fleet submitter assigned (nullopt: a fresh one). `request_id`:
// the peer's id for this submit, claimed fresh in server->submits by the caller; it is committed
// once the run exists and before it starts (a commit that fails refuses the submit). Any executor.
boost::asio::awaitable<SubmitResult> submit_run(std::shared_ptr<Server> server, PeerCredentials peer, Role role,
                                                boost::json::object run, std::optional<std::string> run_id,
                                                std::optional<std::string> request_id = std::nullopt);
// The refusals a submit makes before anything is admitted (what a fleet submitter checks before
// it queues a spec).
boost::system::result<adapters::RunSpec, SubmitRefusal> check_submit(Server& server, Role role,
                                                                     const boost::json::object& run);

// A handler answers on the session (at least one line, unless the connection closes).
using RequestHandler = boost::asio::awaitable<void> (*)(Session& session, const SocketRequest& request);

struct RequestDef {
  std::string_view name;
  Role needs;
  RequestHandler run;
};

// Every request, in the order the vocabulary names them.
std::span<const RequestDef> request_table();
const RequestDef* find_request(std::string_view name);

boost::asio::awaitable<void> handle_submit(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_list(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_get(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_status(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_shutdown(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_command(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_halt(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_tail(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_attach(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_viewer(Session& s, const SocketRequest& r);
boost::asio::awaitable<void> handle_budget(Session& s, const SocketRequest& r);

}  // namespace mh::daemon
