// The ACP wire as values (adapters/acp/acp_wire): what the client sends, and the first reading of
// an agent line, on opencode 1.18.33's shapes and on lines that only look like JSON-RPC.
#include "adapters/acp/acp_wire.hpp"

#include <gtest/gtest.h>

#include "protocol/json.hpp"

namespace mh::adapters::acp {
namespace {

namespace proto = mh::protocol;

json::object object(std::string_view text) {
  auto v = proto::parse_json(text);
  EXPECT_TRUE(v && v->is_object()) << text;
  return v && v->is_object() ? v->as_object() : json::object{};
}

TEST(AcpWire, RequestsCarryOurIdsAndNotificationsNone) {
  EXPECT_EQ(session_prompt_request(OurId{3}, "ses_1", {"a", "b"}),
            R"({"id":3,"jsonrpc":"2.0","method":"session/prompt","params":{"prompt":[{"text":"a","type":"text"},)"
            R"({"text":"b","type":"text"}],"sessionId":"ses_1"}})");
  EXPECT_EQ(session_cancel_notification("ses_1"),
            R"({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"ses_1"}})");
  auto init = object(initialize_request(OurId{1}, ClientInfo{"metaharness", "9"}));
  EXPECT_EQ(init.at("params").at("protocolVersion"), 1);
  EXPECT_EQ(init.at("params").at("clientInfo").at("version"), "9");
}

TEST(AcpWire, AnswersCarryTheAgentsIdVerbatim) {
  EXPECT_EQ(permission_selected(AgentId{json::value(0)}, "once"),
            R"({"id":0,"jsonrpc":"2.0","result":{"outcome":{"optionId":"once","outcome":"selected"}}})");
  EXPECT_EQ(permission_cancelled(AgentId{json::value("p-1")}),
            R"({"id":"p-1","jsonrpc":"2.0","result":{"outcome":{"outcome":"cancelled"}}})");
  auto e = object(error_answer(AgentId{json::value(2)}, kMethodNotFound, "no"));
  EXPECT_EQ(e.at("error").at("code"), -32601);
}

TEST(AcpWire, ClassifiesAnswersNotificationsAndAgentRequests) {
  auto a = classify(object(R"({"jsonrpc":"2.0","id":2,"result":{"sessionId":"s"}})"));
  ASSERT_TRUE(std::holds_alternative<Answer>(a));
  EXPECT_EQ(std::get<Answer>(a).id, OurId{2});
  auto err = classify(object(R"({"jsonrpc":"2.0","id":2,"error":{"code":-32000,"message":"nope"}})"));
  ASSERT_TRUE(std::holds_alternative<Answer>(err));
  EXPECT_FALSE(std::get<Answer>(err).result);
  EXPECT_EQ(std::get<Answer>(err).error_message, "nope");
  EXPECT_EQ(std::get<Answer>(err).error_code, -32000);
  auto n = classify(object(R"({"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}})"));
  ASSERT_TRUE(std::holds_alternative<Notification>(n));
  auto r = classify(object(R"({"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{}})"));
  ASSERT_TRUE(std::holds_alternative<AgentRequest>(r));
  EXPECT_EQ(std::get<AgentRequest>(r).id.key(), "0") << "the agent's 0 is its own";
}

TEST(AcpWire, RefusesEnvelopesByName) {
  for (std::string_view text :
       {R"({"jsonrpc":"2.0"})", R"({"jsonrpc":"2.0","id":1})", R"({"jsonrpc":"2.0","id":"x","result":{}})",
        R"({"jsonrpc":"2.0","id":1.5,"result":{}})", R"({"jsonrpc":"2.0","method":""})",
        R"({"jsonrpc":"2","method":"m"})"}) {
    auto c = classify(object(text));
    ASSERT_TRUE(std::holds_alternative<Unreadable>(c)) << text;
    EXPECT_FALSE(std::get<Unreadable>(c).why.empty());
  }
}

TEST(AcpWire, APermissionRequestNamesItsOptionsAndOnlyOnceKindsAreAskedFor) {
  auto read = read_permission_request(object(
      R"({"sessionId":"s","toolCall":{"toolCallId":"toolu_marker","title":"touch marker.txt","kind":"execute","rawInput":{"command":"touch marker.txt"}},"options":[{"optionId":"once","kind":"allow_once"},{"optionId":"always","kind":"allow_always"},{"optionId":"reject","kind":"reject_once"}]})"));
  ASSERT_TRUE(std::holds_alternative<PermissionRequest>(read));
  const auto& p = std::get<PermissionRequest>(read);
  EXPECT_EQ(p.tool_call_id, "toolu_marker");
  EXPECT_EQ(p.option_of_kind("allow_once"), "once");
  EXPECT_EQ(p.option_of_kind("reject_once"), "reject");
  EXPECT_FALSE(p.option_of_kind("reject_always"));
  auto bad = read_permission_request(object(R"({"sessionId":"s","toolCall":{"toolCallId":"c"},"options":[1]})"));
  ASSERT_TRUE(std::holds_alternative<std::string>(bad));
}

}  // namespace
}  // namespace mh::adapters::acp
