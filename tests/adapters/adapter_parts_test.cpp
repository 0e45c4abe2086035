// The small parts both adapters are built from (adapters/adapter.hpp): the start of a harness
// capability table, operations with a vendor's aliases, and a transcript framed as the live run
// frames it.
#include <gtest/gtest.h>

#include "adapters/adapter.hpp"
#include "metaharness/build_info.hpp"

namespace mh::adapters {
namespace {

namespace proto = mh::protocol;

TEST(HarnessCapabilities, DeliverEveryTierAndDecisionModeWithThePinnedVersions) {
  for (std::string_view id : {"claude", "codex"}) {
    auto t = harness_capabilities(id);
    EXPECT_EQ(t.adapter_id, id);
    EXPECT_EQ(t.adapter_class, proto::AdapterClass::harness);
    std::vector<std::string> pinned;
    for (const auto& pin : build_info::vendor_pins)
      if (pin.adapter == id) pinned.emplace_back(pin.version);
    EXPECT_EQ(t.versions_pinned, pinned) << id;
    EXPECT_FALSE(t.versions_pinned.empty()) << id << " has a pin";
    for (auto tier : {proto::Tier::registration, proto::Tier::call, proto::Tier::turn, proto::Tier::kill})
      EXPECT_EQ(t.tier(tier), proto::TierStatus::delivered);
    for (auto mode : {proto::DecisionMode::frame, proto::DecisionMode::ask, proto::DecisionMode::observe})
      EXPECT_EQ(t.decision_mode(mode), proto::TierStatus::delivered);
    EXPECT_TRUE(t.commands.empty()) << "the commands are the adapter's own";
  }
}

TEST(OperationsWith, AddTheAliasesInVocabularyOrder) {
  proto::CapabilityTable t;
  t.rendering = {{"shell", "Bash"}, {"file.edit", "Edit"}};
  auto ops = operations_with(t, "Bash", {proto::OpKind::file_edit});
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_LT(ops[0].op, ops[1].op);
  EXPECT_EQ(operations_with(t, "Bash", {}).size(), 1u);
  EXPECT_EQ(operations_with(t, "Unknown", {proto::OpKind::shell}).size(), 1u) << "an alias alone still counts";
}

TEST(ReadTranscript, FramesEveryLineWithTheLiveBoundAndDigestsAnOversizedOne) {
  std::string huge(proto::kDefaultMaxVendorLineBytes + 1, 'x');
  std::string transcript = "{\"a\":1}\n\n" + huge + "\n{\"b\":2}";
  std::vector<std::pair<std::uint64_t, bool>> seen;
  std::string digest;
  read_transcript(transcript, [&](const proto::FramedLine& line) {
    seen.emplace_back(line.number, line.too_long);
    if (line.too_long) digest = line.digest;
  });
  EXPECT_EQ(seen, (std::vector<std::pair<std::uint64_t, bool>>{{1, false}, {2, false}, {3, true}, {4, false}}))
      << "blank and unterminated lines count";
  EXPECT_EQ(digest, proto::sha256_hex(huge));
}

}  // namespace
}  // namespace mh::adapters
