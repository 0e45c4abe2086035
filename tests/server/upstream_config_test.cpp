// The daemon's config for the run's model gateway (issue 25, docs/gateway.md): [upstreams.NAME],
// [vendor.upstream] and [runs] network; each refusal by name, the key checked at start but never
// read into the config, and the network decided from what the host can build.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>

#include "adapters/adapter.hpp"
#include "adapters/registry.hpp"
#include "daemon/gateway/gateway.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/server/containment_policy.hpp"
#include "daemon/server/run_network.hpp"
#include "tests/support/config_text.hpp"

namespace mh::test {
namespace {

// A key file holding `text`, in a directory that lives as long as the object.
struct KeyFile {
  TempDir dir;  // one per file: TempDir names its directory for its label and the pid
  std::filesystem::path path;
  explicit KeyFile(const std::string& text, const std::string& name = "key")
      : dir("upstream-" + name), path(dir.path() / name) {
    std::ofstream(path) << text;
  }
};

std::string upstream_toml(const std::string& name, const std::string& body) {
  return "[upstreams." + name + "]\n" + body;
}

TEST(UpstreamConfig, AnUpstreamLoadsWithItsKeysPathNeverItsKey) {
  KeyFile key("sk-test-secret\n");
  KeyFile ca("-----BEGIN CERTIFICATE-----\n", "ca.pem");
  auto c = load_config_text(upstream_toml("main",
                                          "wire = \"anthropic\"\nurl = \"https://api.example.com\"\n"
                                          "credential = \"" +
                                              key.path.string() + "\"\nca_file = \"" + ca.path.string() +
                                              "\"\nheader = \"x-api-key\"\n") +
                            "[vendor.upstream]\nclaude = \"main\"\nopencode = \"main\"\n");
  ASSERT_TRUE(c) << c.error();
  ASSERT_EQ(c->upstreams.size(), 1u);
  const auto& u = c->upstreams.at("main");
  EXPECT_EQ(u.wire, "anthropic");
  EXPECT_EQ(u.url, "https://api.example.com");
  EXPECT_EQ(u.credential_path, key.path);
  EXPECT_EQ(u.ca_file, ca.path);
  EXPECT_EQ(u.header, "x-api-key");
  EXPECT_EQ(c->default_upstream.at("claude"), "main");
  EXPECT_EQ(c->default_upstream.at("opencode"), "main");
  EXPECT_FALSE(c->default_upstream.count("codex"));
}

TEST(UpstreamConfig, TheGeminiWireIsTaken) {
  KeyFile key("k");
  auto c = load_config_text(upstream_toml(
      "g",
      "wire = \"gemini\"\nurl = \"https://generativelanguage.example\"\ncredential = \"" + key.path.string() + "\"\n"));
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->upstreams.at("g").wire, "gemini");
}

TEST(UpstreamConfig, PlainHttpIsTakenOnLoopbackOnly) {
  KeyFile key("k");
  const std::string cred = "credential = \"" + key.path.string() + "\"\n";
  for (std::string url : {"http://127.0.0.1:8080", "http://localhost:9/base", "http://[::1]:443/v"}) {
    auto c = load_config_text(upstream_toml("l", "wire = \"openai-responses\"\nurl = \"" + url + "\"\n" + cred));
    EXPECT_TRUE(c) << url << ": " << (c ? "" : c.error());
  }
  EXPECT_TRUE(refused_naming(upstream_toml("l", "wire = \"anthropic\"\nurl = \"http://api.example.com\"\n" + cred),
                             {"upstreams.l.url", "not a loopback host"}));
  EXPECT_TRUE(refused_naming(upstream_toml("l", "wire = \"anthropic\"\nurl = \"ftp://x\"\n" + cred),
                             {"upstreams.l.url", "https://"}));
  EXPECT_TRUE(refused_naming(upstream_toml("l", "wire = \"anthropic\"\nurl = \"https://u:p@x.example\"\n" + cred),
                             {"upstreams.l.url", "user or password"}));
  EXPECT_TRUE(refused_naming(upstream_toml("l", "wire = \"anthropic\"\nurl = \"https://x.example:0\"\n" + cred),
                             {"upstreams.l.url", "port"}));
}

TEST(UpstreamConfig, EachBadKeyIsRefusedByName) {
  KeyFile key("k");
  KeyFile empty("  \n", "empty");
  const std::string url = "url = \"https://a.example\"\n";
  const std::string cred = "credential = \"" + key.path.string() + "\"\n";
  EXPECT_TRUE(refused_naming(upstream_toml("a", "wire = \"grpc\"\n" + url + cred), {"upstreams.a.wire"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a", url + cred), {"upstreams.a.wire", "required"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a", "wire = \"anthropic\"\n" + cred), {"upstreams.a.url", "required"}));
  EXPECT_TRUE(
      refused_naming(upstream_toml("a", "wire = \"anthropic\"\n" + url), {"upstreams.a.credential", "exactly one"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a", "wire = \"anthropic\"\n" + url + cred + "credential_name = \"k\"\n"),
                             {"upstreams.a.credential", "exactly one"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a", "wire = \"anthropic\"\n" + url + "credential = \"/nonexistent/k\"\n"),
                             {"upstreams.a.credential", "cannot be read"}));
  EXPECT_TRUE(refused_naming(
      upstream_toml("a", "wire = \"anthropic\"\n" + url + "credential = \"" + empty.path.string() + "\"\n"),
      {"upstreams.a.credential", "is empty"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a", "wire = \"anthropic\"\n" + url + "credential = \"relative/k\"\n"),
                             {"upstreams.a.credential", "absolute"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a", "wire = \"anthropic\"\n" + url + cred + "ca_file = \"/nonexistent\"\n"),
                             {"upstreams.a.ca_file"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a", "wire = \"anthropic\"\n" + url + cred + "header = \"x y\"\n"),
                             {"upstreams.a.header"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a", "wire = \"anthropic\"\n" + url + cred + "colour = \"red\"\n"),
                             {"unknown key upstreams.a.colour"}));
  EXPECT_TRUE(refused_naming(upstream_toml("\"a b\"", "wire = \"anthropic\"\n" + url + cred), {"upstreams.a b"}));
  EXPECT_TRUE(refused_naming("[upstreams]\na = 1\n", {"upstreams.a", "must be a table"}));
}

TEST(UpstreamConfig, ACredentialNameIsReadFromSystemdsCredentialsDirectory) {
  const std::string body = "wire = \"anthropic\"\nurl = \"https://a.example\"\ncredential_name = \"anthropic-key\"\n";
  ::unsetenv("CREDENTIALS_DIRECTORY");
  EXPECT_TRUE(refused_naming(upstream_toml("a", body), {"upstreams.a.credential_name", "CREDENTIALS_DIRECTORY"}));
  KeyFile key("sk-from-systemd", "anthropic-key");
  ::setenv("CREDENTIALS_DIRECTORY", key.dir.path().c_str(), 1);
  auto c = load_config_text(upstream_toml("a", body));
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->upstreams.at("a").credential_path, key.dir.path() / "anthropic-key");
  EXPECT_EQ(c->upstreams.at("a").credential_name, "anthropic-key");
  EXPECT_TRUE(refused_naming(upstream_toml("a",
                                           "wire = \"anthropic\"\nurl = \"https://a.example\"\n"
                                           "credential_name = \"other\"\n"),
                             {"upstreams.a.credential_name", "cannot be read"}));
  EXPECT_TRUE(refused_naming(upstream_toml("a",
                                           "wire = \"anthropic\"\nurl = \"https://a.example\"\n"
                                           "credential_name = \"../etc/shadow\"\n"),
                             {"upstreams.a.credential_name", "no /"}));
  ::unsetenv("CREDENTIALS_DIRECTORY");
}

