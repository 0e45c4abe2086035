// Parking (issue 27 §5) in the daemon, on the REAL Claude Code CLI against each run's scripted
// endpoint: runs that are the daemon's own children (runs.supervise = false) and supervised runs
// (the default: the supervisor spawns the vendor again). 20 unsupervised runs park (get and list say
// "parked", no vendor pid), then decisions arrive in a random order (the seed is printed): each
// run resumes, an allowed call runs and a denied one does not, and every stream is whole
// (check-stream: one session.started, contiguous seqs, stream.closed completed).
#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cerrno>
#include <random>

#include "protocol/completeness.hpp"
#include "tests/support/daemon_harness.hpp"

namespace mh::test {
namespace {

constexpr std::size_t kRuns = 20;
constexpr std::size_t kWave = 4;  // runs started together: 2 cores, a real CLI each

std::string park_spec(const std::string& marker) {
  return R"("run":{"adapter":"claude","prompt":"go","decisions":"ask","decision_deadline_ms":600000,)"
         R"("park_after_ms":200,"model_scenario":)" +
         one_bash_call_scenario("touch " + marker) + "}";
}

std::optional<std::string> state_of(const std::filesystem::path& socket, const std::string& id) {
  SocketClient c(socket);
  auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
  if (!got || got->str("reply") != "run") return std::nullopt;
  return got->str("state");  // the summary's fields are the reply's own
}

// Parked is said at the turn's end; its vendor then exits (pid null).
bool parked_and_gone(const std::filesystem::path& socket, const std::string& id) {
  SocketClient c(socket);
  auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
  return got && got->str("reply") == "run" && got->str("state") == "parked" && got->object.at("pid").is_null();
}

TEST(DaemonPark, TwentyParkedRunsResumedByDecisionsInRandomOrderEachStreamWhole) {
  TempDir dir{"park-twenty"};
  DaemonUnderTest d(dir.path(), "[runs]\nsupervise = false\n");
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  std::vector<std::string> ids;
  for (std::size_t wave = 0; wave < kRuns; wave += kWave) {
    std::vector<std::string> started;
    for (std::size_t i = wave; i < wave + kWave; ++i) {
      SocketClient c(d.socket());
      auto reply = c.request(socket_request("submit", park_spec("marker.txt")));
      ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : d.stderr_text());
      started.push_back(reply->str("run_id"));
    }
    for (const auto& id : started)
      ASSERT_TRUE(eventually([&] { return parked_and_gone(d.socket(), id); }, 120s))
          << id << " did not park: " << state_of(d.socket(), id).value_or("?") << d.stderr_text();
    ids.insert(ids.end(), started.begin(), started.end());
  }
  // Every run parked, its vendor gone: list says parked with no pid, and one call still waits.
  {
    SocketClient c(d.socket());
    auto runs = c.request(socket_request("list"));
    ASSERT_TRUE(runs);
    std::size_t parked = 0;
    for (const auto& r : runs->object.at("runs").as_array()) {
      const auto& o = r.as_object();
      if (o.at("state") != "parked") continue;
      ++parked;
      EXPECT_TRUE(o.at("pid").is_null()) << "a parked run holds no vendor process: " << protocol::canonical_json(o);
      EXPECT_EQ(o.at("pending_decisions").to_number<int>(), 1);
      EXPECT_FALSE(o.at("waiting_on_decision_since").is_null());
    }
    EXPECT_EQ(parked, kRuns);
  }
  for (const auto& id : ids)
    EXPECT_FALSE(std::filesystem::exists(d.run_dir(id) / "scratch/work/marker.txt")) << "nothing ran while parked";

