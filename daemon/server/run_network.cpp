#include "daemon/server/run_network.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <cctype>
#include <cstdlib>
#include <fstream>

#include "daemon/file_modes.hpp"
#include "daemon/gateway/gateway.hpp"
#include "daemon/model/scenario.hpp"
#include "daemon/process/sandbox.hpp"
#include "daemon/run/run_dir.hpp"
#include "protocol/json.hpp"

namespace mh::daemon {

namespace {

std::string in_quotes(const std::string& name) {
  return "\"" + protocol::excerpt(name, 64) + "\"";
}

// Whether a budget the gateway can meter before the spend applies to the run: then every model
// request asks the daemon first (`reserve`), so concurrent runs cannot overrun it together.
bool metered_before_spend(const adapters::Budgets& run, const adapters::Budgets& daily) {
  return run.input_tokens || run.output_tokens || run.usd || daily.input_tokens || daily.output_tokens || daily.usd;
}

}  // namespace

std::optional<NetworkRefusal> check_run_network(const NetworkContext& context, const adapters::Adapter& adapter,
                                                adapters::RunSpec& spec, bool has_scenario) {
  const DaemonConfig& config = context.config;
  if (spec.upstream && spec.model_endpoint)
    return NetworkRefusal{"MALFORMED",
                          "a run takes \"upstream\" (a configured upstream, reached through the run's gateway) or "
                          "\"model_endpoint\" (an endpoint and its own token), not both"};
  if (spec.upstream && has_scenario)
    return NetworkRefusal{"MALFORMED",
                          "a run takes \"upstream\" (a configured upstream) or \"model_scenario\" (a scripted "
                          "endpoint), not both"};
  // The adapter's default upstream, for a run that names no way to its model.
  if (!spec.upstream && !spec.model_endpoint && !has_scenario)
    if (auto it = config.default_upstream.find(spec.adapter); it != config.default_upstream.end())
      spec.upstream = it->second;
  if (spec.upstream) {
    auto it = config.upstreams.find(*spec.upstream);
    if (it == config.upstreams.end()) {
      std::string known;
      for (const auto& [name, u] : config.upstreams)
        known += (known.empty() ? "" : ", ") + name;
      return NetworkRefusal{"UPSTREAM_UNKNOWN", "upstream " + in_quotes(*spec.upstream) +
                                                    " is not configured on this host (its [upstreams]: " +
                                                    (known.empty() ? std::string("none") : known) + ")"};
    }
    if (it->second.wire != adapter.model_wire())
      return NetworkRefusal{"UPSTREAM_WIRE_MISMATCH", "upstream " + in_quotes(*spec.upstream) + " serves the " +
                                                          it->second.wire + " wire; the " + spec.adapter +
                                                          " adapter speaks " + std::string(adapter.model_wire())};
    if (!config.supervise)
      return NetworkRefusal{"UPSTREAM_NEEDS_SUPERVISION",
                            "upstream " + in_quotes(*spec.upstream) +
                                " needs the run's model gateway, which its supervisor hosts, and runs.supervise is "
                                "false on this host"};
  }
  if (!spec.egress.empty() && !context.own_network)
    return NetworkRefusal{"EGRESS_NEEDS_GATEWAY",
                          "the run lists egress destinations, but its network would be the host's (runs.network "
                          "is \"host\" here), where nothing enforces a list: every destination would be open"};
  return std::nullopt;
}

std::optional<std::uint16_t> free_loopback_port() {
  boost::asio::io_context io;
  boost::asio::ip::tcp::acceptor acceptor(io);
  boost::system::error_code ec;
  const boost::asio::ip::tcp::endpoint any(boost::asio::ip::address_v4::loopback(), 0);
  acceptor.open(any.protocol(), ec);
  if (!ec) acceptor.bind(any, ec);
  if (ec) return std::nullopt;
  std::uint16_t port = acceptor.local_endpoint(ec).port();
  if (ec || port == 0) return std::nullopt;
  return port;  // closed as `acceptor` goes: the supervisor binds it (see the header: a race it refuses by name)
}

AdoptedRunNetwork adopted_run_network(const RunDir& dir, const adapters::RunSpec& spec) {
  std::ifstream in(dir.root() / "supervisor-spec.json", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), {});
  auto parsed = supervisor::parse_spec(text);
  if (!parsed) return {};
  // An older daemon's supervisor spec names no secret_env: the run spec says which they are.
  if (parsed->secret_env.empty()) parsed->secret_env = spec.secret_vendor_env;
  return AdoptedRunNetwork{supervisor::record_secrets(*parsed), parsed->gateway.has_value()};
}

