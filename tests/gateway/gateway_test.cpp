// The gateway between a raw Beast client (the vendor) and the real scripted endpoint serving HTTPS
// with a throwaway CA (the upstream; its own token stands for the real key). What the upstream was
// sent is proven by the endpoint's request log.
#include "daemon/gateway/gateway.hpp"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>

#include "tests/gateway/gateway_fixture.hpp"
#include "tests/gateway/gateway_support.hpp"
#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"
#include "tests/support/test_ca.hpp"

namespace mh::gateway::testing {
namespace {

namespace json = boost::json;
using model::Credential;
using model::Ending;
using model::ServedRequest;
using model::testing::anthropic_body;
using model::testing::Client;
using model::testing::exchange;
using model::testing::Headers;
using model::testing::Response;
using model::testing::responses_body;
using model::testing::RunningEndpoint;
using model::testing::TempDir;

constexpr std::string_view kTextScenario = R"({"format": "metaharness.scenario/1",
  "steps": [{"name": "answer", "content": [{"type": "text", "text": "Hello through the gateway."}],
             "usage": {"input_tokens": 120, "output_tokens": 33, "cached_input_tokens": 40,
                       "cache_creation_input_tokens": 7}, "sticky": true}]})";

Headers anthropic_bearer(const std::string& token) {
  return {{"authorization", "Bearer " + token},
          {"anthropic-version", "2023-06-01"},
          {"content-type", "application/json"},
          {"user-agent", "claude-cli/2.1.197 (external, sdk-cli)"}};
}
Headers anthropic_key(const std::string& token) {
  return {{"x-api-key", token}, {"anthropic-version", "2023-06-01"}, {"content-type", "application/json"}};
}
Headers openai_bearer(const std::string& token) {
  return {{"authorization", "Bearer " + token}, {"content-type", "application/json"}, {"accept", "text/event-stream"}};
}

json::value parse_json(const std::string& text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  EXPECT_FALSE(ec) << text;
  return v;
}

// One run's world (gateway_fixture.hpp), with the requests this file sends.
class GatewayTest : public GatewayOverTls {
 protected:
  GatewayTest() : GatewayOverTls("gateway", kTextScenario) {}

  void start(Wire wire = Wire::anthropic) {
    start_endpoint();
    start_gateway(setup(wire));
  }

  Response post_messages(const std::string& token, bool stream, std::string_view target = "/v1/messages?beta=true") {
    return exchange(gateway_->port(), "POST", target, anthropic_bearer(token), anthropic_body(stream));
  }
  Response post_responses(const std::string& token, bool stream, std::string_view target = "/v1/responses") {
    return exchange(gateway_->port(), "POST", target, openai_bearer(token), responses_body(stream));
  }

  std::vector<ServedRequest> upstream_log() const { return endpoint_->requests(); }
};

TEST_F(GatewayTest, TheRunsTokenIsForwardedWithTheRealKeyAndTheClientNeverSeesIt) {
  start();
  const Response r = post_messages(token_, false);
  ASSERT_EQ(r.status, 200u) << r.error << r.body;
  EXPECT_EQ(parse_json(r.body).at("content").at(0).at("text"), "Hello through the gateway.");
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  const auto log = upstream_log();
  ASSERT_EQ(log.size(), 1u);
  // The upstream checked its own token: the gateway sent the real key, not the placeholder.
  EXPECT_EQ(log[0].credential, Credential::matched);
  EXPECT_EQ(log[0].target, "/v1/messages?beta=true");
  EXPECT_EQ(log[0].headers.at("anthropic-version"), "2023-06-01");
  for (const auto& [name, value] : log[0].headers)
    EXPECT_EQ(value.find(token_), std::string::npos) << "the placeholder reached the upstream in " << name;
  // Nothing the client got carries the key.
  EXPECT_EQ(r.body.find(endpoint_->token()), std::string::npos);
  for (const auto& [name, value] : r.headers)
    EXPECT_EQ(value.find(endpoint_->token()), std::string::npos) << name;
  EXPECT_EQ(gateway_->gateway().current_key(), endpoint_->token());
}

