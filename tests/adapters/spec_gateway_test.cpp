// A run spec's gateway fields (issue 25, docs/socket-api.md): `upstream`, `egress` and vendor_env
// values marked secret; what spec.json keeps of them, and each refusal by name.
#include <gtest/gtest.h>

#include "adapters/adapter.hpp"
#include "protocol/json.hpp"

namespace mh::adapters {
namespace {

namespace json = boost::json;

boost::system::result<RunSpec, std::string> from(const std::string& extra) {
  auto v = protocol::parse_json(R"({"adapter":"claude","prompt":"p")" + extra + "}");
  EXPECT_TRUE(v && v->is_object());
  return spec_from_json(v->get_object());
}

TEST(SpecGateway, UpstreamEgressAndSecretValuesRoundTripWithoutTheValues) {
  auto spec = from(R"(,"upstream":"main","egress":["pypi.org:443","[2001:db8::1]:8443","pypi.org:443"],)"
                   R"("vendor_env":{"PLAIN":"visible-value","SECRET_ONE":{"value":"s3cret-value","secret":true},)"
                   R"("NOT_SECRET":{"value":"v2","secret":false}})");
  ASSERT_TRUE(spec) << spec.error();
  EXPECT_EQ(spec->upstream, "main");
  EXPECT_EQ(spec->egress, (std::vector<std::string>{"pypi.org:443", "[2001:db8::1]:8443"})) << "a repeat is one";
  EXPECT_EQ(spec->vendor_env.at("SECRET_ONE"), "s3cret-value");
  EXPECT_EQ(spec->vendor_env.at("NOT_SECRET"), "v2");
  EXPECT_EQ(spec->secret_vendor_env, (std::set<std::string>{"SECRET_ONE"}));

  spec->decision_deadline_ms = 55'000;  // the daemon's default, filled in before spec.json is written
  json::value written = spec_to_json(*spec);
  const std::string text = protocol::canonical_json(written);
  EXPECT_EQ(text.find("s3cret-value"), std::string::npos) << text;
  EXPECT_EQ(text.find("visible-value"), std::string::npos) << text;
  EXPECT_NE(text.find(R"("upstream":"main")"), std::string::npos) << text;
  // Read back (an adopted run reads its spec.json): the upstream, the egress and the secret mark stay.
  auto back = spec_from_json(written.as_object());
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(back->upstream, "main");
  EXPECT_EQ(back->egress, spec->egress);
  EXPECT_EQ(back->secret_vendor_env, spec->secret_vendor_env);

  // A get redacts again whatever spec.json holds, the marked form included.
  auto raw = protocol::parse_json(R"({"vendor_env":{"A":{"value":"leak-a","secret":true},"B":"leak-b"}})");
  const std::string redacted = protocol::canonical_json(redacted_spec_json(*raw));
  EXPECT_EQ(redacted.find("leak-"), std::string::npos) << redacted;
}

TEST(SpecGateway, NoUpstreamAndNoEgressAreWrittenAsNullAndEmpty) {
  auto spec = from("");
  ASSERT_TRUE(spec) << spec.error();
  EXPECT_FALSE(spec->upstream);
  EXPECT_TRUE(spec->egress.empty());
  json::value written = spec_to_json(*spec);
  EXPECT_TRUE(written.at("upstream").is_null());
  EXPECT_TRUE(written.at("egress").as_array().empty());
}

TEST(SpecGateway, EachBadFieldIsRefusedByName) {
  auto refused_with = [](const std::string& extra, const std::string& words) {
    auto spec = from(extra);
    if (spec) return ::testing::AssertionFailure() << "taken: " << extra;
    if (spec.error().find(words) == std::string::npos)
      return ::testing::AssertionFailure() << "\"" << spec.error() << "\" does not say \"" << words << "\"";
    return ::testing::AssertionSuccess();
  };
  EXPECT_TRUE(refused_with(R"(,"upstream":"")", "\"upstream\""));
  EXPECT_TRUE(refused_with(R"(,"upstream":")" + std::string(65, 'a') + "\"", "\"upstream\""));
  EXPECT_TRUE(refused_with(R"(,"egress":"pypi.org:443")", "\"egress\""));
  EXPECT_TRUE(refused_with(R"(,"egress":[443])", "\"egress\""));
  EXPECT_TRUE(refused_with(R"(,"egress":["pypi.org"])", "HOST:PORT"));
  EXPECT_TRUE(refused_with(R"(,"egress":[":443"])", "HOST:PORT"));
  EXPECT_TRUE(refused_with(R"(,"egress":["pypi.org:0"])", "port between 1 and 65535"));
  EXPECT_TRUE(refused_with(R"(,"egress":["pypi.org:65536"])", "port between 1 and 65535"));
  EXPECT_TRUE(refused_with(R"(,"egress":["pypi.org:44x"])", "port between 1 and 65535"));
  EXPECT_TRUE(refused_with(R"(,"egress":["py pi.org:443"])", "not a name or an address"));
  EXPECT_TRUE(refused_with(R"(,"egress":["[nothex]:443"])", "IPv6"));
  std::string many = R"(,"egress":[)";
  for (int i = 0; i < 65; ++i)
    many += (i ? "," : "") + std::string("\"h") + std::to_string(i) + ".example:443\"";
  EXPECT_TRUE(refused_with(many + "]", "at most 64"));
  EXPECT_TRUE(refused_with(R"(,"vendor_env":{"A":{"secret":true}})", "vendor_env"));
  EXPECT_TRUE(refused_with(R"(,"vendor_env":{"A":{"value":"v","secret":"yes"}})", "vendor_env"));
  EXPECT_TRUE(refused_with(R"(,"vendor_env":{"A":{"value":"v","other":1}})", "vendor_env"));
  EXPECT_TRUE(refused_with(R"(,"vendor_options":{"A":{"value":"v"}})", "vendor_options"));
}

}  // namespace
}  // namespace mh::adapters
