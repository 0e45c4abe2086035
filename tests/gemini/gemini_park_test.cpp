// Can Gemini CLI park (issue 27 §5; docs/policies.md "Who can park")? Parking needs a call still
// awaiting its decision to be handed to a later process of the same session, which then asks for
// it again and takes the decision. Asked of the REAL `gemini --acp` (0.61.0, .vendor) against the
// scripted endpoint's Gemini wire over ACP with nothing in between: the adapter's own launch
// (adapters/gemini/gemini_plan.cpp: its settings, its admin policy making every tool ask, its
// arguments and environment), a prompt whose model asks for `touch marker.txt`, the
// `session/request_permission` left unanswered, the process ended, then a second process on the
// same GEMINI_CLI_HOME taking the session up the one way its agent capabilities offer
// (`loadSession`: session/load; it offers no `sessionCapabilities.resume`) and prompting.
//
// What 0.61.0 does: the permission is never asked again, and the call is not carried over at all.
// Gemini CLI records a model turn's function calls in its session file only with their results, so
// a call still awaiting its permission is in no record: ended by stdin EOF (as a parking run ends
// it) the process exits 0 with the prompt unanswered and says nothing more of the call; killed
// outright, the same. session/load then replays the user's messages and nothing of the call, and
// the next prompt's model request carries neither the call nor a result for it: the model's turn
// that asked for it is gone from the history. The command never runs. So nothing is left to resume
// a decision into, and the capability table's refusal of park_after_ms stands. These tests fail
// when a later pin asks the pending permission again after a load (or carries the call over in
// any form): the moment to revisit the refusal.
//
// Taken up at once, not minutes later as a parked run would be: within the minute a session began,
// Gemini CLI 0.61.0 cannot load it at all (the loading process's own recording overwrites the
// session's file, as_if_begun_earlier says how), so the test names the file as an earlier minute
// would have. A kill is of every process carrying the first process's marker.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "adapters/gemini/gemini_adapter.hpp"
#include "adapters/gemini/gemini_plan.hpp"
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
constexpr const char* kModelCall = "toolu_marker";  // tests/scenarios/gemini/marker.json's call
// Gemini CLI's ACP names the call "<tool>__<the model's id>".
constexpr const char* kCall = "run_shell_command__toolu_marker";
constexpr std::string_view kPermission = "session/request_permission";

enum class End { stdin_closed, killed };

class GeminiPark : public ::testing::Test {
 protected:
  GeminiPark() : endpoint(scenario_from(read_file(fs::path(MH_SOURCE_DIR) / "tests/scenarios/gemini/marker.json"))) {
    for (const char* sub : {"home/.gemini", "work", "tmp", "own", "first", "second"})
      fs::create_directories(dir / sub);
    std::ofstream(dir / "home/.gemini/settings.json") << adapters::gemini::settings_json();
    std::ofstream(dir / "own/admin-policy.toml") << adapters::gemini::admin_policy_toml();
  }

