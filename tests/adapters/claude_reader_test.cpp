// The Claude record reader on records the real CLI (2.1.197) wrote: a two-turn run against the
// scripted endpoint (turn 1: 100 in / 50 out, turn 2: 200 in / 70 out), its transcript kept in
// data/claude_two_turns.jsonl. Claude's assistant records carry a request's usage as of its start
// (output_tokens 1); its result carries the turn's usage, and modelUsage / total_cost_usd summed
// over the session.
#include "adapters/claude/claude_reader.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "adapters/claude/claude_adapter.hpp"
#include "adapters/registry.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/digest.hpp"
#include "protocol/reader.hpp"

namespace mh::adapters {
namespace {

namespace proto = mh::protocol;

std::string two_turns() {
  std::ifstream in(std::filesystem::path(build_info::source_dir) / "tests/adapters/data/claude_two_turns.jsonl");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<proto::ev::Usage> usages(const std::vector<proto::Event>& events, const std::string& scope) {
  std::vector<proto::ev::Usage> out;
  for (const auto& e : events)
    if (auto* u = std::get_if<proto::ev::Usage>(&e.payload); u && u->scope == scope) out.push_back(*u);
  return out;
}

class ClaudeReader : public ::testing::Test {
 protected:
  void SetUp() override {
    auto transcript = two_turns();
    ASSERT_FALSE(transcript.empty());
    events = make_claude_adapter(HostConfig{})->translate(transcript, "run-1");
  }
  std::vector<proto::Event> events;
};

TEST_F(ClaudeReader, MarksEachAssistantRecordsUsageAsRequestScoped) {
  auto requests = usages(events, "request");
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].request_id, "req_mh_0002");
  EXPECT_EQ(requests[0].usage.output_tokens, 1u) << "as of the message's start: what the CLI writes";
  EXPECT_EQ(requests[1].usage.input_tokens, 200u);
}

TEST_F(ClaudeReader, ReportsEachTurnsOwnTotalsAtItsEndAsTheGrowthOfTheCumulativeFigures) {
  auto turns = usages(events, "turn");
  ASSERT_EQ(turns.size(), 2u);
  EXPECT_EQ(turns[0].model, "claude-sonnet-4-5");
  EXPECT_EQ(turns[0].request_id, std::nullopt);
  EXPECT_EQ(turns[0].usage.input_tokens, 100u);
  EXPECT_EQ(turns[0].usage.output_tokens, 50u);
  EXPECT_EQ(turns[0].usage.cache_read_input_tokens, 0u);
  ASSERT_TRUE(turns[0].usage.cost_usd);
  EXPECT_NEAR(*turns[0].usage.cost_usd, 0.00105, 1e-12) << "the vendor's own cost";
  // Turn 2: modelUsage says 300 in / 120 out and total_cost_usd 0.0027 for the session.
  EXPECT_EQ(turns[1].usage.input_tokens, 200u);
  EXPECT_EQ(turns[1].usage.output_tokens, 70u);
  ASSERT_TRUE(turns[1].usage.cost_usd);
  EXPECT_NEAR(*turns[1].usage.cost_usd, 0.0027 - 0.00105, 1e-12);
}

TEST_F(ClaudeReader, PutsTheTurnsFiguresBeforeItsEnd) {
  std::vector<std::string> names;
  for (const auto& e : events) {
    auto* u = std::get_if<proto::ev::Usage>(&e.payload);
    names.emplace_back(u ? "usage/" + u->scope.value_or("?") : std::string(proto::event_name(e.payload)));
  }
  auto first_turn_usage = std::find(names.begin(), names.end(), "usage/turn");
  auto first_end = std::find(names.begin(), names.end(), "turn.ended");
  ASSERT_NE(first_turn_usage, names.end());
  EXPECT_LT(first_turn_usage, first_end);
}

TEST(UsageScope, IsWrittenWhenKnownOmittedWhenNullAndReadBack) {
  proto::ev::Usage u;
  u.scope = "turn";
  std::string line = proto::serialize(proto::Event{1, "r", std::nullopt, u});
  EXPECT_NE(line.find(R"("scope":"turn")"), std::string::npos) << line;
  auto read = proto::read_event_line(line);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(std::get<proto::ev::Usage>(read->payload).scope, "turn");
  std::string unscoped = proto::serialize(proto::Event{1, "r", std::nullopt, proto::ev::Usage{}});
  EXPECT_EQ(unscoped.find("scope"), std::string::npos) << "older lines stay byte-identical";
}

// A final answer over the vendor line bound (4 MiB, the bound translate reads with) makes both
// its assistant record and the result oversized: still read, the text cut and the turn ended.
TEST(ClaudeReaderOversized, MapsARecordOverTheLineBoundWithItsTextCutAndStillEndsTheTurn) {
  std::string answer(5u << 20, 'x');
  json::object assistant{
      {"type", "assistant"},
      {"message", json::object{{"id", "msg_1"},
                               {"model", "claude-opus-4-8"},
                               {"content", json::array{json::object{{"type", "text"}, {"text", answer}}}},
                               {"usage", json::object{{"input_tokens", 5}, {"output_tokens", 1}}}}},
      {"request_id", "req_1"}};
  json::object result{{"type", "result"},
                      {"subtype", "success"},
                      {"is_error", false},
                      {"result", answer},
                      {"stop_reason", "end_turn"},
                      {"total_cost_usd", 0.5},
                      {"usage", json::object{{"input_tokens", 5}, {"output_tokens", 900}}}};
  std::string transcript = std::string(R"({"type":"system","subtype":"init","session_id":"s"})") + "\n" +
                           proto::canonical_json(assistant) + "\n" + proto::canonical_json(result) + "\n";
  auto events = make_claude_adapter(HostConfig{})->translate(transcript, "run-1");
  const proto::Event* text = nullptr;
  std::size_t ended = 0, named = 0;
  for (const auto& e : events) {
    if (std::holds_alternative<proto::ev::Text>(e.payload)) text = &e;
    if (std::holds_alternative<proto::ev::TurnEnded>(e.payload)) ++ended;
    if (auto* w = std::get_if<proto::ev::Warning>(&e.payload); w && w->code == "VENDOR_LINE_CUT") ++named;
    EXPECT_FALSE(std::holds_alternative<proto::ev::Opaque>(e.payload)) << "no record became opaque";
  }
  ASSERT_TRUE(text);
  ASSERT_EQ(text->cut.size(), 1u);
  EXPECT_EQ(text->cut[0].pointer, "/text");
  EXPECT_EQ(text->cut[0].bytes, answer.size());
  EXPECT_EQ(text->cut[0].digest, proto::sha256_hex(answer));
  EXPECT_EQ(std::get<proto::ev::Text>(text->payload).text.size(), text->cut[0].kept);
  EXPECT_EQ(ended, 1u) << "the oversized result ends the turn";
  EXPECT_EQ(named, 2u);
  auto turns = usages(events, "turn");
  ASSERT_EQ(turns.size(), 1u);
  EXPECT_EQ(turns[0].usage.output_tokens, 900u) << "the oversized result's figures are read too";
}

}  // namespace
}  // namespace mh::adapters
