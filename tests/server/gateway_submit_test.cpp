// The daemon's side of the run's model gateway, over its socket (issue 25, docs/gateway.md): the
// submit refusals by name, what `status` says of the runs' network, a run with an upstream whose
// files and `get` hold neither the key nor its placeholder, and `metaharness budget`.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "daemon/run/run_dir.hpp"
#include "daemon/server/daily_spend.hpp"
#include "daemon/stream/event_log.hpp"
#include "protocol/json.hpp"
#include "tests/support/daemon_harness.hpp"

namespace mh::test {
namespace {

constexpr const char* kKey = "sk-gateway-test-key-5d1e";

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A daemon with two upstreams (one per wire), the key in a file of the test's, on `network`.
struct GatewayDaemon {
  TempDir dir{"gateway-submit"};
  std::filesystem::path key = dir.path() / "anthropic.key";
  std::unique_ptr<DaemonUnderTest> daemon;

  explicit GatewayDaemon(const std::string& network, const std::string& more = "") {
    std::ofstream(key) << kKey << "\n";
    std::filesystem::permissions(key, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
    const std::string cred = "credential = \"" + key.string() + "\"\n";
    daemon = std::make_unique<DaemonUnderTest>(
        dir.path(), "[runs]\nnetwork = \"" + network + "\"\n" + more +
                        "[upstreams.main]\nwire = \"anthropic\"\nurl = \"https://api.anthropic.example\"\n" + cred +
                        "[upstreams.oai]\nwire = \"openai-responses\"\nurl = \"http://127.0.0.1:9\"\n" + cred);
    EXPECT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  }

  // The refusal code of a submit of `run` (a JSON object's members after adapter and prompt).
  std::string refusal_of(const std::string& members) {
    SocketClient c(daemon->socket());
    auto reply = c.request(socket_request("submit", R"("run":{"adapter":"claude","prompt":"p")" + members + "}"));
    if (!reply) return "no reply";
    if (reply->str("reply") != "refused") return "not refused: " + reply->raw;
    return reply->str("code");
  }
};

TEST(GatewaySubmit, EachRefusalIsByNameOverTheSocket) {
  GatewayDaemon d("host");
  EXPECT_EQ(d.refusal_of(R"(,"upstream":"nope")"), "UPSTREAM_UNKNOWN");
  EXPECT_EQ(d.refusal_of(R"(,"upstream":"oai")"), "UPSTREAM_WIRE_MISMATCH");
  EXPECT_EQ(d.refusal_of(R"(,"upstream":"main","model_endpoint":{"base_url":"http://127.0.0.1:1","token":"t"})"),
            "MALFORMED");
  EXPECT_EQ(d.refusal_of(R"(,"upstream":"main","model_scenario":{"format":"x"})"), "MALFORMED");
  EXPECT_EQ(d.refusal_of(R"(,"egress":["pypi.org:443"])"), "EGRESS_NEEDS_GATEWAY");
  EXPECT_EQ(d.refusal_of(R"(,"egress":["pypi.org:99999"])"), "MALFORMED");
  // Nothing of a refused submit is left behind.
  std::error_code ec;
  EXPECT_TRUE(!std::filesystem::exists(d.daemon->state_dir() / "runs", ec) ||
              std::filesystem::is_empty(d.daemon->state_dir() / "runs", ec));
}

// A per-adapter default upstream of another wire would refuse every run of that adapter: the
// daemon refuses to start, naming the key and both wires.
TEST(GatewaySubmit, ADefaultUpstreamOfAnotherWireRefusesTheStartByName) {
  TempDir dir("gateway-default-wire");
  const auto key = dir.path() / "anthropic.key";
  std::ofstream(key) << kKey << "\n";
  DaemonUnderTest daemon(dir.path(),
                         "[runs]\nnetwork = \"host\"\n[upstreams.main]\nwire = \"anthropic\"\n"
                         "url = \"https://api.anthropic.example\"\ncredential = \"" +
                             key.string() + "\"\n[vendor.upstream]\ncodex = \"main\"\n");
  EXPECT_EQ(daemon.wait_exit(), 2);
  const std::string err = daemon.stderr_text();
  EXPECT_NE(err.find("vendor.upstream.codex = \"main\""), std::string::npos) << err;
  EXPECT_NE(err.find("serves the anthropic wire; the codex adapter speaks openai-responses"), std::string::npos) << err;
}

TEST(GatewaySubmit, StatusSaysTheRunsNetwork) {
  GatewayDaemon d("host");
  SocketClient c(d.daemon->socket());
  auto status = c.request(socket_request("status"));
  ASSERT_TRUE(status);
  ASSERT_TRUE(status->object.contains("containment")) << status->raw;
  EXPECT_EQ(status->object.at("containment").at("network"), "host") << status->raw;
  EXPECT_EQ(status->raw.find(kKey), std::string::npos);
}

TEST(GatewaySubmit, ARunWithAnUpstreamKeepsNeitherTheKeyNorItsPlaceholderInItsFilesOrItsGet) {
  GatewayDaemon d("host");
  SocketClient c(d.daemon->socket());
  auto submitted = c.request(socket_request("submit", R"("run":{"adapter":"claude","prompt":"p","upstream":"main"})"));
  ASSERT_TRUE(submitted);
  ASSERT_EQ(submitted->str("reply"), "submitted") << submitted->raw;
  const std::string id = submitted->str("run_id");
  const auto run_dir = d.daemon->run_dir(id);
  // plan.json is written at launch.
  for (int i = 0; i < 300 && !std::filesystem::exists(run_dir / "plan.json"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(std::filesystem::exists(run_dir / "plan.json"));
  const std::string placeholder_prefix = "mh-run-" + id + "-";
  auto get = c.request(socket_request("get", R"("run_id":")" + id + "\""));
  ASSERT_TRUE(get);
  ASSERT_EQ(get->str("reply"), "run") << get->raw;
  EXPECT_EQ(get->object.at("upstream"), "main") << get->raw;
  EXPECT_EQ(get->object.at("network"), "host") << get->raw;
  for (const auto& [what, text] :
       {std::pair{std::string("spec.json"), read_text(run_dir / "spec.json")},
        std::pair{std::string("plan.json"), read_text(run_dir / "plan.json")},
        std::pair{std::string("run.json"), read_text(run_dir / "run.json")}, std::pair{std::string("get"), get->raw}}) {
    EXPECT_FALSE(text.empty()) << what;
    EXPECT_EQ(text.find(kKey), std::string::npos) << what << " holds the key: " << text;
    EXPECT_EQ(text.find(placeholder_prefix), std::string::npos) << what << " holds the placeholder: " << text;
  }
  auto spec = protocol::parse_json(read_text(run_dir / "spec.json"));
  ASSERT_TRUE(spec && spec->is_object());
  EXPECT_EQ(spec->at("upstream"), "main");
  // The supervisor's spec (0600, read by the supervisor alone) names the key's file, never the key.
  const std::string supervisor_spec = read_text(run_dir / "supervisor-spec.json");
  EXPECT_EQ(supervisor_spec.find(kKey), std::string::npos) << supervisor_spec;
  if (supervisor_spec.find("\"gateway\"") != std::string::npos) {  // once the supervisor carries it
    EXPECT_NE(supervisor_spec.find(d.key.string()), std::string::npos) << supervisor_spec;
    EXPECT_NE(supervisor_spec.find(placeholder_prefix), std::string::npos) << supervisor_spec;
  }
  auto halted = c.request(socket_request("halt", R"("run_id":")" + id + "\""));
  ASSERT_TRUE(halted);
  auto events = follow_to_end(d.daemon->socket(), id, std::chrono::seconds(60));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().event(), "stream.closed");
  for (const auto& e : events) {
    EXPECT_EQ(e.raw.find(kKey), std::string::npos) << e.raw;
    EXPECT_EQ(e.raw.find(placeholder_prefix), std::string::npos) << e.raw;
    if (e.event() == "session.started") {
      EXPECT_NE(e.raw.find("\"network\":\"host\""), std::string::npos) << e.raw;
    }
  }
}

// A run a previous daemon made for uid 4242 today, and the ledger's figures for that uid.
void seed_spend(const std::filesystem::path& state) {
  const std::string id = "20261206T000000Z-000001";
  daemon::RunDir dir(state / "runs" / id);
  std::filesystem::create_directories(dir.root());
  ASSERT_FALSE(dir.write_meta(daemon::RunMeta{4242, 1, "claude", {}, 0}));
  auto log = daemon::EventLog::create(dir.events(), id);
  ASSERT_TRUE(log) << log.error();
  ASSERT_TRUE(log->close(protocol::CloseReason::completed, protocol::ProcessTermination{}));
  std::ofstream(state / "daily-spend.json")
      << R"({"day":)" << daemon::utc_day(std::chrono::system_clock::now())
      << R"(,"owners":{"4242":{"input_tokens":1234,"output_tokens":56,"usd":null}}})";
}

TEST(BudgetVerb, PrintsEachOwnersSpendTodayAgainstTheDailyBudgets) {
  TempDir dir("budget-verb");
  seed_spend(dir.path() / "state");
  DaemonUnderTest daemon(dir.path(), "[runs]\nnetwork = \"host\"\n[budgets.daily]\ninput_tokens = 100000\n");
  ASSERT_TRUE(daemon.wait_notify("READY=1")) << daemon.stderr_text();
  auto text = run_to_end({metaharness_binary().string(), "budget", "--socket", daemon.socket().string()});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("(UTC)"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("input_tokens"), std::string::npos) << text.out;
  bool line = false;
  std::istringstream lines(text.out);
  for (std::string l; std::getline(lines, l);)
    line |= l.rfind("4242", 0) == 0 && l.find("1234") != std::string::npos && l.find("56") != std::string::npos &&
            l.find("unpriced") != std::string::npos;
  EXPECT_TRUE(line) << text.out;
  auto json_out = run_to_end({metaharness_binary().string(), "budget", "--json", "--socket", daemon.socket().string()});
  ASSERT_EQ(json_out.status, 0) << json_out.err;
  auto reply = to_event_line(json_out.out.substr(0, json_out.out.find('\n')));
  EXPECT_EQ(reply.object.at("metered"), true) << json_out.out;
  const auto& owners = reply.object.at("owners").as_array();
  ASSERT_EQ(owners.size(), 1u) << json_out.out;
  EXPECT_EQ(owners[0].at("uid"), 4242);
  EXPECT_EQ(owners[0].at("input_tokens"), 1234);
  // Nothing in flight: no reservation held.
  EXPECT_EQ(owners[0].at("reserved").at("requests"), 0) << json_out.out;
}

TEST(BudgetVerb, SaysSoWhenNoDailyBudgetMetersSpend) {
  TempDir dir("budget-verb-none");
  DaemonUnderTest daemon(dir.path(), "[runs]\nnetwork = \"host\"\n");
  ASSERT_TRUE(daemon.wait_notify("READY=1")) << daemon.stderr_text();
  auto text = run_to_end({metaharness_binary().string(), "budget", "--socket", daemon.socket().string()});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("no daily budget is configured"), std::string::npos) << text.out;
}

}  // namespace
}  // namespace mh::test
