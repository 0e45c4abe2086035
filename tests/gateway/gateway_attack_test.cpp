// The gateway as the attacker meets it: an allowed tool call inside a run (or, on the host
// network, any local process) talking raw HTTP to the run's gateway. Each test is one attack; the
// upstream is the real scripted endpoint over HTTPS with a throwaway CA, and what it was sent is
// proven by its request log. Attacks that held are kept as regressions beside those that broke.
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <fstream>

#include "daemon/gateway/egress_proxy.hpp"
#include "daemon/gateway/gateway.hpp"
#include "tests/gateway/gateway_fixture.hpp"
#include "tests/gateway/gateway_support.hpp"
#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"
#include "tests/support/test_ca.hpp"

namespace mh::gateway::testing {
namespace {

namespace json = boost::json;
using model::testing::anthropic_body;
using model::testing::Client;
using model::testing::exchange;
using model::testing::Headers;
using model::testing::Response;
using model::testing::responses_body;
using model::testing::RunningEndpoint;
using model::testing::TempDir;

constexpr std::string_view kTextScenario = R"({"format": "metaharness.scenario/1",
  "steps": [{"name": "answer", "content": [{"type": "text", "text": "Hello."}], "sticky": true}]})";

Headers bearer(const std::string& token) {
  return {
      {"authorization", "Bearer " + token}, {"anthropic-version", "2023-06-01"}, {"content-type", "application/json"}};
}

// anthropic_body() with one field replaced by raw JSON text (so a value Boost.JSON would write
// differently, 4096.0 or 4.096e3, is sent as written).
std::string anthropic_body_with(std::string_view field, std::string_view raw_value) {
  json::object body = json::parse(anthropic_body(false)).as_object();
  body.erase(field);
  std::string text = json::serialize(body);
  text.insert(1, "\"" + std::string(field) + "\":" + std::string(raw_value) + ",");
  return text;
}

class GatewayAttack : public GatewayOverTls {
 protected:
  GatewayAttack() : GatewayOverTls("gateway-attack", kTextScenario) {}

  // A gateway whose every reservation is granted (a budget applies), recording each.
  void start_reserving(Wire wire = Wire::anthropic) {
    start_endpoint();
    auto s = setup(wire);
    s.reserve = ReservationAnswer{true, ""};
    start_gateway(std::move(s));
  }
};

// BROKE (fixed): the body was read whole before the credential was checked, so a client with no
// token at all made the gateway's process (root, outside the run's cgroup) hold up to
// max_request_body_bytes (32 MiB) per connection, max_connections (256) of them: 8 GiB. Now a
// request without the token, or on a refused route, is refused as soon as its header is in, and
// its body is never asked for (no 100-continue).
TEST_F(GatewayAttack, ABodyIsNeverReadBeforeTheCredentialAndTheRouteAreChecked) {
  start_endpoint();
  start_gateway(setup());
  const std::string huge = std::to_string((32u << 20) - 1);
  {
    Client no_token(gateway_->port());
    ASSERT_TRUE(no_token.connect());
    ASSERT_TRUE(
        no_token.send_raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\n"
                          "content-length: " +
                          huge + "\r\n\r\n"));
    const Response r = no_token.read_response(5s);
    EXPECT_EQ(r.status, 401u) << "the gateway waited for a body nobody was allowed to send: " << r.error;
  }
  {
    Client no_token(gateway_->port());
    ASSERT_TRUE(no_token.connect());
    ASSERT_TRUE(
        no_token.send_raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\nexpect: 100-continue\r\n"
                          "content-length: " +
                          huge + "\r\n\r\n"));
    const Response r = no_token.read_response(5s);
    EXPECT_EQ(r.status, 401u) << "a client with no token was invited to send its body: " << r.error;
  }
  {
    Client refused_route(gateway_->port());
    ASSERT_TRUE(refused_route.connect());
    ASSERT_TRUE(refused_route.send_raw("POST /v1/files HTTP/1.1\r\nHost: x\r\nauthorization: Bearer " + token_ +
                                       "\r\ncontent-length: " + huge + "\r\n\r\n"));
    const Response r = refused_route.read_response(5s);
    EXPECT_EQ(r.status, 403u) << r.error;
  }
  EXPECT_TRUE(endpoint_->requests().empty());
  // A refusal of a request with no body keeps the connection, and what follows is served.
  Client kept(gateway_->port());
  ASSERT_TRUE(kept.connect());
  ASSERT_TRUE(kept.send("GET", "/v1/models", bearer(token_), ""));
  EXPECT_EQ(kept.read_response().status, 403u);
  ASSERT_TRUE(kept.send("POST", "/v1/messages", bearer(token_), anthropic_body(false)));
  EXPECT_EQ(kept.read_response().status, 200u);
}