TEST_F(GatewayTest, AnX_Api_KeyPlaceholderIsAcceptedToo) {
  start();
  const Response r = exchange(gateway_->port(), "POST", "/v1/messages", anthropic_key(token_), anthropic_body(true));
  ASSERT_EQ(r.status, 200u) << r.error << r.body;
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  EXPECT_EQ(upstream_log()[0].credential, Credential::matched);
}

TEST_F(GatewayTest, AWrongOrMissingTokenIs401AndNeverForwarded) {
  start();
  const std::string other_run = placeholder_token("r2");
  std::vector<Response> answers;
  answers.push_back(post_messages(other_run, false));
  answers.push_back(post_messages(endpoint_->token(), false));  // the real key is no credential here either
  answers.push_back(
      exchange(gateway_->port(), "POST", "/v1/messages", anthropic_key(other_run), anthropic_body(false)));
  answers.push_back(exchange(gateway_->port(), "POST", "/v1/messages", {{"content-type", "application/json"}},
                             anthropic_body(false)));
  answers.push_back(exchange(gateway_->port(), "POST", "/v1/messages", {{"authorization", "Basic " + token_}},
                             anthropic_body(false)));
  answers.push_back(exchange(gateway_->port(), "POST", "/v1/messages", {{"authorization", "Bearer " + token_ + "x"}},
                             anthropic_body(false)));
  for (const Response& r : answers) {
    ASSERT_EQ(r.status, 401u) << r.error << r.body;
    const json::value body = parse_json(r.body);
    EXPECT_EQ(body.at("type"), "error");
    EXPECT_EQ(body.at("error").at("type"), "authentication_error");
  }
  EXPECT_TRUE(upstream_log().empty());
  EXPECT_TRUE(gateway_->told().usage.empty());
}

TEST_F(GatewayTest, AWrongTokenOnTheOpenAiWireIsRefusedInItsShape) {
  start_endpoint();
  start_gateway(setup(Wire::openai_responses));
  const Response r = post_responses("sk-nothing", false);
  ASSERT_EQ(r.status, 401u) << r.error;
  EXPECT_EQ(parse_json(r.body).at("error").at("code"), "invalid_api_key");
  EXPECT_TRUE(upstream_log().empty());
}

TEST_F(GatewayTest, ARouteOutsideTheWiresModelRoutesIs403ToldOnceAndNeverForwarded) {
  start();
  const Headers h = anthropic_bearer(token_);
  for (int i = 0; i < 3; ++i) {
    for (auto [method, target] : std::vector<std::pair<std::string, std::string>>{
             {"POST", "/v1/messages/batches"}, {"GET", "/v1/models?limit=5"}, {"POST", "/v1/files"}}) {
      const Response r = exchange(gateway_->port(), method, target, h, method == "POST" ? "{}" : "");
      ASSERT_EQ(r.status, 403u) << method << " " << target << " " << r.error;
      EXPECT_EQ(parse_json(r.body).at("error").at("type"), "permission_error");
    }
  }
  const auto refused = gateway_->told().refused_routes;
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"POST", "/v1/messages/batches"}, {"GET", "/v1/models"}, {"POST", "/v1/files"}};
  EXPECT_EQ(refused, expected);
  EXPECT_TRUE(upstream_log().empty());
}

TEST_F(GatewayTest, UsageIsReadFromAnthropicAnswersStreamedAndNot) {
  start();
  for (bool stream : {true, false}) {
    const Response r = post_messages(token_, stream);
    ASSERT_EQ(r.status, 200u) << r.error;
  }
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 2; }));
  for (const RequestUsage& u : gateway_->told().usage) {
    SCOPED_TRACE(u.request);
    EXPECT_EQ(u.status, 200);
    EXPECT_EQ(u.model, "claude-test-model");
    EXPECT_EQ(u.input_tokens, 120u);
    EXPECT_EQ(u.output_tokens, 33u);
    EXPECT_EQ(u.cache_read_tokens, 40u);
    EXPECT_EQ(u.cache_creation_tokens, 7u);
    EXPECT_TRUE(u.complete);
  }
  EXPECT_EQ(gateway_->told().usage[0].request, 1u);
  EXPECT_EQ(gateway_->told().usage[1].request, 2u);
}

