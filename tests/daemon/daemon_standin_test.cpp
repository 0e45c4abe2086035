// The daemon at volume, hosting the stand-in harness (tests/standin) in place of the real CLI:
// hundreds of concurrent runs, and readers that do not keep up.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "protocol/completeness.hpp"
#include "tests/support/daemon_harness.hpp"

namespace mh::test {
namespace {

// `runs_keys`: more keys of [runs]; `tables`: more tables.
// `scripts`: where the stand-in's scripts are. It reads them inside the run's sandbox, so they are
// shown to every run read-only (runs.sandbox_read_only).
std::string standin_config(const std::string& runs_keys = "", const std::string& tables = "",
                           const std::string& scripts = MH_TEST_STANDIN_SCRIPTS) {
  // The stand-in speaks to no model: its runs keep the host's network (no gateway between them
  // and a model they never call), so the usage it reports is what their budgets count.
  return std::string("[vendor]\nclaude = \"") + MH_TEST_STANDIN +
         "\"\n[runs]\nmax_active = 1000\nnetwork = \"host\"\n" + "sandbox_read_only = [\"" +
         std::string(MH_TEST_STANDIN_SCRIPTS) + "\", \"" + scripts + "\"]\n" + runs_keys + tables;
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

  // The same daemon with more config.
  void restart(const std::string& runs_keys, const std::string& tables = "",
               const std::string& scripts = MH_TEST_STANDIN_SCRIPTS) {
    daemon.reset();
    daemon = std::make_unique<DaemonUnderTest>(dir.path(), standin_config(runs_keys, tables, scripts));
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  }

  std::size_t run_dirs() const {
    std::size_t n = 0;
    std::error_code ec;
    for (auto it = std::filesystem::directory_iterator(daemon->state_dir() / "runs", ec);
         !ec && it != std::filesystem::directory_iterator(); ++it)
      ++n;
    return n;
  }

  std::vector<EventLine> follow(const std::string& id) {
    SocketClient c(daemon->socket());
    c.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
    EXPECT_TRUE(c.wait_reply("end", 120s)) << id;
    std::vector<EventLine> events;
    for (const auto& l : c.lines())
      if (!l.event().empty()) events.push_back(l);
    return events;
  }

  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
};

// --- Issue 10: one owner of run ids --------------------------------------------------------

// The daemon and the one-shot `run` take their ids from daemon/run/run_dir.hpp: one format.
TEST_F(DaemonStandin, TheDaemonAndTheOneShotRunNameTheirRunsTheSameWay) {
  const std::regex id_format("[0-9]{8}T[0-9]{6}Z-[0-9a-f]{12}");
  // Both refused at start by the plan (a seam breaker declared): nothing spawns.
  std::string id =
      submit(R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
             R"("vendor_env":{"CLAUDE_CODE_SIMPLE":"1"}})");
  EXPECT_TRUE(std::regex_match(id, id_format)) << id;
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().str("run"), id);
  CliProcess run({metaharness_binary().string(), "run", "claude", "-p", "go", "--model-endpoint", "http://127.0.0.1:9",
                  "--vendor-env", "CLAUDE_CODE_SIMPLE=1", "--run-dir", (dir.path() / "one-shot").string()});
  run.close_stdin();
  EXPECT_EQ(run.finish(60s), 2) << run.stderr_text();
  ASSERT_FALSE(run.events().empty()) << run.stderr_text();
  std::string one_shot = run.events().front().str("run");
  EXPECT_TRUE(std::regex_match(one_shot, id_format)) << one_shot;
  EXPECT_NE(run.stderr_text().find("metaharness: run " + one_shot + " in "), std::string::npos) << run.stderr_text();
}

// --- Issue 9: the socket API's rough edges --------------------------------------------------

TEST_F(DaemonStandin, AConnectionAlreadyStreamingIsRefusedAlreadyAttachedNotBusy) {
  std::string id = submit(standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)"));
  SocketClient c(daemon->socket());
  c.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)", "a1"));
  ASSERT_TRUE(c.wait_reply("attached"));
  for (auto [request, id_of_request] : {std::pair{"tail", "t2"}, std::pair{"attach", "a2"}}) {
    c.send(socket_request(request, R"("run_id":")" + id + "\"", id_of_request));
    auto again = c.wait_for([&](const EventLine& e) { return e.str("id") == id_of_request; });
    ASSERT_TRUE(again) << request;
    EXPECT_EQ(again->str("reply"), "refused");
    EXPECT_EQ(again->str("code"), "ALREADY_ATTACHED") << again->raw;
    EXPECT_NE(again->str("reason").find("already attached to run " + id), std::string::npos) << again->raw;
  }
  c.send(R"({"format":"metaharness.command/1","id":"h","command":"halt"})");
  ASSERT_TRUE(c.wait_reply("end", 60s));
}

TEST_F(DaemonStandin, ASubmitWithBothAScenarioAndAnEndpointIsRefusedNamingBothAndLeavesNothing) {
  SocketClient c(daemon->socket());
  auto reply = c.request(socket_request(
      "submit", R"("run":{"adapter":"claude","prompt":"go","model_scenario":{"format":"metaharness.scenario/1"},)"
                R"("model_endpoint":{"base_url":"http://127.0.0.1:9"}})"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->str("code"), "MALFORMED") << reply->raw;
  EXPECT_NE(reply->str("reason").find("model_scenario"), std::string::npos) << reply->raw;
  EXPECT_NE(reply->str("reason").find("model_endpoint"), std::string::npos) << reply->raw;
  EXPECT_EQ(run_dirs(), 0u);
}

TEST_F(DaemonStandin, ADeadlineTheAdaptersSeamCannotHoldIsRefusedAtSubmitByName) {
  SocketClient c(daemon->socket());
  auto reply =
      c.request(socket_request("submit", standin_run("bash_marker.json", R"("decisions":"ask",)"
                                                                         R"("decision_deadline_ms":2200000000)")));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->str("reply"), "refused") << reply->raw;
  EXPECT_EQ(reply->str("code"), "MALFORMED") << reply->raw;
  EXPECT_NE(reply->str("reason").find("decision_deadline_ms 2200000000"), std::string::npos) << reply->raw;
  EXPECT_NE(reply->str("reason").find("at most"), std::string::npos) << reply->raw;
  EXPECT_EQ(run_dirs(), 0u) << "refused before anything is created";
  // A long deadline the seam does hold is accepted.
  std::string id =
      submit(standin_run("bash_marker.json", R"("decisions":"observe","decision_deadline_ms":2000000000)"));
  ASSERT_FALSE(id.empty());
  follow(id);
}

TEST_F(DaemonStandin, ASubmitRefusedAfterAdmissionLeavesNoRunDirectoryAndNoReservation) {
  SocketClient c(daemon->socket());
  // Admitted, then refused when the run is created: the scenario document does not load.
  auto reply = c.request(socket_request(
      "submit", R"("run":{"adapter":"claude","prompt":"go","model_scenario":{"format":"not-a-scenario"}})"));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->str("code"), "REFUSED") << reply->raw;
  EXPECT_EQ(run_dirs(), 0u) << "no run directory behind a refused submit";
  auto status = c.request(socket_request("status"));
  ASSERT_TRUE(status);
  const auto& runs = status->object.at("runs").as_object();
  EXPECT_EQ(runs.at("active").to_number<int>(), 0) << status->raw;
  EXPECT_EQ(runs.at("closed").to_number<int>(), 0) << "the reservation is released: " << status->raw;
}