TEST(UpstreamConfig, AnAdaptersDefaultUpstreamMustBeConfiguredAndTheAdapterKnown) {
  KeyFile key("k");
  const std::string up = upstream_toml(
      "a", "wire = \"anthropic\"\nurl = \"https://a.example\"\ncredential = \"" + key.path.string() + "\"\n");
  EXPECT_TRUE(refused_naming(up + "[vendor.upstream]\nclaude = \"b\"\n", {"vendor.upstream.claude", "upstreams.b"}));
  EXPECT_TRUE(
      refused_naming(up + "[vendor.upstream]\nnosuchvendor = \"a\"\n", {"unknown key vendor.upstream.nosuchvendor"}));
  EXPECT_TRUE(refused_naming(up + "[vendor]\nupstream = \"a\"\n", {"vendor.upstream", "must be a table"}));
}

TEST(RunsNetwork, OnlyGatewayOrHostIsTaken) {
  EXPECT_TRUE(refused_naming("[runs]\nnetwork = \"none\"\n", {"runs.network", "\"gateway\" or \"host\""}));
  auto c = load_config_text("[runs]\nnetwork = \"host\"\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_EQ(c->network, "host");
  auto d = load_config_text("");
  ASSERT_TRUE(d) << d.error();
  EXPECT_EQ(d->network, "") << "not configured: decided at start";
}

TEST(RunsNetwork, AConfiguredGatewayThatCannotBeBuiltRefusesTheStartByName) {
  daemon::DaemonConfig config;
  daemon::ContainmentPolicy no_sandbox;
  no_sandbox.no_sandbox_why = "runs.sandbox is \"none\"";
  config.network = "gateway";
  auto refused = daemon::decide_network(config, no_sandbox);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().find("runs.network"), std::string::npos) << refused.error();
  EXPECT_NE(refused.error().find("runs.sandbox is \"none\""), std::string::npos) << refused.error();
  // Not configured: the host's network, saying why.
  config.network = "";
  auto fallback = daemon::decide_network(config, no_sandbox);
  ASSERT_TRUE(fallback) << fallback.error();
  EXPECT_FALSE(fallback->own_network);
  EXPECT_NE(fallback->why_host.find("not sandboxed"), std::string::npos) << fallback->why_host;
  // A sandbox but no supervision: the gateway has nowhere to live.
  daemon::ContainmentPolicy sandboxed;
  sandboxed.sandbox = true;
  config.supervise = false;
  config.network = "gateway";
  auto unsupervised = daemon::decide_network(config, sandboxed);
  ASSERT_FALSE(unsupervised);
  EXPECT_NE(unsupervised.error().find("runs.supervise"), std::string::npos) << unsupervised.error();
  config.network = "host";
  auto host = daemon::decide_network(config, no_sandbox);
  ASSERT_TRUE(host);
  EXPECT_FALSE(host->own_network);
  EXPECT_TRUE(host->why_host.empty());
}

