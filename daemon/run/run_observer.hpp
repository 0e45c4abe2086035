// What sees a run's events as its log takes them (the daemon's metrics): an interface a Run's
// options carry (run.hpp).
#pragma once

#include "protocol/events.hpp"

namespace mh::daemon {

// Sees every event the run hands its log, on the run's strand, in stream order, with the
// payload in hand, before any reader can see it (stream.closed included, between its sync and
// its publication). The daemon's metrics (daemon/metrics) are derived from it, so they tell the
// story the record tells. Optional: a run without one pays nothing.
class RunObserver {
 public:
  virtual ~RunObserver() = default;
  virtual void appended(const protocol::EventPayload& event) = 0;
};

}  // namespace mh::daemon