TEST_F(GatewayTest, UsageIsReadFromOpenAiAnswersStreamedAndNot) {
  start_endpoint();
  start_gateway(setup(Wire::openai_responses));
  for (bool stream : {true, false}) {
    const Response r = post_responses(token_, stream);
    ASSERT_EQ(r.status, 200u) << r.error << r.body;
    if (stream) {
      EXPECT_NE(r.body.find("event: response.completed"), std::string::npos);
    }
  }
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 2; }));
  for (const RequestUsage& u : gateway_->told().usage) {
    EXPECT_EQ(u.model, "gpt-test-model");
    EXPECT_EQ(u.input_tokens, 120u);
    EXPECT_EQ(u.output_tokens, 33u);
    EXPECT_EQ(u.cache_read_tokens, 40u);
    EXPECT_TRUE(u.complete);
  }
  ASSERT_TRUE(endpoint_->wait_until_ended(2));
  for (const auto& served : upstream_log())
    EXPECT_EQ(served.credential, Credential::matched);
}

TEST_F(GatewayTest, AStreamIsRelayedAsItComesNotWhenItEnds) {
  // The upstream sends its content and then holds the stream open until the client goes: a
  // gateway that buffered the answer would pass on nothing at all.
  start_endpoint(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "first words"}],
               "timing": {"event_delay_ms": 5, "hold_until_disconnect": true}}]})");
  start_gateway(setup());
  Client client(gateway_->port());
  ASSERT_TRUE(client.connect());
  ASSERT_TRUE(client.send("POST", "/v1/messages", anthropic_bearer(token_), anthropic_body(true)));
  ASSERT_TRUE(client.read_until("first words")) << client.partial().error << client.partial().body;
  EXPECT_EQ(client.partial().status, 200u);
  EXPECT_EQ(client.partial().header("transfer-encoding"), "chunked");
  EXPECT_NE(client.partial().body.find("event: message_start"), std::string::npos);
  // The upstream is still answering: its answer has not ended.
  auto log = upstream_log();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].ending, Ending::in_progress);

  // The vendor going away is passed on: the upstream sees its client go, and the request is
  // settled as incomplete with what was read of it.
  client.close();
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  EXPECT_EQ(upstream_log()[0].ending, Ending::client_disconnected);
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 1; }));
  const RequestUsage u = gateway_->told().usage[0];
  EXPECT_FALSE(u.complete);
  EXPECT_EQ(u.input_tokens, 10u);  // the scenario's default usage, read from message_start
}

TEST_F(GatewayTest, ARotatedCredentialIsUsedOnTheNextRequest) {
  start_endpoint();
  write_file(key_file(), "sk-the-old-key\n");
  start_gateway(setup());
  EXPECT_EQ(gateway_->gateway().current_key(), "sk-the-old-key");
  // The upstream refuses the old key: its 401 is relayed as it is.
  const Response before = post_messages(token_, false);
  EXPECT_EQ(before.status, 401u) << before.error;
  write_file(key_file(), endpoint_->token() + "\n");
  const Response after = post_messages(token_, false);
  EXPECT_EQ(after.status, 200u) << after.error << after.body;
  EXPECT_EQ(gateway_->gateway().current_key(), endpoint_->token());
  ASSERT_TRUE(endpoint_->wait_until_ended(2));
  const auto log = upstream_log();
  EXPECT_EQ(log[0].credential, Credential::mismatched);
  EXPECT_EQ(log[1].credential, Credential::matched);

  // A rotation that leaves the file unreadable keeps the last key, and says so.
  std::filesystem::remove(key_file());
  write_file(key_file(), "");
  EXPECT_EQ(post_messages(token_, false).status, 200u);
  EXPECT_EQ(gateway_->gateway().current_key(), endpoint_->token());
  const auto told = gateway_->told().log;
  EXPECT_TRUE(std::any_of(told.begin(), told.end(),
                          [](const std::string& l) { return l.find("keeping the last key") != std::string::npos; }));
}

