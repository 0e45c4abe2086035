// The daemon process around the Server: listening (systemd socket activation or a path),
// accepting and admitting connections, signals, the io threads, and shutdown.
#include "daemon/server/daemon.hpp"

#include <sys/stat.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/signal_set.hpp>
#include <fstream>
#include <map>
#include <mutex>
#include <vector>

#include "daemon/file_modes.hpp"
#include "daemon/http/http_listener.hpp"
#include "daemon/log.hpp"
#include "daemon/metrics/exposition.hpp"
#include "daemon/peer.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/server/adoption.hpp"
#include "daemon/server/connection.hpp"
#include "daemon/server/connection_home.hpp"
#include "daemon/server/containment_policy.hpp"
#include "daemon/server/fleet_gate.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"
#include "daemon/server/socket_api.hpp"
#include "daemon/stream/close_syncer.hpp"
#include "daemon/supervisor/supervisor_link.hpp"
#include "daemon/viewer/viewer_routes.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

namespace {

asio::awaitable<http::Response> metrics_response(std::shared_ptr<Server> server) {
  http::Response r;
  r.content_type = std::string(metrics::Exposition::kContentType);
  r.body = co_await server->metrics_page();
  co_return r;
}

// Where a test or a scraper's wrapper finds the bound address (port 0 picks one): written
// whole, then renamed into place, so a reader never sees half of it.
std::optional<std::string> write_http_addr(const std::filesystem::path& path, const std::string& text) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << text << "\n";
    if (!out.flush()) return "cannot write " + tmp.string();
  }
  ::chmod(tmp.c_str(), kFileMode);  // 0640 whatever the umask
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return "cannot write " + path.string() + ": " + ec.message();
  return std::nullopt;
}

}  // namespace

namespace {

// A run that did not close within a halting stop's grace: its supervisor (if it is still this
// run's) and every process of its cgroup are killed, its emptied group removed; a run without a
// group is swept by its marker. Synchronous and bounded: the daemon is about to exit. A run that
// did close has nothing left, and this finds nothing.
void end_run_body(const Server& server, const Run& run) {
  (void)end_stale_supervisor(run.run_dir());
  const CgroupParent* cgroups =
      server.containment && server.containment->cgroups ? &*server.containment->cgroups : nullptr;
  if (cgroups) {
    if (auto group = cgroups->find(run.id())) {
      (void)(*group)->kill();
      if ((*group)->wait_empty_sync(std::chrono::seconds(2))) (void)(*group)->remove();
      return;
    }
  }
  (void)kill_run_processes_sync(std::nullopt, RunMarker{"METAHARNESS_RUN", run.id()}, std::chrono::seconds(2));
}

}  // namespace

struct Daemon::Impl final : Server {
  Impl(DaemonConfig c, FleetStarter f)
      : Server(std::move(c)), start_fleet(std::move(f)), acceptor(io), signals(io, SIGTERM, SIGINT) {}

  FleetStarter start_fleet;  // [fleet]: what makes this daemon a host of the fleet (fleet_gate.hpp)

  asio::local::stream_protocol::acceptor acceptor;
  asio::signal_set signals;
  // The open connections, so the stop can let each flush what it was told (a shutdown's own
  // reply among it) before the io_context stops. Any thread: guarded.
  std::mutex live_mu;
  std::vector<std::weak_ptr<Connection>> live;
  std::map<std::uint32_t, std::size_t> connections_of_uid;  // admitted, by the peer's uid
  std::size_t connections_admitted = 0;                     // their sum: a refused connection, lingering, is not one
  std::vector<std::weak_ptr<HomingSocket>> homing_sockets;  // accepted, waiting for their first line
  std::atomic<bool> stopping{false};
  std::optional<asio::steady_timer> flush_bound;
  std::optional<http::Listener> http_listener;  // [http] listen

  std::filesystem::path http_addr_file() const { return config.state_dir / "http.addr"; }