  // `gemini --acp` with the arguments and environment the adapter's plan gives it
  // (adapters/gemini/gemini_plan.cpp): GEMINI_CLI_HOME is the home, as the plan's scratch has it.
  std::unique_ptr<LiveProcess> agent(std::string_view output) {
    std::string base = endpoint.base_url();
    while (!base.empty() && base.back() == '/')
      base.pop_back();
    const std::string model(adapters::gemini::kDefaultModel);
    ProcessSpec spec;
    spec.executable = adapters::gemini::descriptor().default_binary(fs::path(MH_SOURCE_DIR) / ".vendor");
    spec.args = {"--acp",
                 "--model",
                 model,
                 "--approval-mode",
                 "default",
                 "--extensions",
                 "none",
                 "--admin-policy",
                 (dir / "own/admin-policy.toml").string()};
    spec.environment = {"HOME=" + (dir / "home").string(),
                        "GEMINI_CLI_HOME=" + (dir / "home").string(),
                        "PATH=/usr/local/bin:/usr/bin:/bin",
                        "TMPDIR=" + (dir / "tmp").string(),
                        "GEMINI_API_KEY=" + endpoint.token(),
                        "GOOGLE_GEMINI_BASE_URL=" + base,
                        "GEMINI_CLI_NO_RELAUNCH=true",
                        "GEMINI_CLI_SYSTEM_SETTINGS_PATH=" + (dir / "own/no-system-settings.json").string(),
                        "GEMINI_CLI_SYSTEM_DEFAULTS_PATH=" + (dir / "own/no-system-defaults.json").string(),
                        "GEMINI_CLI_TRUSTED_FOLDERS_PATH=" + (dir / "own/no-trusted-folders.json").string(),
                        "GEMINI_TELEMETRY_ENABLED=false",
                        "GEMINI_MODEL=" + model};
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

  // A parked run is taken up minutes after it parked; the test takes it up at once. Gemini CLI
  // (0.61.0) names a session's file by the minute the session began and its id's first 8
  // characters, and a process loading the session starts a recording of its own first, under the
  // name of ITS minute: within the minute the session began that is the session's own file, whose
  // history the new recording's start overwrites (session/load then fails "No previous sessions
  // found for this project."). So the file is renamed as an earlier minute would have named it,
  // as a later take-up would find it; its content is untouched.
  void as_if_begun_earlier() {
    const std::string tail = "-" + session_id.substr(0, 8) + ".jsonl";
    std::vector<fs::path> files;
    for (const auto& e : fs::recursive_directory_iterator(dir / "home/.gemini/tmp"))
      if (const std::string name = e.path().filename().string(); name.starts_with("session-") && name.ends_with(tail))
        files.push_back(e.path());
    ASSERT_EQ(files.size(), 1u) << "the session's file, under " << (dir / "home/.gemini/tmp");
    fs::rename(files[0], files[0].parent_path() / ("session-1970-01-01T00-00" + tail));
  }

  // initialize, as the adapter sends it (adapters/acp/acp_wire.cpp); its agentCapabilities.
  static json::object handshake(RpcPeer& peer) { return acp_initialize(peer, kBound); }

  json::object prompt(const std::string& text) const { return acp_prompt(session_id, text); }

  // The parts of the model requests that name the call (its functionCall, or a functionResponse for
  // it), as JSON text, in order.
  std::vector<std::string> call_parts_sent_to_the_model() const {
    std::vector<std::string> out;
    for (const auto& r : endpoint.requests())
      for (const json::value* c : contents_of(r))
        for (const auto& part : c->at("parts").as_array())
          for (const char* kind : {"functionCall", "functionResponse"})
            if (const json::value* p = part.is_object() ? part.as_object().if_contains(kind) : nullptr;
                p && p->is_object() && p->as_object().contains("id") && p->at("id") == kModelCall)
              out.push_back(json::serialize(part));
    return out;
  }

  // A request's contents that have parts.
  static std::vector<const json::value*> contents_of(const ServedRequest& r) {
    std::vector<const json::value*> out;
    const json::value* contents = r.body.is_object() ? r.body.as_object().if_contains("contents") : nullptr;
    if (!contents || !contents->is_array()) return out;
    for (const auto& c : contents->as_array())
      if (const json::value* parts = c.is_object() ? c.as_object().if_contains("parts") : nullptr;
          parts && parts->is_array())
        out.push_back(&c);
    return out;
  }

  // The session/updates a process sent that name the call.
  static std::vector<json::object> updates_of_the_call(const RpcPeer& peer) {
    std::vector<json::object> out;
    for (const auto& u : peer.read("session/update")) {
      const json::object& update = u.at("params").at("update").as_object();
      if (update.contains("toolCallId") && update.at("toolCallId") == kCall) out.push_back(update);
    }
    return out;
  }

  // What both ways of ending show: nothing of the call survives into the second process.
  void expect_the_call_forgotten() const {
    EXPECT_FALSE(first_prompt_answered) << "Gemini CLI 0.61.0 ends with its prompt unanswered: " << first_transcript;
    EXPECT_TRUE(replayed.empty()) << "session/load replays nothing of the call\n" << second_transcript;
    EXPECT_TRUE(call_parts_sent_to_the_model().empty()) << "no request carries the call or a result for it";
    auto requests = endpoint.requests();
    ASSERT_EQ(requests.size(), 2u) << "one request per prompt";
    for (const json::value* c : contents_of(requests[1]))
      EXPECT_NE(c->as_object().if_contains("role") ? c->at("role") : json::value("user"), "model")
          << "the model's turn that asked for the call is gone from the history: " << json::serialize(*c);
  }

  void park_and_load(End how) {
    // --- the first process: a prompt waiting on its permission ----------------------------
    auto first = agent("first");
    RpcPeer a(*first, true);
    json::object caps = handshake(a);
    ASSERT_FALSE(caps.empty());
    // The one way it offers to take a session up in another process.
    EXPECT_EQ(caps.at("loadSession"), true) << a.transcript();
    EXPECT_FALSE(caps.contains("sessionCapabilities")) << a.transcript();
    auto new_id = a.request("session/new", {{"cwd", (dir / "work").string()}, {"mcpServers", json::array{}}});
    auto created = a.answer_to(new_id, kBound);
    ASSERT_TRUE(created && created->contains("result")) << a.transcript();
    session_id = text_of(created->at("result").at("sessionId"));
    const auto first_prompt = a.request("session/prompt", prompt("make the marker"));
    auto asked = a.message(kPermission, kBound);
    ASSERT_TRUE(asked) << "the first process never asked the permission\n" << a.transcript();
    EXPECT_EQ(asked->at("params").at("toolCall").at("toolCallId"), kCall) << a.transcript();
    if (how == End::stdin_closed)
      first->close_stdin();
    else
      kill_all("first");
    EXPECT_TRUE(a.read_to_end(kBound)) << a.transcript();
    auto status = first->wait(kBound);
    ASSERT_TRUE(status) << "the first gemini did not exit";
    first_status = *status;
    first_transcript = a.transcript();
    EXPECT_EQ(a.read(kPermission).size(), 1u) << a.transcript();
    for (const auto& line : a.read())
      if (!line.contains("method") && line.contains("id") && line.at("id") == first_prompt)
        first_prompt_answered = true;

    ASSERT_NO_FATAL_FAILURE(as_if_begun_earlier());

    // --- the second process: the same home, the session loaded -------------------------------
    auto second = agent("second");
    RpcPeer b(*second, true);
    ASSERT_FALSE(handshake(b).empty());
    auto up_id = b.request(
        "session/load", {{"sessionId", session_id}, {"cwd", (dir / "work").string()}, {"mcpServers", json::array{}}});
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
    ASSERT_TRUE(b.read(kPermission).empty()) << "the second process asked the pending permission again: Gemini CLI "
                                                "may now carry a pending call over, so parking could be honoured "
                                                "(revisit the capability table's refusal)\n"
                                             << b.transcript();
    ASSERT_TRUE(answered && answered->contains("result")) << b.transcript();
    EXPECT_EQ(answered->at("result").at("stopReason"), "end_turn") << b.transcript();
    EXPECT_FALSE(fs::exists(dir / "work/marker.txt")) << "the call was never decided, so it must not have run";
    EXPECT_FALSE(adapters::gemini::capabilities().parking.honoured)
        << "Gemini CLI 0.61.0 cannot carry a pending permission over: the adapter must refuse park_after_ms";

    second->close_stdin();
    EXPECT_TRUE(b.read_to_end(kBound)) << b.transcript();
    auto second_status = second->wait(kBound);
    ASSERT_TRUE(second_status) << "the second gemini did not exit";
    EXPECT_EQ(*second_status, 0) << second->stderr_text();
    // Everything the second process wrote, to its end: nothing asked, and what it replayed.
    EXPECT_TRUE(b.read(kPermission).empty()) << b.transcript();
    replayed = updates_of_the_call(b);
    second_transcript = b.transcript();
  }

  TempDir dir{"gemini-park"};
  RunningEndpoint endpoint;
  std::string session_id;
  int first_status = -1;
  bool first_prompt_answered = false;
  std::vector<json::object> replayed;  // the second process's updates naming the call
  std::string first_transcript, second_transcript;
};

// Ended as a parking run ends it (stdin closed), loaded: the call is in no record.
TEST_F(GeminiPark, ASessionLoadedInANewProcessDoesNotAskThePendingPermissionAgain) {
  ASSERT_NO_FATAL_FAILURE(park_and_load(End::stdin_closed));
  EXPECT_EQ(first_status, 0) << "stdin EOF ends Gemini CLI's ACP connection, and the process with it";
  ASSERT_NO_FATAL_FAILURE(expect_the_call_forgotten());
}

// Killed outright, so the process closes nothing: the same, the call is in no record either.
TEST_F(GeminiPark, ASessionWhoseProcessWasKilledDoesNotAskThePendingPermissionAgainEither) {
  ASSERT_NO_FATAL_FAILURE(park_and_load(End::killed));
  ASSERT_NO_FATAL_FAILURE(expect_the_call_forgotten());
}

}  // namespace
}  // namespace mh::model::testing
