// The earlier seam's verdicts by call id (adapters/acp/acp_seam_verdicts.hpp): kept past the call's
// end and the turn's for a late second gate (soak finding 5), and bounded.
#include "adapters/acp/acp_seam_verdicts.hpp"

#include <gtest/gtest.h>

#include "adapters/acp/acp_updates.hpp"

namespace mh::adapters::acp {
namespace {

TEST(SeamVerdicts, AVerdictOutlivesItsCallsEndAndItsTurn) {
  SeamVerdicts v;
  v.decided("a", SeamVerdict::denied);
  v.decided("b", SeamVerdict::granted);
  v.ended("a");
  EXPECT_EQ(v.find("a"), SeamVerdict::denied);
  v.turn_ended();
  EXPECT_EQ(v.find("a"), SeamVerdict::denied);
  EXPECT_EQ(v.find("b"), SeamVerdict::granted);
  EXPECT_EQ(v.open_size(), 0u);
  EXPECT_EQ(v.ended_size(), 2u);
  EXPECT_FALSE(v.find("c")) << "a call the seam never decided";
}

TEST(SeamVerdicts, AReusedIdAnswersWithItsNewestVerdict) {
  SeamVerdicts v;
  v.decided("a", SeamVerdict::granted);
  v.ended("a");
  v.decided("a", SeamVerdict::not_granted);
  EXPECT_EQ(v.find("a"), SeamVerdict::not_granted);
  v.ended("a");
  EXPECT_EQ(v.find("a"), SeamVerdict::not_granted);
  EXPECT_EQ(v.ended_size(), 1u);
}

TEST(SeamVerdicts, EndedVerdictsAreBoundedTheOldestLetGoFirst) {
  SeamVerdicts v;
  for (std::size_t i = 0; i < kMaxEndedVerdicts + 2; ++i) {
    v.decided("c" + std::to_string(i), SeamVerdict::denied);
    v.ended("c" + std::to_string(i));
  }
  EXPECT_EQ(v.ended_size(), kMaxEndedVerdicts);
  EXPECT_FALSE(v.find("c0"));
  EXPECT_FALSE(v.find("c1"));
  EXPECT_EQ(v.find("c2"), SeamVerdict::denied);
  EXPECT_EQ(v.find("c" + std::to_string(kMaxEndedVerdicts + 1)), SeamVerdict::denied);
}

TEST(SeamVerdicts, OpenVerdictsAreBoundedAndAKeptOneCanStillChange) {
  SeamVerdicts v;
  for (std::size_t i = 0; i < kMaxOpenCalls; ++i)
    v.decided("c" + std::to_string(i), SeamVerdict::granted);
  v.decided("over", SeamVerdict::denied);
  EXPECT_FALSE(v.find("over")) << "past the bound its permission request is presented";
  v.decided("c0", SeamVerdict::denied);
  EXPECT_EQ(v.find("c0"), SeamVerdict::denied);
  EXPECT_EQ(v.open_size(), kMaxOpenCalls);
}

}  // namespace
}  // namespace mh::adapters::acp
