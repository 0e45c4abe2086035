// A real Prometheus (Debian's `prometheus`, installed by ./run setup) scraping the daemon's
// /metrics, and its HTTP query API returning the figures the runs left; and promtool's linter on
// the page.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include "protocol/json.hpp"
#include "tests/metrics/metrics_support.hpp"

namespace mh::test {
namespace {

const std::filesystem::path kPrometheus = "/usr/bin/prometheus";
const std::filesystem::path kPromtool = "/usr/bin/promtool";

// A loopback port nobody listens on right now (the kernel's choice, released for Prometheus).
std::uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof a;
  std::uint16_t port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &length) == 0)
    port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}

std::string url_encode(const std::string& text) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

// The value Prometheus's instant query gives for `query` when it returns exactly one series
// ("" otherwise), with the series' labels.
struct QueryAnswer {
  std::string value;
  std::map<std::string, std::string> labels;
  std::string raw;
};
QueryAnswer instant_query(const std::string& prometheus, const std::string& query) {
  QueryAnswer out;
  auto answer = http_get(prometheus, "/api/v1/query?query=" + url_encode(query), 5s);
  if (!answer) return out;
  out.raw = answer->body;
  auto parsed = protocol::parse_json(answer->body);
  if (!parsed || !parsed->is_object()) return out;
  const auto& o = parsed->as_object();
  const auto* status = o.if_contains("status");
  if (!status || !status->is_string() || status->as_string() != "success") return out;
  const auto& result = o.at("data").as_object().at("result").as_array();
  if (result.size() != 1) return out;
  const auto& series = result[0].as_object();
  for (const auto& [name, value] : series.at("metric").as_object())
    if (value.is_string()) out.labels[std::string(name)] = std::string(value.as_string());
  out.value = std::string(series.at("value").as_array().at(1).as_string());
  return out;
}

class RealPrometheus : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kPrometheus))
        << kPrometheus << " is missing: ./run setup installs Debian's prometheus package";
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), metrics_daemon_config());
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
    address = http_address(*daemon);
    ASSERT_FALSE(address.empty());
  }

  // Runs one run to its end: an ask run nobody answers (its deadline denies), or an observe run.
  void run_to_end(const std::string& fields) {
    SocketClient submitter(daemon->socket());
    auto reply = submitter.request(socket_request("submit", fields));
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
    SocketClient c(daemon->socket());
    c.send(socket_request("tail", R"("run_id":")" + reply->str("run_id") + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(c.wait_reply("end", 60s));
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
  std::string address;
};

TEST_F(RealPrometheus, ScrapesTheDaemonAndItsQueryApiReturnsTheRunsFigures) {
  run_to_end(standin_run_fields("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":300)"));
  run_to_end(standin_run_fields("three_calls.json", R"("decisions":"observe")"));

  std::filesystem::create_directories(dir.path() / "prometheus" / "data");
  const auto config = dir.path() / "prometheus" / "prometheus.yml";
  std::ofstream(config) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                           "scrape_configs:\n  - job_name: metaharness\n    scrape_interval: 1s\n"
                           "    scrape_timeout: 1s\n    static_configs:\n      - targets: [\""
                        << address << "\"]\n";
  const std::string web = "127.0.0.1:" + std::to_string(free_port());
  CliProcess prometheus({kPrometheus.string(), "--config.file=" + config.string(),
                         "--storage.tsdb.path=" + (dir.path() / "prometheus" / "data").string(),
                         "--web.listen-address=" + web, "--log.level=warn"});

  // Bounded polling of Prometheus's own API: it answers once it has scraped.
  QueryAnswer deadline, allowed, up;
  bool scraped = eventually(
      [&] {
        prometheus.stderr_text();  // keep its stderr pipe drained
        deadline = instant_query(web, R"(metaharness_decisions_total{decision="deny",decided_by="deadline"})");
        allowed = instant_query(web, R"(metaharness_decisions_total{decision="allow",decided_by="observe"})");
        return deadline.value == "1" && allowed.value == "3";
      },
      90s);
  EXPECT_TRUE(scraped) << "deadline: " << deadline.raw << "\nobserve: " << allowed.raw
                       << "\nprometheus: " << prometheus.stderr_text();
  EXPECT_EQ(deadline.labels["job"], "metaharness");
  EXPECT_EQ(deadline.labels["instance"], address);
  EXPECT_EQ(instant_query(web, "metaharness_deadline_denials_total").value, "1");
  EXPECT_EQ(instant_query(web, R"(metaharness_runs_closed_total{reason="completed"})").value, "2");
  EXPECT_EQ(instant_query(web, R"(metaharness_runs{adapter="claude",state="closed"})").value, "2");
  EXPECT_EQ(instant_query(web, "metaharness_approval_wait_seconds_count").value, "1");
  EXPECT_EQ(instant_query(web, R"(up{job="metaharness"})").value, "1") << "the scrape itself succeeds";

  ASSERT_EQ(::kill(prometheus.pid(), SIGTERM), 0);
  EXPECT_EQ(prometheus.finish(60s), 0) << prometheus.stderr_text();
}

TEST_F(RealPrometheus, PromtoolFindsNothingToLintOnThePage) {
  ASSERT_TRUE(std::filesystem::exists(kPromtool)) << kPromtool << " is missing (Debian's prometheus package)";
  run_to_end(standin_run_fields("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":300)"));
  auto page = http_get(address, "/metrics");
  ASSERT_TRUE(page && page->status == 200);
  std::ofstream(dir.path() / "metrics.txt") << page->body;  // kept with a failed test's directory
  CliProcess promtool(
      {"/bin/sh", "-c", kPromtool.string() + " check metrics < " + (dir.path() / "metrics.txt").string()});
  EXPECT_EQ(promtool.finish(60s), 0) << promtool.stderr_text() << page->body;
}

}  // namespace
}  // namespace mh::test