// BROKE (fixed): only the first Content-Encoding field was looked at, so "identity" followed by
// "gzip" passed the 415 check; both fields were forwarded and the upstream would decode a body
// whose worst case the reservation never read (a compressed body reserves its compressed size).
TEST_F(GatewayAttack, ASecondContentEncodingCannotHideACompressedBody) {
  start_reserving();
  // Raw: a client library would fold or replace the repeated field.
  const std::string body = "\x1f\x8b compressed";
  Client client(gateway_->port());
  ASSERT_TRUE(client.connect());
  ASSERT_TRUE(client.send_raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\nauthorization: Bearer " + token_ +
                              "\r\ncontent-type: application/json\r\ncontent-encoding: identity\r\n"
                              "content-encoding: gzip\r\ncontent-length: " +
                              std::to_string(body.size()) + "\r\n\r\n" + body));
  const Response r = client.read_response();
  EXPECT_EQ(r.status, 415u) << r.error << r.body;
  EXPECT_TRUE(endpoint_->requests().empty());
  EXPECT_TRUE(gateway_->told().reservations.empty());
}

// BROKE (fixed): a max_tokens that is not a JSON integer ("4096", 4096.0, 4.096e3), or a body
// Boost.JSON cannot read (NaN, which Python's json accepts), reserved no output at all: only the
// body's bytes. An upstream that reads such a value as a count (pydantic's lax mode does) then
// spends max_tokens that were never reserved. Now such a request is refused where a budget
// applies, never forwarded.
TEST_F(GatewayAttack, AWorstCaseTheGatewayCannotReadIsNotForwarded) {
  start_reserving();
  const std::vector<std::string> bodies = {
      anthropic_body_with("max_tokens", "\"4096\""), anthropic_body_with("max_tokens", "4096.0"),
      anthropic_body_with("max_tokens", "4.096e3"),  anthropic_body_with("max_tokens", "true"),
      anthropic_body_with("temperature", "NaN"),     "[" + anthropic_body(false) + "]",
      anthropic_body(false) + " trailing",
  };
  for (const auto& body : bodies) {
    const Response r = exchange(gateway_->port(), "POST", "/v1/messages", bearer(token_), body);
    EXPECT_EQ(r.status, 400u) << body << "\n" << r.error << r.body;
    EXPECT_NE(r.body.find("cannot be metered"), std::string::npos) << body << "\n" << r.body;
  }
  EXPECT_TRUE(endpoint_->requests().empty());
  EXPECT_TRUE(gateway_->told().reservations.empty());
  // What a vendor sends is read and forwarded as before; a null max_tokens is no max_tokens.
  EXPECT_EQ(exchange(gateway_->port(), "POST", "/v1/messages", bearer(token_), anthropic_body(false)).status, 200u);
  EXPECT_EQ(
      exchange(gateway_->port(), "POST", "/v1/messages", bearer(token_), anthropic_body_with("max_tokens", "null"))
          .status,
      200u);
  const auto told = gateway_->told();
  ASSERT_EQ(told.reservations.size(), 2u);
  EXPECT_EQ(told.reservations[0].max_tokens, 1024u);
  EXPECT_EQ(told.reservations[1].max_tokens, 0u);
}

