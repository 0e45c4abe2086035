// A socket peer of another uid, for the tests of who may do what: the daemon reads a peer's uid
// from its connection's credentials (SO_PEERCRED), so the peer must really be that uid — a
// forked child that drops to it, connects, does its part and reports back through a pipe.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>

namespace mh::test {

struct PeerReport {
  bool ran = false;  // the child dropped to the uid and connected; `seen` is what `act` returned
  std::string seen;  // else why not (setresuid, connect, or how the child ended)
};

// Forks a child that drops to `uid` (group too), connects to `socket` with reads bounded by
// `read_bound`, and returns what `act(fd)` returns. Needs root; the child never returns here.
PeerReport as_peer_of_uid(uid_t uid, const std::filesystem::path& socket, std::chrono::seconds read_bound,
                          const std::function<std::string(int fd)>& act);

// The first line a peer running as `uid` reads after sending `request` (one line) on `socket`:
// "" (with `why`) when it read none. Forks: the child drops to `uid`, so the daemon reads that
// uid from the connection's credentials.
std::string first_line_as(uid_t uid, const std::filesystem::path& socket, const std::string& request, std::string& why);

}  // namespace mh::test
