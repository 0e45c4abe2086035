// The SeamProbe the benches use (`metaharness run --latency-report`): metaharness's own share of
// the call seam, timed inside the process, kept as raw samples so several runs can be pooled
// exactly. Not installed in the daemon. Lives on the run's strand like the probe it is.
#pragma once

#include <optional>
#include <vector>

#include "daemon/run/run.hpp"

namespace mh::daemon {

// metaharness's own share of the call seam, measured inside the process (for bench/).
struct SeamLatencies {
  // Vendor input read (a line of its stdout, or a hook-channel request) -> the tool.requested it
  // produced is durable and visible to readers.
  std::vector<std::chrono::nanoseconds> line_to_requested;
  // A tool.decide received -> the vendor's answer handed to its stdin (or its hook's socket).
  std::vector<std::chrono::nanoseconds> decide_to_answer;
  // Vendor input read -> an answer written from it (a hook_callback answered from a decision
  // already parked on the call: the path on the vendor's critical path in ask mode).
  std::vector<std::chrono::nanoseconds> line_to_answer;
};

class SeamTimer final : public SeamProbe {
 public:
  static constexpr std::size_t kMaxSamples = 100'000;  // per path: a bounded record of a long run

  void input_read(Instant at) override { input_at_ = at; }
  void input_done() override { input_at_.reset(); }
  void command_received(Instant at) override { command_at_ = at; }
  void command_done() override { command_at_.reset(); }
  void appending(const protocol::EventPayload& event) override;
  void recorded(bool durable) override;
  void answer_written() override;

  const SeamLatencies& latencies() const { return latencies_; }

 private:
  std::optional<Instant> input_at_;
  std::optional<Instant> command_at_;
  std::vector<Instant> requested_from_;  // the input each tool.requested not yet durable came from
  SeamLatencies latencies_;
};

}  // namespace mh::daemon
