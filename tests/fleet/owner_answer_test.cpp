// What a run's owner host answers a relay is a peer's bytes (docs/fleet.md, Trust): read field
// by field, written again under the client's id, and refused by name when any part does not fit
// (daemon/fleet/owner_answer.hpp).
#include "daemon/fleet/owner_answer.hpp"

#include <gtest/gtest.h>

#include "protocol/json.hpp"

namespace mh::daemon {
namespace {

boost::json::object object_of(const std::string& line) {
  auto v = protocol::parse_json(line);
  EXPECT_TRUE(v && v->is_object()) << line;
  return v && v->is_object() ? v->get_object() : boost::json::object{};
}

TEST(OwnerAnswer, AResultIsWrittenAgainUnderTheClientsIdWithOnlyItsCheckedFields) {
  const std::string answer =
      R"({"format":"metaharness.socket/1","reply":"result","id":"theirs","command_id":"d1",)"
      R"("outcome":{"result":"refused","refused":{"code":"TOO_LATE","reason":"the deadline passed"}},"recorded":true,)"
      R"("extra":"x"})";
  auto read = read_owner_answer(answer, "h1", std::nullopt, std::string("mine"), false);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->kind, OwnerAnswer::Kind::result);
  EXPECT_TRUE(read->recorded);
  auto line = object_of(read->line);
  EXPECT_EQ(line.at("id"), "mine");
  EXPECT_EQ(line.at("reply"), "result");
  EXPECT_EQ(line.at("command_id"), "d1");
  EXPECT_FALSE(line.contains("extra")) << read->line;
  EXPECT_EQ(line.at("outcome").at("refused").at("code"), "TOO_LATE") << read->line;
}

TEST(OwnerAnswer, ARefusalKeepsItsCodeAndReason) {
  auto read = read_owner_answer(
      R"({"format":"metaharness.socket/1","reply":"refused","id":null,"code":"FORBIDDEN","reason":"not yours"})", "h1",
      std::string("a1"), std::nullopt, true);
  ASSERT_TRUE(read) << read.error();
  EXPECT_EQ(read->kind, OwnerAnswer::Kind::refused);
  auto line = object_of(read->line);
  EXPECT_EQ(line.at("id"), "a1");
  EXPECT_EQ(line.at("code"), "FORBIDDEN");
  EXPECT_EQ(line.at("reason"), "not yours");
}

TEST(OwnerAnswer, APendingListIsReadOnlyWhenOneWasAskedFor) {
  const std::string answer = R"({"pending":[{"call_id":"toolu_1","requested_seq":7,"remaining_ms":4000,"new":1}]})";
  auto read = read_owner_answer(answer, "h1", std::string("a1"), std::string("a1"), true);
  ASSERT_TRUE(read) << read.error();
  ASSERT_EQ(read->kind, OwnerAnswer::Kind::pending);
  ASSERT_EQ(read->pending.size(), 1u);
  EXPECT_EQ(read->pending[0].call_id, "toolu_1");
  EXPECT_EQ(read->pending[0].requested_seq, 7u);
  EXPECT_EQ(read->pending[0].remaining_ms, 4000u);
  // The answer to a command line is never a pending list.
  auto unasked = read_owner_answer(answer, "h1", std::nullopt, std::nullopt, false);
  ASSERT_FALSE(unasked);
  EXPECT_NE(unasked.error().find("host h1 answered a line that is neither a result nor a refusal"), std::string::npos)
      << unasked.error();
}

TEST(OwnerAnswer, WhatDoesNotFitIsRefusedNamingWhat) {
  const std::string too_long_id(kMaxOwnerCallIdBytes + 1, 'x');
  const std::string too_long_reason(kMaxOwnerReasonBytes + 1, 'r');
  const std::pair<std::string, std::string> cases[] = {
      {"[1,2]", "not one JSON object"},
      {"{\"pending\":[]}\n{\"pending\":[]}", "more than one line"},
      {R"({"pending":{"call_id":"a"}})", "a \"pending\" that is not an array"},
      {R"({"pending":["toolu_1"]})", "pending call 0 that is not an object"},
      {R"({"pending":[{"call_id":7,"requested_seq":1,"remaining_ms":1}]})", "pending call 0 whose call_id"},
      {R"({"pending":[{"call_id":")" + too_long_id + R"(","requested_seq":1,"remaining_ms":1}]})",
       "pending call 0 whose call_id"},
      {R"({"pending":[{"call_id":"a","requested_seq":1,"remaining_ms":1},{"call_id":"b","requested_seq":"2","remaining_ms":1}]})",
       "pending call 1 whose requested_seq"},
      {R"({"pending":[{"call_id":"a","requested_seq":1,"remaining_ms":-5}]})", "pending call 0 whose remaining_ms"},
      {R"({"format":"metaharness.event/1","event":"tool.decided","seq":9})", "neither a pending list, a result nor"},
      {R"({"format":"metaharness.socket/1","reply":"attached","run_id":"r"})", "a \"attached\" line"},
      {R"({"format":"metaharness.socket/1","reply":"refused","code":"forbidden; rm -rf","reason":"x"})",
       "code is not an upper-case word"},
      {R"({"format":"metaharness.socket/1","reply":"refused","code":"FORBIDDEN","reason":")" + too_long_reason + "\"}",
       "reason is not a string of at most"},
      {R"({"format":"metaharness.socket/1","reply":"result","command_id":"d1","outcome":{"result":"ok"}})",
       "without a boolean \"recorded\""},
      {R"({"format":"metaharness.socket/1","reply":"result","command_id":"d1","outcome":"ok","recorded":false})",
       "without an outcome object"},
      {R"({"format":"metaharness.socket/1","reply":"result","command_id":"d1","outcome":{"result":"maybe"},"recorded":false})",
       "outcome does not read"},
  };
  for (const auto& [answer, named] : cases) {
    auto read = read_owner_answer(answer, "h1", std::string("a1"), std::string("a1"), true);
    ASSERT_FALSE(read) << answer;
    EXPECT_EQ(read.error().rfind("host h1 answered ", 0), 0u) << read.error();
    EXPECT_NE(read.error().find(named), std::string::npos) << answer.substr(0, 200) << " -> " << read.error();
  }
}

}  // namespace
}  // namespace mh::daemon