  // Decisions in a random order: even positions allowed, odd denied.
  const auto seed = std::random_device{}();
  std::cout << "decision order seed " << seed << "\n";
  std::vector<std::size_t> order(kRuns);
  for (std::size_t i = 0; i < kRuns; ++i)
    order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937(seed));
  for (std::size_t k = 0; k < kRuns; ++k) {
    const std::size_t i = order[k];
    const std::string decision =
        i % 2 == 0 ? R"({"decision":"allow"})" : R"({"decision":"deny","reason":"parked and refused"})";
    SocketClient c(d.socket());
    auto result =
        c.request(socket_request("command", R"("run_id":")" + ids[i] + R"(","command":)" +
                                                tool_decide("d" + std::to_string(i), "toolu_probe", decision)));
    ASSERT_TRUE(result && result->str("reply") == "result") << (result ? result->raw : d.stderr_text());
    EXPECT_EQ(result->object.at("outcome").as_object().at("result"), "ok") << result->raw;
    // Resumed one after another (2 cores): this one's vendor is back before the next decision.
    ASSERT_TRUE(eventually([&] { return state_of(d.socket(), ids[i]) != "parked"; }, 60s)) << ids[i];
  }
  std::size_t ungoverned_runs = 0;
  for (std::size_t i = 0; i < kRuns; ++i) {
    auto events = follow_to_end(d.socket(), ids[i], 120s);
    ASSERT_FALSE(events.empty()) << ids[i];
    EXPECT_EQ(events.back().event(), "stream.closed") << ids[i];
    EXPECT_EQ(events.back().str("reason"), "completed") << ids[i];
    EXPECT_EQ(count_events(events, "session.started"), 1u) << ids[i];
    EXPECT_EQ(count_events(events, "warning", "RUN_PARKED"), 1u) << ids[i];
    EXPECT_EQ(count_events(events, "warning", "RUN_RESUMED"), 1u) << ids[i];
    auto checked =
        run_to_end({metaharness_binary().string(), "check-stream", (d.run_dir(ids[i]) / "events.jsonl").string()});
    EXPECT_EQ(checked.status, 0) << ids[i] << ": " << checked.out << checked.err;
    // Claude 2.1.197 may resume the deferred call before it reads the initialize that installs
    // the in-band seam again (seen under load in 15 of 20 runs before the resume carried the
    // decision in a settings hook): no run may resume ungoverned, and in every run the decision
    // made is what happened.
    const std::size_t ungoverned = count_events(events, "warning", "RESUME_UNGOVERNED");
    EXPECT_EQ(ungoverned, 0u) << ids[i] << " resumed ungoverned";
    ungoverned_runs += ungoverned > 0;
    EXPECT_EQ(std::filesystem::exists(d.run_dir(ids[i]) / "scratch/work/marker.txt"), i % 2 == 0)
        << ids[i] << (i % 2 == 0 ? ": the allowed call ran" : ": the denied call did not run");
  }
  std::cout << ungoverned_runs << " of " << kRuns << " runs resumed ungoverned (RESUME_UNGOVERNED)\n";
}

// The daemon's [runs] park_after_s is a default for the runs that can park: a Claude run takes
// it (its spec.json says so), a Codex run (its adapter cannot park) is neither given it nor
// refused for it and completes; a Codex spec that asks for parking itself is refused by name.
TEST(DaemonPark, TheConfigsParkAfterIsADefaultOnlyForRunsWhoseAdapterCanPark) {
  TempDir dir{"park-default"};
  DaemonUnderTest d(dir.path(), "[runs]\nsupervise = false\npark_after_s = 900\n");
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  auto spec_of = [&](const std::string& id) {
    return boost::json::parse(read_file(d.run_dir(id) / "spec.json")).as_object();
  };
  const std::string codex_scenario = R"({"format":"metaharness.scenario/1","wires":["responses"],"steps":[)"
                                     R"({"name":"answer","content":[{"type":"text","text":"Done."}]}]})";
  auto submit = [&](const std::string& run) {
    SocketClient c(d.socket());
    auto reply = c.request(socket_request("submit", R"("run":{)" + run + "}"));
    EXPECT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : d.stderr_text());
    return reply ? reply->str("run_id") : std::string();
  };
  const std::string claude = submit(R"("adapter":"claude","prompt":"go","decisions":"observe","model_scenario":)" +
                                    one_bash_call_scenario("true"));
  const std::string codex =
      submit(R"("adapter":"codex","prompt":"go","decisions":"observe","model_scenario":)" + codex_scenario);
  const std::string codex_asks = submit(R"("adapter":"codex","prompt":"go","decisions":"observe",)"
                                        R"("park_after_ms":1000,"model_scenario":)" +
                                        codex_scenario);
  ASSERT_FALSE(claude.empty() || codex.empty() || codex_asks.empty());

  auto claude_events = follow_to_end(d.socket(), claude, 120s);
  ASSERT_FALSE(claude_events.empty());
  EXPECT_EQ(claude_events.back().str("reason"), "completed");
  ASSERT_TRUE(spec_of(claude).at("park_after_ms").is_number()) << "a run that can park takes the daemon's default";
  EXPECT_EQ(spec_of(claude).at("park_after_ms").to_number<std::uint64_t>(), 900000u);

  auto codex_events = follow_to_end(d.socket(), codex, 120s);
  ASSERT_FALSE(codex_events.empty());
  for (const auto& e : codex_events)
    EXPECT_FALSE(e.event() == "command.result" && e.str("id") == "start/park") << e.raw;
  EXPECT_EQ(codex_events.back().str("reason"), "completed") << codex_events.back().raw;
  EXPECT_TRUE(spec_of(codex).at("park_after_ms").is_null()) << "a Codex run is not given a default it cannot honour";

  auto asked = follow_to_end(d.socket(), codex_asks, 120s);
  bool refused = false;
  for (const auto& e : asked)
    refused |= e.event() == "command.result" && e.str("id") == "start/park" &&
               e.raw.find("UNSUPPORTED_CONTROL") != std::string::npos;
  EXPECT_TRUE(refused) << "a Codex spec's own park_after_ms is refused by name";
}