// BROKE (fixed): on the Responses wire `"background": true` is answered at once (status queued, no
// usage) and spent afterwards; the result is fetched by GET /v1/responses/{id}, which the gateway
// refuses, but the tokens are spent all the same and never metered (the reservation settles at
// nothing). Refused whether or not a budget applies: the meter is the promise too.
TEST_F(GatewayAttack, ABackgroundResponseIsNotForwarded) {
  start_endpoint();
  start_gateway(setup(Wire::openai_responses));
  json::object body = json::parse(responses_body(false)).as_object();
  body["background"] = true;
  const Headers h = {{"authorization", "Bearer " + token_}, {"content-type", "application/json"}};
  const Response r = exchange(gateway_->port(), "POST", "/v1/responses", h, json::serialize(body));
  EXPECT_EQ(r.status, 400u) << r.error << r.body;
  EXPECT_TRUE(endpoint_->requests().empty());
  body["background"] = false;
  EXPECT_EQ(exchange(gateway_->port(), "POST", "/v1/responses", h, json::serialize(body)).status, 200u);
}

// BROKE (fixed: an answer not read to its end is settled at the worst case it reserved): a client that takes
// an answer's content and goes away before its final usage event (Anthropic message_delta, OpenAI
// response.completed) is settled at what message_start said: the input, and next to no output.
// The upstream has generated (and bills) the output all the same, so a run can take whole
// answers, each within its reservation, while the meter counts almost none of their output: the
// usd budget and the daily ledger are passed by as many requests as it likes. Now an answer cut
// before its usage was read counts its worst case (the max_tokens reserved).
TEST_F(GatewayAttack, AnAnswerCutBeforeItsUsageIsSettledAtItsWorstCase) {
  start_endpoint(R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "text", "text": "the whole answer"}],
               "usage": {"input_tokens": 10, "output_tokens": 1000},
               "timing": {"hold_until_disconnect": true}, "sticky": true}]})");
  auto s = setup();
  s.reserve = ReservationAnswer{true, ""};
  start_gateway(std::move(s));
  Client client(gateway_->port());
  ASSERT_TRUE(client.connect());
  ASSERT_TRUE(client.send("POST", "/v1/messages", bearer(token_), anthropic_body(true)));
  ASSERT_TRUE(client.read_until("content_block_stop")) << client.partial().error << client.partial().body;
  EXPECT_NE(client.partial().body.find("the whole answer"), std::string::npos);
  client.close();
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 1; }));
  const auto told = gateway_->told();
  ASSERT_EQ(told.reservations.size(), 1u);
  EXPECT_FALSE(told.usage[0].complete);
  EXPECT_GE(told.usage[0].output_tokens.value_or(0), told.reservations[0].max_tokens)
      << "the run took the whole answer; the meter counts " << told.usage[0].output_tokens.value_or(0)
      << " output token(s) of it";
}

// BROKE (fixed, the same settlement as above): an answer too large for the usage reader's bound
// (a JSON answer, or an OpenAI response.completed that echoes the request's instructions and
// tools, over 8 MiB) is relayed whole and its usage never read: settled at nothing. A run can ask
// for one (output that costs few tokens per byte, or instructions of long whitespace runs) and
// spend its whole reservation, request after request, while the meter counts none of it. Now the
// request counts its worst case.
TEST_F(GatewayAttack, AnAnswerTooLargeToReadForUsageIsNotSettledAtNothing) {
  const std::string text((9u << 20), ' ');
  json::object step{{"content", json::array{json::object{{"type", "text"}, {"text", text}}}},
                    {"usage", json::object{{"input_tokens", 10}, {"output_tokens", 1000}}},
                    {"sticky", true}};
  start_endpoint(json::serialize(json::object{{"format", "metaharness.scenario/1"}, {"steps", json::array{step}}}));
  auto s = setup();
  s.reserve = ReservationAnswer{true, ""};
  start_gateway(std::move(s));
  const Response r = exchange(gateway_->port(), "POST", "/v1/messages", bearer(token_), anthropic_body(false), 30s);
  ASSERT_EQ(r.status, 200u) << r.error;
  EXPECT_GT(r.body.size(), 9u << 20);
  ASSERT_TRUE(gateway_->wait_for([](const Told& t) { return t.usage.size() == 1; }));
  const auto told = gateway_->told();
  EXPECT_GE(told.usage[0].output_tokens.value_or(0), 1000u)
      << "an answer of " << r.body.size() << " bytes was settled at " << told.usage[0].output_tokens.value_or(0)
      << " output token(s)";
}

