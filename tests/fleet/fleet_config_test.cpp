// The [fleet] section: absent, nothing of the fleet is configured; present, every bad value is
// refused at start naming its key; the daemon exits 2 for an unreachable NATS, naming the key.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "daemon/config/config.hpp"
#include "daemon/server/containment_policy.hpp"
#include "tests/support/cli_process.hpp"
#include "tests/support/daemon_harness.hpp"

namespace mh::test {
namespace {

boost::system::result<daemon::DaemonConfig, std::string> load(const std::string& toml) {
  TempDir dir("fleetconf");
  auto path = dir.path() / "c.toml";
  std::ofstream(path) << toml;
  return daemon::load_config(path);
}

TEST(FleetConfig, NoSectionMeansNoFleet) {
  auto c = load("[runs]\nmax_active = 3\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->fleet);
}

TEST(FleetConfig, TheSectionIsReadWithItsDefaults) {
  TempDir dir("fleetcreds");
  const auto creds = dir.path() / "nats.creds";
  std::ofstream(creds) << "h:pw\n";
  auto c = load(
      "[fleet]\nnats_urls = [\"nats://10.0.0.1:4222\", \"tls://n2:4222\"]\nhost_id = \"gpu-07\"\n"
      "credentials = \"" +
      creds.string() + "\"\n");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->fleet);
  EXPECT_EQ(c->fleet->nats_urls.size(), 2u);
  EXPECT_EQ(c->fleet->host_id, "gpu-07");
  EXPECT_EQ(c->fleet->credentials, creds);
  EXPECT_FALSE(c->fleet->insecure_no_credentials);
  EXPECT_EQ(c->fleet->replicas, 3);  // what the docs and the shipped config say
  EXPECT_EQ(c->fleet->lease_ttl.count(), 6000);
  EXPECT_EQ(c->fleet->prefix, "mh");
  EXPECT_FALSE(c->fleet->serial_publish);  // pipelined unless asked (issue 26 section 5)
  EXPECT_EQ(c->fleet->publish_batch_lines, 64);
}

TEST(FleetConfig, TheSerialPublisherIsTakenWhenAskedFor) {
  auto c = load(
      "[fleet]\nnats_urls = [\"nats://127.0.0.1:4222\"]\nhost_id = \"h\"\ninsecure_no_credentials = true\n"
      "serial_publish = true\n");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->fleet);
  EXPECT_TRUE(c->fleet->serial_publish);
}

TEST(FleetConfig, TheBatchOfLinesPerMessageIsTakenAndBounded) {
  const std::string head =
      "[fleet]\nnats_urls = [\"nats://127.0.0.1:4222\"]\nhost_id = \"h\"\ninsecure_no_credentials = true\n";
  auto c = load(head + "publish_batch_lines = 1\n");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->fleet);
  EXPECT_EQ(c->fleet->publish_batch_lines, 1);
  for (const char* bad : {"publish_batch_lines = 0\n", "publish_batch_lines = 1001\n"}) {
    auto refused = load(head + bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().find("fleet.publish_batch_lines: must be between 1 and 1000"), std::string::npos)
        << refused.error();
  }
}

TEST(FleetConfig, ABadValueIsRefusedNamingItsKey) {
  struct Case {
    std::string toml;
    std::string named;
  };
  const std::string urls = "nats_urls = [\"nats://127.0.0.1:4222\"]\nhost_id = \"h\"\ninsecure_no_credentials = true\n";
  const Case cases[] = {
      {"[fleet]\nhost_id = \"h\"\n", "fleet.nats_urls: must name at least one"},
      {"[fleet]\nnats_urls = \"nats://x\"\n", "fleet.nats_urls: must be an array"},
      {"[fleet]\nnats_urls = [\"http://x\"]\n", "fleet.nats_urls: must hold nats://"},
      {"[fleet]\n" + urls + "replicas = 7\n", "fleet.replicas: must be between 1 and 5"},
      {"[fleet]\nnats_urls = [\"nats://x:1\"]\nhost_id = \"a.b\"\n", "fleet.host_id: must hold only"},
      {"[fleet]\n" + urls + "lease_ttl_ms = 10\n", "fleet.lease_ttl_ms: must be between"},
      {"[fleet]\n" + urls + "credentials = \"relative\"\n", "fleet.credentials: must be an absolute path"},
      {"[fleet]\n" + urls + "credentials = \"/nonexistent/creds\"\n", "fleet.credentials: names no readable file"},
      {"[fleet]\n" + urls + "prefix = \"MH\"\n", "fleet.prefix: must hold only a-z and 0-9"},
      // The NKey's public key says whose seed the credentials file holds: alone, it means nothing.
      {"[fleet]\n" + urls + "nkey = \"" + std::string(56, 'U') + "\"\n",
       "fleet.nkey: is the public key of the seed in fleet.credentials, which is not set"},
      {"[fleet]\n" + urls + "nkey = \"SU" + std::string(56, 'A') + "\"\n",
       "fleet.nkey: must be an NKey user's public key"},
      {"[fleet]\n" + urls + "nkey = \"U" + std::string(55, '1') + "\"\n",
       "fleet.nkey: must be an NKey user's public key"},
      {"[fleet]\n" + urls + "replica = 3\n", "unknown key fleet.replica"},
  };
  for (const Case& c : cases) {
    auto loaded = load(c.toml);
    ASSERT_FALSE(loaded) << c.toml;
    EXPECT_NE(loaded.error().find(c.named), std::string::npos) << loaded.error();
  }
}