TEST_F(DaemonStandin, ALineOverTheBoundIsRefusedAsSoonAsItCrossesItThenDiscardedToItsNewline) {
  restart("", "[server]\nmax_line_bytes = 1024\n");
  SocketClient c(daemon->socket());
  c.send_raw(std::string(3000, 'x'));  // no newline, and none coming yet
  auto refused = c.wait_reply("refused", 20s);
  ASSERT_TRUE(refused) << "answered when the bound was crossed, not when the newline arrives";
  EXPECT_EQ(refused->str("code"), "LINE_TOO_LONG");
  EXPECT_NE(refused->str("reason").find("over the 1024-byte bound"), std::string::npos) << refused->raw;
  c.send_raw(std::string(5000, 'y') + R"({"format":"metaharness.socket/1","request":"status","id":"hidden"})");
  c.send("");  // the newline: the oversized line ends here, the request inside it is discarded
  auto status = c.request(socket_request("status", "", "after"));
  ASSERT_TRUE(status);
  EXPECT_EQ(status->str("reply"), "status") << "the connection stays usable";
  EXPECT_EQ(status->str("id"), "after") << "nothing of the discarded line was acted on";
  std::size_t refusals = 0;
  for (const auto& l : c.lines())
    refusals += l.str("reply") == "refused";
  EXPECT_EQ(refusals, 1u) << "one refusal per oversized line";
}

TEST_F(DaemonStandin, AnUnterminatedLastLineBeforeAHalfCloseIsRefusedAndEveryReplyStillArrives) {
  SocketClient c(daemon->socket());
  c.send(socket_request("status", "", "s1"));
  c.send_raw(socket_request("list", "", "never"));  // no newline
  c.close_write();
  auto status = c.wait_reply("status", 20s);
  ASSERT_TRUE(status) << "the reply to the terminated line reaches the peer";
  auto refused = c.wait_reply("refused", 20s);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->str("code"), "UNTERMINATED_LINE") << refused->raw;
  EXPECT_NE(refused->str("reason").find("without a newline"), std::string::npos) << refused->raw;
  EXPECT_FALSE(c.next_line(20s)) << "then the daemon closes the connection";
  EXPECT_TRUE(c.eof());
  for (const auto& l : c.lines())
    EXPECT_NE(l.str("reply"), "runs") << "the unterminated request was not acted on";
}

TEST_F(DaemonStandin, AHalfClosedConnectionStillGetsTheWholeStreamItAskedFor) {
  std::string id = submit(standin_run("bash_marker.json", R"("decisions":"observe")"));
  SocketClient c(daemon->socket());
  c.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
  c.close_write();  // like `... | nc -U`: nothing more to say, still reading
  auto end = c.wait_reply("end", 60s);
  ASSERT_TRUE(end);
  auto closed = c.events_named("stream.closed");
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(end->object.at("next_seq").to_number<std::uint64_t>(),
            closed[0].object.at("seq").to_number<std::uint64_t>() + 1);
  EXPECT_FALSE(c.next_line(20s));
  EXPECT_TRUE(c.eof());
}

// Right after `end`, no view of the daemon may still count the run active.
TEST_F(DaemonStandin, RightAfterEndStatusListAndGetAgreeWithTheStreamThatTheRunIsClosed) {
  SocketClient observer(daemon->socket());
  for (int i = 0; i < 15; ++i) {
    std::string id = submit(standin_run("bash_marker.json", R"("decisions":"observe")"));
    SocketClient tail(daemon->socket());
    tail.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(tail.wait_reply("end", 60s)) << i;
    auto status = observer.request(socket_request("status", "", "s" + std::to_string(i)));
    ASSERT_TRUE(status);
    EXPECT_EQ(status->object.at("runs").as_object().at("active").to_number<int>(), 0) << i << ": " << status->raw;
    auto got = observer.request(socket_request("get", R"("run_id":")" + id + "\"", "g" + std::to_string(i)));
    ASSERT_TRUE(got);
    EXPECT_EQ(got->str("state"), "closed") << got->raw;
    EXPECT_EQ(got->str("close_reason"), "completed") << got->raw;
  }
}

// --- Issue 9: one line bound, through the whole daemon ---------------------------------------

TEST_F(DaemonStandin, AVendorRecordOverTheEventLineBoundIsCutInTheStreamAndWholeInTheTranscript) {
  std::filesystem::create_directories(dir.path() / "scripts");
  restart("max_event_line_bytes = 65536\n", "", (dir.path() / "scripts").string());
  auto script = dir.path() / "scripts/huge_text.json";
  std::ofstream(script)
      << R"({"format":"mh-standin-claude.script/1","turns":[[{"type":"chatter","count":1,"bytes":2000000}]]})";
  std::string id =
      submit(R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
             R"("decisions":"observe","vendor_env":{"MH_STANDIN_SCRIPT":")" +
             script.string() + "\"}}");
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  std::optional<EventLine> text;
  for (const auto& e : events) {
    EXPECT_LE(e.raw.size(), 65536u) << e.event();
    if (e.event() == "text") text = e;
  }
  ASSERT_TRUE(text);
  const auto& cut = text->object.at("cut").as_array();
  ASSERT_EQ(cut.size(), 1u);
  EXPECT_EQ(cut[0].as_object().at("pointer"), "/text");
  EXPECT_EQ(cut[0].as_object().at("bytes").to_number<std::uint64_t>(), 2000000u);
  auto verdict = protocol::check_stream(read_file(daemon->run_dir(id) / "events.jsonl"));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
  EXPECT_GT(std::filesystem::file_size(daemon->run_dir(id) / "vendor-stdout.jsonl"), 2000000u)
      << "the whole record stays in the retained vendor transcript";
}

