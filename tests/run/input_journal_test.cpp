// The input journal: every kind of input round-trips through its line exactly (a replay must hand
// the core what the live run handed it), a torn last line is dropped, anything else bad refuses
// the journal by name.
#include "daemon/run/input_journal.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "protocol/commands.hpp"

namespace mh::daemon {
namespace {

namespace fs = std::filesystem;
using journal::Entry;

std::chrono::steady_clock::time_point at(std::int64_t ns) {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(ns));
}

std::vector<Entry> one_of_each() {
  protocol::PeerIdentity peer{1000, 4242, std::string("viewer")};
  protocol::LineRefusal refusal{protocol::LineRefusalKind::UnknownName, "no command \"x\"", std::string("c-9")};
  return {
      {at(1), journal::Start{}},
      {at(2), journal::VendorOut{65536, 1764633600123}},
      {at(3), journal::VendorEnd{}},
      {at(4), journal::HookRequest{7, R"({"tool_name":"Bash","tool_input":{"command":"ls \"x\"\n"}})"}},
      {at(5), journal::HookGone{7}},
      {at(6), journal::CommandLine{R"({"format":"metaharness.command/1","id":"c1","name":"halt","payload":{}})", peer}},
      {at(7), journal::CommandLine{"{}", std::nullopt}},
      {at(8), journal::Unreadable{refusal}},
      {at(9), journal::SourceClosed{}},
      {at(10), journal::BudgetExhausted{"owner 1000: usd 5 of 5 spent today"}},
      {at(11), journal::Shutdown{}},
      {at(12), journal::Deadline{"toolu_01"}},
      {at(13), journal::IdleTimeout{}},
      {at(14), journal::ShellWarning{"RUN_ADOPTED", "no daemon governed it for 1.2 s"}},
      {at(std::numeric_limits<std::int64_t>::max()), journal::WallBudget{}},
      {at(15), journal::Start{true}},
      {at(16), journal::GatewayUsage{4, 200, "claude-opus-4", 1200, 345, 0, std::nullopt, true}},
      {at(17), journal::GatewayUsage{5, 429, "", std::nullopt, std::nullopt, std::nullopt, std::nullopt, false}},
      {at(18), journal::GatewayRefused{"POST", "/v1/files?x=\"1\""}},
      {at(19), journal::Egress{"pypi.org:443", true, ""}},
      {at(20), journal::Egress{"169.254.169.254:80", false, "link-local"}},
      {at(21), journal::StallTimeout{}},
      {at(22), journal::ParkTimeout{"toolu_01"}},
      {at(23), journal::Resumed{}},
  };
}

TEST(InputJournal, EveryKindOfInputRoundTripsThroughItsLine) {
  std::set<std::size_t> kinds;
  for (const Entry& entry : one_of_each())
    kinds.insert(entry.input.index());
  EXPECT_EQ(kinds.size(), std::variant_size_v<journal::Input>)
      << "one of each kind, the stall and park timeouts and the resume included";
  for (const Entry& entry : one_of_each()) {
    std::string line = journal::serialize(entry);
    ASSERT_EQ(line.back(), '\n');
    ASSERT_EQ(line.find('\n'), line.size() - 1) << "one line per input: " << line;
    auto back = journal::parse(std::string_view(line).substr(0, line.size() - 1));
    ASSERT_TRUE(back) << back.error();
    EXPECT_EQ(back->now, entry.now);
    ASSERT_EQ(back->input.index(), entry.input.index());
    // Serialising what was read gives the same bytes: nothing was lost or changed.
    EXPECT_EQ(journal::serialize(*back), line);
  }
}

TEST(InputJournal, AGatewaysFiguresComeBackAsTheyWentIncludingTheUnknownOnes) {
  Entry entry{at(1), journal::GatewayUsage{4, 200, "m", 1200, std::nullopt, 0, 7, true}};
  std::string line = journal::serialize(entry);
  auto back = journal::parse(std::string_view(line).substr(0, line.size() - 1));
  ASSERT_TRUE(back) << back.error();
  const auto& g = std::get<journal::GatewayUsage>(back->input);
  EXPECT_EQ(g.request, 4u);
  EXPECT_EQ(g.status, 200);
  EXPECT_EQ(g.input_tokens, 1200u);
  EXPECT_FALSE(g.output_tokens) << "unknown stays unknown, never 0";
  EXPECT_EQ(g.cache_read_tokens, 0u);
  EXPECT_EQ(g.cache_creation_tokens, 7u);
  EXPECT_TRUE(g.complete);
  // An older journal's start (no "gateway") reads as a run without one.
  auto old_start = journal::parse(R"({"k":"start","now":5})");
  ASSERT_TRUE(old_start) << old_start.error();
  EXPECT_FALSE(std::get<journal::Start>(old_start->input).gateway);
  EXPECT_EQ(journal::serialize(Entry{at(5), journal::Start{}}), "{\"k\":\"start\",\"now\":5}\n");
}

TEST(InputJournal, ALineThatIsNotAnInputIsRefusedByName) {
  EXPECT_NE(journal::parse("[1]").error().find("not a JSON object"), std::string::npos);
  EXPECT_NE(journal::parse(R"({"k":"teleport","now":1})").error().find("teleport"), std::string::npos);
  EXPECT_NE(journal::parse(R"({"k":"out","now":1,"at":5})").error().find("\"to\""), std::string::npos);
  EXPECT_NE(journal::parse(R"({"k":"out","now":1,"to":-3,"at":5})").error().find("\"to\""), std::string::npos);
  EXPECT_NE(journal::parse(R"({"k":"deadline"})").error().find("\"now\""), std::string::npos);
  EXPECT_NE(journal::parse(R"({"k":"unreadable","now":1,"refusal":"Nope","message":"m"})").error().find("Nope"),
            std::string::npos);
}

class JournalFile : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mh-journal-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(JournalFile, WhatWasAppendedIsReadBackInOrderAndATornTailIsDropped) {
  auto path = dir_ / "core-inputs.jsonl";
  {
    auto j = InputJournal::create(path);
    ASSERT_TRUE(j) << j.error();
    for (const Entry& e : one_of_each())
      j->append(e);
    EXPECT_FALSE(j->failed());
    EXPECT_FALSE(InputJournal::create(path)) << "a second journal never overwrites the first";
  }
  EXPECT_EQ(fs::status(path).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read);
  {
    std::ofstream torn(path, std::ios::app);
    torn << R"({"k":"command","now":99,"li)";  // the daemon died mid-write
  }
  auto read = read_journal(path);
  ASSERT_TRUE(read) << read.error();
  EXPECT_TRUE(read->torn_tail);
  auto expected = one_of_each();
  ASSERT_EQ(read->entries.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(journal::serialize(read->entries[i]), journal::serialize(expected[i])) << i;
}

TEST_F(JournalFile, AJournalWithABadLineInsideOrNoHeaderIsRefused) {
  auto path = dir_ / "j.jsonl";
  std::ofstream(path) << "{\"journal\":\"metaharness.core-inputs/1\"}\n{\"k\":\"start\",\"now\":1}\nnot json\n"
                      << "{\"k\":\"start\",\"now\":2}\n";
  auto bad = read_journal(path);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().find("line 3"), std::string::npos) << bad.error();
  std::ofstream(path) << "{\"k\":\"start\",\"now\":1}\n";
  EXPECT_NE(read_journal(path).error().find("metaharness.core-inputs/1"), std::string::npos);
  EXPECT_FALSE(read_journal(dir_ / "missing.jsonl"));
}

}  // namespace
}  // namespace mh::daemon
