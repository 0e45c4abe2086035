// Can Qwen Code park (issue 27 §5; docs/policies.md "Who can park")? Parking needs a call still
// awaiting its decision to be handed to a later process of the same session, which then asks for
// it again and takes the decision. Asked of the REAL `qwen --acp` (0.24.4, .vendor) against the
// scripted endpoint's Anthropic wire over ACP with nothing in between: the adapter's own launch
// (adapters/qwen/qwen_plan.cpp: its settings, permissions.ask naming every tool, its arguments and
// environment), a prompt whose model asks for `touch marker.txt`, the `session/request_permission`
// left unanswered, the process ended, then a second process on the same QWEN_HOME taking the
// session up again by each way its agent capabilities offer (`loadSession`: session/load;
// `sessionCapabilities.resume`: session/resume) and prompting.
//
// What 0.24.4 does: the permission is never asked again. Ended by stdin EOF (as a parking run ends
// it), the process cancels the call itself before it exits 0: "Tool call was cancelled before
// execution." (tool_call_update failed), the prompt answered `cancelled`; session/load replays the
// call in_progress then failed so, and the next prompt's model request carries it as that error
// tool_result. Killed outright, nothing closes the call, yet nothing asks for it either: session/load
// replays it failed ("Tool result missing from saved history; ..."), and the next request carries
// "Tool execution result was not recorded — likely interrupted by ... process exit. ...".
// session/resume replays nothing, and the model is told the same as after a load. The command
// never runs. So nothing is left to
// resume a decision into, and the capability table's refusal of park_after_ms stands. These tests
// fail when a later pin asks the pending permission again after a load or resume: the moment to
// revisit the refusal.
//
// `qwen` is two processes: cli-entry.js relaunches cli.js with --expose-gc as its child (0.24.4
// does so whatever QWEN_CODE_NO_RELAUNCH says) and waits on it. Killed outright means both: every
// process carrying the first process's marker, so no child outlives its parent holding the pipes.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "adapters/qwen/qwen_adapter.hpp"
#include "adapters/qwen/qwen_plan.hpp"
#include "adapters/vendor_descriptor.hpp"
#include "testkit/proc.hpp"
#include "tests/model/acp_probe.hpp"
#include "tests/model/rpc_peer.hpp"
#include "tests/model/test_support.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

constexpr auto kBound = std::chrono::seconds(120);
constexpr const char* kCall = "toolu_marker";  // tests/scenarios/qwen/marker.json's call
constexpr std::string_view kPermission = "session/request_permission";

enum class End { stdin_closed, killed };
enum class TakeUp { load, resume };

struct Update {
  std::string status;
  std::string text;  // its content's text
};

class QwenPark : public ::testing::Test {
 protected:
  QwenPark() : endpoint(scenario_from(read_file(fs::path(MH_SOURCE_DIR) / "tests/scenarios/qwen/marker.json"))) {
    for (const char* sub : {"home/.qwen", "work", "tmp", "own", "first", "second"})
      fs::create_directories(dir / sub);
    std::ofstream(dir / "home/.qwen/settings.json") << adapters::qwen::settings_json(adapters::qwen::kDefaultModel);
  }

  // `qwen --acp` with the arguments and environment the adapter's plan gives it
  // (adapters/qwen/qwen_plan.cpp): QWEN_HOME is the plan's home/.qwen.
  std::unique_ptr<LiveProcess> agent(std::string_view output) {
    std::string base = endpoint.base_url();
    while (!base.empty() && base.back() == '/')
      base.pop_back();
    const std::string model(adapters::qwen::kDefaultModel);
    ProcessSpec spec;
    spec.executable = adapters::qwen::descriptor().default_binary(fs::path(MH_SOURCE_DIR) / ".vendor");
    spec.args = {"--acp", "--auth-type", "anthropic", "--approval-mode", "default", "--model", model};
    spec.environment = {"HOME=" + (dir / "home").string(),
                        "QWEN_HOME=" + (dir / "home/.qwen").string(),
                        "PATH=/usr/local/bin:/usr/bin:/bin",
                        "TMPDIR=" + (dir / "tmp").string(),
                        "ANTHROPIC_API_KEY=" + endpoint.token(),
                        "ANTHROPIC_BASE_URL=" + base,
                        "ANTHROPIC_MODEL=" + model,
                        "QWEN_CODE_NO_RELAUNCH=true",
                        "QWEN_CODE_SYSTEM_SETTINGS_PATH=" + (dir / "own/no-system-settings.json").string(),
                        "QWEN_CODE_SYSTEM_DEFAULTS_PATH=" + (dir / "own/no-system-defaults.json").string(),
                        "QWEN_CODE_TRUSTED_FOLDERS_PATH=" + (dir / "own/no-trusted-folders.json").string()};
    // The run marker the plan gives every vendor process (adapters/plan_common.cpp), here one per
    // process of the test, so that a kill finds the process's children too.
    spec.environment.push_back(marker(output));
    spec.working_dir = dir / "work";
    spec.output_dir = dir / output;
    spec.pipe_stdin = true;
    return std::make_unique<LiveProcess>(spec);
  }

