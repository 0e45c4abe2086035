// The fleet's numbers through the daemons (issue 13): three real `metaharness daemon`s, host h<i>
// on node i of the bench's cluster, hosting the stand-in harness, measured at their sockets:
//   submit -> placed       a socket `submit` with "fleet": true on h0 until its `submitted`
//                          reply says "placed" (the submitter's watch saw a host win the record)
//   event fleet-wide       a paced run on h0, read at once by a local `tail -f` on h0 and a
//                          `tail --fleet -f` on h1: per line, the fleet reader's arrival minus the
//                          local reader's (what the fleet adds after the line is on h0's disk)
//   decision round trip    a `command` (tool.decide) for a run on h0 from h1 (routed) beside the
//                          same from h0 itself, to its `result` reply
//   placement throughput   N fleet submits from h0 on many connections at once, three hosts
//                          placing: runs placed per second
#pragma once

#include <filesystem>
#include <vector>

#include "tests/support/nats_cluster.hpp"

namespace mh::bench {

struct FleetDaemonOptions {
  std::filesystem::path metaharness, standin, work_dir;
  int submits = 40, lines = 200, decisions = 200, placements = 60;
};

// One figure's line: p50, p99 and max of microsecond samples.
void report_us(const char* what, std::vector<double> samples);

// 0, or 2 when the bench itself failed (a daemon did not start, a reply did not come).
int bench_fleet_daemons(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o);

}  // namespace mh::bench
