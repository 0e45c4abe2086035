// The gateway's Gemini wire (`wire = "gemini"`): a raw Beast client as the Gemini CLI (its key as
// x-goog-api-key, as the CLI 0.61.0 sends it, or ?key=), the real scripted endpoint over HTTPS as
// the upstream. What the upstream was sent is proven by the endpoint's request log.
#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>

#include "daemon/gateway/gateway.hpp"
#include "tests/gateway/gateway_fixture.hpp"
#include "tests/gateway/gateway_support.hpp"
#include "tests/model/test_support.hpp"

namespace mh::gateway::testing {
namespace {

namespace json = boost::json;
using model::Credential;
using model::ServedRequest;
using model::testing::exchange;
using model::testing::Headers;
using model::testing::Response;

constexpr std::string_view kGeminiScenario = R"({"format": "metaharness.scenario/1", "wires": ["gemini"],
  "steps": [{"name": "answer", "content": [{"type": "thinking", "text": "hm"},
                                           {"type": "text", "text": "Hello through the gateway."}],
             "usage": {"input_tokens": 120, "output_tokens": 33, "cached_input_tokens": 40,
                       "reasoning_tokens": 5}, "sticky": true}]})";

constexpr std::string_view kStream = "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse";
constexpr std::string_view kJson = "/v1beta/models/gemini-2.5-flash:generateContent";

Headers goog_key(const std::string& token) {
  return {{"x-goog-api-key", token}, {"content-type", "application/json"}};
}

// What the Gemini CLI sends, with `generation_config` as its generationConfig.
std::string gemini_body(json::value generation_config = json::object{{"temperature", 1}}) {
  json::object body{
      {"contents",
       json::array{json::object{{"role", "user"}, {"parts", json::array{json::object{{"text", "hello"}}}}}}},
      {"tools",
       json::array{json::object{{"functionDeclarations", json::array{json::object{{"name", "run_shell_command"}}}}}}}};
  if (!generation_config.is_null()) body["generationConfig"] = std::move(generation_config);
  return json::serialize(body);
}

json::value parse_json(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  EXPECT_FALSE(ec) << text;
  return v;
}

class GeminiGatewayTest : public GatewayOverTls {
 protected:
  GeminiGatewayTest() : GatewayOverTls("gateway-gemini", kGeminiScenario) {}

  void start(std::optional<ReservationAnswer> reserve = std::nullopt) {
    start_endpoint();
    auto s = setup(Wire::gemini);
    s.reserve = std::move(reserve);
    start_gateway(std::move(s));
  }
  Response post(std::string_view target, const Headers& headers, const std::string& body) {
    return exchange(gateway_->port(), "POST", target, headers, body);
  }
  std::vector<ServedRequest> upstream_log() const { return endpoint_->requests(); }
};

TEST_F(GeminiGatewayTest, TheRealKeyGoesUpstreamAsXGoogApiKeyAndThePlaceholderNowhere) {
  start();
  const Response r = post(kStream, goog_key(token_), gemini_body());
  ASSERT_EQ(r.status, 200u) << r.error << r.body;
  EXPECT_NE(r.body.find("Hello through the gateway."), std::string::npos);
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  const auto log = upstream_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].credential, Credential::matched);  // the endpoint's own token: the real key
  EXPECT_EQ(log[0].target, kStream);
  for (const auto& [name, value] : log[0].headers)
    EXPECT_EQ(value.find(token_), std::string::npos) << "the placeholder reached the upstream in " << name;
  EXPECT_EQ(r.body.find(endpoint_->token()), std::string::npos);
}

TEST_F(GeminiGatewayTest, AKeyInTheQueryIsAcceptedButNeverForwarded) {
  // The REST form puts the key in the URL: the run's placeholder there is accepted, and the
  // query reaches the upstream without it (the real key goes as the header).
  start();
  const Response r =
      post(std::string(kStream) + "&key=" + token_, {{"content-type", "application/json"}}, gemini_body());
  ASSERT_EQ(r.status, 200u) << r.error << r.body;
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  const auto log = upstream_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].target, kStream) << "the vendor's key= went upstream";
  EXPECT_EQ(log[0].credential, Credential::matched);
}

TEST_F(GeminiGatewayTest, AWrongKeyAnywhereIs401InGeminisShapeAndNeverForwarded) {
  start();
  const std::string other_run = placeholder_token("r2");
  std::vector<Response> answers;
  answers.push_back(post(kStream, goog_key(other_run), gemini_body()));
  answers.push_back(post(kStream, goog_key(endpoint_->token()), gemini_body()));  // the real key is no credential
  answers.push_back(post(std::string(kStream) + "&key=" + other_run, {}, gemini_body()));
  answers.push_back(post(kJson, {{"content-type", "application/json"}}, gemini_body()));
  // A query key that is only the placeholder's beginning.
  answers.push_back(post(std::string(kJson) + "?key=" + token_.substr(0, 10), {}, gemini_body()));
  for (const Response& r : answers) {
    ASSERT_EQ(r.status, 401u) << r.error << r.body;
    const json::value body = parse_json(r.body);
    EXPECT_EQ(body.at("error").at("code"), 401);
    EXPECT_EQ(body.at("error").at("status"), "UNAUTHENTICATED");
  }
  EXPECT_TRUE(upstream_log().empty());
  EXPECT_TRUE(gateway_->told().usage.empty());
}