// --- the daemon's wiring of a run's gateway (run_network.hpp) ---------------------------------

struct Wiring {
  TempDir dir{"run-network"};
  KeyFile key{"sk-live-key-0123"};
  daemon::DaemonConfig config;
  adapters::AdapterRegistry adapters{adapters::host_config_from_environment()};
  Wiring() {
    daemon::UpstreamConfig a{"main",       "anthropic", "https://api.example.com", key.path, std::nullopt, key.path,
                             std::nullopt, ""};
    daemon::UpstreamConfig o{
        "oai", "openai-responses", "https://api.example.org", key.path, std::nullopt, key.path, std::nullopt, ""};
    config.upstreams.emplace("main", a);
    config.upstreams.emplace("oai", o);
  }
  adapters::RunSpec spec(const std::string& adapter) {
    adapters::RunSpec s;
    s.run_id = "20261206T000000Z-abcdef";
    s.adapter = adapter;
    s.prompt = "p";
    return s;
  }
};

TEST(RunNetwork, SubmitRefusalsAreByName) {
  Wiring w;
  const adapters::Adapter& claude = *w.adapters.find("claude");
  auto code = [&](adapters::RunSpec s, bool own_network, bool scenario = false) -> std::string {
    auto refused = daemon::check_run_network({w.config, own_network}, claude, s, scenario);
    return refused ? refused->code : "";
  };
  auto s = w.spec("claude");
  s.upstream = "nope";
  EXPECT_EQ(code(s, true), "UPSTREAM_UNKNOWN");
  s.upstream = "oai";
  EXPECT_EQ(code(s, true), "UPSTREAM_WIRE_MISMATCH");
  s.upstream = "main";
  EXPECT_EQ(code(s, true), "");
  EXPECT_EQ(code(s, true, true), "MALFORMED") << "upstream and model_scenario";
  s.model_endpoint = adapters::ModelEndpoint{"http://127.0.0.1:1", "t"};
  EXPECT_EQ(code(s, true), "MALFORMED") << "upstream and model_endpoint";
  s.upstream.reset();
  EXPECT_EQ(code(s, false), "") << "a model_endpoint with its own token stays";
  s.egress = {"example.com:443"};
  EXPECT_EQ(code(s, false), "EGRESS_NEEDS_GATEWAY");
  EXPECT_EQ(code(s, true), "");
  auto u = w.spec("claude");
  u.upstream = "main";
  w.config.supervise = false;
  EXPECT_EQ(code(u, false), "UPSTREAM_NEEDS_SUPERVISION");
}

