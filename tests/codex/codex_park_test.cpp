// Can Codex park (issue 27 §5; docs/policies.md "Who can park")? Parking needs a call still
// awaiting its decision to be handed to a later process of the same session, which then asks for
// it again and takes the decision. Asked of the REAL `codex app-server` (0.171.0, .vendor) against
// the scripted endpoint, speaking its own wire with nothing in between: a thread started as the
// adapter starts one (approval policy untrusted, sandbox workspace-write, per-thread hook trust
// bypassed, raw events on), a turn whose model asks for `touch marker.txt`, the approval request
// left unanswered, the process ended, then a second app-server on the same CODEX_HOME resuming the
// thread (`thread/resume`) and starting a turn.
//
// What 0.171.0 does: the ending process closes the pending call itself (the rollout gets the
// call's output "aborted by user", a `<turn_aborted>` message and `turn_aborted`); when the process
// is killed outright, the resuming process closes it instead ("aborted"). Either way the resumed
// thread shows the turn `interrupted` and idle, the approval is never asked again, the next turn's
// model request carries the call as aborted, and the command never runs. So nothing is left to
// resume a decision into, and the capability table's refusal of park_after_ms stands. These tests
// fail when a later pin carries the pending approval over (or stops closing the call): that is the
// moment to revisit the refusal.
//
// The config is the adapter's (adapters/codex/codex_plan.cpp) without its PreToolUse hook: the hook
// needs a run's hook channel, and the approval, not the hook, is what a parked call would wait on.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>
#include <sstream>

#include "adapters/codex/codex_adapter.hpp"
#include "tests/model/rpc_peer.hpp"
#include "tests/model/test_support.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

constexpr auto kBound = std::chrono::seconds(120);
constexpr const char* kCall = "call_marker";  // tests/scenarios/codex/marker.json's call
constexpr std::string_view kApproval = "item/commandExecution/requestApproval";

enum class End { stdin_closed, killed };

std::string text_of(const json::value& v) {
  return v.is_string() ? std::string(v.get_string()) : json::serialize(v);
}

std::vector<json::object> jsonl_objects(const fs::path& file) {
  std::vector<json::object> out;
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    boost::system::error_code ec;
    json::value v = json::parse(line, ec);
    if (!ec && v.is_object()) out.push_back(v.as_object());
  }
  return out;
}

class CodexPark : public ::testing::Test {
 protected:
  CodexPark() : endpoint(scenario_from(read_file(fs::path(MH_SOURCE_DIR) / "tests/scenarios/codex/marker.json"))) {
    for (const char* sub : {"home", "work", "tmp", "first", "second"})
      fs::create_directories(dir / sub);
    std::ofstream(dir / "home/config.toml") << "model = \"gpt-5.5\"\n"
                                            << "model_provider = \"metaharness\"\n"
                                            << "web_search = \"disabled\"\n"
                                            << "project_root_markers = []\n\n"
                                            << "[features]\n"
                                            << "unified_exec_tty = false\n\n"
                                            << "[model_providers.metaharness]\n"
                                            << "name = \"metaharness model endpoint\"\n"
                                            << "base_url = \"" << endpoint.openai_base_url() << "\"\n"
                                            << "wire_api = \"responses\"\n"
                                            << "env_key = \"METAHARNESS_MODEL_TOKEN\"\n"
                                            << "request_max_retries = 0\n"
                                            << "stream_max_retries = 0\n\n"
                                            << "[projects.\"" << (dir / "work").string() << "\"]\n"
                                            << "trust_level = \"untrusted\"\n";
  }

  std::unique_ptr<LiveProcess> app_server(std::string_view output) {
    ProcessSpec spec;
    spec.executable = adapters::codex::default_binary(fs::path(MH_SOURCE_DIR) / ".vendor");
    spec.args = {"app-server"};
    spec.environment = {"HOME=" + (dir / "home").string(), "CODEX_HOME=" + (dir / "home").string(),
                        "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + (dir / "tmp").string(),
                        "METAHARNESS_MODEL_TOKEN=" + endpoint.token()};
    spec.working_dir = dir / "work";
    spec.output_dir = dir / output;
    spec.pipe_stdin = true;
    return std::make_unique<LiveProcess>(spec);
  }

