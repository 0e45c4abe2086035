// A run's supervisor (the containerd shim pattern, docs/supervisor.md): one small process per run
// that owns the vendor child, its three pipes and its hook channel, so the vendor never notices
// the daemon going away. The daemon drives it over a Unix socket (supervisor_protocol.hpp) and
// re-attaches after a restart.
//
// What it keeps is on disk, not in memory: the vendor's stdout is appended to the transcript as
// it is read, and the transcript is the buffer: a daemon that was away reads what it missed from
// the file (hello.stdout_bytes says how far it goes). Only the latest size, the ends, the exit,
// the stdin log's size and the hook requests still waiting are held for the next daemon.
//
// One io_context, one thread, coroutines. Nothing here blocks except the spawn's fork+exec
// handshake and the bounded wait for an abandoned run's cgroup to empty.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/system/result.hpp>
#include <memory>
#include <string>

#include "daemon/supervisor/supervisor_spec.hpp"

namespace mh::supervisor {

// Exit codes of metaharness-supervisor.
inline constexpr int kExitReleased = 0;        // the daemon released the run
inline constexpr int kExitBadSpec = 2;         // the spec could not be read (named on stderr)
inline constexpr int kExitAbandoned = 3;       // no daemon within adopt_within_ms: the run was killed
inline constexpr int kExitSpawnFailed = 4;     // the vendor did not start; a daemon was told (or none came)
inline constexpr int kExitSetupFailed = 5;     // the socket or the run's files could not be opened
inline constexpr int kExitUngovernedHalt = 6;  // no daemon within ungoverned_halt_after_ms: killed, record closed

class Supervisor {
 public:
  // Opens the run's files, binds and listens on the socket (before the spawn, so a daemon can
  // always connect once the supervisor is up), spawns the vendor, writes supervisor.json. A
  // failure to spawn is not an error here: it is reported to the first daemon that attaches.
  // Errors name what could not be set up (the supervisor then exits kExitSetupFailed).
  static boost::system::result<std::unique_ptr<Supervisor>, std::string> start(boost::asio::io_context& io,
                                                                               SupervisorSpec spec);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs the loop on the calling thread until the run is released, abandoned, or its failed
  // spawn was reported; returns the exit code.
  int run();

  struct Impl;

 private:
  explicit Supervisor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// One line in supervisor.log (stderr): "<UTC time> supervisor[<pid>] <run id>: <message>".
void supervisor_log(const std::string& run_id, const std::string& message);

}  // namespace mh::supervisor