TEST_F(GatewayTest, AReservationRefusedIsAnsweredInTheWiresShapeAndNeverForwarded) {
  start_endpoint();
  auto s = setup();
  s.reserve = ReservationAnswer{false, "metaharness: the run's budget of $1.00 is spent"};
  start_gateway(std::move(s));
  const Response r = post_messages(token_, true);
  ASSERT_EQ(r.status, 400u) << r.error;
  const json::value body = parse_json(r.body);
  EXPECT_EQ(body.at("type"), "error");
  EXPECT_EQ(body.at("error").at("type"), "invalid_request_error");
  EXPECT_EQ(body.at("error").at("message"), "metaharness: the run's budget of $1.00 is spent");
  EXPECT_TRUE(upstream_log().empty());
  const auto told = gateway_->told();
  ASSERT_EQ(told.reservations.size(), 1u);
  EXPECT_EQ(told.reservations[0].model, "claude-test-model");
  EXPECT_EQ(told.reservations[0].max_tokens, 1024u);
  EXPECT_GT(told.reservations[0].input_bytes, 0u);
  EXPECT_TRUE(told.usage.empty());

  // count_tokens spends nothing: it is not reserved, and is forwarded.
  const Response counted =
      exchange(gateway_->port(), "POST", "/v1/messages/count_tokens", anthropic_bearer(token_), anthropic_body(false));
  EXPECT_EQ(gateway_->told().reservations.size(), 1u);
  EXPECT_EQ(upstream_log().size(), 1u) << counted.status;
}

TEST_F(GatewayTest, ACompressedBodyIsRefusedWhereABudgetApplies) {
  start_endpoint();
  auto s = setup();
  s.reserve = ReservationAnswer{true, ""};
  start_gateway(std::move(s));
  Headers h = anthropic_bearer(token_);
  h.emplace_back("content-encoding", "gzip");
  const Response r = exchange(gateway_->port(), "POST", "/v1/messages", h, "not really gzip");
  ASSERT_EQ(r.status, 415u) << r.error;
  EXPECT_NE(r.body.find("cannot be metered"), std::string::npos) << r.body;
  EXPECT_TRUE(upstream_log().empty());
  EXPECT_TRUE(gateway_->told().reservations.empty());
}

TEST_F(GatewayTest, ConnectionsPastTheLimitAreClosedAndTheOthersServed) {
  start_endpoint();
  auto s = setup();
  s.options.max_connections = 2;
  start_gateway(std::move(s));
  Client first(gateway_->port()), second(gateway_->port()), third(gateway_->port());
  ASSERT_TRUE(first.connect());
  ASSERT_TRUE(first.send("POST", "/v1/messages", anthropic_bearer(token_), anthropic_body(false)));
  ASSERT_EQ(first.read_response().status, 200u);
  ASSERT_TRUE(second.connect());
  ASSERT_TRUE(second.send("POST", "/v1/messages", anthropic_bearer(token_), anthropic_body(false)));
  ASSERT_EQ(second.read_response().status, 200u);
  ASSERT_TRUE(third.connect());
  EXPECT_TRUE(third.wait_for_close());
  ASSERT_TRUE(first.send("POST", "/v1/messages", anthropic_bearer(token_), anthropic_body(true)));
  EXPECT_EQ(first.read_response().status, 200u);
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) {
    return std::any_of(t.log.begin(), t.log.end(),
                       [](const std::string& l) { return l.find("connections already open") != std::string::npos; });
  }));
}

TEST_F(GatewayTest, AReservationRefusedOnTheOpenAiWireSaysBudgetExceeded) {
  start_endpoint();
  auto s = setup(Wire::openai_responses);
  s.reserve = ReservationAnswer{false, "over the daily budget"};
  start_gateway(std::move(s));
  const Response r = post_responses(token_, true);
  ASSERT_EQ(r.status, 400u) << r.error;
  const json::value body = parse_json(r.body);
  EXPECT_EQ(body.at("error").at("message"), "over the daily budget");
  EXPECT_EQ(body.at("error").at("type"), "invalid_request_error");
  EXPECT_EQ(body.at("error").at("code"), "budget_exceeded");
  EXPECT_TRUE(upstream_log().empty());
}

