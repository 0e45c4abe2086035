// The run's gateway and egress proxy, hosted by its supervisor (docs/gateway.md,
// docs/supervisor.md): root, outside the run's PID namespace, outliving the daemon exactly as the
// run does. So the real key is in a process the run can neither read nor trace, and a response
// being streamed when the daemon dies completes.
//
// What they report goes to the attached daemon as `reserve`, `gateway_usage`, `gateway_refused`
// and `egress`; while none is attached it is kept, in order and bounded, for the next hello. A
// model request that asks to reserve waits for the daemon's `reserved` however long no daemon is
// there (the adopt bound ends the run if none comes); it is asked again after every hello until
// it is answered, so a daemon that died holding the question does not strand it.
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "daemon/supervisor/supervisor_impl.hpp"

namespace mh::supervisor {

std::optional<std::string> listen_on_path(local::acceptor& acceptor, const fs::path& path,
                                          std::optional<SpecIdentity> owner) {
  // A stale socket of an earlier supervisor of this run is nobody's: this one replaces it.
  ::unlink(path.c_str());
  boost::system::error_code ec;
  acceptor.open(local(), ec);
  int dir_fd = -1;
  std::string reachable;
  if (!ec) {
    // Born 0600 (one thread, before the vendor is spawned: nothing else creates files meanwhile).
    mode_t previous = ::umask(0177);
    reachable = reachable_socket_path(path, dir_fd);
    if (reachable.empty())
      ec = boost::system::errc::make_error_code(boost::system::errc::filename_too_long);
    else
      acceptor.bind(local::endpoint(reachable), ec);
    ::umask(previous);
  }
  // The run's own user connects to it (the gate directory above is root's, so nobody else can
  // replace it between the bind and the chown).
  if (!ec && owner && ::chown(reachable.c_str(), owner->uid, owner->gid) != 0)
    ec = boost::system::error_code(errno, boost::system::system_category());
  if (dir_fd >= 0) ::close(dir_fd);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    return "cannot listen on " + path.string() + ": " + ec.message();
  }
  return std::nullopt;
}