  // [http] listen: /metrics and the viewer (viewer_routes.hpp) on the address exactly as configured; the bound address
  // goes to the log and to <state_dir>/http.addr.
  std::optional<std::string> listen_http() {
    if (!config.http_listen) return std::nullopt;
    auto server = std::static_pointer_cast<Server>(self());
    auto metrics_route = [server](http::Request) { return metrics_response(server); };
    std::vector<http::Route> routes{{"/metrics", {"GET"}, metrics_route}};
    for (auto& route : viewer_routes(server))
      routes.push_back(std::move(route));
    http_listener.emplace(io, std::move(routes));
    auto bound = http_listener->start(config.http_listen->address, config.http_listen->port);
    if (!bound) return "http.listen: " + bound.error();
    if (auto problem = write_http_addr(http_addr_file(), bound->text())) return "http.listen: " + *problem;
    http_address = bound->text();
    boost::system::error_code ec;
    const auto ip = asio::ip::make_address(bound->address, ec);
    if (!ec && !ip.is_loopback())
      log(LogPriority::warning, "http: " + bound->text() +
                                    " is not a loopback address: /metrics answers anyone who can reach it, without "
                                    "authentication, and viewer tokens cross the network in clear text");
    log(LogPriority::info, "http: metrics on http://" + bound->text() + "/metrics, the viewer on /viewer (also in " +
                               http_addr_file().string() + ")");
    return std::nullopt;
  }

  std::shared_ptr<Impl> self() { return std::static_pointer_cast<Impl>(shared_from_this()); }

  // Socket activation first (LISTEN_FDS); otherwise bind the configured path.
  std::optional<std::string> listen() {
    int n = sd_listen_fds(0);
    if (n > 1) return "systemd passed " + std::to_string(n) + " sockets; metaharness listens on exactly one";
    if (n == 1) {
      int fd = SD_LISTEN_FDS_START;
      if (sd_is_socket_unix(fd, SOCK_STREAM, 1, nullptr, 0) <= 0)
        return "the socket systemd passed is not a listening Unix stream socket";
      boost::system::error_code ec;
      acceptor.assign(asio::local::stream_protocol(), fd, ec);
      if (ec) return "cannot use the socket systemd passed: " + ec.message();
      log(LogPriority::info, "listening on the socket systemd passed");
      return std::nullopt;
    }
    const std::string path = config.socket.string();
    // sockaddr_un holds 107 bytes of path: a longer one cannot be bound, so say so plainly.
    if (path.size() >= sizeof(sockaddr_un::sun_path))
      return "the socket path " + path + " is " + std::to_string(path.size()) +
             " bytes; Unix socket paths are limited to " + std::to_string(sizeof(sockaddr_un::sun_path) - 1);
    std::error_code fsec;
    make_directories(config.socket.parent_path(), fsec, 0755);  // peers must reach the socket
    // A socket file left by a daemon that died: remove it only if nobody answers on it.
    if (std::filesystem::exists(config.socket)) {
      boost::system::error_code ec;
      local_socket probe(io);
      probe.connect(asio::local::stream_protocol::endpoint(path), ec);
      if (!ec) return "another daemon is already listening on " + path;
      std::filesystem::remove(config.socket, fsec);
    }
    boost::system::error_code ec;
    acceptor.open(asio::local::stream_protocol(), ec);
    if (!ec) acceptor.bind(asio::local::stream_protocol::endpoint(path), ec);
    if (!ec) ::chmod(config.socket.c_str(), config.socket_mode);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return "cannot listen on " + path + ": " + ec.message();
    log(LogPriority::info, "listening on " + path);
    return std::nullopt;
  }

  asio::awaitable<void> accept_loop(std::shared_ptr<Impl>) {
    for (;;) {
      auto connection_strand = asio::make_strand(io);
      auto [ec, socket] = co_await acceptor.async_accept(connection_strand, asio::as_tuple(asio::use_awaitable));
      if (ec) {
        if (!acceptor.is_open()) co_return;
        log(LogPriority::warning, "accept failed: " + ec.message());
        continue;
      }
      serve(std::move(socket));
    }
  }