  // initialize, as the adapter sends it, then initialized.
  static void handshake(RpcPeer& peer) {
    auto id = peer.request("initialize",
                           {{"clientInfo", {{"name", "metaharness"}, {"title", "metaharness"}, {"version", "0"}}},
                            {"capabilities", {{"experimentalApi", true}}}});
    auto answer = peer.answer_to(id, kBound);
    ASSERT_TRUE(answer && answer->contains("result")) << peer.transcript();
    peer.notify("initialized");
  }

  // The model requests that carried the call's output, in order: what the model was told of it.
  std::vector<std::string> call_outputs_sent_to_the_model() const {
    std::vector<std::string> out;
    for (const auto& r : endpoint.requests()) {
      if (!r.body.is_object()) continue;
      const json::value* input = r.body.as_object().if_contains("input");
      if (!input || !input->is_array()) continue;
      for (const auto& item : input->as_array())
        if (item.is_object() && item.as_object().if_contains("type") && item.at("type") == "function_call_output" &&
            item.at("call_id") == kCall)
          out.push_back(text_of(item.at("output")));
    }
    return out;
  }

  // The whole scenario: a pending approval, the process ended as `how`, the thread resumed in a
  // new process and a turn started there; `thread_id` and `rollout` are left for the test's own checks.
  void park_and_resume(End how) {
    // --- the first process: a turn waiting on its approval ---------------------------------
    auto first = app_server("first");
    RpcPeer a(*first, false);
    ASSERT_NO_FATAL_FAILURE(handshake(a));
    auto start_id = a.request("thread/start", {{"cwd", (dir / "work").string()},
                                               {"approvalPolicy", "untrusted"},
                                               {"sandbox", "workspace-write"},
                                               {"config", {{"bypass_hook_trust", true}}},
                                               {"experimentalRawEvents", true}});
    auto started = a.answer_to(start_id, kBound);
    ASSERT_TRUE(started && started->contains("result")) << a.transcript();
    const json::object& thread = started->at("result").at("thread").as_object();
    thread_id = text_of(thread.at("id"));
    rollout = text_of(thread.at("path"));
    a.request("turn/start", {{"threadId", thread_id},
                             {"input", json::array{json::object{{"type", "text"}, {"text", "make the marker"}}}}});
    auto asked = a.message(kApproval, kBound);
    ASSERT_TRUE(asked) << "the first process never asked for the approval\n" << a.transcript();
    EXPECT_EQ(asked->at("params").at("itemId"), kCall) << a.transcript();
    EXPECT_TRUE(asked->contains("id")) << "a request awaiting its answer";
    // Unanswered, as a parking run leaves it; then the process goes.
    if (how == End::stdin_closed)
      first->close_stdin();  // what a parking run does
    else
      first->signal(SIGKILL);  // nothing of the process may tidy up
    EXPECT_TRUE(a.read_to_end(kBound)) << a.transcript();
    auto status = first->wait(kBound);
    ASSERT_TRUE(status) << "the first app-server did not exit";
    if (how == End::stdin_closed) {
      EXPECT_EQ(*status, 0) << first->stderr_text();
    }
    EXPECT_EQ(a.read(kApproval).size(), 1u) << a.transcript();

    // --- the second process: the same CODEX_HOME, the thread resumed ------------------------
    auto second = app_server("second");
    RpcPeer b(*second, false);
    ASSERT_NO_FATAL_FAILURE(handshake(b));
    auto resume_id = b.request("thread/resume", {{"threadId", thread_id}});
    auto resumed = b.answer_to(resume_id, kBound);
    ASSERT_TRUE(resumed && resumed->contains("result")) << b.transcript();
    const json::object& again = resumed->at("result").at("thread").as_object();
    EXPECT_EQ(again.at("status"), (json::object{{"type", "idle"}}))
        << "no turn is waiting on anything: " << b.transcript();
    const json::array& turns = again.at("turns").as_array();
    ASSERT_EQ(turns.size(), 1u) << b.transcript();
    EXPECT_EQ(turns[0].at("status"), "interrupted") << "the parked turn is over: " << b.transcript();

    // A new turn: the model is told the call was aborted, and ends its turn with "Done.".
    auto turn_id = b.request("turn/start", {{"threadId", thread_id},
                                            {"input", json::array{json::object{{"type", "text"}, {"text", "go on"}}}}});
    auto turn = b.answer_to(turn_id, kBound);
    ASSERT_TRUE(turn && turn->contains("result")) << b.transcript();
    auto completed = b.message("turn/completed", kBound);
    ASSERT_TRUE(completed) << b.transcript();
    EXPECT_EQ(completed->at("params").at("turn").at("status"), "completed") << b.transcript();

    // THE POINT: the pending approval was not asked again, neither on resume nor in the new turn.
    EXPECT_TRUE(b.read(kApproval).empty()) << "the resumed process asked the pending approval again: Codex may "
                                              "now carry a pending call over, so parking could be honoured (revisit "
                                              "the capability table's refusal)\n"
                                           << b.transcript();
    EXPECT_FALSE(fs::exists(dir / "work/marker.txt")) << "the call was never decided, so it must not have run";

    second->close_stdin();
    EXPECT_TRUE(b.read_to_end(kBound)) << b.transcript();
    auto second_status = second->wait(kBound);
    ASSERT_TRUE(second_status) << "the second app-server did not exit";
    EXPECT_EQ(*second_status, 0) << second->stderr_text();
  }