TEST_F(GatewayTest, AnAllowedReservationIsForwardedAndSettled) {
  start_endpoint();
  auto s = setup();
  s.reserve = ReservationAnswer{true, ""};
  start_gateway(std::move(s));
  EXPECT_EQ(post_messages(token_, true).status, 200u);
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 1; }));
  EXPECT_EQ(gateway_->told().reservations.at(0).request, gateway_->told().usage.at(0).request);
}

TEST_F(GatewayTest, AnUpstreamNotSignedByTheGivenCaIsRefused) {
  start_endpoint();
  mh::testing::TestCa other(dir_ / "other-ca");
  ASSERT_TRUE(other.ok()) << other.error();
  auto s = setup();
  s.options.upstream.ca_file = other.ca_file();
  start_gateway(std::move(s));
  const Response r = post_messages(token_, false);
  ASSERT_EQ(r.status, 502u) << r.error;
  EXPECT_EQ(parse_json(r.body).at("error").at("type"), "api_error");
  EXPECT_NE(r.body.find("TLS handshake"), std::string::npos) << r.body;
  EXPECT_TRUE(upstream_log().empty());
  // Settled once the refusal is written: waited for, not assumed.
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 1; }));
  const auto told = gateway_->told();
  EXPECT_EQ(told.usage[0].status, 0);
  // Why no answer came travels with the usage (the run warns GATEWAY_UPSTREAM_UNREACHABLE).
  EXPECT_NE(told.usage[0].failure.find("TLS handshake"), std::string::npos) << told.usage[0].failure;
  EXPECT_FALSE(told.log.empty());
}

TEST_F(GatewayTest, TheSystemStoreDoesNotTrustTheTestCa) {
  start_endpoint();
  auto s = setup();
  s.options.upstream.ca_file.reset();
  start_gateway(std::move(s));
  EXPECT_EQ(post_messages(token_, false).status, 502u);
  EXPECT_TRUE(upstream_log().empty());
}

// The system's trust is its CA directory, each CA looked up by its subject's hash when a chain
// is verified (not the whole bundle parsed for every run's gateway): shown with the environment's
// directory ($SSL_CERT_DIR, which OpenSSL's default reads first) holding the test CA under its
// hash name; the same directory without it trusts nothing of the test's.
TEST_F(GatewayTest, TheSystemStoreIsItsCaDirectoryLookedUpByHashWhenAChainIsVerified) {
  start_endpoint();
  const auto trusted = dir_ / "trusted-certs", empty = dir_ / "empty-certs";
  std::filesystem::create_directories(trusted);
  std::filesystem::create_directories(empty);
  {
    FILE* pem = std::fopen(ca_.ca_file().c_str(), "r");
    ASSERT_NE(pem, nullptr);
    X509* ca = ::PEM_read_X509(pem, nullptr, nullptr, nullptr);
    std::fclose(pem);
    ASSERT_NE(ca, nullptr);
    char name[16];
    std::snprintf(name, sizeof name, "%08lx.0", ::X509_subject_name_hash(ca));
    ::X509_free(ca);
    std::filesystem::copy_file(ca_.ca_file(), trusted / name);
  }
  const char* before = std::getenv("SSL_CERT_DIR");
  const std::string kept = before ? before : "";
  for (const auto& [directory, status] : {std::pair{trusted, 200u}, std::pair{empty, 502u}}) {
    ::setenv("SSL_CERT_DIR", directory.c_str(), 1);
    auto s = setup();
    s.options.upstream.ca_file.reset();
    start_gateway(std::move(s));
    EXPECT_EQ(post_messages(token_, false).status, status) << directory;
  }
  if (before)
    ::setenv("SSL_CERT_DIR", kept.c_str(), 1);
  else
    ::unsetenv("SSL_CERT_DIR");
}