TEST(FleetConfig, NoCredentialsAreRefusedUnlessTheConfigNamesTheRiskForLoopbackServersOnly) {
  const std::string fleet = "[fleet]\nhost_id = \"h\"\n";
  {
    auto loaded = load(fleet + "nats_urls = [\"nats://127.0.0.1:4222\"]\n");
    ASSERT_FALSE(loaded);
    EXPECT_NE(loaded.error().find("fleet.credentials: not set; a fleet without NATS credentials lets anything that "
                                  "reaches its NATS servers (a run's own tool calls among them) submit runs"),
              std::string::npos)
        << loaded.error();
  }
  for (const char* url : {"nats://127.0.0.1:4222", "nats://127.3.2.1:1", "nats://localhost:4222", "tls://[::1]:4222",
                          "nats://u:p@127.0.0.1:4222"}) {
    auto loaded = load(fleet + "nats_urls = [\"" + url + "\"]\ninsecure_no_credentials = true\n");
    ASSERT_TRUE(loaded) << url << ": " << loaded.error();
    EXPECT_TRUE(loaded->fleet->insecure_no_credentials);
    EXPECT_TRUE(loaded->fleet->credentials.empty());
  }
  for (const char* url : {"nats://10.0.0.1:4222", "nats://127.0.0.1.example.com:4222", "nats://[::2]:4222",
                          "nats://localhost.evil:4222", "nats://128.0.0.1:4222", "nats://127.0.0:4222"}) {
    auto loaded =
        load(fleet + "nats_urls = [\"nats://127.0.0.1:4222\", \"" + url + "\"]\ninsecure_no_credentials = true\n");
    ASSERT_FALSE(loaded) << url;
    EXPECT_NE(loaded.error().find("fleet.insecure_no_credentials: only for NATS servers on loopback"),
              std::string::npos)
        << loaded.error();
    EXPECT_NE(loaded.error().find(url), std::string::npos) << loaded.error();
  }
  TempDir dir("fleetboth");
  std::ofstream(dir.path() / "creds") << "h:pw\n";
  auto both = load(fleet + "nats_urls = [\"nats://127.0.0.1:4222\"]\ninsecure_no_credentials = true\ncredentials = \"" +
                   (dir.path() / "creds").string() + "\"\n");
  ASSERT_FALSE(both);
  EXPECT_NE(both.error().find("fleet.insecure_no_credentials: true, but fleet.credentials is set too"),
            std::string::npos)
      << both.error();
}

TEST(FleetConfig, ADaemonWithNoFleetCredentialsRefusesToStartNamingTheKey) {
  // Refused before anything is asked of NATS (nothing listens there).
  TempDir dir("fleetnocreds");
  std::ofstream(dir.path() / "c.toml") << "[fleet]\nnats_urls = [\"nats://127.0.0.1:9\"]\nhost_id = \"h\"\n";
  CliProcess p({metaharness_binary().string(), "daemon", "--config", (dir.path() / "c.toml").string(), "--socket",
                (dir.path() / "s").string(), "--state-dir", (dir.path() / "st").string()});
  EXPECT_EQ(p.finish(60s), 2);
  EXPECT_NE(p.stderr_text().find("fleet.credentials: not set"), std::string::npos) << p.stderr_text();
  EXPECT_EQ(p.stderr_text().find("connecting to"), std::string::npos) << p.stderr_text();
}

// The [fleet] block of a shipped config, uncommented: `keys` as they are shown (each `# key = `
// line), the credentials path swapped for `credentials` (the shown one need not exist here).
std::string shipped_fleet(const std::string& file, const std::vector<std::string>& keys,
                          const std::filesystem::path& credentials) {
  std::string out = "[fleet]\n";
  for (const auto& line : read_lines(source_dir() / file)) {
    for (const auto& key : keys) {
      const std::string shown = "# " + key + " = ";
      if (line.rfind(shown, 0) != 0) continue;
      std::string value = line.substr(2);
      if (key == "credentials") value = "credentials = \"" + credentials.string() + "\"";
      out += value.substr(0, value.find("  #")) + "\n";
    }
  }
  return out;
}