TEST(RunNetwork, TheAdaptersDefaultUpstreamIsTakenOnlyWhenTheRunNamesNoWayToItsModel) {
  Wiring w;
  w.config.default_upstream["claude"] = "main";
  const adapters::Adapter& claude = *w.adapters.find("claude");
  auto s = w.spec("claude");
  ASSERT_FALSE(daemon::check_run_network({w.config, true}, claude, s, false));
  EXPECT_EQ(s.upstream, "main");
  auto scripted = w.spec("claude");
  ASSERT_FALSE(daemon::check_run_network({w.config, true}, claude, scripted, true));
  EXPECT_FALSE(scripted.upstream);
  auto direct = w.spec("claude");
  direct.model_endpoint = adapters::ModelEndpoint{"http://127.0.0.1:1", "t"};
  ASSERT_FALSE(daemon::check_run_network({w.config, true}, claude, direct, false));
  EXPECT_FALSE(direct.upstream);
}

TEST(RunNetwork, AnUpstreamRunsGatewayHoldsTheKeysPathAndAPlaceholderAndTheVendorOnlyThePlaceholder) {
  Wiring w;
  const adapters::Adapter& claude = *w.adapters.find("claude");
  daemon::RunDir dir(w.dir.path() / "run");
  std::filesystem::create_directories(dir.root());
  for (bool own : {true, false}) {
    daemon::RunOptions options;
    options.supervision.emplace();
    options.spec = w.spec("claude");
    options.spec.upstream = "main";
    if (own) options.spec.egress = {"pypi.org:443"};
    ASSERT_FALSE(daemon::wire_run_network({w.config, own}, claude, dir, options, std::nullopt));
    ASSERT_TRUE(options.gateway);
    const auto& g = *options.gateway;
    EXPECT_EQ(g.upstream_name, "main");
    EXPECT_EQ(g.wire, "anthropic");
    EXPECT_EQ(g.url, "https://api.example.com");
    EXPECT_EQ(g.credential, w.key.path) << "the key's path, never the key";
    EXPECT_EQ(g.token.rfind("mh-run-" + options.spec.run_id + "-", 0), 0u) << g.token;
    EXPECT_EQ(g.token.size(), std::string("mh-run-" + options.spec.run_id + "-").size() + 32);
    ASSERT_TRUE(options.spec.model_endpoint);
    EXPECT_EQ(options.spec.model_endpoint->token, g.token);
    EXPECT_EQ(options.own_network, own);
    if (own) {
      EXPECT_EQ(g.listen.path, dir.root() / "gate" / "model.sock");
      EXPECT_EQ(options.spec.model_endpoint->base_url, "http://127.0.0.1:41000");
      ASSERT_TRUE(options.egress);
      EXPECT_EQ(options.egress->allowed, std::vector<std::string>{"pypi.org:443"});
      EXPECT_EQ(options.egress->listen.path, dir.root() / "gate" / "egress.sock");
    } else {
      ASSERT_TRUE(g.listen.tcp_port);
      EXPECT_EQ(options.spec.model_endpoint->base_url, "http://127.0.0.1:" + std::to_string(*g.listen.tcp_port));
      EXPECT_FALSE(options.egress);
    }
    // What the run's files say of it: neither the key nor the placeholder in clear.
    const std::string spec_json = protocol::canonical_json(adapters::spec_to_json(options.spec));
    EXPECT_EQ(spec_json.find("sk-live-key-0123"), std::string::npos) << spec_json;
    EXPECT_EQ(spec_json.find(g.token), std::string::npos) << spec_json;
    EXPECT_NE(spec_json.find("\"upstream\":\"main\""), std::string::npos) << spec_json;
  }
}

