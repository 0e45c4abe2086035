// The viewer's token book: what a token grants, for how long, and the bounds it keeps.
#include "daemon/viewer/viewer_tokens.hpp"

#include <gtest/gtest.h>

#include <set>
#include <vector>

namespace mh::daemon {
namespace {

using namespace std::chrono_literals;
const auto kNow = std::chrono::system_clock::time_point(std::chrono::seconds(1'800'000'000));

TEST(ViewerTokens, ATokenCarriesTheRoleAndThePeerItWasMintedForUntilItExpires) {
  ViewerTokens book;
  std::string why;
  auto minted = book.mint(Role::control, protocol::PeerIdentity{1001, 4242}, 60s, kNow, why);
  ASSERT_TRUE(minted) << why;
  EXPECT_EQ(minted->expires_at, kNow + 60s);
  auto grant = book.check(minted->token, kNow + 59s);
  ASSERT_TRUE(grant);
  EXPECT_EQ(grant->role, Role::control);
  EXPECT_EQ(grant->minted_by.uid, 1001u);
  EXPECT_EQ(grant->minted_by.pid, 4242);
  EXPECT_FALSE(book.check(minted->token, kNow + 60s)) << "expired at its expires_at";
  EXPECT_FALSE(book.check(minted->token, kNow)) << "an expired token is forgotten, not revived";
}

TEST(ViewerTokens, AnUnknownOrAlteredTokenGrantsNothing) {
  ViewerTokens book;
  std::string why;
  auto minted = book.mint(Role::admin, protocol::PeerIdentity{0, 1}, 60s, kNow, why);
  ASSERT_TRUE(minted);
  std::string altered = minted->token;
  altered[0] = altered[0] == 'A' ? 'B' : 'A';
  EXPECT_FALSE(book.check(altered, kNow));
  EXPECT_FALSE(book.check("", kNow));
  EXPECT_FALSE(book.check(minted->token + "x", kNow));
  EXPECT_TRUE(book.check(minted->token, kNow));
}

TEST(ViewerTokens, TokensAre256RandomBitsInBase64Url) {
  ViewerTokens book;
  std::set<std::string> seen;
  std::string why;
  for (int i = 0; i < 64; ++i) {
    auto minted = book.mint(Role::observe, protocol::PeerIdentity{}, 60s, kNow, why);
    ASSERT_TRUE(minted) << why;
    EXPECT_EQ(minted->token.size(), 43u) << minted->token;
    EXPECT_EQ(minted->token.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"),
              std::string::npos)
        << minted->token;
    seen.insert(minted->token);
  }
  EXPECT_EQ(seen.size(), 64u);
}

TEST(ViewerTokens, ATtlOutOfRangeOrNoRoleIsRefusedByName) {
  ViewerTokens book;
  std::string why;
  EXPECT_FALSE(book.mint(Role::observe, {}, 0s, kNow, why));
  EXPECT_NE(why.find("from 1 s"), std::string::npos) << why;
  EXPECT_FALSE(book.mint(Role::observe, {}, ViewerTokens::kMaxTtl + 1s, kNow, why));
  EXPECT_FALSE(book.mint(Role::none, {}, 60s, kNow, why));
  EXPECT_NE(why.find("role"), std::string::npos) << why;
  EXPECT_EQ(book.live(kNow), 0u);
}

TEST(ViewerTokens, AFullBookRefusesOneMoreToAUidHoldingAsManyAsAnyUntilATokenExpires) {
  ViewerTokens book;
  std::string why;
  // kMaxTokens uids, one token each: the book is full and nobody holds more than another.
  auto uid_of = [](std::size_t i) { return protocol::PeerIdentity{static_cast<std::uint32_t>(i), 0, std::nullopt}; };
  for (std::size_t i = 0; i < ViewerTokens::kMaxTokens; ++i)
    ASSERT_TRUE(book.mint(Role::observe, uid_of(i), i == 0 ? 10s : 3600s, kNow, why)) << why;
  EXPECT_FALSE(book.mint(Role::observe, uid_of(7), 60s, kNow + 1s, why));
  EXPECT_NE(why.find("live"), std::string::npos) << why;
  EXPECT_NE(why.find("holds as many as any uid"), std::string::npos) << why;
  // The first one expires: there is room again, and nobody else's token was pushed out.
  EXPECT_TRUE(book.mint(Role::observe, uid_of(7), 60s, kNow + 10s, why)) << why;
  EXPECT_EQ(book.live(kNow + 10s), ViewerTokens::kMaxTokens);
}

// The attack that follows the next one's fix (a review's, as an attacker reads it): 16 uids, each
// its kMaxTokensPerUid week-long tokens, fill the book, and every other uid (root among them) is
// refused for a week. A full book is shared fairly: a uid holding fewer than the most still gets
// a token, and the one that ends is the biggest holder's nearest to expiry, never a small holder's.
TEST(ViewerTokens, AFullBookTakenBySixteenUidsStillGivesAnotherUidOneAtTheBiggestHoldersCost) {
  ViewerTokens book;
  std::string why;
  const std::size_t hoarders = ViewerTokens::kMaxTokens / ViewerTokens::kMaxTokensPerUid;
  std::vector<std::string> first_of_each;
  for (std::size_t u = 0; u < hoarders; ++u)
    for (std::size_t i = 0; i < ViewerTokens::kMaxTokensPerUid; ++i) {
      const protocol::PeerIdentity hoarder{static_cast<std::uint32_t>(1000 + u), 0, std::nullopt};
      auto minted = book.mint(Role::observe, hoarder, ViewerTokens::kMaxTtl - std::chrono::seconds(i), kNow, why);
      ASSERT_TRUE(minted) << why;
      if (i + 1 == ViewerTokens::kMaxTokensPerUid) first_of_each.push_back(minted->token);  // nearest to expiry
    }
  ASSERT_EQ(book.live(kNow), ViewerTokens::kMaxTokens);
  const protocol::PeerIdentity root{0, 2, std::nullopt}, operator_uid{4343, 3, std::nullopt};
  auto roots = book.mint(Role::admin, root, 60s, kNow, why);
  ASSERT_TRUE(roots) << why;
  auto operators = book.mint(Role::observe, operator_uid, 60s, kNow, why);
  ASSERT_TRUE(operators) << why;
  EXPECT_EQ(book.live(kNow), ViewerTokens::kMaxTokens) << "still at most kMaxTokens";
  std::size_t ended = 0;
  for (const auto& token : first_of_each)
    ended += !book.check(token, kNow);
  EXPECT_EQ(ended, 2u) << "each new token ended one hoarder's token nearest to expiry";
  // The hoarders mint on: each new one costs a hoarder holding the most, never root or the
  // operator, who hold one each.
  for (std::size_t i = 0; i < 4 * ViewerTokens::kMaxTokensPerUid; ++i)
    (void)book.mint(Role::observe, {static_cast<std::uint32_t>(1000 + i % hoarders), 0, std::nullopt},
                    ViewerTokens::kMaxTtl, kNow, why);
  EXPECT_TRUE(book.check(roots->token, kNow)) << "root's page goes on";
  EXPECT_TRUE(book.check(operators->token, kNow)) << "the operator's page goes on";
}

// Of uids holding as many tokens, the one that minted last gives one up: root (uid 0, the lowest
// number) holding two old pages is not the first to lose one to a full book's fair share.
TEST(ViewerTokens, OfEqualHoldersTheOneThatMintedLastGivesATokenUp) {
  ViewerTokens book;
  std::string why;
  const protocol::PeerIdentity root{0, 1, std::nullopt};
  auto first = book.mint(Role::admin, root, 3600s, kNow, why);
  auto second = book.mint(Role::admin, root, 3600s, kNow, why);
  ASSERT_TRUE(first && second) << why;
  for (std::size_t i = 2; i < ViewerTokens::kMaxTokens; ++i)
    ASSERT_TRUE(book.mint(Role::observe, {static_cast<std::uint32_t>(1000 + i / 2), 0, std::nullopt}, 3600s,
                          kNow + std::chrono::seconds(i), why))
        << why;
  ASSERT_EQ(book.live(kNow + 2000s), ViewerTokens::kMaxTokens);
  EXPECT_TRUE(book.mint(Role::observe, {4343, 0, std::nullopt}, 60s, kNow + 2000s, why)) << why;
  EXPECT_TRUE(book.check(first->token, kNow + 2000s)) << "root's pages go on";
  EXPECT_TRUE(book.check(second->token, kNow + 2000s)) << "root's pages go on";
}

// The attack (an outside tester's): one observer uid minted every token the book holds (week-long
// ones), and root's `metaharness viewer` was refused for a week. One uid holds at most
// kMaxTokensPerUid; another uid (root among them) still gets one.
TEST(ViewerTokens, OneUidHoldsAtMostItsShareAndAnotherStillGetsOne) {
  ViewerTokens book;
  std::string why;
  const protocol::PeerIdentity observer{4343, 1, std::nullopt}, root{0, 2, std::nullopt};
  for (std::size_t i = 0; i < ViewerTokens::kMaxTokensPerUid; ++i)
    ASSERT_TRUE(book.mint(Role::observe, observer, ViewerTokens::kMaxTtl, kNow, why)) << why;
  EXPECT_FALSE(book.mint(Role::observe, observer, ViewerTokens::kMaxTtl, kNow, why));
  EXPECT_NE(why.find("uid 4343 holds"), std::string::npos) << why;
  EXPECT_TRUE(book.mint(Role::admin, root, 60s, kNow, why)) << why;
}

}  // namespace
}  // namespace mh::daemon
