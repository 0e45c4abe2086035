// The hook channel (plan.hook_channel): a unix socket (abstract, or a path in the run's gate when
// it has a network of its own) on which the vendor's hook program
// asks for a decision and waits for its answer. Separate because it is a second input beside the
// vendor's stdout, with its own peer check and its own retained log (vendor-hooks.jsonl).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "daemon/peer.hpp"
#include "daemon/process/process_env.hpp"
#include "daemon/run/run_impl.hpp"
#include "daemon/supervisor/supervisor_spec.hpp"

namespace mh::daemon {

namespace {

constexpr std::size_t kMaxHookRequestBytes = 1u << 20;

}  // namespace

void Run::Impl::reply_hook(std::uint64_t connection, std::string line) {
  if (replay) {  // sent once the replay is reconciled, if that hook still waits
    replay->hook_replies[connection] = std::move(line);
    return;
  }
  if (link) {
    if (options.seam_probe) options.seam_probe->answer_written();
    log_hook(connection, "out", json::value(line));
    link->send(supervisor::HookReply{connection, std::move(line)});
    return;
  }
  auto it = hook_waiting.find(connection);
  if (it == hook_waiting.end()) return;  // the hook already went away
  if (options.seam_probe) options.seam_probe->answer_written();
  auto socket = std::move(it->second);
  hook_waiting.erase(it);
  log_hook(connection, "out", json::value(line));
  auto bytes = std::make_shared<std::string>(std::move(line));
  bytes->push_back('\n');
  asio::async_write(*socket, asio::buffer(*bytes), [socket, bytes](boost::system::error_code, std::size_t) {
    boost::system::error_code ec;
    socket->shutdown(asio::socket_base::shutdown_both, ec);
    socket->close(ec);
  });
}

// One line per message on the hook channel, so the vendor traffic is retained whole.
void Run::Impl::log_hook(std::uint64_t connection, std::string_view direction, const json::value& message) {
  std::string line = protocol::canonical_json(
                         json::object{{"connection", connection}, {"direction", direction}, {"message", message}}) +
                     "\n";
  redactor.redact(line);  // no secret in what the run keeps (issue 25), the hook log included
  hook_log.append(line);
}

bool Run::Impl::open_hook_channel(const adapters::HookChannel& channel, std::string& error) {
  boost::system::error_code ec;
  hook_acceptor.emplace(strand);
  hook_acceptor->open(asio::local::stream_protocol(), ec);
  if (!channel.bound_at.empty() || (!channel.address.empty() && channel.address.front() == '/')) {
    // A path socket (a run with a network namespace of its own, where the host's abstract sockets
    // are out of reach): bound in the run's gate (`bound_at`), reached inside its view at
    // `address`. Given to the run's user, 0600: the daemon is multi-threaded, so no umask dance;
    // the gate is the daemon's and 0755, so nobody else can reach the socket meanwhile (the
    // mode it is born with gives others no write, which connecting needs).
    const std::filesystem::path path =
        channel.bound_at.empty() ? std::filesystem::path(channel.address) : channel.bound_at;
    ::unlink(path.c_str());
    int dir_fd = -1;
    std::string reachable = supervisor::reachable_socket_path(path, dir_fd);
    if (reachable.empty()) ec = boost::system::errc::make_error_code(boost::system::errc::filename_too_long);
    if (!ec) hook_acceptor->bind(asio::local::stream_protocol::endpoint(reachable), ec);
    if (!ec && ::chmod(reachable.c_str(), 0600) != 0)
      ec = boost::system::error_code(errno, boost::system::system_category());
    const uid_t run_uid = containment && containment->uid() ? *containment->uid() : ::geteuid();
    if (!ec && run_uid != ::geteuid() && ::chown(reachable.c_str(), run_uid, static_cast<gid_t>(-1)) != 0)
      ec = boost::system::error_code(errno, boost::system::system_category());
    if (dir_fd >= 0) ::close(dir_fd);
    if (!ec) hook_acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) error = "cannot open the hook channel " + path.string() + ": " + ec.message();
    return !ec;
  }
  // An abstract socket: no path, so no path-length limit and nothing left on disk.
  std::string name = channel.address;
  if (!name.empty() && name.front() == '@') name.front() = '\0';
  if (!ec) hook_acceptor->bind(asio::local::stream_protocol::endpoint(name), ec);
  if (!ec) hook_acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) error = "cannot open the hook channel " + channel.address + ": " + ec.message();
  return !ec;
}

asio::awaitable<void> Run::Impl::accept_hooks(std::shared_ptr<Run> keep) {
  for (;;) {
    auto [ec, socket] = co_await hook_acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;
    auto shared = std::make_shared<local_socket>(std::move(socket));
    asio::co_spawn(strand, serve_hook(keep, shared), asio::detached);
  }
}

asio::awaitable<void> Run::Impl::serve_hook(std::shared_ptr<Run> keep, std::shared_ptr<local_socket> socket) {
  (void)keep;
  const auto& plan = std::get<adapters::LaunchPlan>(planned);
  auto refuse = [&](const std::string& why) {
    // The hook program prints a deny on any answer it cannot use; say why for its stderr.
    auto bytes = std::make_shared<std::string>(why + "\n");
    asio::async_write(*socket, asio::buffer(*bytes), [socket, bytes](boost::system::error_code, std::size_t) {});
  };
  auto peer = peer_credentials(socket->native_handle());
  // The peer must be a process of this run: its user (the run's own under a root daemon), its
  // marker, and, when the run has a cgroup, inside it (a marker can be copied; a cgroup cannot
  // be joined from outside without privilege).
  const uid_t run_uid = containment && containment->uid() ? *containment->uid() : ::geteuid();
  if (!peer || peer->uid != run_uid ||
      !process_carries(peer->pid, plan.run_marker.first + "=" + plan.run_marker.second) ||
      (containment && !containment->holds(peer->pid))) {
    refuse("refused: the peer is not a process of this run");
    co_return;
  }
  std::string request;
  auto [ec, n] = co_await asio::async_read_until(*socket, asio::dynamic_buffer(request, kMaxHookRequestBytes), '\n',
                                                 asio::as_tuple(asio::use_awaitable));
  if (ec || core->phase() == RunCore::Phase::closed) {
    refuse("refused: no request line");
    co_return;
  }
  Clock::time_point read_at = Clock::now();
  auto parsed = protocol::parse_json(std::string_view(request).substr(0, n));
  if (!parsed) {
    refuse("refused: the request is not JSON");
    co_return;
  }
  std::uint64_t id = ++hook_connections;
  hook_waiting.emplace(id, socket);
  // The request is vendor input like a line of its stdout (Codex's calls arrive here), timed so.
  SeamProbe* timing = options.seam_probe.get();
  if (timing) timing->input_read(read_at);
  InputExtras extras;
  extras.hook_request = std::move(*parsed);
  input(journal::HookRequest{id, journal ? request.substr(0, n - 1) : std::string()}, Clock::now(), std::move(extras));
  after_core();
  if (timing) timing->input_done();
  // Watch for the hook going away before its answer (the vendor's own timeout kills it).
  if (!hook_waiting.count(id)) co_return;
  char probe;
  co_await socket->async_read_some(asio::buffer(&probe, 1), asio::as_tuple(asio::use_awaitable));
  if (hook_waiting.erase(id)) {
    input(journal::HookGone{id}, Clock::now());
    after_core();
  }
}

}  // namespace mh::daemon
