// The bench's seam timer (a SeamProbe): which input each sample is timed from. Lower bounds
// only: the samples are measured with the real clock, so only "at least as long as the input is
// old" is deterministic.
#include "daemon/run/seam_timer.hpp"

#include <gtest/gtest.h>

namespace mh::daemon {
namespace {

using namespace std::chrono_literals;

TEST(SeamTimer, ARequestFromVendorInputIsTimedWhenItIsDurable) {
  SeamTimer timer;
  Instant read_at = std::chrono::steady_clock::now() - 5ms;
  timer.input_read(read_at);  // e.g. a hook-channel request (Codex's calls arrive there)
  timer.appending(protocol::ev::ToolRequested{});
  EXPECT_TRUE(timer.latencies().line_to_requested.empty()) << "not before it is durable";
  timer.recorded(true);
  timer.input_done();
  ASSERT_EQ(timer.latencies().line_to_requested.size(), 1u);
  EXPECT_GE(timer.latencies().line_to_requested[0], 5ms);
}

TEST(SeamTimer, ALostRequestAndOneFromNoVendorInputAreNotTimed) {
  SeamTimer timer;
  timer.input_read(std::chrono::steady_clock::now());
  timer.appending(protocol::ev::ToolRequested{});
  timer.recorded(false);
  timer.input_done();
  timer.appending(protocol::ev::ToolRequested{});
  timer.recorded(true);
  timer.input_read(std::chrono::steady_clock::now());
  timer.appending(protocol::ev::Warning{"X", "not a request"});
  timer.recorded(true);
  EXPECT_TRUE(timer.latencies().line_to_requested.empty());
}

TEST(SeamTimer, ADecisionIsTimedToItsFirstAnswerAndALineToItsAnswers) {
  SeamTimer timer;
  timer.command_received(std::chrono::steady_clock::now() - 3ms);
  timer.answer_written();  // the decision, to the vendor's stdin or its hook's socket
  timer.answer_written();  // anything else the same command wrote is not the decision's answer
  timer.command_done();
  ASSERT_EQ(timer.latencies().decide_to_answer.size(), 1u);
  EXPECT_GE(timer.latencies().decide_to_answer[0], 3ms);
  EXPECT_TRUE(timer.latencies().line_to_answer.empty());
  timer.input_read(std::chrono::steady_clock::now());
  timer.answer_written();
  timer.input_done();
  timer.answer_written();  // no input in hand: nothing to time it from
  EXPECT_EQ(timer.latencies().line_to_answer.size(), 1u);
}

}  // namespace
}  // namespace mh::daemon
