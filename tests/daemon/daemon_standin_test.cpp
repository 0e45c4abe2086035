// The daemon at volume, hosting the stand-in harness (tests/standin) in place of the real CLI:
// hundreds of concurrent runs, and readers that do not keep up.
#include <gtest/gtest.h>

#include "protocol/completeness.hpp"
#include "tests/support/daemon_harness.hpp"

namespace mh::test {
namespace {

std::string standin_config() {
  return std::string("[vendor]\nclaude = \"") + MH_TEST_STANDIN + "\"\n[runs]\nmax_active = 1000\n";
}

std::string standin_run(const std::string& script, const std::string& extra = "") {
  return R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
         R"("vendor_env":{"MH_STANDIN_SCRIPT":")" +
         (std::filesystem::path(MH_TEST_STANDIN_SCRIPTS) / script).string() + "\"}" +
         (extra.empty() ? "" : "," + extra) + "}";
}

class DaemonStandin : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), standin_config());
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  }

  std::string submit(const std::string& run_fields) {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request("submit", run_fields));
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
};

TEST_F(DaemonStandin, TwoHundredConcurrentRunsAreEachDecidedByTheirAttachedClient) {
  constexpr int kRuns = 200;
  std::vector<std::string> ids;
  std::vector<std::unique_ptr<SocketClient>> controllers;
  for (int i = 0; i < kRuns; ++i) {
    ids.push_back(submit(standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)")));
    controllers.push_back(std::make_unique<SocketClient>(daemon->socket()));
    controllers.back()->send(socket_request("attach", R"("run_id":")" + ids.back() + R"(","from_seq":1)"));
  }
  // Every run waits on its own decision at the same time: decide them all, in reverse order
  // (allow the even ones, deny the odd ones).
  std::vector<std::string> calls(kRuns);
  for (int i = 0; i < kRuns; ++i) {
    auto requested = controllers[i]->wait_event("tool.requested", 120s);
    ASSERT_TRUE(requested) << "run " << i << " never asked";
    calls[i] = requested->str("call_id");
  }
  for (int i = kRuns - 1; i >= 0; --i)
    controllers[i]->send(tool_decide("d" + std::to_string(i), calls[i],
                                     i % 2 == 0 ? R"({"decision":"allow"})" : R"({"decision":"deny","reason":"odd"})"));
  for (int i = 0; i < kRuns; ++i) {
    ASSERT_TRUE(controllers[i]->wait_reply("end", 120s)) << "run " << i << " never closed";
    auto decided = controllers[i]->events_named("tool.decided");
    ASSERT_EQ(decided.size(), 1u) << i;
    EXPECT_EQ(decided[0].str("decided_by"), "embedder");
    EXPECT_EQ(std::filesystem::exists(daemon->run_dir(ids[i]) / "scratch/work/marker.txt"), i % 2 == 0) << i;
    auto verdict = protocol::check_stream(read_file(daemon->run_dir(ids[i]) / "events.jsonl"));
    EXPECT_TRUE(verdict.complete_and_well_formed()) << i << ": " << verdict.summary();
    EXPECT_EQ(verdict.close_reason, protocol::CloseReason::completed) << i;
  }
  SocketClient c(daemon->socket());
  auto status = c.request(socket_request("status"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->object.at("runs").as_object().at("closed").to_number<int>(), kRuns);
}

TEST_F(DaemonStandin, AStalledReaderNeverHoldsUpTheRunOrAFastReader) {
  std::string id = submit(standin_run("chatter.json"));
  // The stalled reader asks to follow the stream and then never reads a byte.
  SocketClient stalled(daemon->socket());
  stalled.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
  SocketClient fast(daemon->socket());
  fast.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
  auto end = fast.wait_reply("end", 120s);
  ASSERT_TRUE(end) << "the fast reader must see the whole stream while the other stalls";
  auto fast_events = fast.events_named("text").size();
  EXPECT_EQ(fast_events, 20000u);
  ASSERT_FALSE(fast.lines().empty());
  // The run itself finished, durably, while a reader held nothing.
  auto verdict = protocol::check_stream(read_file(daemon->run_dir(id) / "events.jsonl"));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary();
  // The daemon held the stalled reader to a bounded amount (one batch), not the stream.
  std::string status = read_file("/proc/" + std::to_string(daemon->pid()) + "/status");
  auto rss_at = status.find("VmRSS:");
  ASSERT_NE(rss_at, std::string::npos);
  long rss_kb = std::stol(status.substr(rss_at + 6));
  EXPECT_LT(rss_kb, 64 * 1024) << "the file is the buffer: no per-reader backlog in memory";
  // The stalled reader loses nothing: when it finally reads, everything is there.
  ASSERT_TRUE(stalled.wait_reply("end", 120s));
  EXPECT_EQ(stalled.events_named("text").size(), 20000u);
}

}  // namespace
}  // namespace mh::test