TEST_F(DaemonStandin, TwoHundredConcurrentRunsAreEachDecidedByTheirAttachedClient) {
  constexpr int kRuns = 200;
  std::vector<std::string> ids;
  std::vector<std::unique_ptr<SocketClient>> controllers;
  for (int i = 0; i < kRuns; ++i) {
    ids.push_back(submit(standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)")));
    ASSERT_FALSE(ids.back().empty()) << "submit " << i << " was not answered";
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

// --- Issue 9: budgets over the socket ---------------------------------------------------------

std::string first_warning(const std::vector<EventLine>& events, const std::string& code) {
  for (const auto& e : events)
    if (e.event() == "warning" && e.str("code") == code) return e.str("message");
  return "";
}

TEST_F(DaemonStandin, ADefaultBudgetFromTheConfigAppliesToARunThatNamesNoneAndGetShowsTheSpend) {
  restart("", "[budgets]\ntool_calls = 0\n");
  std::string id = submit(standin_run("bash_marker.json"));
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().str("reason"), "budget");
  EXPECT_NE(first_warning(events, "BUDGET_EXHAUSTED").find("tool_calls budget of 0"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(daemon->run_dir(id) / "scratch/work/marker.txt"));
  SocketClient c(daemon->socket());
  auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
  ASSERT_TRUE(got);
  const auto& budget = got->object.at("budget").as_object();
  EXPECT_EQ(budget.at("tool_calls").to_number<int>(), 0) << got->raw;
  const auto& spend = got->object.at("spend").as_object();
  EXPECT_EQ(spend.at("tool_calls").to_number<int>(), 1) << got->raw;
  EXPECT_GT(spend.at("output_tokens").to_number<int>(), 0) << got->raw;
  EXPECT_TRUE(spend.at("usd").is_double() || spend.at("usd").is_null());
  auto listed = c.request(socket_request("list"));
  ASSERT_TRUE(listed);
  EXPECT_TRUE(listed->object.at("runs").as_array().at(0).as_object().contains("spend")) << listed->raw;
}

TEST_F(DaemonStandin, AUsdBudgetForAModelWithNoPriceIsRefusedAtSubmitByName) {
  SocketClient c(daemon->socket());
  auto reply = c.request(socket_request("submit", standin_run("bash_marker.json", R"("budget":{"usd":1})")));
  ASSERT_TRUE(reply);
  EXPECT_EQ(reply->str("code"), "BUDGET_UNPRICED") << reply->raw;
  EXPECT_NE(reply->str("reason").find("names no model"), std::string::npos) << reply->raw;
  EXPECT_EQ(run_dirs(), 0u);
  auto bad = c.request(socket_request("submit", standin_run("bash_marker.json", R"("budget":{"minutes":1})")));
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->str("code"), "MALFORMED");
  EXPECT_NE(bad->str("reason").find("unknown budget \"minutes\""), std::string::npos) << bad->raw;
  auto text = c.request(socket_request("submit", standin_run("bash_marker.json", R"("budget":{"turns":"3"})")));
  ASSERT_TRUE(text);
  EXPECT_EQ(text->str("code"), "MALFORMED") << "a budget is a number, never a string read as one: " << text->raw;
  EXPECT_EQ(run_dirs(), 0u);
}

TEST_F(DaemonStandin, AtSigtermAFollowerReadsItsRunsStreamToStreamClosedAndEnd) {
  // The stop closes every run, then lets each connection's stream run to its `end` before the
  // daemon lets go. Several rounds: a follower cut short was a race.
  for (int round = 0; round < 4; ++round) {
    if (round > 0) restart("", "");
    std::string id = submit(standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)"));
    SocketClient follower(daemon->socket());
    follower.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(follower.wait_event("tool.requested", 60s)) << "round " << round;
    daemon->signal(SIGTERM);
    auto closed = follower.wait_event("stream.closed", 60s);
    ASSERT_TRUE(closed) << "round " << round << ": the follower was cut off before stream.closed";
    EXPECT_EQ(closed->str("reason"), "killed");
    EXPECT_TRUE(follower.wait_reply("end", 30s)) << "round " << round;
    EXPECT_EQ(daemon->wait_exit(60s), 0) << daemon->stderr_text();
  }
}

TEST_F(DaemonStandin, UnderADailyUsdBudgetARunWhoseModelHasNoPriceIsRefusedAtSubmitByName) {
  restart("", "[budgets.daily]\nusd = 5\n[prices.\"priced-model\"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n");
  SocketClient c(daemon->socket());
  auto unnamed = c.request(socket_request("submit", standin_run("bash_marker.json")));
  ASSERT_TRUE(unnamed);
  EXPECT_EQ(unnamed->str("code"), "BUDGET_UNPRICED") << unnamed->raw;
  EXPECT_NE(unnamed->str("reason").find("daily usd budget"), std::string::npos) << unnamed->raw;
  auto unpriced = c.request(socket_request("submit", standin_run("bash_marker.json", R"("model":"other-model")")));
  ASSERT_TRUE(unpriced);
  EXPECT_EQ(unpriced->str("code"), "BUDGET_UNPRICED") << unpriced->raw;
  EXPECT_NE(unpriced->str("reason").find("no price for other-model"), std::string::npos) << unpriced->raw;
  EXPECT_EQ(run_dirs(), 0u);
  auto priced = c.request(socket_request("submit", standin_run("bash_marker.json", R"("model":"priced-model")")));
  ASSERT_TRUE(priced);
  EXPECT_EQ(priced->str("reply"), "submitted") << priced->raw;
  follow(priced->str("run_id"));
}

TEST_F(DaemonStandin, ADailyBudgetStopsEveryRunOfTheOwnerAndRefusesTheirNextSubmitUntilTheDayEnds) {
  // Each stand-in assistant message reports one output token: the first run's call makes 1 (and
  // it then waits on its decision), the second run's call the second, which reaches the owner's
  // daily budget: both runs, each waiting on a decision, are stopped.
  restart("", "[budgets.daily]\noutput_tokens = 2\n");
  std::string waiting = submit(standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)"));
  SocketClient controller(daemon->socket());
  controller.send(socket_request("attach", R"("run_id":")" + waiting + R"(","from_seq":1)"));
  ASSERT_TRUE(controller.wait_event("tool.requested", 60s)) << "the first run waits on its call";
  std::string crossing = submit(standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)"));
  for (const auto& id : {waiting, crossing}) {
    auto events = follow(id);
    ASSERT_FALSE(events.empty()) << id;
    EXPECT_EQ(events.back().str("reason"), "budget") << id;
    auto message = first_warning(events, "BUDGET_EXHAUSTED");
    EXPECT_NE(message.find("the daily output_tokens budget of 2 token(s) is exhausted: 2 token(s) today by uid " +
                           std::to_string(::geteuid())),
              std::string::npos)
        << id << ": " << message;
  }
  SocketClient c(daemon->socket());
  auto refused = c.request(socket_request("submit", standin_run("bash_marker.json")));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->str("code"), "BUDGET_EXHAUSTED") << refused->raw;
  EXPECT_NE(refused->str("reason").find("until the UTC day ends"), std::string::npos) << refused->raw;
  // The day's figures survive a restart of the daemon, even a kill -9 right after the crossing.
  restart("", "[budgets.daily]\noutput_tokens = 2\n");
  SocketClient after(daemon->socket());
  auto still = after.request(socket_request("submit", standin_run("bash_marker.json")));
  ASSERT_TRUE(still);
  EXPECT_EQ(still->str("code"), "BUDGET_EXHAUSTED") << still->raw;
}

// --- Issue 27: idempotent submit ---------------------------------------------------------------

// A submit whose reply the client lost is sent again with the same request_id: one run.
TEST_F(DaemonStandin, ASubmitRetriedWithItsRequestIdGetsTheFirstRunBackNeverASecond) {
  const std::string run = standin_run("bash_marker.json", R"("decisions":"observe")");
  SocketClient c(daemon->socket());
  auto first = c.request(socket_request("submit", R"("request_id":"job-7:attempt.1",)" + run));
  ASSERT_TRUE(first && first->str("reply") == "submitted") << (first ? first->raw : "no reply");
  EXPECT_EQ(first->raw.find("duplicate"), std::string::npos) << "a first submit is not a duplicate: " << first->raw;
  auto again = c.request(socket_request("submit", R"("request_id":"job-7:attempt.1",)" + run));
  ASSERT_TRUE(again && again->str("reply") == "submitted") << (again ? again->raw : "no reply");
  EXPECT_EQ(again->str("run_id"), first->str("run_id"));
  EXPECT_EQ(again->str("run_dir"), first->str("run_dir"));
  EXPECT_TRUE(again->object.at("duplicate").as_bool()) << again->raw;
  EXPECT_EQ(run_dirs(), 1u);
  // The same spec with its keys in another order is the same spec.
  const std::string reordered =
      R"("run":{"prompt":"go","adapter":"claude","decisions":"observe","vendor_env":{"MH_STANDIN_SCRIPT":")" +
      (std::filesystem::path(MH_TEST_STANDIN_SCRIPTS) / "bash_marker.json").string() +
      R"("},"model_endpoint":{"base_url":"http://127.0.0.1:9"}})";
  auto reordered_reply = c.request(socket_request("submit", R"("request_id":"job-7:attempt.1",)" + reordered));
  ASSERT_TRUE(reordered_reply);
  EXPECT_EQ(reordered_reply->str("run_id"), first->str("run_id")) << reordered_reply->raw;
  // Without a request_id every submit is a run of its own, as before.
  std::string other = submit(run);
  EXPECT_NE(other, first->str("run_id"));
  EXPECT_EQ(run_dirs(), 2u);
  for (const auto& id : {first->str("run_id"), other})
    EXPECT_EQ(follow(id).back().str("reason"), "completed") << id;
}