TEST(RunNetwork, ASupervisedScenarioIsPlayedByTheGatewayNotInTheDaemon) {
  Wiring w;
  const adapters::Adapter& codex = *w.adapters.find("codex");
  daemon::RunDir dir(w.dir.path() / "scenario-run");
  std::filesystem::create_directories(dir.root());
  daemon::RunOptions options;
  options.supervision.emplace();
  options.spec = w.spec("codex");
  options.model_scenario = dir.scenario_json();
  // A document the gateway cannot play is refused here, at submit, by name.
  std::ofstream(dir.scenario_json()) << R"({"format":"not-a-scenario"})";
  auto refused = daemon::wire_run_network({w.config, true}, codex, dir, options, dir.scenario_json());
  ASSERT_TRUE(refused);
  EXPECT_NE(refused->find("the model scenario"), std::string::npos) << *refused;
  EXPECT_NE(refused->find("is refused"), std::string::npos) << *refused;
  std::ofstream(dir.scenario_json()) << R"({"format":"metaharness.scenario/1","steps":[]})";
  ASSERT_FALSE(daemon::wire_run_network({w.config, true}, codex, dir, options, dir.scenario_json()));
  ASSERT_TRUE(options.gateway);
  EXPECT_EQ(options.gateway->scenario, dir.scenario_json());
  EXPECT_EQ(options.gateway->scenario_log, dir.model_requests());
  EXPECT_EQ(options.gateway->wire, "openai-responses");
  EXPECT_TRUE(options.gateway->url.empty());
  EXPECT_FALSE(options.gateway->credential);
  EXPECT_FALSE(options.model_scenario) << "the daemon hosts no scripted endpoint of its own";
  // Unsupervised (runs.supervise = false): the daemon's own scripted endpoint, as before.
  daemon::RunOptions alone;
  alone.spec = w.spec("codex");
  alone.model_scenario = dir.scenario_json();
  ASSERT_FALSE(daemon::wire_run_network({w.config, false}, codex, dir, alone, dir.scenario_json()));
  EXPECT_FALSE(alone.gateway);
  EXPECT_TRUE(alone.model_scenario);
}

TEST(RunNetwork, APlaceholderIsFreshEachTime) {
  EXPECT_NE(mh::gateway::placeholder_token("r"), mh::gateway::placeholder_token("r"));
}

}  // namespace
}  // namespace mh::test
