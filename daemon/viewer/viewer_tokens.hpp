// The viewer page's tokens: `metaharness viewer` asks the daemon over its socket for one, and the
// page sends it on every API call (Authorization: Bearer). A token carries a role (never more
// than the role of the peer that asked for it) and that peer's identity, which a decision taken
// from the page is recorded under (tool.decided.peer, via "viewer").
//
// Tokens live in the daemon's memory only: a restart ends every page's access, and nothing on
// disk can be copied to gain it. Only each token's SHA-256 is kept, so the book itself holds
// nothing a page could use. A token expires (the ttl it was given); at most kMaxTokens are live,
// at most kMaxTokensPerUid of them one uid's. With the book full, a uid holding fewer than the
// uid holding the most still gets one, which ends that uid's token nearest to expiry (a fair
// share: a few uids cannot shut everyone else out); of uids holding as many, the one that minted
// last gives it up (the one minting, not one that holds a few old pages); a uid holding as many as
// anyone is refused.
//
// Thread-safe: socket sessions mint and HTTP connections check, each on its own strand.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "daemon/config/config.hpp"
#include "protocol/types.hpp"

namespace mh::daemon {

struct ViewerGrant {
  Role role = Role::none;
  protocol::PeerIdentity minted_by;  // the socket peer that asked for the token
  std::chrono::system_clock::time_point expires_at;
  std::chrono::system_clock::time_point minted_at;
};

class ViewerTokens {
 public:
  static constexpr std::size_t kMaxTokens = 1024;
  // Of them, at most this many minted by one uid: no one peer can take every token there is.
  static constexpr std::size_t kMaxTokensPerUid = 64;
  static constexpr std::chrono::seconds kMaxTtl{7 * 24 * 3600};

  struct Minted {
    std::string token;  // 43 characters of base64url: 256 random bits
    std::chrono::system_clock::time_point expires_at;
  };

  // A fresh token for `grant` (its expires_at is now + ttl), or why not: the ttl out of range
  // (1 s to kMaxTtl), the book full of live tokens, or no randomness from the system.
  std::optional<Minted> mint(Role role, protocol::PeerIdentity by, std::chrono::seconds ttl,
                             std::chrono::system_clock::time_point now, std::string& why_not);
  // The grant a token carries, while it is live; nullopt for an unknown or expired token.
  std::optional<ViewerGrant> check(std::string_view token, std::chrono::system_clock::time_point now);
  std::size_t live(std::chrono::system_clock::time_point now);

 private:
  void forget_expired(std::chrono::system_clock::time_point now);  // mu_ held

  std::mutex mu_;
  std::map<std::string, ViewerGrant> by_digest_;  // SHA-256 of the token, hex
};

}  // namespace mh::daemon
