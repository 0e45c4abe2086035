// fleet.credentials against a real nats-server that asks who connects (one node, loopback,
// started and stopped here): a user with a password, and an NKey user whose key pair the test
// makes at run time. The right credentials connect and make the layout; wrong ones, none, and a
// file the link cannot read are refused at start naming the key at fault — by the link, and by a
// daemon that refuses to start.
#include <gtest/gtest.h>

#include <fstream>

#include "daemon/fleet/fleet_link.hpp"
#include "tests/support/nats_cluster.hpp"
#include "tests/support/nkeys.hpp"

namespace mh::test {
namespace {

using fleet::FleetLink;

class FleetCredentials : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("fleet-creds");
    nkey_ = new UserNKey(new_user_nkey());
    server_ = new NatsCluster(dir_->path(), 1, NatsUsers{kUser, kPassword, nkey_->public_key});
    ASSERT_TRUE(server_->ready(1)) << server_->why() << "\n" << server_->log(0);
  }
  static void TearDownTestSuite() {
    delete server_;
    delete nkey_;
    delete dir_;
  }

  // A credentials file holding `text`, named after the test (each test its own).
  std::filesystem::path credentials(const std::string& text) const {
    auto path = dir_->path() / (name() + ".creds");
    std::ofstream(path) << text;
    return path;
  }
  fleet::FleetConfig config(const std::filesystem::path& credentials, const std::string& nkey = "") const {
    fleet::FleetConfig c;
    c.nats_urls = {server_->url(0)};
    c.host_id = "h";
    c.replicas = 1;  // a lone server
    c.prefix = "t";
    for (char ch : name())
      c.prefix += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    c.prefix.resize(std::min<std::size_t>(c.prefix.size(), 16));
    c.credentials = credentials;
    c.nkey = nkey;
    return c;
  }
  static std::string name() { return ::testing::UnitTest::GetInstance()->current_test_info()->name(); }

  // The link connected and made the layout: its events stream and its buckets are there.
  static void expect_layout(const FleetLink& link) {
    jsStreamInfo* info = nullptr;
    EXPECT_EQ(js_GetStreamInfo(&info, link.js(), link.names().events_stream().c_str(), nullptr, nullptr), NATS_OK);
    if (info) jsStreamInfo_Destroy(info);
    EXPECT_NE(link.runs(), nullptr);
    EXPECT_NE(link.hosts(), nullptr);
  }

  static constexpr const char* kUser = "mh";
  static constexpr const char* kPassword = "pw:with:colons";
  static TempDir* dir_;
  static UserNKey* nkey_;
  static NatsCluster* server_;
};
TempDir* FleetCredentials::dir_ = nullptr;
UserNKey* FleetCredentials::nkey_ = nullptr;
NatsCluster* FleetCredentials::server_ = nullptr;

TEST_F(FleetCredentials, AUserAndPasswordConnectAndMakeTheLayout) {
  auto link = FleetLink::connect(config(credentials(std::string(kUser) + ":" + kPassword + "\n")));
  ASSERT_TRUE(link) << link.error().text;
  expect_layout(**link);
}

TEST_F(FleetCredentials, AWrongPasswordOrNoneIsRefusedNamingTheCredentials) {
  auto wrong = FleetLink::connect(config(credentials(std::string(kUser) + ":not-" + kPassword + "\n")));
  ASSERT_FALSE(wrong);
  EXPECT_EQ(wrong.error().key, "fleet.credentials") << wrong.error().text;
  EXPECT_EQ(wrong.error().status, NATS_CONNECTION_AUTH_FAILED) << wrong.error().text;
  // A server that asks for credentials, given none: the key to set is the same.
  auto none = FleetLink::connect(config(""));
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().key, "fleet.credentials") << none.error().text;
}

TEST_F(FleetCredentials, AnNKeySeedConnectsWithItsPublicKey) {
  auto link = FleetLink::connect(config(credentials(nkey_->seed + "\n"), nkey_->public_key));
  ASSERT_TRUE(link) << link.error().text;
  expect_layout(**link);
  // Another key pair's seed with this public key: the server checks the signature against the key.
  auto other = FleetLink::connect(config(credentials(new_user_nkey().seed + "\n"), nkey_->public_key));
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().key, "fleet.credentials") << other.error().text;
}

TEST_F(FleetCredentials, AFileOfNoKnownFormIsRefusedBeforeConnectingNamingTheKey) {
  struct Case {
    std::string file, nkey;
    std::string key, says;
  };
  const Case cases[] = {
      {"a-token-alone\n", "", "fleet.credentials", "holds neither user:password"},
      {"", "", "fleet.credentials", "holds neither user:password"},
      {":password-without-user\n", "", "fleet.credentials", "holds neither user:password"},
      {nkey_->seed + "\n", "", "fleet.nkey", "holds an NKey seed: fleet.nkey must name its public key"},
      {std::string(kUser) + ":" + kPassword + "\n", nkey_->public_key, "fleet.credentials", "holds no NKey seed"},
      {"-----BEGIN NATS USER JWT-----\nx\n------END NATS USER JWT------\n", nkey_->public_key, "fleet.nkey",
       "is a .creds file"},
  };
  for (const Case& c : cases) {
    auto link = FleetLink::connect(config(credentials(c.file), c.nkey));
    ASSERT_FALSE(link) << c.file;
    EXPECT_EQ(link.error().key, c.key) << c.file << ": " << link.error().text;
    EXPECT_NE(link.error().text.find(c.says), std::string::npos) << link.error().text;
    EXPECT_EQ(link.error().status, NATS_INVALID_ARG) << link.error().text;  // refused here, not by the server
  }
}

TEST_F(FleetCredentials, ADaemonWithAWrongPasswordRefusesToStartNamingTheCredentials) {
  auto creds = credentials(std::string(kUser) + ":not-" + kPassword + "\n");
  std::ofstream(dir_->path() / "c.toml") << "[fleet]\nnats_urls = [\"" << server_->url(0) << "\"]\nhost_id = \"h\"\n"
                                         << "replicas = 1\ncredentials = \"" << creds.string() << "\"\n";
  CliProcess p({metaharness_binary().string(), "daemon", "--config", (dir_->path() / "c.toml").string(), "--socket",
                (dir_->path() / "s").string(), "--state-dir", (dir_->path() / "st").string()});
  EXPECT_EQ(p.finish(60s), 2);
  EXPECT_NE(p.stderr_text().find("fleet.credentials: connecting to " + server_->url(0)), std::string::npos)
      << p.stderr_text();
}

}  // namespace
}  // namespace mh::test
