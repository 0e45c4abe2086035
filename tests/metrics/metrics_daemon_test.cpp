// /metrics on a real daemon hosting the stand-in harness (the figures are about the daemon, not
// the vendor): runs with an allow, a deny and a deadline denial, and the exact figures they leave.
#include <gtest/gtest.h>

#include <fstream>

#include "protocol/json.hpp"
#include "tests/metrics/metrics_support.hpp"

namespace mh::test {
namespace {

constexpr double kInputPerMtok = 3.0, kOutputPerMtok = 15.0, kCachePerMtok = 0.5;

std::string priced_config() {
  return metrics_daemon_config(
      "[prices.\"claude-*\"]\ninput_per_mtok = 3.0\noutput_per_mtok = 15.0\n"
      "cache_read_per_mtok = 0.5\ncache_creation_per_mtok = 0.5\n");
}

class MetricsDaemon : public ::testing::Test {
 protected:
  void start(const std::string& config) {
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), config);
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
    address = http_address(*daemon);
    ASSERT_FALSE(address.empty()) << "http.addr is written before READY: " << daemon->stderr_text();
  }

  std::string submit(const std::string& run_fields) {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request("submit", run_fields));
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    return reply ? reply->str("run_id") : "";
  }

  std::map<std::string, std::string> page() {
    std::string failure;
    auto samples = scrape(address, &failure);
    EXPECT_FALSE(samples.empty()) << failure;
    return samples;
  }

  // Waits (bounded) until the series reads `value`; returns what it last read.
  std::string eventually_reads(const std::string& series, const std::string& value) {
    std::string last;
    eventually(
        [&] {
          auto samples = scrape(address);
          last = samples.count(series) ? samples[series] : "(absent)";
          return last == value;
        },
        20s);
    return last;
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
  std::string address;
};

// The record's own figures, from events.jsonl: events by name, and the usage they carry.
struct RecordFigures {
  std::map<std::string, std::uint64_t> events;
  std::uint64_t input = 0, output = 0, cache_read = 0, cache_creation = 0, usage_events = 0;
  std::uint64_t request_usage_events = 0, vendor_costed = 0;
  double vendor_cost = 0;
};

void add_record(RecordFigures& f, const std::filesystem::path& events) {
  for (const auto& line : read_lines(events)) {
    auto parsed = protocol::parse_json(line);
    ASSERT_TRUE(parsed && parsed->is_object()) << line;
    const auto& o = parsed->as_object();
    std::string name(o.at("event").as_string());
    ++f.events[name];
    if (name != "usage") continue;
    const auto* scope = o.if_contains("scope");
    if (scope && scope->is_string() && scope->as_string() == "request") {
      ++f.request_usage_events;  // superseded by the turn's own figures
      continue;
    }
    ++f.usage_events;
    const auto& u = o.at("usage").as_object();
    const auto* cost = u.if_contains("cost_usd");
    if (cost && !cost->is_null()) {
      ++f.vendor_costed;
      f.vendor_cost += cost->to_number<double>();
    }
    auto n = [&](const char* key) -> std::uint64_t {
      const auto* v = u.if_contains(key);
      return v && !v->is_null() ? v->to_number<std::uint64_t>() : 0;
    };
    f.input += n("input_tokens");
    f.output += n("output_tokens");
    f.cache_read += n("cache_read_input_tokens");
    f.cache_creation += n("cache_creation_input_tokens");
  }
}