  std::string marker(std::string_view output) const {
    return "METAHARNESS_RUN=" + dir.path().filename().string() + "-" + std::string(output);
  }

  // Killed outright: every process of it, children included (nothing of it may tidy up).
  void kill_all(std::string_view output) const {
    auto pids = testkit::processes_with_environment(marker(output));
    EXPECT_FALSE(pids.empty()) << "no process of " << output << " to kill";
    for (pid_t pid : pids)
      ::kill(pid, SIGKILL);
  }

  // initialize, as the adapter sends it (adapters/acp/acp_wire.cpp); its agentCapabilities.
  static json::object handshake(RpcPeer& peer) { return acp_initialize(peer, kBound); }

  json::object prompt(const std::string& text) const { return acp_prompt(session_id, text); }

  // The tool_results for the call the model was sent, in order.
  std::vector<ToolResult> results_sent_to_the_model() const { return tool_results_sent(endpoint, kCall); }

  // The call's updates a process sent (session/update tool_call / tool_call_update), in order.
  static std::vector<Update> updates_of_the_call(const RpcPeer& peer) {
    std::vector<Update> out;
    for (const auto& u : peer.read("session/update")) {
      const json::object& update = u.at("params").at("update").as_object();
      if (!update.contains("toolCallId") || update.at("toolCallId") != kCall || !update.contains("status")) continue;
      Update got{text_of(update.at("status")), ""};
      if (const json::value* content = update.if_contains("content"); content && content->is_array())
        for (const auto& c : content->as_array())
          if (const json::value* inner = c.is_object() ? c.as_object().if_contains("content") : nullptr;
              inner && inner->is_object() && inner->as_object().contains("text"))
            got.text += text_of(inner->at("text"));
      out.push_back(std::move(got));
    }
    return out;
  }

  // The whole scenario: a pending permission, the process ended as `how`, the session taken up in
  // a new process by `take_up` and prompted there. What each process said of the call is left in
  // `closed` (the first) and `replayed` (the second).
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
    const auto first_prompt = a.request("session/prompt", prompt("make the marker"));
    auto asked = a.message(kPermission, kBound);
    ASSERT_TRUE(asked) << "the first process never asked the permission\n" << a.transcript();
    EXPECT_EQ(asked->at("params").at("toolCall").at("toolCallId"), kCall) << a.transcript();
    const std::size_t before_the_end = updates_of_the_call(a).size();
    // Unanswered, as a parking run leaves it; then the process goes.
    if (how == End::stdin_closed)
      first->close_stdin();
    else
      kill_all("first");
    EXPECT_TRUE(a.read_to_end(kBound)) << a.transcript();
    auto status = first->wait(kBound);
    ASSERT_TRUE(status) << "the first qwen did not exit";
    if (how == End::stdin_closed) {
      EXPECT_EQ(*status, 0) << first->stderr_text();
    }
    EXPECT_EQ(a.read(kPermission).size(), 1u) << a.transcript();
    auto said = updates_of_the_call(a);
    closed.assign(said.begin() + static_cast<std::ptrdiff_t>(before_the_end), said.end());
    for (const auto& line : a.read())
      if (!line.contains("method") && line.contains("id") && line.at("id") == first_prompt)
        first_stop = line.contains("result") ? text_of(line.at("result").at("stopReason")) : json::serialize(line);
    first_transcript = a.transcript();

    // --- the second process: the same QWEN_HOME, the session taken up -------------------------
    auto second = agent("second");
    RpcPeer b(*second, true);
    ASSERT_FALSE(handshake(b).empty());
    auto up_id =
        b.request(take_up == TakeUp::load ? "session/load" : "session/resume",
                  {{"sessionId", session_id}, {"cwd", (dir / "work").string()}, {"mcpServers", json::array{}}});
    auto up = b.answer_to(up_id, kBound);
    ASSERT_TRUE(up && up->contains("result")) << b.transcript();

    auto prompt_id = b.request("session/prompt", prompt("go on"));
    // Its answer, or the permission asked again (which would hold the prompt until answered).
    auto answered = b.read_until(
        [prompt_id](const json::object& o) {
          return RpcPeer::is(o, kPermission) || (!o.contains("method") && o.contains("id") && o.at("id") == prompt_id);
        },
        kBound);
    // THE POINT: the pending permission was not asked again, neither on taking the session up nor
    // in the next prompt.
    ASSERT_TRUE(b.read(kPermission).empty()) << "the second process asked the pending permission again: Qwen Code "
                                                "may now carry a pending call over, so parking could be honoured "
                                                "(revisit the capability table's refusal)\n"
                                             << b.transcript();
    ASSERT_TRUE(answered && answered->contains("result")) << b.transcript();
    EXPECT_EQ(answered->at("result").at("stopReason"), "end_turn") << b.transcript();
    EXPECT_FALSE(fs::exists(dir / "work/marker.txt")) << "the call was never decided, so it must not have run";
    EXPECT_FALSE(adapters::qwen::capabilities().parking.honoured)
        << "Qwen Code 0.24.4 cannot carry a pending permission over: the adapter must refuse park_after_ms";