std::filesystem::path gate_dir(const RunDir& dir) {
  return dir.root() / "gate";
}

std::optional<std::string> wire_run_network(const NetworkContext& context, const adapters::Adapter& adapter,
                                            const RunDir& dir, RunOptions& options,
                                            const std::optional<std::filesystem::path>& scenario) {
  const DaemonConfig& config = context.config;
  adapters::RunSpec& spec = options.spec;
  // A scenario played by the run's gateway loads in its supervisor: checked here first, so a
  // document that cannot be played is refused at submit (as an in-process endpoint refuses it),
  // never found out by a supervisor that cannot start.
  if (scenario && options.supervision)
    if (auto loaded = model::load_scenario_file(*scenario); !loaded)
      return "the model scenario " + scenario->string() + " is refused: " + loaded.error().message();
  options.own_network = context.own_network;
  if (context.own_network) {
    std::error_code ec;
    make_directories(gate_dir(dir), ec);
    if (ec) return "cannot create " + gate_dir(dir).string() + ": " + ec.message();
  }
  const bool supervised = options.supervision.has_value();
  // The gateway: for an upstream; for a scenario under supervision (so the scripted endpoint
  // outlives the daemon as the run does); and for a model_endpoint on a network of the run's own,
  // where the gateway is the only way out (the endpoint's own token then stays with the gateway).
  const bool raw_endpoint = !spec.upstream && spec.model_endpoint && context.own_network;
  if (spec.upstream || (scenario && supervised) || raw_endpoint) {
    supervisor::SpecGateway g;
    g.token = gateway::placeholder_token(spec.run_id);
    g.wire = std::string(adapter.model_wire());
    g.reserve = metered_before_spend(spec.budget, config.daily_budget);
    if (spec.upstream) {
      const UpstreamConfig& u = config.upstreams.at(*spec.upstream);  // check_run_network made sure
      g.upstream_name = u.name;
      g.wire = u.wire;
      g.url = u.url;
      // The path: the supervisor reads the key itself. (The daemon reads it only to redact it from
      // the run's record: supervisor::record_secrets.)
      g.credential = u.credential_path;
      g.ca_file = u.ca_file;
      g.header = u.header;
    } else if (scenario && supervised) {
      g.scenario = *scenario;
      g.scenario_log = dir.model_requests();
      options.model_scenario.reset();  // played by the gateway, not in this process
    } else {
      g.url = spec.model_endpoint->base_url;
      if (!spec.model_endpoint->token.empty()) {
        // The endpoint's token in a file of the run directory (0600, hidden from the run's view
        // with the state directory), for the gateway to add as an upstream's key.
        auto key_file = dir.root() / "model-endpoint.key";
        if (auto problem = write_file(key_file, spec.model_endpoint->token, 0600)) return *problem;
        g.credential = key_file;
      }
    }
    std::string base_url;
    if (context.own_network) {
      g.listen.path = gate_dir(dir) / "model.sock";
      base_url = "http://127.0.0.1:" + std::to_string(kGatewayRelayPort);
    } else {
      auto port = free_loopback_port();
      if (!port) return std::string("no free port on 127.0.0.1 for the run's model gateway");
      g.listen.tcp_port = *port;
      base_url = "http://127.0.0.1:" + std::to_string(*port);
    }
    spec.model_endpoint = adapters::ModelEndpoint{base_url, g.token};
    options.gateway = std::move(g);
  }
  if (!spec.egress.empty()) {
    // check_run_network refused egress on the host's network: here the run has its own.
    supervisor::SpecEgress e;
    e.allowed = spec.egress;
    e.listen.path = gate_dir(dir) / "egress.sock";
    options.egress = std::move(e);
  }
  std::vector<std::pair<std::string, std::string>> env(spec.vendor_env.begin(), spec.vendor_env.end());
  options.redactions = supervisor::record_secrets(options.gateway, env, spec.secret_vendor_env);
  // A raw endpoint's token on the host's network is the vendor's own (attested as such): still
  // never written to the record.
  if (!options.gateway && spec.model_endpoint && !spec.model_endpoint->token.empty())
    options.redactions.emplace_back("model_endpoint.token", spec.model_endpoint->token);
  return std::nullopt;
}

}  // namespace mh::daemon
