// What times metaharness's own share of the call seam (seam_timer.hpp implements it): an
// interface a Run's options carry (run.hpp).
#pragma once

#include "daemon/run/run_types.hpp"
#include "protocol/events.hpp"

namespace mh::daemon {

// Times metaharness's own share of the call seam, for the benches (`metaharness run
// --latency-report` installs a SeamTimer, seam_timer.hpp). Optional and absent in the daemon: a
// run without one pays a null test per input. Called on the run's strand, in this order per
// input: input_read or command_received, then appending / answer_written as the core acts, then
// recorded once what was appended is durable, then input_done or command_done.
class SeamProbe {
 public:
  virtual ~SeamProbe() = default;
  // Vendor input is being handled, read at `at`: a chunk of its stdout, or one hook-channel
  // request (Codex's calls arrive there).
  virtual void input_read(Instant at) = 0;
  virtual void input_done() = 0;
  // A command (received at `at` by whoever read its line) is being handled.
  virtual void command_received(Instant at) = 0;
  virtual void command_done() = 0;
  // An event is about to be appended to the run's stream.
  virtual void appending(const protocol::EventPayload& event) = 0;
  // What was appended since the last call is durable and visible to readers (or, !durable, lost).
  virtual void recorded(bool durable) = 0;
  // An answer left for the vendor: a line handed to its stdin, or a hook-channel reply.
  virtual void answer_written() = 0;
};

}  // namespace mh::daemon