TEST_F(DaemonStandin, ARequestIdReusedWithAnotherSpecIsRefusedConflictAndABadOneMalformed) {
  SocketClient c(daemon->socket());
  std::string id = c.request(socket_request("submit", R"("request_id":"r1",)" +
                                                          standin_run("bash_marker.json", R"("decisions":"observe")")))
                       ->str("run_id");
  ASSERT_FALSE(id.empty());
  auto conflict = c.request(
      socket_request("submit", R"("request_id":"r1",)" + standin_run("chatter.json", R"("decisions":"observe")")));
  ASSERT_TRUE(conflict);
  EXPECT_EQ(conflict->str("code"), "CONFLICT") << conflict->raw;
  EXPECT_NE(conflict->str("reason").find(id), std::string::npos) << "names the run the id made: " << conflict->raw;
  for (const std::string& bad :
       std::vector<std::string>{R"("")", R"("has space")", R"("a/b")", "\"" + std::string(129, 'x') + "\"", "7"}) {
    auto refused =
        c.request(socket_request("submit", R"("request_id":)" + bad + "," + standin_run("bash_marker.json")));
    ASSERT_TRUE(refused) << bad;
    EXPECT_EQ(refused->str("code"), "MALFORMED") << bad << ": " << refused->raw;
    EXPECT_NE(refused->str("reason").find("request_id"), std::string::npos) << refused->raw;
  }
  // 128 characters of the whole alphabet are a request id.
  std::string longest = "AZaz09._:-" + std::string(118, 'k');
  auto accepted = c.request(socket_request(
      "submit", R"("request_id":")" + longest + "\"," + standin_run("bash_marker.json", R"("decisions":"observe")")));
  ASSERT_TRUE(accepted && accepted->str("reply") == "submitted") << (accepted ? accepted->raw : "no reply");
  EXPECT_EQ(run_dirs(), 2u) << "no refusal left a run behind";
  for (const auto& run : {id, accepted->str("run_id")})
    follow(run);
}

// A refusal makes no run, so the request id stays free for the submit that is accepted.
TEST_F(DaemonStandin, ARefusedSubmitLeavesItsRequestIdFreeForTheRetryThatIsAccepted) {
  SocketClient c(daemon->socket());
  auto refused = c.request(socket_request(
      "submit", R"("request_id":"retry-me","run":{"adapter":"claude","prompt":"go","model_scenario":{"format":"x"}})"));
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->str("code"), "REFUSED") << refused->raw;
  auto accepted = c.request(socket_request(
      "submit", R"("request_id":"retry-me",)" + standin_run("bash_marker.json", R"("decisions":"observe")")));
  ASSERT_TRUE(accepted && accepted->str("reply") == "submitted") << (accepted ? accepted->raw : "no reply");
  EXPECT_EQ(accepted->raw.find("duplicate"), std::string::npos) << accepted->raw;
  follow(accepted->str("run_id"));
}