// HELD: path, method and framing tricks never reach the upstream; a pipelined request behind an
// allowed one is checked as its own.
TEST_F(GatewayAttack, PathMethodAndFramingTricksAreRefused) {
  start_endpoint();
  start_gateway(setup());
  for (auto [method, target] : std::vector<std::pair<std::string, std::string>>{
           {"POST", "/v1/messages/../files"},
           {"POST", "//v1/messages"},
           {"POST", "/v1/messages%2F..%2Ffiles"},
           {"POST", "/V1/Messages"},
           {"POST", "/v1/messages/"},
           {"POST", "/v1/messages;/../files"},
           {"POST", "http://127.0.0.1/v1/messages"},
           {"POST", "/v1/messages/count_tokens/../../files"},
           {"HEAD", "/v1/messages"},
           {"post", "/v1/messages"},
           {"OPTIONS", "*"},
       }) {
    const Response r = exchange(gateway_->port(), method, target, bearer(token_), anthropic_body(false));
    EXPECT_EQ(r.status, 403u) << method << " " << target << " " << r.error;
  }
  EXPECT_TRUE(endpoint_->requests().empty());

  const std::string body = anthropic_body(false);
  const std::string allowed = "POST /v1/messages HTTP/1.1\r\nHost: x\r\nauthorization: Bearer " + token_ +
                              "\r\ncontent-length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  Client pipelined(gateway_->port());
  ASSERT_TRUE(pipelined.connect());
  ASSERT_TRUE(pipelined.send_raw(allowed + "GET /v1/models HTTP/1.1\r\nHost: x\r\nauthorization: Bearer " + token_ +
                                 "\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(pipelined.read_response().status, 200u);
  EXPECT_EQ(pipelined.read_response().status, 403u);
  EXPECT_EQ(pipelined.read_response().status, 401u);

  // Content-Length with Transfer-Encoding, and two Content-Lengths that differ: refused.
  for (const std::string& framing : {std::string("content-length: 4\r\ntransfer-encoding: chunked\r\n"),
                                     "content-length: " + std::to_string(body.size()) + "\r\ncontent-length: 5\r\n"}) {
    Client smuggler(gateway_->port());
    ASSERT_TRUE(smuggler.connect());
    ASSERT_TRUE(smuggler.send_raw("POST /v1/messages HTTP/1.1\r\nHost: x\r\nauthorization: Bearer " + token_ + "\r\n" +
                                  framing + "\r\n" + body));
    EXPECT_EQ(smuggler.read_response().status, 400u) << framing;
  }
  ASSERT_TRUE(endpoint_->wait_until_ended(1));
  const auto log = endpoint_->requests();
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0].target, "/v1/messages");
}

// BROKE (fixed): an IPv4-compatible (::a.b.c.d) or NAT64 (64:ff9b::a.b.c.d) address was judged by
// the v4 rules alone, not against the host's own v4 addresses (the own-address check compared the
// v6 bytes): where a NAT64 gateway serves the network, a listed name resolving to
// 64:ff9b::<this host's address> led back to this host. (::ffff:a.b.c.d held.)
TEST(EgressAttack, AHostsOwnV4AddressInsideAV6AddressIsRefused) {
  struct ifaddrs* list = nullptr;
  ASSERT_EQ(::getifaddrs(&list), 0);
  std::size_t checked = 0;
  for (auto* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(i->ifa_addr);
    const boost::asio::ip::address_v4 own(ntohl(in->sin_addr.s_addr));
    if (own.is_loopback()) continue;  // refused by the v4 rules already
    for (const std::string prefix : {"::ffff:", "::", "64:ff9b::"}) {
      const auto v6 = boost::asio::ip::make_address(prefix + own.to_string());
      EXPECT_FALSE(egress_address_allowed(v6)) << i->ifa_name << " " << v6.to_string();
    }
    ++checked;
  }
  ::freeifaddrs(list);
  if (checked == 0) GTEST_SKIP() << "this host has no IPv4 address off loopback";
}

}  // namespace
}  // namespace mh::gateway::testing