TEST_F(MetricsDaemon, AnAllowADenyAndADeadlineDenialLeaveExactlyTheirFiguresOnMetrics) {
  start(priced_config());
  auto before = page();
  EXPECT_EQ(before[R"(metaharness_runs{adapter="claude",state="closed"})"], "0");
  EXPECT_EQ(before[R"(metaharness_runs{adapter="codex",state="turn"})"], "0") << "every adapter in every state";
  EXPECT_EQ(before["metaharness_pending_approvals"], "0");
  EXPECT_EQ(before["metaharness_runs_waiting_on_decision"], "0");

  // Run A waits on its decision while a controller is attached and a tail follows it.
  std::string a = submit(standin_run_fields("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)"));
  SocketClient controller(daemon->socket());
  controller.send(socket_request("attach", R"("run_id":")" + a + R"(","from_seq":1)"));
  auto requested = controller.wait_event("tool.requested", 60s);
  ASSERT_TRUE(requested) << daemon->stderr_text();
  SocketClient tail(daemon->socket());
  tail.send(socket_request("tail", R"("run_id":")" + a + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(tail.wait_reply("tailing"));
  ASSERT_TRUE(tail.wait_event("tool.requested", 60s));
  auto waiting = page();
  EXPECT_EQ(waiting["metaharness_pending_approvals"], "1") << "counted before the record was readable";
  // Issue 27 §2: the run waits on a decision, which is no stall.
  EXPECT_EQ(waiting["metaharness_runs_waiting_on_decision"], "1");
  ASSERT_FALSE(waiting["metaharness_oldest_pending_decision_seconds"].empty());
  EXPECT_GE(std::stod(waiting["metaharness_oldest_pending_decision_seconds"]), 0.0);
  EXPECT_EQ(waiting["metaharness_runs_stalled"], "0");
  EXPECT_EQ(waiting[R"(metaharness_runs{adapter="claude",state="turn"})"], "1");
  EXPECT_EQ(waiting[R"(metaharness_stream_readers{kind="attach"})"], "1");
  EXPECT_EQ(waiting[R"(metaharness_stream_readers{kind="tail"})"], "1");
  EXPECT_EQ(eventually_reads("metaharness_connections", "2"), "2") << "the controller and the tail";
  controller.send(tool_decide("d1", requested->str("call_id"), R"({"decision":"allow"})"));
  ASSERT_TRUE(controller.wait_reply("end", 60s));
  ASSERT_TRUE(tail.wait_reply("end", 60s));

  // Run B is denied by its controller.
  std::string b = submit(standin_run_fields("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)"));
  SocketClient denier(daemon->socket());
  denier.send(socket_request("attach", R"("run_id":")" + b + R"(","from_seq":1)"));
  auto asked = denier.wait_event("tool.requested", 60s);
  ASSERT_TRUE(asked);
  denier.send(tool_decide("d2", asked->str("call_id"), R"({"decision":"deny","reason":"not today"})"));
  ASSERT_TRUE(denier.wait_reply("end", 60s));

  // Run C: nobody answers; its 500 ms deadline denies.
  std::string c = submit(standin_run_fields("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":500)"));
  SocketClient watcher(daemon->socket());
  watcher.send(socket_request("tail", R"("run_id":")" + c + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(watcher.wait_reply("end", 60s));
  auto late = watcher.events_named("tool.decided");
  ASSERT_EQ(late.size(), 1u);
  ASSERT_EQ(late[0].str("decided_by"), "deadline") << late[0].raw;

  auto m = page();
  EXPECT_EQ(m[R"(metaharness_decisions_total{decision="allow",decided_by="embedder"})"], "1");
  EXPECT_EQ(m[R"(metaharness_decisions_total{decision="deny",decided_by="embedder"})"], "1");
  EXPECT_EQ(m[R"(metaharness_decisions_total{decision="deny",decided_by="deadline"})"], "1");
  EXPECT_EQ(m[R"(metaharness_decisions_total{decision="allow",decided_by="frame"})"], "0");
  EXPECT_EQ(m["metaharness_deadline_denials_total"], "1");
  EXPECT_EQ(m["metaharness_pending_approvals"], "0");
  EXPECT_EQ(m["metaharness_approval_wait_seconds_count"], "3");
  EXPECT_EQ(m[R"(metaharness_approval_wait_seconds_bucket{le="+Inf"})"], "3");
  EXPECT_GE(std::stod(m["metaharness_approval_wait_seconds_sum"]), 0.5) << "the deadline's wait is in it";
  EXPECT_LE(std::stoi(m[R"(metaharness_approval_wait_seconds_bucket{le="0.25"})"]), 2)
      << "the deadline's 500 ms wait is above 0.25 s";
  EXPECT_EQ(m[R"(metaharness_runs_closed_total{reason="completed"})"], "3");
  EXPECT_EQ(m[R"(metaharness_runs{adapter="claude",state="closed"})"], "3");
  EXPECT_EQ(m[R"(metaharness_runs{adapter="claude",state="turn"})"], "0");
  EXPECT_EQ(m[R"(metaharness_stream_readers{kind="tail"})"], "0") << "a reader is gone before its end is sent";
  EXPECT_EQ(m[R"(metaharness_stream_readers{kind="attach"})"], "0");

  // The same story as the record: every event by name, and the usage the streams carry.
  RecordFigures record;
  for (const auto& id : {a, b, c})
    add_record(record, daemon->run_dir(id) / "events.jsonl");
  ASSERT_GT(record.usage_events, 0u) << "the stand-in reports usage";
  for (const auto& [name, count] : record.events)
    EXPECT_EQ(m["metaharness_events_total{event=\"" + name + "\"}"], std::to_string(count)) << name;
  std::uint64_t total = 0;
  for (const auto& [series, value] : m)
    if (series.rfind("metaharness_events_total{", 0) == 0) total += std::stoull(value);
  std::uint64_t recorded = 0;
  for (const auto& [name, count] : record.events)
    recorded += count;
  EXPECT_EQ(total, recorded) << "no event counted that is not in a stream";
  EXPECT_EQ(m[R"(metaharness_tokens_total{kind="input"})"], std::to_string(record.input));
  EXPECT_EQ(m[R"(metaharness_tokens_total{kind="output"})"], std::to_string(record.output));
  EXPECT_EQ(m[R"(metaharness_tokens_total{kind="cache_read"})"], std::to_string(record.cache_read));
  EXPECT_EQ(m[R"(metaharness_tokens_total{kind="cache_creation"})"], std::to_string(record.cache_creation));
  // Each settled record at the vendor's own cost where it gives one (the stand-in, as Claude,
  // does at each turn's end), else at the configured price.
  ASSERT_EQ(record.vendor_costed, record.usage_events) << "every settled record here carries the vendor's cost";
  EXPECT_NEAR(std::stod(m["metaharness_spend_usd_total"]), record.vendor_cost, 1e-12);
  EXPECT_GT(record.request_usage_events, 0u) << "the provisional request figures are in the record, not the metrics";
  EXPECT_EQ(m["metaharness_priced_usage_total"], std::to_string(record.usage_events));
  EXPECT_EQ(m["metaharness_unpriced_usage_total"], "0");
}

TEST_F(MetricsDaemon, UsageWithNoPriceIsCountedUnpricedAndAddsNoSpend) {
  start(metrics_daemon_config());
  std::string id = submit(standin_run_fields("bash_marker.json", R"("decisions":"observe")"));
  SocketClient c(daemon->socket());
  c.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
  ASSERT_TRUE(c.wait_reply("end", 60s));
  RecordFigures record;
  add_record(record, daemon->run_dir(id) / "events.jsonl");
  ASSERT_GT(record.usage_events, 0u);
  auto m = page();
  // No price in the config: only the vendor's own cost (the stand-in gives one at each turn's
  // end) prices a record; every other settled record is unpriced, never free.
  EXPECT_EQ(m["metaharness_unpriced_usage_total"], std::to_string(record.usage_events - record.vendor_costed));
  EXPECT_EQ(m["metaharness_priced_usage_total"], std::to_string(record.vendor_costed));
  EXPECT_NEAR(std::stod(m["metaharness_spend_usd_total"]), record.vendor_cost, 1e-12)
      << "an unknown cost is not added as zero: it is counted apart";
  EXPECT_EQ(m[R"(metaharness_decisions_total{decision="allow",decided_by="observe"})"], "1");
}

TEST_F(MetricsDaemon, TheListenerAnswersOnlyMetricsAndOnlyToGet) {
  start(metrics_daemon_config());
  auto [host, port] = split_host_port(address);
  EXPECT_EQ(host, "127.0.0.1");
  HttpTestClient client(host, port);
  auto ok = client.get("/metrics");
  ASSERT_TRUE(ok) << client.error();
  EXPECT_EQ(ok->status, 200u);
  EXPECT_EQ(ok->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  auto missing = client.get("/");
  ASSERT_TRUE(missing) << client.error();
  EXPECT_EQ(missing->status, 404u);
  EXPECT_NE(missing->body.find("this listener serves /metrics"), std::string::npos) << missing->body;
  auto post = client.request("POST", "/metrics");
  ASSERT_TRUE(post) << client.error();
  EXPECT_EQ(post->status, 405u);
  EXPECT_EQ(post->headers["allow"], "GET");
  EXPECT_NE(daemon->stderr_text().find("http: metrics on http://" + address + "/metrics"), std::string::npos)
      << "the bound address is logged too: " << daemon->stderr_text();
  daemon->signal(SIGTERM);
  EXPECT_EQ(daemon->wait_exit(), 0);
  EXPECT_FALSE(std::filesystem::exists(daemon->state_dir() / "http.addr")) << "removed at a clean stop";
}

TEST_F(MetricsDaemon, WithoutHttpNothingListensAndNothingIsWritten) {
  daemon =
      std::make_unique<DaemonUnderTest>(dir.path(), std::string("[vendor]\nclaude = \"") + MH_TEST_STANDIN + "\"\n");
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  EXPECT_FALSE(std::filesystem::exists(daemon->state_dir() / "http.addr"));
  EXPECT_EQ(daemon->stderr_text().find("http:"), std::string::npos) << daemon->stderr_text();
}

TEST_F(MetricsDaemon, ABadListenValueOrATakenPortIsRefusedAtStartNamingTheKey) {
  {
    DaemonUnderTest bad(dir.path(), "[http]\nlisten = \"localhost:9464\"\n");
    EXPECT_EQ(bad.wait_exit(), 2);
    EXPECT_NE(bad.stderr_text().find("refusing to start: http.listen: \"localhost:9464\" does not name an IP address"),
              std::string::npos)
        << bad.stderr_text();
  }
  start(metrics_daemon_config());
  TempDir other("metrics-second-daemon");
  DaemonUnderTest second(other.path(), "[http]\nlisten = \"" + address + "\"\n");
  EXPECT_EQ(second.wait_exit(), 2);
  EXPECT_NE(second.stderr_text().find("http.listen: cannot listen on " + address), std::string::npos)
      << second.stderr_text();
  EXPECT_FALSE(std::filesystem::exists(second.socket())) << "nothing is left listening behind a refused start";
}

}  // namespace
}  // namespace mh::test