// Sixteen clients send the same submit at once (a harness retrying on a timeout that was only
// slow): one run, every one of them told its id.
TEST_F(DaemonStandin, ConcurrentSubmitsWithOneRequestIdMakeOneRunAndAllGetItsId) {
  const std::string request = socket_request(
      "submit", R"("request_id":"burst",)" + standin_run("bash_marker.json", R"("decisions":"observe")"));
  std::vector<std::string> ids(16);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < ids.size(); ++i)
    clients.emplace_back([&, i] {
      SocketClient c(daemon->socket());
      auto reply = c.request(request);
      if (reply && reply->str("reply") == "submitted") ids[i] = reply->str("run_id");
    });
  for (auto& t : clients)
    t.join();
  std::set<std::string> distinct(ids.begin(), ids.end());
  ASSERT_EQ(distinct.size(), 1u) << "every client got the one run's id";
  EXPECT_FALSE(distinct.begin()->empty());
  EXPECT_EQ(run_dirs(), 1u);
  follow(*distinct.begin());
}

// The request id outlives the daemon: a kill -9 between the submit and its retry still gives the
// one run (adopted by the next daemon from its supervisor).
TEST_F(DaemonStandin, ARetryAfterTheDaemonWasKilledMinus9GetsTheRunTheFirstSubmitMade) {
  const std::string run = standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)");
  SocketClient c(daemon->socket());
  auto first = c.request(socket_request("submit", R"("request_id":"survives-kill",)" + run));
  ASSERT_TRUE(first && first->str("reply") == "submitted") << (first ? first->raw : "no reply");
  daemon->signal(SIGKILL);
  daemon->wait_exit(30s);
  daemon = std::make_unique<DaemonUnderTest>(dir.path(), standin_config());
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  SocketClient after(daemon->socket());
  auto again = after.request(socket_request("submit", R"("request_id":"survives-kill",)" + run));
  ASSERT_TRUE(again && again->str("reply") == "submitted") << (again ? again->raw : "no reply");
  EXPECT_EQ(again->str("run_id"), first->str("run_id"));
  EXPECT_TRUE(again->object.at("duplicate").as_bool()) << again->raw;
  EXPECT_EQ(run_dirs(), 1u);
  after.send(socket_request("attach", R"("run_id":")" + first->str("run_id") + R"(","from_seq":1)"));
  ASSERT_TRUE(after.wait_reply("attached"));
  after.send(R"({"format":"metaharness.command/1","id":"h","command":"halt"})");
  ASSERT_TRUE(after.wait_reply("end", 60s));
}

TEST_F(DaemonStandin, SubmitFromTheCommandLineWithARequestIdPrintsTheSameRunTwice) {
  auto submit_once = [&] {
    CliProcess submitted(
        {metaharness_binary().string(), "submit", "claude", "-p", "go", "--model-endpoint", "http://127.0.0.1:9",
         "--vendor-env",
         "MH_STANDIN_SCRIPT=" + (std::filesystem::path(MH_TEST_STANDIN_SCRIPTS) / "bash_marker.json").string(),
         "--decisions", "observe", "--request-id", "cli:job-1", "--socket", daemon->socket().string()});
    submitted.close_stdin();
    auto id = submitted.next_line(30s);
    EXPECT_EQ(submitted.finish(30s), 0) << submitted.stderr_text();
    return std::pair{id.value_or(""), submitted.stderr_text()};
  };
  auto [first, first_err] = submit_once();
  auto [second, second_err] = submit_once();
  ASSERT_FALSE(first.empty()) << first_err;
  EXPECT_EQ(second, first);
  EXPECT_EQ(first_err.find("made run"), std::string::npos) << first_err;
  EXPECT_NE(second_err.find("request id cli:job-1 made run " + first + " already"), std::string::npos) << second_err;
  EXPECT_EQ(run_dirs(), 1u);
  follow(first);
}

// A retention the config shortens: an id older than it makes a new run.
TEST_F(DaemonStandin, ARequestIdOlderThanTheRetentionMakesANewRun) {
  restart("request_id_retention_s = 1\n");
  const std::string run = standin_run("bash_marker.json", R"("decisions":"observe")");
  SocketClient c(daemon->socket());
  std::string first = c.request(socket_request("submit", R"("request_id":"short-lived",)" + run))->str("run_id");
  ASSERT_FALSE(first.empty());
  follow(first);
  // The retention is a wall-clock promise; waiting it out is the behaviour under test.
  ASSERT_TRUE(eventually(
      [&] {
        auto reply = c.request(socket_request("submit", R"("request_id":"short-lived",)" + run));
        return reply && reply->str("reply") == "submitted" && reply->str("run_id") != first;
      },
      10s));
  EXPECT_EQ(run_dirs(), 2u);
}

// --- Issue 27: failures a harness can filter without reading prose ----------------------------

// Each category from a real cause, read from stream.closed's `failure`.
TEST_F(DaemonStandin, EachWayARunEndsIsItsFailureCategoryOnStreamClosed) {
  struct Case {
    std::string run;
    std::string category;  // "" : completed, no failure
    bool retryable;
  };
  const std::vector<Case> cases = {
      {standin_run("bash_marker.json", R"("decisions":"observe")"), "", false},
      {standin_run("auth_401.json", R"("decisions":"observe")"), "auth", false},
      {standin_run("api_error_429.json", R"("decisions":"observe")"), "rate_limit", true},
      {standin_run("api_error_500.json", R"("decisions":"observe")"), "upstream", true},
      {standin_run("crash_mid_turn.json", R"("decisions":"observe")"), "vendor_exit", true},
      {standin_run("bash_marker.json", R"("decisions":"observe","budget":{"output_tokens":1})"), "budget", false},
      // A seam breaker declared: refused at launch, nothing spawns.
      {R"("run":{"adapter":"claude","prompt":"go","model_endpoint":{"base_url":"http://127.0.0.1:9"},)"
       R"("vendor_env":{"CLAUDE_CODE_SIMPLE":"1"}})",
       "launch", false},
  };
  for (const auto& c : cases) {
    const std::string id = submit(c.run);
    auto events = follow(id);
    ASSERT_FALSE(events.empty()) << c.run;
    const auto& closed = events.back();
    ASSERT_EQ(closed.event(), "stream.closed");
    // `get` says the same as the record.
    SocketClient observer(daemon->socket());
    auto got = observer.request(socket_request("get", R"("run_id":")" + id + "\""));
    ASSERT_TRUE(got && got->object.contains("failure")) << (got ? got->raw : "no reply");
    if (c.category.empty()) {
      EXPECT_EQ(closed.str("reason"), "completed") << closed.raw;
      EXPECT_FALSE(closed.object.contains("failure")) << "a completed run has none: " << closed.raw;
      EXPECT_TRUE(got->object.at("failure").is_null()) << got->raw;
      continue;
    }
    ASSERT_TRUE(got->object.at("failure").is_object()) << got->raw;
    EXPECT_EQ(got->object.at("failure").as_object().at("category").as_string(), c.category) << got->raw;
    ASSERT_TRUE(closed.object.contains("failure")) << closed.raw;
    const auto& failure = closed.object.at("failure").as_object();
    EXPECT_EQ(failure.at("category").as_string(), c.category) << closed.raw;
    EXPECT_EQ(failure.at("retryable").as_bool(), c.retryable) << closed.raw;
    EXPECT_FALSE(failure.at("detail").as_string().empty()) << closed.raw;
  }
  // A controller's halt.
  const std::string halted =
      submit(standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)"));
  SocketClient controller(daemon->socket());
  controller.send(socket_request("attach", R"("run_id":")" + halted + R"(","from_seq":1)"));
  ASSERT_TRUE(controller.wait_event("tool.requested", 60s));
  controller.send(R"({"format":"metaharness.command/1","id":"h","command":"halt"})");
  ASSERT_TRUE(controller.wait_reply("end", 60s));
  auto closed = controller.events_named("stream.closed");
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_NE(closed[0].raw.find(R"("failure":{"category":"halted","retryable":false)"), std::string::npos)
      << closed[0].raw;
}

