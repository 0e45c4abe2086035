// Can opencode park (issue 27 §5; docs/policies.md "Who can park")? Parking needs a call still
// awaiting its decision to be handed to a later process of the same session, which then asks for
// it again and takes the decision. Asked of the REAL `opencode acp` (1.18.33, .vendor) against the
// scripted endpoint over ACP with nothing in between: the adapter's own generated config
// ("permission": "ask" for every tool), a prompt whose model asks for `touch marker.txt`, the
// `session/request_permission` left unanswered, the process ended, then a second process on the
// same data directory taking the session up again by each way its agent capabilities offer
// (`loadSession`: session/load; `sessionCapabilities.resume`: session/resume) and prompting.
//
// What 1.18.33 does: the permission is never asked again. Ended by stdin EOF, the process marks
// the call failed ("Tool execution aborted", metadata interrupted) before it exits; session/load
// replays it so, and the next prompt's model request carries it as an error tool_result. Killed
// outright, the call is replayed still `in_progress`, yet nothing asks for it: the next request
// carries "[Tool execution was interrupted]". The command never runs. So nothing is left to resume
// a decision into, and the capability table's refusal of park_after_ms stands. These tests fail
// when a later pin asks the pending permission again after a load or resume: the moment to revisit
// the refusal.
//
// The seam plugin (tool.execute.before, asking the run over its hook channel) is left out: it
// needs a run's hook channel, and the ACP permission is what a parked call would wait on.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/opencode/opencode_plan.hpp"
#include "tests/model/acp_probe.hpp"
#include "tests/model/rpc_peer.hpp"
#include "tests/model/test_support.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

constexpr auto kBound = std::chrono::seconds(120);
constexpr const char* kCall = "toolu_marker";  // tests/scenarios/opencode/marker.json's call
constexpr std::string_view kPermission = "session/request_permission";

enum class End { stdin_closed, killed };
enum class TakeUp { load, resume };

class OpencodePark : public ::testing::Test {
 protected:
  OpencodePark()
      : endpoint(scenario_from(read_file(fs::path(MH_SOURCE_DIR) / "tests/scenarios/opencode/marker.json"))) {
    for (const char* sub : {"home", "work", "tmp", "config", "data", "cache", "state", "oc", "first", "second"})
      fs::create_directories(dir / sub);
    std::ofstream(dir / "oc/opencode.json") << adapters::opencode::config_json(
        adapters::ModelEndpoint{endpoint.base_url(), endpoint.token()}, adapters::opencode::kDefaultModel, true);
  }

  // `opencode acp` with the environment the adapter's plan gives it (adapters/opencode/opencode_plan.cpp).
  std::unique_ptr<LiveProcess> agent(std::string_view output) {
    ProcessSpec spec;
    spec.executable = adapters::opencode::default_binary(fs::path(MH_SOURCE_DIR) / ".vendor");
    spec.args = {"acp", "--cwd", (dir / "work").string()};
    spec.environment = {"HOME=" + (dir / "home").string(),
                        "PATH=/usr/local/bin:/usr/bin:/bin",
                        "TMPDIR=" + (dir / "tmp").string(),
                        "XDG_CONFIG_HOME=" + (dir / "config").string(),
                        "XDG_DATA_HOME=" + (dir / "data").string(),
                        "XDG_CACHE_HOME=" + (dir / "cache").string(),
                        "XDG_STATE_HOME=" + (dir / "state").string(),
                        "OPENCODE_CONFIG=" + (dir / "oc/opencode.json").string(),
                        "OPENCODE_DISABLE_AUTOUPDATE=1",
                        "OPENCODE_DISABLE_MODELS_FETCH=1",
                        "OPENCODE_DISABLE_PROJECT_CONFIG=1",
                        "OPENCODE_DISABLE_CLAUDE_CODE=1",
                        "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
                        "OPENCODE_DISABLE_EXTERNAL_SKILLS=1",
                        "OPENCODE_DISABLE_LSP_DOWNLOAD=1",
                        "OPENCODE_DISABLE_SHARE=1",
                        "npm_config_registry=" + std::string(adapters::opencode::kDeadRegistry)};
    spec.working_dir = dir / "work";
    spec.output_dir = dir / output;
    spec.pipe_stdin = true;
    return std::make_unique<LiveProcess>(spec);
  }

  // initialize, as the adapter sends it (adapters/acp/acp_wire.cpp); its agentCapabilities.
  static json::object handshake(RpcPeer& peer) { return acp_initialize(peer, kBound); }

  json::object prompt(const std::string& text) const { return acp_prompt(session_id, text); }

  // The tool_results for the call the model was sent, in order.
  std::vector<ToolResult> results_sent_to_the_model() const { return tool_results_sent(endpoint, kCall); }

  // The statuses the call's replayed updates carry (session/update tool_call / tool_call_update), in order.
  static std::vector<std::string> replayed_statuses(const RpcPeer& peer) {
    std::vector<std::string> out;
    for (const auto& u : peer.read("session/update")) {
      const json::object& update = u.at("params").at("update").as_object();
      if (update.contains("toolCallId") && update.at("toolCallId") == kCall && update.contains("status"))
        out.push_back(text_of(update.at("status")));
    }
    return out;
  }