  // Admits a connection by its peer's credentials: a role from [access], and room under
  // server.max_connections. A refused one hears why in one line, then closes.
  void serve(local_socket socket) {
    auto peer = peer_credentials(socket.native_handle());
    std::optional<std::string> refusal;
    Role role = Role::none;
    if (!peer) {
      refusal = refusal_line("FORBIDDEN", "the peer's credentials could not be read", std::nullopt);
      peer = PeerCredentials{};
    } else {
      role = config.role_of(peer->uid, peer->gid);
    }
    if (!refusal && role == Role::none)
      refusal = refusal_line("FORBIDDEN",
                             "uid " + std::to_string(peer->uid) + " (gid " + std::to_string(peer->gid) +
                                 ") has no role on this daemon; [access] in the config grants observe, control or "
                                 "admin",
                             std::nullopt);
    // The slot an admitted connection holds under its uid, given back when the connection (or
    // its homing, cut short by a stop) goes.
    std::shared_ptr<void> slot;
    if (!refusal) {
      const bool admin = role == Role::admin;
      const std::uint32_t uid = peer->uid;
      std::lock_guard lock(live_mu);
      // Admitted connections only: refused ones linger up to 2 s (discard_then_close), and a peer
      // that keeps being refused must not fill the admin's reserve with them.
      if (connections_admitted >= config.max_connections + (admin ? DaemonConfig::kAdminConnectionReserve : 0)) {
        refusal = refusal_line("BUSY", "the daemon is at server.max_connections", std::nullopt);
      } else if (auto held = connections_of_uid.find(uid);
                 !admin && held != connections_of_uid.end() && held->second >= config.max_connections_per_uid) {
        refusal = refusal_line("BUSY",
                               "uid " + std::to_string(uid) + " holds server.max_connections_per_uid (" +
                                   std::to_string(config.max_connections_per_uid) + ") connections already",
                               std::nullopt);
      } else {
        ++connections_of_uid[uid];
        ++connections_admitted;
        slot = std::shared_ptr<void>(nullptr, [self = self(), uid](void*) {
          std::lock_guard lock(self->live_mu);
          --self->connections_admitted;
          if (auto it = self->connections_of_uid.find(uid); it != self->connections_of_uid.end() && --it->second == 0)
            self->connections_of_uid.erase(it);
        });
      }
    }
    if (refusal)
      log(LogPriority::notice,
          "refused a connection from uid " + std::to_string(peer->uid) + " pid " + std::to_string(peer->pid));
    ++connections;
    if (refusal) {
      make_connection(std::move(socket))->start_refused(std::move(*refusal));
      return;
    }
    // Served on the io thread of the run its first request names (connection_home.hpp).
    auto homing = std::make_shared<HomingSocket>(std::move(socket));
    {
      std::lock_guard lock(live_mu);
      std::erase_if(homing_sockets, [](const std::weak_ptr<HomingSocket>& h) { return h.expired(); });
      homing_sockets.push_back(homing);
      if (stopping) homing->cancel();
    }
    auto strand = homing->socket().get_executor();
    asio::co_spawn(strand, home_then_serve(self(), std::move(homing), *peer, role, std::move(slot)), asio::detached);
  }

  asio::awaitable<void> home_then_serve(std::shared_ptr<Impl> self, std::shared_ptr<HomingSocket> homing,
                                        PeerCredentials peer, Role role, std::shared_ptr<void> slot) {
    auto socket = co_await home_connection(std::move(homing), registry_run_context(self));
    auto connection = make_connection(std::move(socket), std::move(slot));
    connection->start(std::make_shared<Session>(self, connection, peer, role));
  }

  // A connection counted in `connections`, known to the stop; one made after the stop began is
  // finished at once (it answers what it was asked, then closes).
  std::shared_ptr<Connection> make_connection(local_socket socket, std::shared_ptr<void> slot = {}) {
    auto gone = [self = self(), slot = std::move(slot)] {
      if (--self->connections == 0 && self->stopping) asio::post(self->io, [self] { self->pool.stop(); });
    };
    auto connection = std::make_shared<Connection>(std::move(socket), config.max_line_bytes, std::move(gone));
    bool stopped;
    {
      std::lock_guard lock(live_mu);
      std::erase_if(live, [](const std::weak_ptr<Connection>& c) { return c.expired(); });
      live.push_back(connection);
      stopped = stopping;
    }
    if (stopped) asio::post(connection->executor(), [connection] { connection->finish(); });
    return connection;
  }