// --- Issue 27: a run that has lost its governor --------------------------------------------

// runs.ungoverned_halt_after_s: the daemon is killed and never comes back; the run's supervisor
// halts the run and closes its record itself. A daemon started later finds it closed.
TEST_F(DaemonStandin, ARunWhoseDaemonStaysGoneIsHaltedByItsSupervisorAndItsRecordClosedKilled) {
  restart("ungoverned_halt_after_s = 1\n");
  const std::string id = submit(standin_run("bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000)"));
  {
    SocketClient controller(daemon->socket());
    controller.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
    ASSERT_TRUE(controller.wait_event("tool.requested", 60s)) << "the run waits on a decision";
  }
  const auto events_path = daemon->run_dir(id) / "events.jsonl";
  const auto before = read_lines(events_path);
  daemon->signal(SIGKILL);
  daemon->wait_exit(30s);
  // No daemon is there to tell anyone: the file is where the supervisor's close shows.
  ASSERT_TRUE(eventually(
      [&] {
        auto lines = read_lines(events_path);
        return !lines.empty() && lines.back().find("\"stream.closed\"") != std::string::npos;
      },
      30s))
      << read_file(daemon->run_dir(id) / "supervisor.log");
  const auto after = read_lines(events_path);
  ASSERT_EQ(after.size(), before.size() + 2) << "everything the daemon wrote kept; a warning and the close appended";
  for (std::size_t i = 0; i < before.size(); ++i)
    EXPECT_EQ(after[i], before[i]);
  EXPECT_NE(after[after.size() - 2].find("RUN_UNGOVERNED"), std::string::npos) << after[after.size() - 2];
  EXPECT_NE(after[after.size() - 2].find("runs.ungoverned_halt_after_s = 1 s"), std::string::npos);
  EXPECT_NE(after.back().find(R"("reason":"killed")"), std::string::npos) << after.back();
  EXPECT_NE(after.back().find(R"("failure":{"category":"daemon","retryable":true,"detail":"RUN_UNGOVERNED: )"),
            std::string::npos)
      << after.back();
  auto verdict = protocol::check_stream(read_file(events_path));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
  EXPECT_TRUE(eventually([&] { return processes_with_env("METAHARNESS_RUN=" + id).empty(); }))
      << "the vendor and the supervisor are gone";
  // A daemon that comes back later leaves the closed record as it is.
  restart("ungoverned_halt_after_s = 1\n");
  SocketClient c(daemon->socket());
  auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
  ASSERT_TRUE(got);
  EXPECT_EQ(got->str("close_reason"), "killed") << got->raw;
  EXPECT_EQ(read_lines(events_path), after);
}

TEST_F(DaemonStandin, AnUngovernedBoundTheAdoptBoundWouldPreemptIsRefusedAtStartByName) {
  daemon.reset();
  DaemonUnderTest refused(dir.path(), standin_config("ungoverned_halt_after_s = 700\nadopt_within_ms = 600000\n"));
  EXPECT_NE(refused.wait_exit(30s), 0);
  EXPECT_NE(
      refused.stderr_text().find("runs.ungoverned_halt_after_s (700 s) must be shorter than runs.adopt_within_ms"),
      std::string::npos)
      << refused.stderr_text();
}

// --- Issue 27 §2: stalls are named, not waited out ---------------------------------------------

std::vector<EventLine> warnings_coded(const std::vector<EventLine>& events, const std::string& code) {
  std::vector<EventLine> out;
  for (const auto& e : events)
    if (e.event() == "warning" && e.str("code") == code) out.push_back(e);
  return out;
}

// Each silence of a vendor (4 s of the model streaming nothing, twice) is named once with a short
// stall_after, each after the output that preceded it; under "warn" the run goes on and completes.
TEST_F(DaemonStandin, EachSilenceOfTheVendorIsNamedStalledOnceAndUnderWarnTheRunCompletes) {
  const std::string id =
      submit(standin_run("stall_twice.json", R"("decisions":"observe","stall_after_ms":300,"on_stall":"warn")"));
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  auto stalls = warnings_coded(events, "RUN_STALLED");
  ASSERT_EQ(stalls.size(), 2u) << "one per silence, never repeated within one";
  std::vector<std::string> order;
  for (const auto& e : events)
    if (e.event() == "text" || (e.event() == "warning" && e.str("code") == "RUN_STALLED"))
      order.push_back(e.event() == "text" ? e.str("text") : "STALLED");
  EXPECT_EQ(order, (std::vector<std::string>{"Working.", "STALLED", "Halfway.", "STALLED", "Done."}));
  const auto& stall = stalls[0].object.at("stall").as_object();
  EXPECT_GE(stall.at("silent_ms").to_number<std::uint64_t>(), 300u) << stalls[0].raw;
  EXPECT_EQ(stall.at("last_event").as_string(), "usage")
      << "the text record's last event, its usage: " << stalls[0].raw;
  EXPECT_EQ(stall.at("on_stall").as_string(), "warn") << stalls[0].raw;
  EXPECT_EQ(stall.at("stall_after_ms").to_number<std::uint64_t>(), 300u) << stalls[0].raw;
  EXPECT_EQ(events.back().str("reason"), "completed") << events.back().raw;
}

