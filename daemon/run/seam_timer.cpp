#include "daemon/run/seam_timer.hpp"

namespace mh::daemon {

namespace {

void sample(std::vector<std::chrono::nanoseconds>& into, Instant from) {
  if (into.size() < SeamTimer::kMaxSamples) into.push_back(std::chrono::steady_clock::now() - from);
}

}  // namespace

void SeamTimer::appending(const protocol::EventPayload& event) {
  if (input_at_ && std::holds_alternative<protocol::ev::ToolRequested>(event)) requested_from_.push_back(*input_at_);
}

void SeamTimer::recorded(bool durable) {
  if (durable)
    for (Instant from : requested_from_)
      sample(latencies_.line_to_requested, from);
  requested_from_.clear();
}

void SeamTimer::answer_written() {
  if (command_at_) {
    // Only the command's first answer: what a decision costs until the vendor can go on.
    sample(latencies_.decide_to_answer, *command_at_);
    command_at_.reset();
  } else if (input_at_) {
    sample(latencies_.line_to_answer, *input_at_);
  }
}

}  // namespace mh::daemon
