// Who is on the other end of a Unix socket, as the kernel says (SO_PEERCRED), read in one place:
// the daemon's clients (their role) and a run's hook channel (is it this run's process?) both
// ask here.
#pragma once

#include <cstdint>
#include <optional>

#include "protocol/types.hpp"

namespace mh::daemon {

struct PeerCredentials {
  std::uint32_t uid = 0;
  std::uint32_t gid = 0;
  std::int32_t pid = 0;

  // The part the stream records (`tool.decided.peer`).
  protocol::PeerIdentity identity() const { return protocol::PeerIdentity{uid, pid}; }
};

// The credentials of the peer of a connected Unix socket; nullopt when they cannot be read.
std::optional<PeerCredentials> peer_credentials(int fd);

}  // namespace mh::daemon