// on_stall = "halt": the vendor that hangs is named once, halted, and its close says `stalled`.
TEST_F(DaemonStandin, AHangingVendorUnderHaltIsNamedStalledThenHaltedAndClosesWithFailureStalled) {
  const std::string id =
      submit(standin_run("stall_hang.json", R"("decisions":"observe","stall_after_ms":300,"on_stall":"halt")"));
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  ASSERT_EQ(warnings_coded(events, "RUN_STALLED").size(), 1u);
  const auto& closed = events.back();
  ASSERT_EQ(closed.event(), "stream.closed") << closed.raw;
  EXPECT_EQ(closed.str("reason"), "steer-halt") << closed.raw;
  ASSERT_TRUE(closed.object.contains("failure")) << closed.raw;
  EXPECT_EQ(closed.object.at("failure").as_object().at("category").as_string(), "stalled") << closed.raw;
  EXPECT_TRUE(closed.object.at("failure").as_object().at("retryable").as_bool()) << closed.raw;
  SocketClient observer(daemon->socket());
  auto got = observer.request(socket_request("get", R"("run_id":")" + id + "\""));
  ASSERT_TRUE(got && got->object.at("failure").is_object()) << (got ? got->raw : "no reply");
  EXPECT_EQ(got->object.at("failure").as_object().at("category").as_string(), "stalled") << got->raw;
}

// A call waiting on a decision is no stall, however long it waits: `get` and `ls` say since when
// it waits instead. Another run with the same stall_after, named stalled meanwhile, is the clock
// that shows the wait outlasted stall_after (no sleep).
TEST_F(DaemonStandin, ACallWaitingOnADecisionLongerThanStallAfterIsNoStallAndGetAndLsSayWaitingSince) {
  const std::string waiting = submit(standin_run(
      "bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000,"stall_after_ms":300,"on_stall":"halt")"));
  SocketClient controller(daemon->socket());
  controller.send(socket_request("attach", R"("run_id":")" + waiting + R"(","from_seq":1)"));
  ASSERT_TRUE(controller.wait_event("tool.requested", 60s));
  const std::string clock =
      submit(standin_run("stall_hang.json", R"("decisions":"observe","stall_after_ms":300,"on_stall":"halt")"));
  auto clock_events = follow(clock);
  ASSERT_EQ(warnings_coded(clock_events, "RUN_STALLED").size(), 1u) << "the clock run was named: 300 ms passed";

  SocketClient observer(daemon->socket());
  auto got = observer.request(socket_request("get", R"("run_id":")" + waiting + "\""));
  ASSERT_TRUE(got) << "no reply";
  EXPECT_EQ(got->str("state"), "turn") << got->raw;
  EXPECT_EQ(got->object.at("pending_decisions").to_number<std::uint64_t>(), 1u) << got->raw;
  ASSERT_TRUE(got->object.at("waiting_on_decision_since").is_string()) << got->raw;
  EXPECT_TRUE(got->object.at("stalled_since").is_null()) << got->raw;
  EXPECT_TRUE(got->object.at("last_output_at").is_string()) << got->raw;
  auto listed = observer.request(socket_request("list"));
  ASSERT_TRUE(listed && listed->object.at("runs").is_array()) << (listed ? listed->raw : "no reply");
  bool found = false;
  for (const auto& run : listed->object.at("runs").as_array()) {
    if (run.as_object().at("run_id").as_string() != waiting) continue;
    found = true;
    EXPECT_TRUE(run.as_object().at("waiting_on_decision_since").is_string()) << listed->raw;
  }
  EXPECT_TRUE(found) << listed->raw;

  controller.send(tool_decide("d1", "toolu_marker", R"({"decision":"allow"})"));
  ASSERT_TRUE(controller.wait_reply("end", 60s));
  EXPECT_TRUE(warnings_coded(controller.lines(), "RUN_STALLED").empty()) << "a wait on a decision is no stall";
  auto closed = controller.events_named("stream.closed");
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].str("reason"), "completed") << closed[0].raw;
}

// A stall named before the daemon was killed is not named again by the daemon that adopts the run:
// the timeout is an input in the run's journal, replayed with the rest. Another run named stalled
// after the adoption is the clock that shows a second warning had time to come (no sleep).
TEST_F(DaemonStandin, AStallNamedBeforeAKillIsNotNamedAgainByTheDaemonThatAdoptsTheRun) {
  const std::string id =
      submit(standin_run("stall_hang.json", R"("decisions":"observe","stall_after_ms":300,"on_stall":"warn")"));
  {
    SocketClient watcher(daemon->socket());
    watcher.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(watcher.wait_for([](const EventLine& e) { return e.str("code") == "RUN_STALLED"; }, 60s));
  }
  daemon->signal(SIGKILL);
  daemon->wait_exit(30s);
  daemon = std::make_unique<DaemonUnderTest>(dir.path(), standin_config());
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  SocketClient controller(daemon->socket());
  controller.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  ASSERT_TRUE(controller.wait_for([](const EventLine& e) { return e.str("code") == "RUN_ADOPTED"; }, 60s));
  const std::string clock =
      submit(standin_run("stall_hang.json", R"("decisions":"observe","stall_after_ms":300,"on_stall":"halt")"));
  ASSERT_EQ(warnings_coded(follow(clock), "RUN_STALLED").size(), 1u);
  SocketClient observer(daemon->socket());
  auto got = observer.request(socket_request("get", R"("run_id":")" + id + "\""));
  ASSERT_TRUE(got) << "no reply";
  EXPECT_TRUE(got->object.at("stalled_since").is_string()) << "still silent since it was named: " << got->raw;
  controller.send(R"({"format":"metaharness.command/1","id":"h","command":"halt"})");
  ASSERT_TRUE(controller.wait_reply("end", 60s));
  EXPECT_EQ(warnings_coded(controller.lines(), "RUN_STALLED").size(), 1u) << "named once, across the adoption";
  auto closed = controller.events_named("stream.closed");
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_NE(closed[0].raw.find(R"("category":"halted")"), std::string::npos)
      << "a person's halt after a warn-only stall is that person's: " << closed[0].raw;
}