  void begin_shutdown(const std::string& why) override {
    asio::post(registry_strand, [self = self(), why] {
      if (!self->registry.accepting()) return;
      // The fleet's queue first: a spec this host would take from now on could only be refused
      // SHUTTING_DOWN or left unmade (soak finding 6); it is left for a host that stays.
      if (self->fleet) self->fleet->stop_placing();
      auto open = self->registry.stop_accepting();
      sd_notify(0, "STOPPING=1");
      boost::system::error_code ec;
      self->acceptor.close(ec);
      if (self->config.on_stop == "detach") {
        // The runs go on with their supervisors; the next daemon adopts them.
        log(LogPriority::info, "stopping (" + why + "): " + std::to_string(self->registry.active()) +
                                   " run(s) left to their supervisors, for the next start to adopt");
        self->drained();
        return;
      }
      log(LogPriority::info, "stopping (" + why + "): halting " + std::to_string(self->registry.active()) + " run(s)");
      for (auto& run : open)
        run->shutdown();
      if (self->registry.active() == 0) {
        self->drained();
        return;
      }
      // Runs stop within their halt grace; this bounds the whole stop even for a stuck one, and a
      // halting stop leaves nothing of any run running: what did not close is ended here.
      auto deadline = std::make_shared<asio::steady_timer>(self->registry_strand, self->config.shutdown_grace);
      deadline->async_wait([self, deadline, open = std::move(open)](boost::system::error_code ec) {
        if (ec) return;
        log(LogPriority::warning,
            std::to_string(self->registry.active()) +
                " run(s) did not close within the shutdown grace: their processes and supervisors are killed "
                "now; the next start closes their streams");
        for (const auto& run : open)
          end_run_body(*self, *run);
        self->drained();
      });
    });
  }

  // Registry strand: every run has closed (or the grace is over). Keeps the day's spend, lets
  // every connection flush what it was told (the `shutdown` reply, a tail's `end`), then stops:
  // when the last connection has gone, or after kFlushBound for a peer that does not hang up.
  void drained() override {
    signals.cancel();
    cancel_timers();
    if (http_listener) http_listener->stop();
    // Every run's stream.closed made durable and handed to its readers (close_syncer.hpp) before
    // the connections are told to flush: a tail's stream.closed and `end` go out as before.
    CloseSyncer::shared()->wait_idle();
    if (auto problem = registry.save_ledger()) log(LogPriority::error, "daily budgets: " + *problem);
    std::vector<std::shared_ptr<Connection>> open;
    {
      std::lock_guard lock(live_mu);
      if (stopping.exchange(true)) return;
      for (auto& weak : live)
        if (auto c = weak.lock()) open.push_back(std::move(c));
      live.clear();
      for (auto& weak : homing_sockets)  // still waiting for a first line: served now, then finished
        if (auto h = weak.lock()) h->cancel();
      homing_sockets.clear();
    }
    for (auto& c : open)
      asio::post(c->executor(), [c] { c->finish(); });
    open.clear();  // the connections' own loops hold them from here
    if (connections.load() == 0) {
      pool.stop();
      return;
    }
    flush_bound.emplace(registry_strand, kFlushBound);
    flush_bound->async_wait([self = self()](boost::system::error_code ec) {
      if (ec) return;
      log(LogPriority::notice,
          std::to_string(self->connections.load()) + " connection(s) still open at the stop; closing them unflushed");
      self->pool.stop();
    });
  }

  static constexpr std::chrono::seconds kFlushBound{3};
};

namespace {

// One start-up line saying what each run's body gets, and what it does not and why.
void log_containment(const ContainmentPolicy& p) {
  std::string line = "runs: ";
  line += p.cgroups ? "a cgroup each under " + p.cgroups->dir().string() : "no cgroups (" + p.no_cgroups_why + ")";
  line += p.sandbox ? "; sandboxed with " + p.sandbox_spec.bwrap.string() : "; no sandbox (" + p.no_sandbox_why + ")";
  if (p.daemon_is_root)
    line += p.fixed_user ? "; as uid " + std::to_string(p.fixed_user->uid) : "; as a uid of their own each";
  else
    line += "; as the daemon's user";
  log(p.cgroups && p.sandbox ? LogPriority::info : LogPriority::warning, line);
}

}  // namespace

Daemon::Daemon(DaemonConfig config, FleetStarter start_fleet)
    : impl_(std::make_shared<Impl>(std::move(config), std::move(start_fleet))) {}
Daemon::~Daemon() = default;