TEST_F(GeminiGatewayTest, ARouteOutsideTheModelCallsIs403AndNeverForwarded) {
  start();
  const Headers h = goog_key(token_);
  for (auto [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/v1beta/models?pageSize=50"},
           {"POST", "/v1beta/models/gemini-2.5-flash:embedContent"},
           {"POST", "/v1beta/models/gemini-2.5-flash:batchGenerateContent"},
           {"POST", "/upload/v1beta/files?uploadType=resumable"},
           {"POST", "/v1beta/cachedContents"},
           {"POST", "/v1beta/models/../files:generateContent"},
           {"POST", "/v1/messages"}}) {
    const Response r = exchange(gateway_->port(), method, target, h, method == "POST" ? gemini_body() : "");
    ASSERT_EQ(r.status, 403u) << method << " " << target << " " << r.error;
    const json::value body = parse_json(r.body);
    EXPECT_EQ(body.at("error").at("status"), "PERMISSION_DENIED");
    EXPECT_EQ(body.at("error").at("details").at(0).at("reason"), "route_not_allowed");
  }
  EXPECT_EQ(gateway_->told().refused_routes.size(), 7u);
  EXPECT_TRUE(upstream_log().empty());
}

TEST_F(GeminiGatewayTest, UsageIsReadFromUsageMetadataStreamedAndNot) {
  start();
  ASSERT_EQ(post(kStream, goog_key(token_), gemini_body()).status, 200u);
  ASSERT_EQ(post(kJson, goog_key(token_), gemini_body()).status, 200u);
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 2; }));
  for (const RequestUsage& u : gateway_->told().usage) {
    SCOPED_TRACE(u.request);
    EXPECT_EQ(u.status, 200);
    EXPECT_EQ(u.model, "gemini-2.5-flash");
    EXPECT_EQ(u.input_tokens, 120u);
    EXPECT_EQ(u.cache_read_tokens, 40u);
    EXPECT_EQ(u.output_tokens, 38u) << "candidates + thoughts";
    EXPECT_TRUE(u.complete);
  }
}

TEST_F(GeminiGatewayTest, AReservationTakesMaxOutputTokensAndTheModelFromThePath) {
  start(ReservationAnswer{true, ""});
  ASSERT_EQ(post(kStream, goog_key(token_), gemini_body(json::object{{"maxOutputTokens", 2048}})).status, 200u);
  ASSERT_EQ(post(kStream, goog_key(token_), gemini_body(nullptr)).status, 200u);  // the CLI names none
  // countTokens spends nothing: not reserved, forwarded.
  ASSERT_EQ(post("/v1beta/models/gemini-2.5-flash:countTokens", goog_key(token_), gemini_body()).status, 200u);
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 3; }));
  const auto told = gateway_->told();
  ASSERT_EQ(told.reservations.size(), 2u);
  EXPECT_EQ(told.reservations[0].model, "gemini-2.5-flash");
  EXPECT_EQ(told.reservations[0].max_tokens, 2048u);
  EXPECT_GT(told.reservations[0].input_bytes, 0u);
  EXPECT_EQ(told.reservations[1].max_tokens, 0u);
  ASSERT_TRUE(endpoint_->wait_until_ended(3));
  EXPECT_EQ(upstream_log().size(), 3u);
}

TEST_F(GeminiGatewayTest, AnUnreadableMaxOutputTokensIsRefusedUnmeterableWhereABudgetApplies) {
  start(ReservationAnswer{true, ""});
  for (const json::value& config :
       {json::value(json::object{{"maxOutputTokens", "2048"}}), json::value(json::object{{"maxOutputTokens", 2048.5}}),
        json::value(json::object{{"maxOutputTokens", -1}}), json::value("fast")}) {
    const Response r = post(kStream, goog_key(token_), gemini_body(config));
    ASSERT_EQ(r.status, 400u) << json::serialize(config) << " " << r.body;
    const json::value body = parse_json(r.body);
    EXPECT_EQ(body.at("error").at("status"), "INVALID_ARGUMENT");
    EXPECT_EQ(body.at("error").at("details").at(0).at("reason"), "unmeterable_request");
  }
  const Response not_json = post(kStream, goog_key(token_), "[1,2]");
  EXPECT_EQ(not_json.status, 400u);
  EXPECT_TRUE(gateway_->told().reservations.empty());
  EXPECT_TRUE(upstream_log().empty());
}

TEST_F(GeminiGatewayTest, ABudgetRefusalIsAnsweredInGeminisShape) {
  start(ReservationAnswer{false, "over the daily budget"});
  const Response r = post(kStream, goog_key(token_), gemini_body());
  ASSERT_EQ(r.status, 400u) << r.error;
  const json::value body = parse_json(r.body);
  EXPECT_EQ(body.at("error").at("code"), 400);
  EXPECT_EQ(body.at("error").at("message"), "over the daily budget");
  EXPECT_EQ(body.at("error").at("details").at(0).at("reason"), "budget_exceeded");
  EXPECT_TRUE(upstream_log().empty());
}

}  // namespace
}  // namespace mh::gateway::testing