// A run adopted while its vendor is silent and its stall not yet named: the replay rebuilds the
// core, which then believes its stall timer set from the output it replayed. The adopting daemon
// must set that timer (Adoption::reconcile), or the silence is never named: here it is named once,
// after RUN_ADOPTED, and under "halt" the run closes `stalled` by itself.
// (15 s: room for the kill to land before the stall is named on a loaded machine.)
TEST_F(DaemonStandin, AVendorSilentAcrossAnAdoptionIsStillNamedStalledByTheAdoptingDaemon) {
  const std::string id =
      submit(standin_run("stall_hang.json", R"("decisions":"observe","stall_after_ms":15000,"on_stall":"halt")"));
  {
    SocketClient watcher(daemon->socket());
    watcher.send(socket_request("tail", R"("run_id":")" + id + R"(","from_seq":1,"follow":true)"));
    ASSERT_TRUE(watcher.wait_for([](const EventLine& e) { return e.event() == "text"; }, 60s));
  }
  daemon->signal(SIGKILL);
  daemon->wait_exit(30s);
  {
    std::vector<EventLine> before;
    std::ifstream in(daemon->run_dir(id) / "events.jsonl");
    for (std::string line; std::getline(in, line);)
      before.push_back(to_event_line(line));
    ASSERT_TRUE(warnings_coded(before, "RUN_STALLED").empty())
        << "the kill must come before the stall is named, or this proves nothing of the adoption";
  }
  daemon = std::make_unique<DaemonUnderTest>(dir.path(), standin_config());
  ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  auto events = follow(id);
  ASSERT_FALSE(events.empty());
  std::vector<std::string> order;
  for (const auto& e : events)
    if (e.event() == "warning" && (e.str("code") == "RUN_ADOPTED" || e.str("code") == "RUN_STALLED"))
      order.push_back(e.str("code"));
  EXPECT_EQ(order, (std::vector<std::string>{"RUN_ADOPTED", "RUN_STALLED"}));
  const auto& closed = events.back();
  ASSERT_EQ(closed.event(), "stream.closed") << closed.raw;
  ASSERT_TRUE(closed.object.contains("failure")) << closed.raw;
  EXPECT_EQ(closed.object.at("failure").as_object().at("category").as_string(), "stalled") << closed.raw;
}

// `metaharness ls --human`: the PROGRESS column says which run waits on a decision (however long:
// no stall) and which was named stalled, each with how long; a closed run says neither. The
// stalled run, named after 300 ms, is the clock that shows the wait outlasted that (no sleep).
TEST_F(DaemonStandin, LsHumanTableSaysWhichRunWaitsOnADecisionAndWhichIsStalled) {
  const std::string done = submit(standin_run("bash_marker.json", R"("decisions":"observe")"));
  follow(done);
  const std::string waiting = submit(standin_run(
      "bash_marker.json", R"("decisions":"ask","decision_deadline_ms":120000,"stall_after_ms":300,"on_stall":"halt")"));
  SocketClient waiting_control(daemon->socket());
  waiting_control.send(socket_request("attach", R"("run_id":")" + waiting + R"(","from_seq":1)"));
  ASSERT_TRUE(waiting_control.wait_event("tool.requested", 60s));
  const std::string stalled =
      submit(standin_run("stall_hang.json", R"("decisions":"observe","stall_after_ms":300,"on_stall":"warn")"));
  SocketClient stalled_control(daemon->socket());
  stalled_control.send(socket_request("attach", R"("run_id":")" + stalled + R"(","from_seq":1)"));
  ASSERT_TRUE(stalled_control.wait_for([](const EventLine& e) { return e.str("code") == "RUN_STALLED"; }, 60s));

  CliProcess ls({metaharness_binary().string(), "ls", "--human", "--socket", daemon->socket().string()});
  ls.close_stdin();
  const std::string table = ls.read_out(60s);
  EXPECT_EQ(ls.finish(60s), 0) << ls.stderr_text();
  auto row = [&](const std::string& id) {
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(id, 0) == 0) return line;
    return std::string();
  };
  EXPECT_NE(table.substr(0, table.find('\n')).find("PROGRESS"), std::string::npos) << table;
  EXPECT_TRUE(std::regex_search(row(waiting), std::regex(R"( waiting \d+[smh] )"))) << table;
  EXPECT_TRUE(std::regex_search(row(stalled), std::regex(R"( stalled \d+[smh] )"))) << table;
  ASSERT_FALSE(row(done).empty()) << table;
  EXPECT_EQ(row(done).find("waiting"), std::string::npos) << table;
  EXPECT_EQ(row(done).find("stalled"), std::string::npos) << table;

  for (auto* control : {&waiting_control, &stalled_control}) {
    control->send(R"({"format":"metaharness.command/1","id":"h","command":"halt"})");
    EXPECT_TRUE(control->wait_reply("end", 60s));
  }
}

// The spec's fields are refused by name; what a spec leaves unset is the daemon's [runs] default,
// shown in `get`'s spec.
TEST_F(DaemonStandin, StallFieldsOfASpecAreRefusedByNameAndUnsetOnesAreTheDaemonsDefaults) {
  SocketClient c(daemon->socket());
  for (auto [fields, named] :
       std::vector<std::pair<std::string, std::string>>{{R"("stall_after_ms":-1)", "stall_after_ms"},
                                                        {R"("stall_after_ms":"10s")", "stall_after_ms"},
                                                        {R"("stall_after_ms":2592000001)", "stall_after_ms"},
                                                        {R"("on_stall":"kill")", "on_stall"},
                                                        {R"("on_stall":3)", "on_stall"}}) {
    auto reply = c.request(socket_request("submit", standin_run("bash_marker.json", fields)));
    ASSERT_TRUE(reply) << fields;
    EXPECT_EQ(reply->str("reply"), "refused") << reply->raw;
    EXPECT_EQ(reply->str("code"), "MALFORMED") << reply->raw;
    EXPECT_NE(reply->str("reason").find(named), std::string::npos) << reply->raw;
  }
  const std::string id = submit(standin_run("bash_marker.json", R"("decisions":"observe")"));
  follow(id);
  auto got = c.request(socket_request("get", R"("run_id":")" + id + "\""));
  ASSERT_TRUE(got && got->object.at("spec").is_object()) << (got ? got->raw : "no reply");
  const auto& spec = got->object.at("spec").as_object();
  EXPECT_EQ(spec.at("stall_after_ms").to_number<std::uint64_t>(), 600'000u) << got->raw;
  EXPECT_EQ(spec.at("on_stall").as_string(), "warn") << got->raw;
  // The command line: a duration needs its unit.
  CliProcess submit_cli({metaharness_binary().string(), "submit", "--socket", daemon->socket().string(), "claude", "-p",
                         "go", "--stall-after", "600"});
  EXPECT_EQ(submit_cli.finish(60s), 2) << submit_cli.stderr_text();
  EXPECT_NE(submit_cli.stderr_text().find("--stall-after"), std::string::npos) << submit_cli.stderr_text();
}

}  // namespace
}  // namespace mh::test