    second->close_stdin();
    EXPECT_TRUE(b.read_to_end(kBound)) << b.transcript();
    auto second_status = second->wait(kBound);
    ASSERT_TRUE(second_status) << "the second qwen did not exit";
    EXPECT_EQ(*second_status, 0) << second->stderr_text();
    // Everything the second process wrote, to its end: nothing asked, and what it replayed.
    EXPECT_TRUE(b.read(kPermission).empty()) << b.transcript();
    replayed = updates_of_the_call(b);
    second_transcript = b.transcript();
  }

  // The one tool_result the model was sent for the call: an error, in the second process's request.
  ToolResult the_result() const {
    auto results = results_sent_to_the_model();
    EXPECT_EQ(results.size(), 1u) << "only the second prompt's request carries the call";
    return results.empty() ? ToolResult{} : results[0];
  }

  TempDir dir{"qwen-park"};
  RunningEndpoint endpoint;
  std::string session_id;
  std::string first_stop;        // the first prompt's stopReason, when it was answered
  std::vector<Update> closed;    // what the first process said of the call once it was told to end
  std::vector<Update> replayed;  // what the second process said of the call
  std::string first_transcript, second_transcript;
};

constexpr std::string_view kCancelled = "Tool call was cancelled before execution.";

// Ended as a parking run ends it (stdin closed), loaded: the ending process cancelled the call, and
// the load replays it so.
TEST_F(QwenPark, ASessionLoadedInANewProcessDoesNotAskThePendingPermissionAgain) {
  ASSERT_NO_FATAL_FAILURE(park_and_take_up(End::stdin_closed, TakeUp::load));
  ASSERT_EQ(closed.size(), 1u) << first_transcript;
  EXPECT_EQ(closed[0].status, "failed");
  EXPECT_EQ(closed[0].text, kCancelled);
  EXPECT_EQ(first_stop, "cancelled") << first_transcript;
  ASSERT_EQ(replayed.size(), 2u) << second_transcript;
  EXPECT_EQ(replayed[0].status, "in_progress");
  EXPECT_EQ(replayed[1].status, "failed");
  EXPECT_EQ(replayed[1].text, kCancelled);
  ToolResult told = the_result();
  EXPECT_TRUE(told.is_error);
  EXPECT_EQ(told.content, kCancelled);
}

// The same, resumed (session/resume replays nothing): not asked either.
TEST_F(QwenPark, ASessionResumedInANewProcessDoesNotAskThePendingPermissionAgain) {
  ASSERT_NO_FATAL_FAILURE(park_and_take_up(End::stdin_closed, TakeUp::resume));
  ASSERT_EQ(closed.size(), 1u) << first_transcript;
  EXPECT_EQ(closed[0].text, kCancelled);
  EXPECT_TRUE(replayed.empty()) << "session/resume replays no history\n" << second_transcript;
  ToolResult told = the_result();
  EXPECT_TRUE(told.is_error);
  EXPECT_EQ(told.content, kCancelled);
}

// Killed outright, so the process closes nothing: the load finds the call without a result and
// replays it failed, yet the permission is not asked again, and the model is told the call's
// result was not recorded.
TEST_F(QwenPark, ASessionWhoseProcessWasKilledDoesNotAskThePendingPermissionAgainEither) {
  ASSERT_NO_FATAL_FAILURE(park_and_take_up(End::killed, TakeUp::load));
  EXPECT_TRUE(closed.empty()) << "a killed process says nothing more\n" << first_transcript;
  EXPECT_TRUE(first_stop.empty()) << first_transcript;
  ASSERT_EQ(replayed.size(), 2u) << second_transcript;
  EXPECT_EQ(replayed[0].status, "in_progress");
  EXPECT_EQ(replayed[1].status, "failed");
  EXPECT_NE(replayed[1].text.find("Tool result missing from saved history"), std::string::npos) << replayed[1].text;
  ToolResult told = the_result();
  EXPECT_TRUE(told.is_error);
  EXPECT_NE(told.content.find("was not recorded"), std::string::npos) << told.content;
}

// Killed, then resumed: nothing replayed, nothing asked, the model told the same.
TEST_F(QwenPark, ASessionResumedAfterItsProcessWasKilledDoesNotAskThePendingPermissionAgainEither) {
  ASSERT_NO_FATAL_FAILURE(park_and_take_up(End::killed, TakeUp::resume));
  EXPECT_TRUE(closed.empty()) << first_transcript;
  EXPECT_TRUE(replayed.empty()) << "session/resume replays no history\n" << second_transcript;
  ToolResult told = the_result();
  EXPECT_TRUE(told.is_error);
  EXPECT_NE(told.content.find("was not recorded"), std::string::npos) << told.content;
}

}  // namespace
}  // namespace mh::model::testing
