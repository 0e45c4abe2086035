// The viewer's token book: what a token grants, for how long, and the bounds it keeps.
#include "daemon/viewer/viewer_tokens.hpp"

#include <gtest/gtest.h>

#include <set>

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

TEST(ViewerTokens, AFullBookRefusesOneMoreUntilATokenExpires) {
  ViewerTokens book;
  std::string why;
  // Many uids' tokens (one uid may hold kMaxTokensPerUid of them).
  auto uid_of = [](std::size_t i) {
    return protocol::PeerIdentity{static_cast<std::uint32_t>(i / ViewerTokens::kMaxTokensPerUid), 0, std::nullopt};
  };
  for (std::size_t i = 0; i < ViewerTokens::kMaxTokens; ++i)
    ASSERT_TRUE(book.mint(Role::observe, uid_of(i), i == 0 ? 10s : 3600s, kNow, why)) << why;
  EXPECT_FALSE(book.mint(Role::observe, uid_of(ViewerTokens::kMaxTokens), 60s, kNow + 1s, why));
  EXPECT_NE(why.find("live"), std::string::npos) << why;
  // The first one expires: there is room again, and nobody else's token was pushed out.
  EXPECT_TRUE(book.mint(Role::observe, uid_of(0), 60s, kNow + 10s, why)) << why;
  EXPECT_EQ(book.live(kNow + 10s), ViewerTokens::kMaxTokens);
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