namespace {

// A port on the host's loopback (network = "host"): the daemon picked it free.
std::optional<std::string> listen_on_port(asio::ip::tcp::acceptor& acceptor, std::uint16_t port) {
  boost::system::error_code ec;
  const asio::ip::tcp::endpoint at(asio::ip::address_v4::loopback(), port);
  acceptor.open(at.protocol(), ec);
  if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(at, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return "cannot listen on 127.0.0.1:" + std::to_string(port) + ": " + ec.message();
  return std::nullopt;
}

}  // namespace

std::optional<std::string> Supervisor::Impl::open_gateway() {
  if (spec.gateway) {
    const SpecGateway& g = *spec.gateway;
    gateway::GatewayOptions options;
    options.token = g.token;
    options.upstream.name = g.upstream_name;
    options.upstream.wire = gateway::wire_from_name(g.wire).value_or(gateway::Wire::anthropic);
    options.upstream.header = g.header;
    options.upstream.ca_file = g.ca_file;
    if (g.scenario) {
      // The run's model_scenario, played by this process so it outlives the daemon as the run
      // does. Its token exists only here: the gateway adds it as it would a real key.
      auto scenario = model::load_scenario_file(*g.scenario);
      if (!scenario) return "the gateway's scenario " + g.scenario->string() + ": " + scenario.error().message();
      model::EndpointOptions endpoint_options;
      endpoint_options.log_path = g.scenario_log.value_or(fs::path());
      // What the vendor sent may echo its placeholder or a secret of its environment.
      endpoint_options.redact_log_line = [this](std::string& line) { record_redactor().redact(line); };
      scripted = std::make_unique<model::ScriptedEndpoint>(io, std::move(*scenario), endpoint_options);
      auto port = scripted->start();
      if (!port) return "the gateway's scripted endpoint cannot start: " + port.error().message();
      options.upstream.url = scripted->base_url();
      options.upstream.key = scripted->token();
    } else {
      options.upstream.url = g.url;
      if (g.credential)
        options.upstream.credential = *g.credential;
      else if (g.upstream_name.empty())
        options.upstream.key = "";  // a raw model_endpoint that names no token: nothing to add
    }
    gateway::GatewayHooks hooks;
    if (g.reserve) hooks.reserve = [this](const gateway::Reservation& reservation) { return reserve(reservation); };
    hooks.usage = [this](const gateway::RequestUsage& usage) {
      tell_or_keep(GatewayUsage{usage.request, usage.status, usage.model, usage.input_tokens, usage.output_tokens,
                                usage.cache_read_tokens, usage.cache_creation_tokens, usage.complete, usage.failure});
    };
    hooks.refused_route = [this](const std::string& method, const std::string& path) {
      tell_or_keep(GatewayRefused{method, path});
    };
    hooks.log = [this](const std::string& line) { log(line); };
    gateway = std::make_unique<gateway::Gateway>(io, std::move(options), std::move(hooks));
    if (auto problem = gateway->prepare()) return *problem;
    if (g.listen.path) {
      local::acceptor acceptor(io);
      if (auto problem = listen_on_path(acceptor, *g.listen.path, spec.run_owner())) return "the gateway " + *problem;
      gateway->serve(std::move(acceptor));
    } else {
      asio::ip::tcp::acceptor acceptor(io);
      if (auto problem = listen_on_port(acceptor, *g.listen.tcp_port)) return "the gateway " + *problem;
      gateway->serve(std::move(acceptor));
    }
  }
  if (spec.egress) {
    gateway::EgressHooks hooks;
    // Every attempt is told (the daemon warns once per refused destination and counts them all).
    hooks.attempt = [this](const std::string& destination, bool allowed, const std::string& why) {
      tell_or_keep(Egress{destination, allowed, why});
    };
    hooks.log = [this](const std::string& line) { log(line); };
    egress = std::make_unique<gateway::EgressProxy>(io, spec.egress->allowed, std::move(hooks));
    if (spec.egress->listen.path) {
      local::acceptor acceptor(io);
      if (auto problem = listen_on_path(acceptor, *spec.egress->listen.path, spec.run_owner()))
        return "the egress proxy " + *problem;
      egress->serve(std::move(acceptor));
    } else {
      asio::ip::tcp::acceptor acceptor(io);
      if (auto problem = listen_on_port(acceptor, *spec.egress->listen.tcp_port)) return "the egress proxy " + *problem;
      egress->serve(std::move(acceptor));
    }
  }
  return std::nullopt;
}

void Supervisor::Impl::tell_or_keep(const FromSupervisor& message) {
  if (daemon && daemon->attached && !daemon->closed) {
    send(daemon, message);
    return;
  }
  if (std::holds_alternative<Reserve>(message)) return;  // asked again after the next hello, while it waits
  if (kept_for_daemon.size() == kMaxKeptForDaemon) {
    kept_for_daemon.pop_front();
    if (kept_dropped++ == 0)
      log("over " + std::to_string(kMaxKeptForDaemon) +
          " gateway messages kept for a daemon that is not attached: the oldest are dropped");
  }
  kept_for_daemon.push_back(serialize(message));
}

void Supervisor::Impl::after_hello(const std::shared_ptr<DaemonConnection>& connection) {
  if (kept_dropped > 0) {
    log(std::to_string(kept_dropped) + " gateway messages were dropped while no daemon was attached");
    kept_dropped = 0;
  }
  // What happened meanwhile, in order, then every question still open (the previous daemon may
  // have died holding it; a daemon answers a request once, whichever of its asks it reads).
  for (std::string& line : kept_for_daemon) {
    connection->queue.emplace_back(std::move(line));
  }
  kept_for_daemon.clear();
  for (const auto& [request, pending] : reserves_pending)
    connection->queue.emplace_back(serialize(FromSupervisor(pending->message)));
  pump_daemon(connection);
}

void Supervisor::Impl::on_reserved(const Reserved& reserved) {
  auto it = reserves_pending.find(reserved.request);
  if (it == reserves_pending.end()) return;  // answered already (a question asked twice), or never asked
  it->second->answer = reserved;
  it->second->wake.cancel();
  reserves_pending.erase(it);
}

asio::awaitable<gateway::ReservationAnswer> Supervisor::Impl::reserve(gateway::Reservation reservation) {
  auto pending = std::make_shared<PendingReserve>(io);
  pending->message = Reserve{reservation.request, reservation.model, reservation.max_tokens, reservation.input_bytes};
  reserves_pending[reservation.request] = pending;
  tell_or_keep(pending->message);
  while (!pending->answer && !exit_code) {
    auto [ec] = co_await pending->wake.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;  // cancelled: answered (or the supervisor is ending)
  }
  reserves_pending.erase(reservation.request);
  if (!pending->answer) co_return gateway::ReservationAnswer{false, "the run is ending"};
  co_return gateway::ReservationAnswer{pending->answer->allowed, pending->answer->reason};
}

}  // namespace mh::supervisor