  // The whole scenario: a pending permission, the process ended as `how`, the session taken up in
  // a new process by `take_up` and prompted there. What the second process said is left in
  // `taken_up` (its replay, when it gives one).
  void park_and_take_up(End how, TakeUp take_up) {
    // --- the first process: a prompt waiting on its permission ----------------------------
    auto first = agent("first");
    RpcPeer a(*first, true);
    json::object caps = handshake(a);
    ASSERT_FALSE(caps.empty());
    // The ways it offers to take a session up in another process.
    EXPECT_EQ(caps.at("loadSession"), true) << a.transcript();
    EXPECT_TRUE(caps.at("sessionCapabilities").as_object().contains("resume")) << a.transcript();
    auto new_id = a.request("session/new", {{"cwd", (dir / "work").string()}, {"mcpServers", json::array{}}});
    auto created = a.answer_to(new_id, kBound);
    ASSERT_TRUE(created && created->contains("result")) << a.transcript();
    session_id = text_of(created->at("result").at("sessionId"));
    a.request("session/prompt", prompt("make the marker"));
    auto asked = a.message(kPermission, kBound);
    ASSERT_TRUE(asked) << "the first process never asked the permission\n" << a.transcript();
    EXPECT_EQ(asked->at("params").at("toolCall").at("toolCallId"), kCall) << a.transcript();
    // Unanswered, as a parking run leaves it; then the process goes.
    if (how == End::stdin_closed)
      first->close_stdin();
    else
      first->signal(SIGKILL);
    EXPECT_TRUE(a.read_to_end(kBound)) << a.transcript();
    auto status = first->wait(kBound);
    ASSERT_TRUE(status) << "the first opencode did not exit";
    if (how == End::stdin_closed) {
      EXPECT_EQ(*status, 0) << first->stderr_text();
    }
    EXPECT_EQ(a.read(kPermission).size(), 1u) << a.transcript();

    // --- the second process: the same data directory, the session taken up -------------------
    auto second = agent("second");
    RpcPeer b(*second, true);
    ASSERT_FALSE(handshake(b).empty());
    auto up_id =
        b.request(take_up == TakeUp::load ? "session/load" : "session/resume",
                  {{"sessionId", session_id}, {"cwd", (dir / "work").string()}, {"mcpServers", json::array{}}});
    auto up = b.answer_to(up_id, kBound);
    ASSERT_TRUE(up && up->contains("result")) << b.transcript();
    statuses = replayed_statuses(b);

    auto prompt_id = b.request("session/prompt", prompt("go on"));
    auto answered = b.answer_to(prompt_id, kBound);
    ASSERT_TRUE(answered && answered->contains("result")) << b.transcript();
    EXPECT_EQ(answered->at("result").at("stopReason"), "end_turn") << b.transcript();

    // THE POINT: the pending permission was not asked again, neither on taking the session up
    // nor in the next prompt.
    EXPECT_TRUE(b.read(kPermission).empty()) << "the second process asked the pending permission again: opencode may "
                                                "now carry a pending call over, so parking could be honoured (revisit "
                                                "the capability table's refusal)\n"
                                             << b.transcript();
    EXPECT_FALSE(fs::exists(dir / "work/marker.txt")) << "the call was never decided, so it must not have run";
    EXPECT_FALSE(adapters::opencode::capabilities().parking.honoured)
        << "opencode 1.18.33 cannot carry a pending permission over: the adapter must refuse park_after_ms";

    second->close_stdin();
    EXPECT_TRUE(b.read_to_end(kBound)) << b.transcript();
    auto second_status = second->wait(kBound);
    ASSERT_TRUE(second_status) << "the second opencode did not exit";
    EXPECT_EQ(*second_status, 0) << second->stderr_text();
  }

  TempDir dir{"opencode-park"};
  RunningEndpoint endpoint;
  std::string session_id;
  std::vector<std::string> statuses;  // the call's statuses as the second process replayed them
};

// Ended as a parking run ends it (stdin closed), loaded: the call is replayed failed, aborted.
TEST_F(OpencodePark, ASessionLoadedInANewProcessDoesNotAskThePendingPermissionAgain) {
  ASSERT_NO_FATAL_FAILURE(park_and_take_up(End::stdin_closed, TakeUp::load));
  ASSERT_FALSE(statuses.empty()) << "session/load replays the call";
  EXPECT_EQ(statuses.back(), "failed");
  auto results = results_sent_to_the_model();
  ASSERT_EQ(results.size(), 1u) << "only the second prompt's request carries the call";
  EXPECT_TRUE(results[0].is_error);
  EXPECT_EQ(results[0].content, "Tool execution aborted");
}

// The same, resumed (session/resume replays nothing): not asked either.
TEST_F(OpencodePark, ASessionResumedInANewProcessDoesNotAskThePendingPermissionAgain) {
  ASSERT_NO_FATAL_FAILURE(park_and_take_up(End::stdin_closed, TakeUp::resume));
  EXPECT_TRUE(statuses.empty()) << "session/resume replays no history";
  auto results = results_sent_to_the_model();
  ASSERT_EQ(results.size(), 1u) << "only the second prompt's request carries the call";
  EXPECT_TRUE(results[0].is_error);
  EXPECT_EQ(results[0].content, "Tool execution aborted");
}

// Killed outright, so the process closes nothing: the call is replayed as it was left, yet the
// permission is not asked again, and the model is told the call was interrupted.
TEST_F(OpencodePark, ASessionWhoseProcessWasKilledDoesNotAskThePendingPermissionAgainEither) {
  ASSERT_NO_FATAL_FAILURE(park_and_take_up(End::killed, TakeUp::load));
  ASSERT_FALSE(statuses.empty()) << "session/load replays the call";
  EXPECT_EQ(statuses.back(), "in_progress") << "left as it was when the process was killed";
  auto results = results_sent_to_the_model();
  ASSERT_EQ(results.size(), 1u) << "only the second prompt's request carries the call";
  EXPECT_TRUE(results[0].is_error);
  EXPECT_NE(results[0].content.find("interrupted"), std::string::npos) << results[0].content;
}

}  // namespace
}  // namespace mh::model::testing