  TempDir dir{"codex-park"};
  RunningEndpoint endpoint;
  std::string thread_id;
  fs::path rollout;
};

// Ended as a parking run ends it (stdin closed): Codex closes the pending call itself, "aborted by
// user", and records the turn aborted before it exits.
TEST_F(CodexPark, AThreadResumedInANewProcessDoesNotAskThePendingApprovalAgain) {
  ASSERT_NO_FATAL_FAILURE(park_and_resume(End::stdin_closed));

  bool aborted = false, closed_by_first = false;
  for (const auto& record : jsonl_objects(rollout)) {
    const json::value* payload = record.if_contains("payload");
    if (!payload || !payload->is_object() || !payload->as_object().contains("type")) continue;
    if (record.at("type") == "event_msg" && payload->at("type") == "turn_aborted") aborted = true;
    if (record.at("type") == "response_item" && payload->at("type") == "function_call_output" &&
        payload->at("call_id") == kCall && !aborted)
      closed_by_first = text_of(payload->at("output")).find("aborted by user") != std::string::npos;
  }
  EXPECT_TRUE(closed_by_first) << "the ending process closed the pending call (rollout " << rollout << ")";
  EXPECT_TRUE(aborted) << "the ending process recorded the turn aborted (rollout " << rollout << ")";

  auto outputs = call_outputs_sent_to_the_model();
  ASSERT_EQ(outputs.size(), 1u) << "only the resumed turn's request carries the call";
  EXPECT_NE(outputs[0].find("aborted by user"), std::string::npos) << outputs[0];

  EXPECT_FALSE(adapters::codex::capabilities().parking.honoured)
      << "Codex 0.171.0 cannot carry a pending approval over: the adapter must refuse park_after_ms";
}

// Killed outright, so the process cannot close anything: the resuming process closes the call
// ("aborted") instead of asking it again.
TEST_F(CodexPark, AThreadWhoseProcessWasKilledDoesNotAskThePendingApprovalAgainEither) {
  ASSERT_NO_FATAL_FAILURE(park_and_resume(End::killed));

  auto outputs = call_outputs_sent_to_the_model();
  ASSERT_EQ(outputs.size(), 1u) << "only the resumed turn's request carries the call";
  EXPECT_NE(outputs[0].find("aborted"), std::string::npos) << outputs[0];

  EXPECT_FALSE(adapters::codex::capabilities().parking.honoured);
}

}  // namespace
}  // namespace mh::model::testing
