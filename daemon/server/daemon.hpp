// `metaharness daemon`: many governed runs in one long-running Asio process, served over a Unix
// socket (docs/socket-api.md). A systemd Type=notify service (READY, STOPPING, STATUS with run
// counts) that also accepts socket activation (LISTEN_FDS).
//
// Concurrency: one io_context run by N threads. Every run has its own strand (daemon/run);
// every connection has its own strand; the run registry has its own strand. No lock is shared
// between runs; a busy or stuck run never blocks the daemon or another run.
#pragma once

#include <memory>

#include "daemon/config/config.hpp"
#include "daemon/server/fleet_gate.hpp"

namespace mh::daemon {

class Daemon {
 public:
  // `start_fleet`: what a config with a [fleet] section starts (the fleet's FleetHost::start,
  // daemon/fleet/fleet_host.hpp); without it such a config is refused at start, by name.
  explicit Daemon(DaemonConfig config, FleetStarter start_fleet = {});
  ~Daemon();
  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;

  // Recovers the state directory, listens, serves until SIGTERM/SIGINT (or a `shutdown`
  // request), halts every run within the grace period, and returns the exit status (0 on a clean
  // stop; 2 when it could not start).
  int run();

 private:
  struct Impl;  // daemon.cpp
  std::shared_ptr<Impl> impl_;
};

}  // namespace mh::daemon