// A supervised run (the daemon's default) parks too: its vendor's process is gone while it is
// parked, its supervisor (a few MB) stays, and the decision has the supervisor spawn the vendor
// again. One run allowed, one denied: each resumes once, the allowed call runs, the denied one
// does not, and each stream is whole.
TEST(DaemonPark, ASupervisedRunParksKeepingOnlyItsSupervisorAndResumesOnItsDecision) {
  TempDir dir{"park-supervised"};
  DaemonUnderTest d(dir.path());
  ASSERT_TRUE(d.wait_notify("READY=1")) << d.stderr_text();
  std::vector<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    SocketClient c(d.socket());
    auto reply = c.request(socket_request("submit", park_spec("marker.txt")));
    ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : d.stderr_text());
    ids.push_back(reply->str("run_id"));
  }
  for (const auto& id : ids) {
    ASSERT_TRUE(eventually([&] { return parked_and_gone(d.socket(), id); }, 120s))
        << id << " did not park: " << state_of(d.socket(), id).value_or("?") << "\n"
        << read_file(d.run_dir(id) / "events.jsonl") << read_file(d.run_dir(id) / "supervisor.log") << d.stderr_text();
    // Its supervisor is there; the vendor it spawned is not.
    auto state = boost::json::parse(read_file(d.run_dir(id) / "supervisor.json")).as_object();
    const auto supervisor = static_cast<pid_t>(state.at("supervisor_pid").to_number<std::int64_t>());
    const auto vendor = static_cast<pid_t>(state.at("vendor_pid").to_number<std::int64_t>());
    EXPECT_EQ(::kill(supervisor, 0), 0) << id << ": the parked run's supervisor stays";
    EXPECT_TRUE(::kill(vendor, 0) != 0 && errno == ESRCH) << id << ": the parked vendor's process is gone";
    EXPECT_FALSE(std::filesystem::exists(d.run_dir(id) / "scratch/work/marker.txt")) << "nothing ran while parked";
  }
  const std::vector<std::string> decisions = {R"({"decision":"allow"})",
                                              R"({"decision":"deny","reason":"parked and refused"})"};
  for (std::size_t i = 0; i < ids.size(); ++i) {
    SocketClient c(d.socket());
    auto result = c.request(socket_request(
        "command", R"("run_id":")" + ids[i] + R"(","command":)" + tool_decide("d", "toolu_probe", decisions[i])));
    ASSERT_TRUE(result && result->str("reply") == "result") << (result ? result->raw : d.stderr_text());
    EXPECT_EQ(result->object.at("outcome").as_object().at("result"), "ok") << result->raw;
  }
  for (std::size_t i = 0; i < ids.size(); ++i) {
    auto events = follow_to_end(d.socket(), ids[i], 120s);
    ASSERT_FALSE(events.empty()) << ids[i];
    EXPECT_EQ(events.back().event(), "stream.closed") << ids[i];
    EXPECT_EQ(events.back().str("reason"), "completed") << ids[i] << "\n"
                                                        << read_file(d.run_dir(ids[i]) / "supervisor.log");
    EXPECT_EQ(count_events(events, "session.started"), 1u) << ids[i];
    EXPECT_EQ(count_events(events, "warning", "RUN_PARKED"), 1u) << ids[i];
    EXPECT_EQ(count_events(events, "warning", "RUN_RESUMED"), 1u) << ids[i];
    EXPECT_EQ(count_events(events, "warning", "RESUME_UNGOVERNED"), 0u) << ids[i];
    auto checked =
        run_to_end({metaharness_binary().string(), "check-stream", (d.run_dir(ids[i]) / "events.jsonl").string()});
    EXPECT_EQ(checked.status, 0) << ids[i] << ": " << checked.out << checked.err;
    EXPECT_EQ(std::filesystem::exists(d.run_dir(ids[i]) / "scratch/work/marker.txt"), i == 0)
        << ids[i] << (i == 0 ? ": the allowed call ran" : ": the denied call did not run");
  }
}

}  // namespace
}  // namespace mh::test
