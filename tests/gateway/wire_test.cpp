// The wires as the gateway knows them: names, key headers, the model routes it forwards, and the
// run's placeholder token.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "daemon/gateway/gateway.hpp"
#include "daemon/gateway/upstream_url.hpp"

namespace mh::gateway {
namespace {

TEST(Wire, NamesRoundTrip) {
  EXPECT_EQ(wire_from_name("anthropic"), Wire::anthropic);
  EXPECT_EQ(wire_from_name("openai-responses"), Wire::openai_responses);
  EXPECT_EQ(wire_from_name("openai"), std::nullopt);
  EXPECT_EQ(wire_name(Wire::anthropic), "anthropic");
  EXPECT_EQ(wire_name(Wire::openai_responses), "openai-responses");
  EXPECT_EQ(default_key_header(Wire::anthropic), "x-api-key");
  EXPECT_EQ(default_key_header(Wire::openai_responses), "authorization");
}

TEST(Wire, OnlyTheModelRoutesAreAllowed) {
  EXPECT_TRUE(route_allowed(Wire::anthropic, "POST", "/v1/messages"));
  EXPECT_TRUE(route_allowed(Wire::anthropic, "POST", "/v1/messages/count_tokens"));
  for (auto path : {"/v1/messages/batches", "/v1/files", "/v1/models", "/v1/messages/", "/v1/messages/../admin",
                    "/v1/organizations/api_keys", "/v1/responses", "/", "http://evil/v1/messages"})
    EXPECT_FALSE(route_allowed(Wire::anthropic, "POST", path)) << path;
  for (auto method : {"GET", "PUT", "DELETE", "HEAD", "TRACE", "post"})
    EXPECT_FALSE(route_allowed(Wire::anthropic, method, "/v1/messages")) << method;

  EXPECT_TRUE(route_allowed(Wire::openai_responses, "POST", "/v1/responses"));
  EXPECT_TRUE(route_allowed(Wire::openai_responses, "POST", "/responses"));
  for (auto path : {"/v1/messages", "/v1/files", "/v1/batches", "/v1/responses/resp_1", "/v1/responses/resp_1/cancel",
                    "/v1/chat/completions", "/v1/models"})
    EXPECT_FALSE(route_allowed(Wire::openai_responses, "POST", path)) << path;
  EXPECT_FALSE(route_allowed(Wire::openai_responses, "GET", "/v1/responses"));
}

TEST(Wire, GeminiIsNamedKeyedAndRoutedToTheModelCallsOnly) {
  EXPECT_EQ(wire_from_name("gemini"), Wire::gemini);
  EXPECT_EQ(wire_name(Wire::gemini), "gemini");
  EXPECT_EQ(default_key_header(Wire::gemini), "x-goog-api-key");
  for (auto path :
       {"/v1beta/models/gemini-2.5-flash:streamGenerateContent", "/v1beta/models/gemini-2.5-flash:generateContent",
        "/v1beta/models/gemini-2.5-flash:countTokens", "/v1/models/gemini-2.5-pro:generateContent"})
    EXPECT_TRUE(route_allowed(Wire::gemini, "POST", path)) << path;
  const auto route = gemini_route("/v1beta/models/gemini-2.5-flash:streamGenerateContent");
  ASSERT_TRUE(route);
  EXPECT_EQ(route->model, "gemini-2.5-flash");
  EXPECT_EQ(route->method, "streamGenerateContent");
  for (auto path :
       {"/v1beta/models", "/v1beta/models/gemini-2.5-flash", "/v1beta/models/gemini-2.5-flash:embedContent",
        "/v1beta/models/gemini-2.5-flash:batchGenerateContent", "/v1beta/models/gemini-2.5-flash:predict",
        "/v1beta/files", "/upload/v1beta/files", "/v1beta/cachedContents", "/v1beta/tunedModels/x:generateContent",
        "/v1beta/models/:generateContent", "/v1beta/models/a/b:generateContent", "/v1beta/models/..:generateContent",
        "/v1beta/models/a%2Fb:generateContent", "/v1/messages", "/v1/responses",
        "/v1beta/models/gemini-2.5-flash:generateContent/x", "/x/v1beta/models/m:generateContent"})
    EXPECT_FALSE(route_allowed(Wire::gemini, "POST", path)) << path;
  EXPECT_FALSE(route_allowed(Wire::gemini, "GET", "/v1beta/models/gemini-2.5-flash:generateContent"));
  // Gemini's routes are no other wire's.
  EXPECT_FALSE(route_allowed(Wire::anthropic, "POST", "/v1beta/models/gemini-2.5-flash:generateContent"));
  EXPECT_FALSE(route_allowed(Wire::openai_responses, "POST", "/v1beta/models/gemini-2.5-flash:generateContent"));
}

TEST(Placeholder, NamesTheRunAndIsFreshEachTime) {
  std::set<std::string> seen;
  const std::regex shape("mh-run-r42-[0-9a-f]{32}");
  for (int i = 0; i < 50; ++i) {
    const std::string token = placeholder_token("r42");
    EXPECT_TRUE(std::regex_match(token, shape)) << token;
    EXPECT_TRUE(seen.insert(token).second) << "repeated " << token;
  }
}

TEST(UpstreamUrl, HttpsAnywhereHttpOnlyOnLoopback) {
  auto a = parse_upstream_url("https://api.anthropic.com");
  ASSERT_TRUE(a.url) << a.error;
  EXPECT_TRUE(a.url->tls);
  EXPECT_EQ(a.url->host, "api.anthropic.com");
  EXPECT_EQ(a.url->port, "443");
  EXPECT_EQ(a.url->base_path, "");
  EXPECT_EQ(a.url->host_header(), "api.anthropic.com");

  auto b = parse_upstream_url("https://Gateway.Example:8443/api/");
  ASSERT_TRUE(b.url) << b.error;
  EXPECT_EQ(b.url->host, "gateway.example");
  EXPECT_EQ(b.url->base_path, "/api");
  EXPECT_EQ(b.url->host_header(), "gateway.example:8443");

  auto c = parse_upstream_url("http://127.0.0.1:9000");
  ASSERT_TRUE(c.url) << c.error;
  EXPECT_FALSE(c.url->tls);
  auto d = parse_upstream_url("http://[::1]:9000/x");
  ASSERT_TRUE(d.url) << d.error;
  EXPECT_EQ(d.url->host, "::1");
  EXPECT_EQ(d.url->host_header(), "[::1]:9000");
  EXPECT_TRUE(parse_upstream_url("http://localhost:9000").url);

  for (auto refused : {"http://93.184.216.34/", "http://api.openai.com", "ftp://127.0.0.1/", "not a url",
                       "https://user:pw@host/", "https://host/?q=1", "https://host:0/"}) {
    auto r = parse_upstream_url(refused);
    EXPECT_FALSE(r.url) << refused;
    EXPECT_FALSE(r.error.empty()) << refused;
  }
  EXPECT_NE(parse_upstream_url("http://93.184.216.34/").error.find("plain http off loopback"), std::string::npos);
}

}  // namespace
}  // namespace mh::gateway