TEST_F(GatewayTest, APlainHttpUpstreamOffLoopbackIsRefusedAtPrepare) {
  start_endpoint();
  for (auto url : {"http://93.184.216.34:80", "http://api.anthropic.com/"}) {
    auto s = setup();
    s.options.upstream.url = url;
    RunningGateway g(std::move(s));
    EXPECT_FALSE(g.ok()) << url;
    EXPECT_NE(g.prepare_error().find("plain http off loopback"), std::string::npos) << g.prepare_error();
  }
}

TEST_F(GatewayTest, PrepareRefusesAMissingOrEmptyCredential) {
  start_endpoint();
  auto s = setup();
  s.options.upstream.credential = dir_ / "no-such-key";
  RunningGateway missing(std::move(s));
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.prepare_error().find("no-such-key"), std::string::npos) << missing.prepare_error();
  write_file(dir_ / "empty.key", "\n");
  auto e = setup();
  e.options.upstream.credential = dir_ / "empty.key";
  RunningGateway empty(std::move(e));
  EXPECT_NE(empty.prepare_error().find("is empty"), std::string::npos) << empty.prepare_error();
}

TEST_F(GatewayTest, APlainHttpUpstreamOnLoopbackWithAKeyAndABasePath) {
  start_endpoint(kTextScenario, /*tls=*/false);
  auto s = setup();
  s.options.upstream.url = endpoint_->base_url() + "/api/";
  s.options.upstream.credential.clear();
  s.options.upstream.key = endpoint_->token();
  start_gateway(std::move(s));
  EXPECT_EQ(post_messages(token_, true).status, 200u);
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  EXPECT_EQ(upstream_log()[0].target, "/api/v1/messages?beta=true");
  EXPECT_EQ(upstream_log()[0].credential, Credential::matched);
}

TEST_F(GatewayTest, AConfiguredHeaderCarriesTheKey) {
  // An Anthropic upstream told to take the key as a bearer token (a gateway in front of it).
  start();
  auto s = setup();
  s.options.upstream.header = "Authorization";
  gateway_.reset();
  start_gateway(std::move(s));
  EXPECT_EQ(post_messages(token_, false).status, 200u);
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  EXPECT_EQ(upstream_log()[0].credential, Credential::matched);
}

TEST_F(GatewayTest, KeepAliveCarriesSeveralRequestsOnOneConnection) {
  start();
  Client client(gateway_->port());
  ASSERT_TRUE(client.connect());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.send("POST", "/v1/messages", anthropic_bearer(token_), anthropic_body(i % 2 == 0)));
    const Response r = client.read_response();
    ASSERT_EQ(r.status, 200u) << r.error;
  }
  // A refusal keeps the connection too.
  ASSERT_TRUE(client.send("POST", "/v1/messages", anthropic_bearer("wrong"), anthropic_body(false)));
  EXPECT_EQ(client.read_response().status, 401u);
  ASSERT_TRUE(client.send("POST", "/v1/messages", anthropic_bearer(token_), anthropic_body(false)));
  EXPECT_EQ(client.read_response().status, 200u);
  ASSERT_TRUE(endpoint_->wait_until_ended(4));
}

TEST_F(GatewayTest, AnUpstream429IsRelayedAsItIs) {
  start_endpoint(R"({"format": "metaharness.scenario/1",
    "steps": [{"error": {"status": 429, "retry_after": 2}, "sticky": true}]})");
  start_gateway(setup());
  const Response r = post_messages(token_, true);
  ASSERT_EQ(r.status, 429u) << r.error;
  EXPECT_EQ(r.header("retry-after"), "2");
  EXPECT_EQ(parse_json(r.body).at("error").at("type"), "rate_limit_error");
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 1; }));
  EXPECT_EQ(gateway_->told().usage[0].status, 429);
  EXPECT_FALSE(gateway_->told().usage[0].complete);
}

