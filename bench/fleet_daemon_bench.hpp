// The fleet's numbers through the daemons (issue 13): three real `metaharness daemon`s, host h<i>
// on node i of the bench's cluster, hosting the stand-in harness, measured at their sockets:
//   submit -> placed       a socket `submit` with "fleet": true on h0 until its `submitted`
//                          reply says "placed" (the submitter's watch saw a host win the record)
//   event fleet-wide       a paced run on h0, read at once by a local `tail -f` on h0 and a
//                          `tail --fleet -f` on h1: per line, the fleet reader's arrival minus the
//                          local reader's (what the fleet adds after the line is on h0's disk)
//   decision round trip    a `command` (tool.decide) for a run on h0 from h1 (routed) beside the
//                          same from h0 itself, to its `result` reply
//   publish throughput     bench_fleet_publish below
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
  // The publishing phase (issue 26 section 5): chatty runs on h0, each writing this many lines.
  int publish_runs = 50, publish_lines = 1000;
  // fleet.publish_batch_lines of the batched phase (the others publish one line per message).
  int publish_batch = 64;
};

// One figure's line: p50, p99 and max of microsecond samples.
void report_us(const char* what, std::vector<double> samples);

// Publishing throughput (issue 26 section 5): `publish_runs` runs on h0 (the stand-in, a text line
// per step, no pause) while h0 publishes them to the fleet, once with fleet.serial_publish (the
// publisher before issue 26), once pipelined with one line per message (fleet.publish_batch_lines
// = 1, the publisher of the first half of issue 26) and once pipelined with up to
// `publish_batch` lines per message, each on a fresh daemon and prefix: event lines
// per second from the first submit until the fleet holds every line, beside the local rate (until
// every run is closed on h0); then every run's stream in JetStream is read back and checked
// complete, in order and without a duplicate (nothing after its last line). 0, 1 when a check failed, 2 when the bench
// did.
int bench_fleet_publish(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o);

// 0, or 2 when the bench itself failed (a daemon did not start, a reply did not come).
int bench_fleet_daemons(const mh::test::NatsCluster& cluster, const FleetDaemonOptions& o);

}  // namespace mh::bench
