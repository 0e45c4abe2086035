// `metaharness model serve`: the scripted model endpoint as a standalone process, for running a
// vendor CLI by hand against a scenario (tests host the endpoint in-process instead).
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>
#include <iostream>
#include <memory>

#include "cli/verbs.hpp"
#include "daemon/model/scripted_endpoint.hpp"

namespace mh::cli {

namespace {

struct ServeOptions {
  std::string scenario;
  std::uint16_t port = 0;
  std::string token;
  std::string log;
  std::string tls_cert;
  std::string tls_key;
};

int serve(const ServeOptions& options) {
  auto scenario = model::load_scenario_file(options.scenario);
  if (!scenario) {
    std::cerr << "metaharness model serve: scenario refused: " << scenario.error().message() << "\n";
    return 2;
  }
  model::EndpointOptions endpoint_options;
  endpoint_options.port = options.port;
  endpoint_options.token = options.token;
  endpoint_options.log_path = options.log;
  endpoint_options.tls_cert = options.tls_cert;
  endpoint_options.tls_key = options.tls_key;
  auto served = model::serve_until_signal(std::move(*scenario), std::move(endpoint_options),
                                          [](const model::ScriptedEndpoint& endpoint) {
                                            // One line, then silence on stdout: whoever started us reads the address
                                            // from it.
                                            boost::json::object line{{"base_url", endpoint.base_url()},
                                                                     {"openai_base_url", endpoint.openai_base_url()},
                                                                     {"port", endpoint.port()},
                                                                     {"token", endpoint.token()}};
                                            std::cout << boost::json::serialize(line) << std::endl;
                                          });
  if (!served) {
    std::cerr << "metaharness model serve: cannot listen: " << served.error().message() << "\n";
    return 2;
  }
  std::cerr << "metaharness model serve: stopped after " << *served << " request(s)\n";
  return 0;
}

}  // namespace

void register_model_verbs(CLI::App& app, Context& ctx) {
  CLI::App* model = app.add_subcommand("model", "The scripted model endpoint (tests, demos)");
  model->require_subcommand(1);
  CLI::App* serve_cmd = model->add_subcommand(
      "serve",
      "Serve a metaharness.scenario/1 on 127.0.0.1 as the Anthropic Messages and OpenAI Responses "
      "APIs until SIGINT/SIGTERM. Prints one JSON line {base_url, openai_base_url, port, token}.");
  auto options = std::make_shared<ServeOptions>();
  serve_cmd->add_option("--scenario", options->scenario, "Scenario file (docs/scenarios.md)")->required();
  serve_cmd->add_option("--port", options->port, "Port to bind (default: an ephemeral one)");
  serve_cmd->add_option("--token", options->token, "Credential clients must send (default: a random one)");
  serve_cmd->add_option("--log", options->log, "Append a JSONL record of every request to this file");
  // Both or neither: an HTTPS upstream on loopback for tests of the model gateway (test CA).
  auto* cert = serve_cmd->add_option("--tls-cert", options->tls_cert,
                                     "Serve HTTPS with this certificate chain (PEM); base_url then says https://");
  auto* key = serve_cmd->add_option("--tls-key", options->tls_key, "The private key (PEM) of --tls-cert");
  cert->needs(key);
  key->needs(cert);
  serve_cmd->callback([options, &ctx] { ctx.exit_code = serve(*options); });
}

}  // namespace mh::cli
