// The hook channel, held by the supervisor (spec.hook_channel): a Unix socket (abstract, or a path
// in the run's gate directory when the run has a network of its own) on which
// the vendor's hook program asks for a decision and waits. Each peer is checked exactly as the
// daemon's run loop checks it (its uid, the run's marker in its environment, and its cgroup when
// the run has one), its one request line is relayed to the daemon as `hook`, and the connection
// is held until the daemon's `hook_reply` (or the peer's hang-up, told as `hook_gone`). A
// request that arrives with no daemon attached waits the same way: the next hello lists it.
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include "daemon/peer.hpp"
#include "daemon/process/process_env.hpp"
#include "daemon/supervisor/supervisor_impl.hpp"
#include "protocol/json.hpp"

namespace mh::supervisor {

std::optional<std::string> Supervisor::Impl::open_hook_channel() {
  const SpecHookChannel& channel = *spec.hook_channel;
  hook_acceptor.emplace(io);
  if (channel.address.front() == '/') {
    // A path socket (a run with a network namespace of its own, where the host's abstract
    // sockets are out of reach): in the run's gate directory, bound into its view, the run's own.
    std::optional<SpecIdentity> owner;
    if (channel.uid != ::geteuid())
      owner =
          SpecIdentity{channel.uid, spec.run_owner() ? spec.run_owner()->gid : static_cast<std::uint32_t>(::getegid())};
    if (auto problem = listen_on_path(*hook_acceptor, channel.address, owner)) {
      hook_acceptor.reset();
      return "cannot open the hook channel: " + *problem;
    }
    return std::nullopt;
  }
  // An abstract socket: no path, so no path-length limit and nothing left on disk.
  std::string name = channel.address;
  name.front() = '\0';
  boost::system::error_code ec;
  hook_acceptor->open(local(), ec);
  if (!ec) hook_acceptor->bind(local::endpoint(name), ec);
  if (!ec) hook_acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    hook_acceptor.reset();
    return "cannot open the hook channel " + channel.address + ": " + ec.message();
  }
  return std::nullopt;
}

asio::awaitable<void> Supervisor::Impl::accept_hooks() {
  for (;;) {
    auto [ec, socket] = co_await hook_acceptor->async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) {
      if (ec == asio::error::operation_aborted) co_return;
      log("accepting a hook connection failed: " + ec.message());
      continue;
    }
    asio::co_spawn(io, serve_hook(std::make_shared<HookConnection>(std::move(socket))), asio::detached);
  }
}

asio::awaitable<void> Supervisor::Impl::serve_hook(std::shared_ptr<HookConnection> hook) {
  // The hook program prints a deny on any answer it cannot use; the refusal says why, for its
  // stderr. The same words as the daemon's own channel.
  auto refuse = [&hook](const std::string& why) {
    auto bytes = std::make_shared<std::string>(why + "\n");
    auto keep = hook;
    asio::async_write(keep->socket, asio::buffer(*bytes), [keep, bytes](boost::system::error_code, std::size_t) {});
  };
  const SpecHookChannel& channel = *spec.hook_channel;
  auto peer = daemon::peer_credentials(hook->socket.native_handle());
  // The peer must be a process of this run: its user, its marker, and, when the run has a
  // cgroup, inside it (a marker can be copied; a cgroup cannot be joined from outside without
  // privilege).
  if (!peer || peer->uid != channel.uid || !daemon::process_carries(peer->pid, channel.marker) ||
      (spec.cgroup && !daemon::process_in_cgroup(peer->pid, *spec.cgroup))) {
    refuse("refused: the peer is not a process of this run");
    co_return;
  }
  std::string request;
  auto [ec, n] = co_await asio::async_read_until(hook->socket, asio::dynamic_buffer(request, kMaxHookLineBytes), '\n',
                                                 asio::as_tuple(asio::use_awaitable));
  if (ec || exit_code) {
    refuse("refused: no request line");
    co_return;
  }
  std::string_view line = std::string_view(request).substr(0, n - 1);
  if (!protocol::parse_json(line)) {
    refuse("refused: the request is not JSON");
    co_return;
  }
  hook->id = ++hook_connections;
  hook->line = std::string(line);
  hooks_open.emplace(hook->id, hook);
  tell(Hook{hook->id, hook->line});
  // Watch for the hook going away before its answer (the vendor's own timeout kills it). The
  // reply closes the socket, which ends this read too.
  char probe;
  co_await hook->socket.async_read_some(asio::buffer(&probe, 1), asio::as_tuple(asio::use_awaitable));
  if (hooks_open.erase(hook->id)) {
    hooks_gone.push_back(hook->id);
    boost::system::error_code ignored;
    hook->socket.close(ignored);
    tell(HookGone{hook->id});
  }
}

void Supervisor::Impl::reply_hook(std::uint64_t connection, std::string line) {
  auto it = hooks_open.find(connection);
  if (it == hooks_open.end()) return;  // the hook already went away (or was answered)
  auto hook = std::move(it->second);
  hooks_open.erase(it);
  auto bytes = std::make_shared<std::string>(std::move(line));
  bytes->push_back('\n');
  asio::async_write(hook->socket, asio::buffer(*bytes), [hook, bytes](boost::system::error_code, std::size_t) {
    boost::system::error_code ec;
    hook->socket.shutdown(asio::socket_base::shutdown_both, ec);
    hook->socket.close(ec);
  });
}

}  // namespace mh::supervisor