int Daemon::run() {
  Impl& d = *impl_;
  set_log_level(d.config.log_level);
  log(LogPriority::info,
      "starting: state in " + d.config.state_dir.string() + ", defaults from " + d.config.defaults_from);
  std::error_code ec;
  make_directories(d.config.state_dir, ec);  // 0750 whatever the umask (daemon/file_modes.hpp)
  if (ec) {
    log(LogPriority::error, "cannot create the state directory " + d.config.state_dir.string() + ": " + ec.message());
    return 2;
  }
  if (d.config.supervise) {
    // Every run is launched through it: a missing supervisor would fail each run's start instead.
    auto supervisor = supervisor_binary(d.config);
    if (::access(supervisor.c_str(), X_OK) != 0) {
      log(LogPriority::error, "cannot start: runs.supervisor: " + supervisor.string() +
                                  " is not an executable file (runs.supervise = true launches every run through "
                                  "it; runs.supervise = false runs them as the daemon's children)");
      return 2;
    }
  }
  // A per-adapter default upstream of another wire would refuse every run of that adapter at
  // submit (UPSTREAM_WIRE_MISMATCH): refused here, once, by name.
  for (const auto& [adapter_id, upstream_name] : d.config.default_upstream) {
    const adapters::Adapter* adapter = d.adapters.find(adapter_id);
    auto upstream = d.config.upstreams.find(upstream_name);
    if (adapter && upstream != d.config.upstreams.end() && upstream->second.wire != adapter->model_wire()) {
      log(LogPriority::error, "cannot start: vendor.upstream." + adapter_id + " = \"" + upstream_name +
                                  "\": that upstream serves the " + upstream->second.wire + " wire; the " + adapter_id +
                                  " adapter speaks " + std::string(adapter->model_wire()));
      return 2;
    }
  }
  auto containment = make_containment_policy(d.config, d.config.config_file);
  if (!containment) {
    log(LogPriority::error, "cannot start: " + containment.error());
    return 2;
  }
  d.containment = *containment;
  ContainmentCleanup containment_cleanup(d.containment);  // no empty cgroup parent outlives the daemon
  log_containment(*d.containment);
  auto network = decide_network(d.config, *d.containment);
  if (!network) {
    log(LogPriority::error, "cannot start: " + network.error());
    return 2;
  }
  d.own_network = network->own_network;
  d.why_host_network = network->why_host;
  log(network->own_network || d.config.network == "host" ? LogPriority::info : LogPriority::warning,
      network->own_network
          ? "runs: a network namespace each; their model gateway is the only door"
          : "runs: the host's network (" +
                (d.config.network == "host" ? std::string("runs.network = \"host\"") : network->why_host) + ")");
  auto left = d.registry.recover(d.containment->cgroups ? &*d.containment->cgroups : nullptr, d.config.supervise);
  if (!left.empty())
    log(LogPriority::info, "adopted " + std::to_string(adopt_runs(d, left)) + " of the " + std::to_string(left.size()) +
                               " run(s) the previous daemon left to their supervisors");
  if (auto problem = d.registry.load_ledger(std::chrono::system_clock::now()))
    log(LogPriority::warning, "daily budgets: " + *problem);
  if (auto problem = SubmitLedger::open(d.submits, d.config.state_dir / "submits.jsonl", d.config.request_id_retention,
                                        std::chrono::system_clock::now()))
    log(LogPriority::warning, "submit request ids: " + *problem);
  if (d.config.fleet) {
    if (!d.start_fleet) {
      log(LogPriority::error,
          "cannot start: fleet: the config has a [fleet] section, but this program was built "
          "without the fleet (no FleetStarter)");
      return 2;
    }
    auto host = d.start_fleet(impl_);
    if (!host) {
      log(LogPriority::error, "cannot start: " + host.error());
      return 2;
    }
    d.fleet = *host;
    for (const auto& run : d.registry.snapshot())  // before the io threads: no strand needed yet
      d.fleet->track(run.id);
  }
  if (auto error = d.listen()) {
    log(LogPriority::error, *error);
    if (d.fleet) d.fleet->stop();
    return 2;
  }
  if (auto error = d.listen_http()) {
    log(LogPriority::error, *error);
    if (!sd_listen_fds(0)) std::filesystem::remove(d.config.socket, ec);
    return 2;
  }
  d.signals.async_wait([self = impl_](boost::system::error_code e, int signal) {
    if (!e) self->begin_shutdown(signal == SIGTERM ? "SIGTERM" : "SIGINT");
  });
  asio::co_spawn(d.io, d.accept_loop(impl_), asio::detached);
  sd_notify(0, "READY=1");
  asio::post(d.registry_strand, [self = impl_] { self->schedule_status(); });
  log(LogPriority::info, "ready: " + std::to_string(d.registry.size()) + " run(s) on disk");

  d.pool.run();
  if (d.fleet) d.fleet->stop();  // what is on disk goes out, then the lease
  boost::system::error_code close_ec;
  d.acceptor.close(close_ec);
  if (!sd_listen_fds(0)) std::filesystem::remove(d.config.socket, ec);
  if (d.http_listener) std::filesystem::remove(d.http_addr_file(), ec);
  log(LogPriority::info, "stopped");
  return 0;
}

}  // namespace mh::daemon
