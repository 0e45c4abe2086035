// [http] in the daemon's config: off unless configured, an address exactly as given, a bad value
// refused naming the key and why.
#include <gtest/gtest.h>

#include "tests/support/config_text.hpp"

namespace mh::test {
namespace {

TEST(HttpConfig, AbsentMeansNothingListens) {
  auto c = load_config_text("[runs]\nmax_active = 3\n");
  ASSERT_TRUE(c) << c.error();
  EXPECT_FALSE(c->http_listen);
  auto empty_table = load_config_text("[http]\n");
  ASSERT_TRUE(empty_table) << empty_table.error();
  EXPECT_FALSE(empty_table->http_listen);
}

TEST(HttpConfig, TheShippedExampleDocumentsTheListenKeyAndItLoads) {
  std::string shipped = read_file(source_dir() / "config/metaharness.toml");
  auto commented = daemon::load_config(source_dir() / "config/metaharness.toml");
  ASSERT_TRUE(commented) << commented.error();
  EXPECT_FALSE(commented->http_listen) << "off unless configured";
  const std::string line = "# listen = \"127.0.0.1:9464\"";
  auto at = shipped.find(line);
  ASSERT_NE(at, std::string::npos) << "the [http] block shows its key";
  shipped.erase(at, 2);  // uncomment it
  auto c = load_config_text(shipped);
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->http_listen);
  EXPECT_EQ(c->http_listen->port, 9464);
}

TEST(HttpConfig, AnAddressAndAPortAreTakenExactlyAsGiven) {
  auto c = load_config_text("[http]\nlisten = \"127.0.0.1:9464\"\n");
  ASSERT_TRUE(c) << c.error();
  ASSERT_TRUE(c->http_listen);
  EXPECT_EQ(c->http_listen->address, "127.0.0.1");
  EXPECT_EQ(c->http_listen->port, 9464);
  auto v6 = daemon::parse_http_listen("[::1]:0");
  ASSERT_TRUE(v6) << v6.error();
  EXPECT_EQ(v6->address, "::1");
  EXPECT_EQ(v6->port, 0) << "port 0: any free port";
  auto explicit_any = daemon::parse_http_listen("0.0.0.0:9464");
  ASSERT_TRUE(explicit_any) << "an explicit address is the operator's choice";
  EXPECT_EQ(explicit_any->address, "0.0.0.0");
}

TEST(HttpConfig, ABadValueIsRefusedNamingTheKeyAndWhy) {
  struct Case {
    std::string value;
    std::string says;
  };
  for (const auto& [value, says] : std::vector<Case>{
           {"9464", "has no port"},
           {":9464", "names no address (nothing is listened on by default; say which)"},
           {"localhost:9464", "does not name an IP address (localhost; a host name is not resolved)"},
           {"127.0.0.1:", "has no port between 0 and 65535"},
           {"127.0.0.1:65536", "has no port between 0 and 65535"},
           {"127.0.0.1:http", "has no port between 0 and 65535"},
           {"::1:9464", "is not ADDRESS:PORT (an IPv6 address goes in brackets)"},
           {"[127.0.0.1]:9464", "does not name an IP address"},
           {"", "has no port"},
       }) {
    auto c = load_config_text("[http]\nlisten = \"" + value + "\"\n");
    ASSERT_FALSE(c) << value;
    EXPECT_EQ(c.error().rfind("http.listen: \"" + value + "\" ", 0), 0u) << c.error();
    EXPECT_NE(c.error().find(says), std::string::npos) << c.error();
    EXPECT_NE(c.error().find("e.g. \"127.0.0.1:9464\""), std::string::npos) << c.error();
  }
  auto not_a_string = load_config_text("[http]\nlisten = 9464\n");
  ASSERT_FALSE(not_a_string);
  EXPECT_EQ(not_a_string.error(), "http.listen: must be a string, not integer");
  auto unknown = load_config_text("[http]\nlisten = \"127.0.0.1:1\"\nlisten_on = \"x\"\n");
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error(), "unknown key http.listen_on (known keys of [http]: listen)");
}

}  // namespace
}  // namespace mh::test
