#include "daemon/viewer/viewer_tokens.hpp"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "protocol/digest.hpp"

namespace mh::daemon {

namespace {

// base64url without padding (RFC 4648 §5): a token travels in a URL fragment and a header.
std::string base64url(const unsigned char* bytes, int n) {
  std::string out(4 * ((n + 2) / 3) + 1, '\0');
  int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), bytes, n);
  out.resize(written);
  while (!out.empty() && out.back() == '=')
    out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

}  // namespace

std::optional<ViewerTokens::Minted> ViewerTokens::mint(Role role, protocol::PeerIdentity by, std::chrono::seconds ttl,
                                                       std::chrono::system_clock::time_point now,
                                                       std::string& why_not) {
  if (ttl < std::chrono::seconds(1) || ttl > kMaxTtl) {
    why_not = "a viewer token lives from 1 s to " + std::to_string(kMaxTtl.count()) + " s, not " +
              std::to_string(ttl.count()) + " s";
    return std::nullopt;
  }
  if (role == Role::none) {
    why_not = "a viewer token needs a role";
    return std::nullopt;
  }
  unsigned char random[32];
  if (RAND_bytes(random, sizeof random) != 1) {
    why_not = "the system gave no randomness for a token";
    return std::nullopt;
  }
  std::string token = base64url(random, sizeof random);
  std::lock_guard lock(mu_);
  forget_expired(now);
  struct Holding {
    std::size_t tokens = 0;
    std::chrono::system_clock::time_point last_minted;
  };
  std::map<std::uint32_t, Holding> held;  // live tokens by the uid that minted them
  for (const auto& [digest, grant] : by_digest_) {
    Holding& h = held[grant.minted_by.uid];
    ++h.tokens;
    h.last_minted = std::max(h.last_minted, grant.minted_at);
  }
  const std::size_t mine = held.contains(by.uid) ? held[by.uid].tokens : 0;
  if (mine >= kMaxTokensPerUid) {
    why_not = "uid " + std::to_string(by.uid) + " holds " + std::to_string(kMaxTokensPerUid) +
              " live viewer tokens already; one frees when it expires (or at a restart)";
    return std::nullopt;
  }
  if (by_digest_.size() >= kMaxTokens) {
    // A full book: a fair share, not first come. A few uids that took every token (each its
    // kMaxTokensPerUid) would otherwise shut every other uid out for as long as the tokens live
    // (a week). The uid holding the most gives up its token nearest to expiry, to a uid holding
    // fewer; a uid holding as many as anyone is refused.
    // The most tokens; of equals, the uid that minted last (so root, uid 0, is not first to lose
    // a page only because its number is the lowest).
    const auto most = std::max_element(held.begin(), held.end(), [](const auto& a, const auto& b) {
      return std::tie(a.second.tokens, a.second.last_minted) < std::tie(b.second.tokens, b.second.last_minted);
    });
    if (most->second.tokens <= mine) {
      why_not = std::to_string(kMaxTokens) + " viewer tokens are live and uid " + std::to_string(by.uid) +
                " holds as many as any uid; one frees when it expires (or at a restart)";
      return std::nullopt;
    }
    auto given_up = by_digest_.end();
    for (auto it = by_digest_.begin(); it != by_digest_.end(); ++it)
      if (it->second.minted_by.uid == most->first &&
          (given_up == by_digest_.end() || it->second.expires_at < given_up->second.expires_at))
        given_up = it;
    by_digest_.erase(given_up);
  }
  ViewerGrant grant{role, std::move(by), now + ttl, now};
  by_digest_[protocol::sha256_hex(token)] = grant;
  return Minted{std::move(token), grant.expires_at};
}

std::optional<ViewerGrant> ViewerTokens::check(std::string_view token, std::chrono::system_clock::time_point now) {
  // The digest is what is compared: how long a lookup takes says nothing about the token.
  const std::string digest = protocol::sha256_hex(token);
  std::lock_guard lock(mu_);
  auto it = by_digest_.find(digest);
  if (it == by_digest_.end()) return std::nullopt;
  if (it->second.expires_at <= now) {
    by_digest_.erase(it);
    return std::nullopt;
  }
  return it->second;
}

std::size_t ViewerTokens::live(std::chrono::system_clock::time_point now) {
  std::lock_guard lock(mu_);
  forget_expired(now);
  return by_digest_.size();
}

void ViewerTokens::forget_expired(std::chrono::system_clock::time_point now) {
  std::erase_if(by_digest_, [now](const auto& entry) { return entry.second.expires_at <= now; });
}

}  // namespace mh::daemon