TEST(FleetConfig, TheShippedConfigsShowCredentialsAndTheirFleetBlockLoadsOnlyWithThem) {
  TempDir dir("fleetshipped");
  const auto creds = dir.path() / "nats.creds";
  std::ofstream(creds) << "h0:pw\n";
  for (const char* file : {"config/metaharness.toml", "packaging/metaharness.toml"}) {
    const std::string with = shipped_fleet(file, {"nats_urls", "host_id", "credentials", "replicas"}, creds);
    EXPECT_NE(with.find("credentials = "), std::string::npos) << file << " shows no credentials:\n" << with;
    auto loaded = load(with);
    ASSERT_TRUE(loaded) << file << ": " << loaded.error() << "\n" << with;
    EXPECT_EQ(loaded->fleet->credentials, creds) << file;
    EXPECT_EQ(loaded->fleet->replicas, 3) << file;
    // The same block without its credentials is refused, naming them.
    auto without = load(shipped_fleet(file, {"nats_urls", "host_id", "replicas"}, creds));
    ASSERT_FALSE(without) << file;
    EXPECT_NE(without.error().find("fleet.credentials: not set"), std::string::npos) << without.error();
  }
}

TEST(FleetConfig, TheCredentialsFileIsHiddenFromEveryRunsSandbox) {
  // Whoever holds the credentials is a host of the fleet: a run must not read them, wherever
  // they live (under /etc, which the sandbox shows read-only, by default).
  TempDir dir("fleethide");
  const auto creds = dir.path() / "nats.creds";
  std::ofstream(creds) << "h0:secret\n";
  auto c = load(
      "[runs]\ncgroup_root = \"none\"\n[fleet]\nnats_urls = [\"nats://10.0.0.1:4222\"]\nhost_id = \"h0\"\n"
      "credentials = \"" +
      creds.string() + "\"\n");
  ASSERT_TRUE(c) << c.error();
  auto policy = daemon::make_containment_policy(*c, std::nullopt);
  ASSERT_TRUE(policy) << policy.error();
  const auto& hidden = (*policy)->sandbox_spec.hidden;
  EXPECT_NE(std::find(hidden.begin(), hidden.end(), creds), hidden.end());
}

TEST(FleetConfig, ADaemonThatCannotReachNatsRefusesToStartNamingTheKey) {
  TempDir dir("fleetnonats");
  // A port nothing listens on (loopback): the connect is refused at once.
  std::ofstream(dir.path() / "c.toml") << "[fleet]\nnats_urls = [\"nats://127.0.0.1:9\"]\nhost_id = \"h\"\n"
                                       << "request_timeout_ms = 2000\ninsecure_no_credentials = true\n";
  CliProcess p({metaharness_binary().string(), "daemon", "--config", (dir.path() / "c.toml").string(), "--socket",
                (dir.path() / "s").string(), "--state-dir", (dir.path() / "st").string()});
  EXPECT_EQ(p.finish(60s), 2);
  EXPECT_NE(p.stderr_text().find("fleet.nats_urls: connecting to nats://127.0.0.1:9"), std::string::npos)
      << p.stderr_text();
}

// With no [fleet] a daemon is one host: a fleet submit or fleet listing is refused by name, and
// nothing was queued or made.
TEST(FleetConfig, AFleetRequestToADaemonWithoutTheSectionIsRefusedByName) {
  TempDir dir("fleetnone");
  DaemonUnderTest d(dir.path(), "[runs]\nmax_active = 2\n");
  ASSERT_TRUE(d.wait_notify("READY=1", 90s)) << d.stderr_text();
  SocketClient c(d.socket());
  auto submitted = c.request(socket_request(
      "submit", R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"}},)"
                R"("fleet":true)"));
  ASSERT_TRUE(submitted);
  EXPECT_EQ(submitted->str("reply"), "refused") << submitted->raw;
  EXPECT_EQ(submitted->str("code"), "FLEET_UNCONFIGURED") << submitted->raw;
  auto listed = c.request(socket_request("list", R"("fleet":true)"));
  ASSERT_TRUE(listed);
  EXPECT_EQ(listed->str("code"), "FLEET_UNCONFIGURED") << listed->raw;
  auto runs = c.request(socket_request("list", ""));
  ASSERT_TRUE(runs && runs->str("reply") == "runs") << (runs ? runs->raw : "no reply");
  EXPECT_TRUE(runs->object.at("runs").as_array().empty()) << runs->raw;
}

}  // namespace
}  // namespace mh::test