TEST_F(GatewayTest, AnUnreachableUpstreamIs502InTheWiresShape) {
  start_endpoint();
  auto s = setup(Wire::openai_responses);
  const std::uint16_t port = endpoint_->port();
  endpoint_->stop_and_join();
  s.options.upstream.url = "https://127.0.0.1:" + std::to_string(port);
  start_gateway(std::move(s));
  const Response r = post_responses(token_, true);
  ASSERT_EQ(r.status, 502u) << r.error;
  EXPECT_EQ(parse_json(r.body).at("error").at("code"), "upstream_unreachable");
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return !t.log.empty(); }));
}

TEST_F(GatewayTest, OversizedRequestsAreRefusedByName) {
  start_endpoint();
  auto s = setup();
  s.options.max_request_body_bytes = 4096;
  s.options.max_header_bytes = 2048;
  start_gateway(std::move(s));
  const Response big =
      exchange(gateway_->port(), "POST", "/v1/messages", anthropic_bearer(token_), std::string(8192, ' '));
  EXPECT_EQ(big.status, 413u) << big.error;
  EXPECT_NE(big.body.find("exceeds 4096 bytes"), std::string::npos) << big.body;
  Headers fat = anthropic_bearer(token_);
  fat.emplace_back("x-padding", std::string(4096, 'a'));
  const Response headers = exchange(gateway_->port(), "POST", "/v1/messages", fat, anthropic_body(false));
  EXPECT_EQ(headers.status, 431u) << headers.error;
  // Garbage is refused and the gateway goes on serving.
  Client garbage(gateway_->port());
  ASSERT_TRUE(garbage.connect());
  ASSERT_TRUE(garbage.send_raw("NOT HTTP AT ALL\r\n\r\n"));
  EXPECT_EQ(garbage.read_response().status, 400u);
  EXPECT_TRUE(upstream_log().empty());
  EXPECT_EQ(post_messages(token_, false).status, 200u);
}

TEST_F(GatewayTest, ClaudesWarmUpHeadIsAnsweredLocally) {
  start();
  Client client(gateway_->port());
  ASSERT_TRUE(client.connect());
  ASSERT_TRUE(client.send("HEAD", "/", {}, ""));
  EXPECT_EQ(client.read_response(10s, true).status, 200u);
  EXPECT_TRUE(upstream_log().empty());
  EXPECT_TRUE(gateway_->told().refused_routes.empty());
}

// A minimal HTTP exchange over a Unix socket, every wait bounded by socket timeouts.
Response exchange_unix(const std::filesystem::path& socket_path, const std::string& token) {
  namespace asio = boost::asio;
  namespace http = boost::beast::http;
  Response out;
  asio::io_context io;
  asio::local::stream_protocol::socket socket(io);
  boost::system::error_code ec;
  socket.connect(asio::local::stream_protocol::endpoint(socket_path.string()), ec);
  if (ec) {
    out.error = ec.message();
    return out;
  }
  timeval limit{10, 0};
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  http::request<http::string_body> request{http::verb::post, "/v1/messages", 11};
  request.set(http::field::host, "gateway");
  request.set(http::field::authorization, "Bearer " + token);
  request.set(http::field::content_type, "application/json");
  request.body() = anthropic_body(true);
  request.prepare_payload();
  http::write(socket, request, ec);
  boost::beast::flat_buffer buffer;
  http::response<http::string_body> response;
  if (!ec) http::read(socket, buffer, response, ec);
  if (ec) {
    out.error = ec.message();
    return out;
  }
  out.status = response.result_int();
  out.body = response.body();
  out.complete = true;
  return out;
}

TEST_F(GatewayTest, AUnixSocketIsServedToo) {
  start_endpoint();
  auto s = setup();
  s.unix_socket = dir_ / "gateway.sock";
  start_gateway(std::move(s));
  const Response r = exchange_unix(dir_ / "gateway.sock", token_);
  ASSERT_EQ(r.status, 200u) << r.error;
  EXPECT_NE(r.body.find("message_stop"), std::string::npos);
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  EXPECT_EQ(upstream_log()[0].credential, Credential::matched);
}

}  // namespace
}  // namespace mh::gateway::testing
