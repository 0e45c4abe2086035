// The stand-in alone, driven line by line on its stdin/stdout exactly as a supervisor drives the
// real CLI: each test pins one behaviour observed on Claude Code 2.1.197 (claude-code-wire.md,
// /tmp/probe/FINDINGS.md) so a daemon test that passes against the stand-in means something.
#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <thread>

#include "tests/standin/standin_identity.hpp"
#include "tests/standin/standin_support.hpp"

namespace mh::test {
namespace {

constexpr std::string_view kAllow =
    R"({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}})";

// What metaharness's launch plan passes (the stand-in ignores all but the wire flags).
std::vector<std::string> bidirectional_launch() {
  return {"-p", "--input-format",     "stream-json", "--output-format", "stream-json", "--verbose", "--setting-sources",
          "",   "--strict-mcp-config"};
}

// One stand-in process on the wire.
class Wire {
 public:
  Wire(const TempDir& dir, const std::string& script, std::vector<std::string> args = {},
       std::optional<std::filesystem::path> timing_file = std::nullopt)
      : script_path_(write_text(dir.path() / "script.json", script)) {
    std::vector<std::string> argv = {standin_binary().string()};
    if (args.empty()) args = bidirectional_launch();
    argv.insert(argv.end(), args.begin(), args.end());
    auto env = environment_with("MH_STANDIN_SCRIPT", script_path_.string());
    if (timing_file) env.push_back("MH_STANDIN_TIMING=" + timing_file->string());
    process = std::make_unique<CliProcess>(argv, env, dir.path());
  }

  void send(const std::string& line) { process->send(line); }
  void initialize(
      const std::string& hooks_json = R"({"PreToolUse":[{"matcher":"*","hookCallbackIds":["cb"],"timeout":60}]})") {
    send(R"({"type":"control_request","request_id":"init","request":{"subtype":"initialize","hooks":)" + hooks_json +
         "}}");
  }
  void user(const std::string& text = "go") {
    send(R"({"type":"user","session_id":"","message":{"role":"user","content":[{"type":"text","text":")" + text +
         R"("}]},"parent_tool_use_id":null})");
  }
  void control(const std::string& id, const std::string& request_json) {
    send(R"({"type":"control_request","request_id":")" + id + R"(","request":)" + request_json + "}");
  }
  void answer(const std::string& request_id, std::string_view response_json) {
    send(R"({"type":"control_response","response":{"subtype":"success","request_id":")" + request_id +
         R"(","response":)" + std::string(response_json) + "}}");
  }

  // The next record, or nullopt on EOF / after the timeout. Every record read is kept.
  std::optional<json::object> next(std::chrono::milliseconds timeout = 10s) {
    auto line = process->next_line(timeout);
    if (!line) return std::nullopt;
    auto v = protocol::parse_json(*line);
    if (!v || !v->is_object()) {
      ADD_FAILURE() << "the stand-in wrote a line that is not a JSON object: " << *line;
      return std::nullopt;
    }
    seen.push_back(v->get_object());
    return seen.back();
  }
  // Records up to and including the first that `match` accepts (empty if it never came).
  std::vector<json::object> until(const std::function<bool(const json::object&)>& match,
                                  std::chrono::milliseconds timeout = 10s) {
    std::vector<json::object> out;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      auto r = next(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()));
      if (!r) return {};
      out.push_back(*r);
      if (match(*r)) return out;
    }
    return {};
  }
  std::vector<json::object> until_type(std::string_view type) {
    return until([type](const json::object& o) { return o.at("type").as_string() == type; });
  }
  int finish() {
    process->close_stdin();
    while (next(10s)) {
    }
    return process->finish(10s);
  }

  std::unique_ptr<CliProcess> process;
  std::vector<json::object> seen;

 private:
  std::filesystem::path script_path_;
};

std::string type_of(const json::object& o) {
  std::string t(o.at("type").as_string());
  if (auto* s = o.if_contains("subtype"); s && s->is_string()) t += "/" + std::string(s->as_string());
  if (t == "control_request") t += "/" + std::string(o.at("request").as_object().at("subtype").as_string());
  return t;
}

const json::object& tool_result_block(const json::object& user_record) {
  return user_record.at("message").as_object().at("content").as_array().at(0).as_object();
}

std::vector<std::string> denied_ids(const json::object& result) {
  std::vector<std::string> ids;
  for (const auto& d : result.at("permission_denials").as_array())
    ids.emplace_back(d.as_object().at("tool_use_id").as_string());
  return ids;
}

std::string script(const std::string& turns_json) {
  return R"({"format":"mh-standin-claude.script/1","session_id":"sess-standin","turns":)" + turns_json + "}";
}

class StandinWire : public ::testing::Test {
 protected:
  TempDir dir{std::string("standin-") + ::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_F(StandinWire, SaysItsIdentityAndIsLinkedAsMhStandinBesideItself) {
  // What the soak reads instead of spelling the stand-in (bench/soak/soak_runs.py load_standin):
  // `mh-standin --identity`, the link the build makes beside the program, names the program, the
  // adapter it runs as and its scripts' format, as standin_identity.hpp defines them.
  const std::filesystem::path link = standin_binary().parent_path() / "mh-standin";
  ASSERT_TRUE(std::filesystem::is_symlink(link)) << link;
  EXPECT_EQ(std::filesystem::canonical(link), std::filesystem::canonical(standin_binary()));
  auto said = run_to_end({link.string(), "--identity"});
  ASSERT_EQ(said.status, 0) << said.err;
  auto v = protocol::parse_json(said.out);
  ASSERT_TRUE(v && v->is_object()) << said.out;
  const auto& o = v->as_object();
  EXPECT_EQ(protocol::string_at(o, "program").value_or(""), standin::kProgram) << said.out;
  EXPECT_EQ(protocol::string_at(o, "adapter").value_or(""), standin::kAdapter) << said.out;
  EXPECT_EQ(protocol::string_at(o, "script_format").value_or(""), standin::kScriptFormat) << said.out;
  EXPECT_EQ(standin_binary().filename(), standin::kProgram);
}

TEST_F(StandinWire, RefusesALaunchThatIsNotBidirectionalStreamJson) {
  Wire wire(dir, script("[]"), {"-p", "--output-format", "stream-json", "--verbose"});
  EXPECT_EQ(wire.finish(), 2);
  EXPECT_NE(wire.process->stderr_text().find("expected a bidirectional stream-json launch"), std::string::npos)
      << wire.process->stderr_text();
  EXPECT_TRUE(wire.seen.empty());
}

TEST_F(StandinWire, RefusesAScriptWithAMisspeltFieldAndNamesWhere) {
  Wire wire(dir, script(R"([[{"type":"text","txt":"typo"}]])"));
  EXPECT_EQ(wire.finish(), 2);
  EXPECT_NE(wire.process->stderr_text().find("turns[0][0]: unknown key \"txt\""), std::string::npos)
      << wire.process->stderr_text();
}

TEST_F(StandinWire, WritesNothingBeforeTheFirstLineThenAnswersInitializeWithItsOwnPid) {
  Wire wire(dir, script(R"([[{"type":"text","text":"hi"}]])"));
  // Absence has no event to wait for: a short bounded look is the whole assertion.
  EXPECT_FALSE(wire.next(300ms)) << "the real CLI writes nothing until its first stdin line";
  wire.initialize();
  auto reply = wire.next();
  ASSERT_TRUE(reply);
  const auto& response = reply->at("response").as_object();
  EXPECT_EQ(response.at("subtype"), "success");
  EXPECT_EQ(response.at("request_id"), "init");
  EXPECT_EQ(response.at("response").as_object().at("pid").to_number<int>(), wire.process->pid());
  EXPECT_FALSE(wire.next(200ms)) << "initialize alone starts no turn";
  wire.user();
  auto turn = wire.until_type("result");
  ASSERT_EQ(turn.size(), 3u);
  EXPECT_EQ(type_of(turn[0]), "system/init");
  EXPECT_EQ(turn[0].at("claude_code_version"), "2.1.197");
  EXPECT_EQ(turn[0].at("session_id"), "sess-standin");
  EXPECT_EQ(turn[0].at("permissionMode"), "default");
  EXPECT_EQ(type_of(turn[1]), "assistant");
  EXPECT_EQ(turn[2].at("subtype"), "success");
  EXPECT_EQ(turn[2].at("result"), "hi");
  EXPECT_EQ(turn[2].at("terminal_reason"), "completed");
  EXPECT_EQ(wire.finish(), 0);
}

// Allow runs, deny and abstain refuse (and are listed), replace runs the replaced input; each
// turn's result lists only that turn's denials.
TEST_F(StandinWire, HookAnswersDecideTheCallAndDenialsAreListedPerTurn) {
  Wire wire(dir, script(R"([
    [{"type":"tool_use","id":"t_allow","name":"Bash","input":{"command":"touch allowed.txt"}},
     {"type":"tool_use","id":"t_deny","name":"Bash","input":{"command":"touch denied.txt"}},
     {"type":"tool_use","id":"t_replace","name":"Bash","input":{"command":"touch original.txt"}},
     {"type":"tool_use","id":"t_abstain","name":"Bash","input":{"command":"touch abstained.txt"}},
     {"type":"tool_use","id":"t_readonly","name":"Bash","input":{"command":"echo read-only runs"}},
     {"type":"text","text":"turn one done"}],
    [{"type":"tool_use","id":"t_deny2","name":"Bash","input":{"command":"touch denied2.txt"}}]])"));
  wire.initialize();
  ASSERT_TRUE(wire.next());
  wire.user();
  const std::map<std::string, std::string> answers = {
      {"t_allow", std::string(kAllow)},
      {"t_deny",
       R"({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"SUPERVISOR: no"}})"},
      {"t_replace",
       R"({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow","updatedInput":{"command":"touch replaced.txt"}}})"},
      {"t_abstain", "{}"},
      {"t_readonly", "{}"},
      {"t_deny2", R"({"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny"}})"}};
  std::map<std::string, json::object> results;
  auto play_turn = [&] {
    for (;;) {
      auto r = wire.next();
      if (!r) return json::object{};
      if (type_of(*r) == "control_request/hook_callback") {
        const auto& input = r->at("request").as_object().at("input").as_object();
        EXPECT_EQ(input.at("hook_event_name"), "PreToolUse");
        EXPECT_EQ(input.at("session_id"), "sess-standin");
        EXPECT_EQ(input.at("tool_name"), "Bash");
        std::string id(input.at("tool_use_id").as_string());
        wire.answer(std::string(r->at("request_id").as_string()), answers.at(id));
      } else if (r->at("type") == "user") {
        const auto& block = tool_result_block(*r);
        results[std::string(block.at("tool_use_id").as_string())] = block;
      } else if (r->at("type") == "result") {
        return *r;
      }
    }
  };
  auto first = play_turn();
  ASSERT_FALSE(first.empty());
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "allowed.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "denied.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "replaced.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "original.txt"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "abstained.txt"));
  EXPECT_EQ(results["t_allow"].at("is_error"), false);
  EXPECT_EQ(results["t_deny"].at("content"), "SUPERVISOR: no");
  EXPECT_EQ(results["t_deny"].at("is_error"), true);
  EXPECT_EQ(results["t_abstain"].at("content"), "This command requires approval");
  EXPECT_EQ(results["t_readonly"].at("content"), "read-only runs");
  EXPECT_EQ(denied_ids(first), (std::vector<std::string>{"t_deny", "t_abstain"}));

  wire.user();
  auto second = play_turn();
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(results["t_deny2"].at("content"), "Hook PreToolUse:Bash denied this tool");
  EXPECT_EQ(denied_ids(second), (std::vector<std::string>{"t_deny2"})) << "denials are per turn, not cumulative";
  EXPECT_GT(second.at("total_cost_usd").to_number<double>(), first.at("total_cost_usd").to_number<double>())
      << "cost is cumulative";
  EXPECT_EQ(wire.finish(), 0);
}

// Several calls in one message: every tool_use record first, then one hook_callback at a time;
// the previous call's tool_result comes right after the next call's hook_callback.
TEST_F(StandinWire, CallsOfOneMessageAreAnnouncedFirstThenGovernedOneAtATime) {
  Wire wire(dir, script(R"([[{"type":"tool_use","calls":[
      {"id":"t1","name":"Bash","input":{"command":"touch one.txt"}},
      {"id":"t2","name":"Bash","input":{"command":"touch two.txt"}}]}]])"));
  wire.initialize();
  ASSERT_TRUE(wire.next());
  wire.user();
  auto head = wire.until_type("control_request");
  ASSERT_EQ(head.size(), 4u);
  EXPECT_EQ(type_of(head[1]), "assistant");
  EXPECT_EQ(type_of(head[2]), "assistant");
  EXPECT_EQ(head[1].at("message").as_object().at("id"), head[2].at("message").as_object().at("id"))
      << "blocks of one API message share message.id";
  EXPECT_EQ(head[3].at("request").as_object().at("tool_use_id"), "t1");
  EXPECT_FALSE(wire.next(200ms)) << "the second callback waits for the first answer";
  wire.answer(std::string(head[3].at("request_id").as_string()), kAllow);
  auto second = wire.next();
  ASSERT_TRUE(second);
  EXPECT_EQ(second->at("request").as_object().at("tool_use_id"), "t2");
  auto first_result = wire.next();
  ASSERT_TRUE(first_result);
  EXPECT_EQ(tool_result_block(*first_result).at("tool_use_id"), "t1");
  wire.answer(std::string(second->at("request_id").as_string()), kAllow);
  ASSERT_FALSE(wire.until_type("result").empty());
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "one.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() / "two.txt"));
  EXPECT_EQ(wire.finish(), 0);
}

TEST_F(StandinWire, TimingOptionStampsWhenEachCallWasAskedAndWhenItsAnswerWasRead) {
  auto timing = dir.path() / "timing.jsonl";
  Wire wire(dir, script(R"([[{"type":"tool_use","id":"t1","name":"Bash","input":{"command":"true"}},
                             {"type":"tool_use","id":"t2","name":"Bash","input":{"command":"true"}}]])"),
            {}, timing);
  wire.initialize();
  ASSERT_TRUE(wire.next());
  wire.user();
  for (int call = 0; call < 2; ++call) {
    auto head = wire.until_type("control_request");
    ASSERT_FALSE(head.empty());
    // The answer to the first call is held back, so its round trip is at least that long.
    if (call == 0) std::this_thread::sleep_for(50ms);
    wire.answer(std::string(head.back().at("request_id").as_string()), kAllow);
  }
  ASSERT_FALSE(wire.until_type("result").empty());
  EXPECT_EQ(wire.finish(), 0);

  std::ifstream in(timing);
  std::vector<json::object> lines;
  for (std::string line; std::getline(in, line);) {
    auto v = protocol::parse_json(line);
    ASSERT_TRUE(v && v->is_object()) << line;
    lines.push_back(v->get_object());
  }
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("call_id"), "t1");
  EXPECT_EQ(lines[1].at("call_id"), "t2");
  auto ns = [](const json::object& o, const char* key) { return o.at(key).to_number<std::int64_t>(); };
  EXPECT_GE(ns(lines[0], "answered_ns") - ns(lines[0], "asked_ns"), 50'000'000);
  EXPECT_GE(ns(lines[1], "asked_ns"), ns(lines[0], "answered_ns")) << "call 2 is asked after call 1's answer";
  EXPECT_GT(ns(lines[1], "answered_ns"), ns(lines[1], "asked_ns"));
}

TEST_F(StandinWire, WithoutARegisteredPreToolUseCallbackTheCallIsUngovernedAndTheCliDecides) {
  Wire wire(dir, script(
                     R"([[{"type":"tool_use","id":"t_write","name":"Bash","input":{"command":"touch x.txt"}},
                             {"type":"tool_use","id":"t_read","name":"Bash","input":{"command":"echo hello"}}]])"));
  wire.initialize(R"({"Stop":[{"hookCallbackIds":["stop"]}]})");
  ASSERT_TRUE(wire.next());
  wire.user();
  auto turn = wire.until_type("result");
  ASSERT_FALSE(turn.empty());
  for (const auto& r : turn)
    EXPECT_NE(r.at("type"), "control_request") << "no callback without a registration";
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "x.txt"));
  EXPECT_EQ(denied_ids(turn.back()), (std::vector<std::string>{"t_write"}));
  EXPECT_EQ(wire.finish(), 0);
}

TEST_F(StandinWire, SilenceBeyondTheCallbackTimeoutIsCancelledAndFailsClosed) {
  Wire wire(dir, script(R"([[{"type":"tool_use","id":"t_slow","name":"Bash","input":{"command":"touch late.txt"}}]])"));
  wire.initialize(R"({"PreToolUse":[{"matcher":"Bash","hookCallbackIds":["cb"],"timeout":1}]})");
  ASSERT_TRUE(wire.next());
  wire.user();
  auto asked = wire.until_type("control_request");
  ASSERT_FALSE(asked.empty());
  std::string request_id(asked.back().at("request_id").as_string());
  auto cancel = wire.next(5s);
  ASSERT_TRUE(cancel) << "the 1 s callback timeout must fire";
  EXPECT_EQ(type_of(*cancel), "control_cancel_request");
  EXPECT_EQ(cancel->at("request_id").as_string(), request_id);
  wire.answer(request_id, kAllow);  // late: ignored silently
  auto rest = wire.until_type("result");
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(tool_result_block(rest[0]).at("is_error"), true);
  EXPECT_NE(std::string(tool_result_block(rest[0]).at("content").as_string()).find("doesn't want to take this action"),
            std::string::npos);
  EXPECT_TRUE(denied_ids(rest[1]).empty()) << "a timed-out call is not listed in permission_denials";
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "late.txt"));
  EXPECT_EQ(wire.finish(), 0);
}

TEST_F(StandinWire, InterruptCancelsThePendingCallbackFirstAndTheSessionGoesOn) {
  Wire wire(dir, script(
                     R"([[{"type":"tool_use","id":"t_pending","name":"Bash","input":{"command":"touch no.txt"}}],
                             [{"type":"text","text":"turn two"}]])"));
  wire.initialize();
  ASSERT_TRUE(wire.next());
  wire.user();
  auto asked = wire.until_type("control_request");
  ASSERT_FALSE(asked.empty());
  wire.control("int_1", R"({"subtype":"interrupt"})");
  auto aborted = wire.until_type("result");
  ASSERT_EQ(aborted.size(), 5u);
  EXPECT_EQ(type_of(aborted[0]), "control_cancel_request");
  EXPECT_EQ(aborted[0].at("request_id"), asked.back().at("request_id"));
  EXPECT_EQ(aborted[1].at("response").as_object().at("request_id"), "int_1");
  EXPECT_FALSE(aborted[1].at("response").as_object().contains("response")) << "interrupt's reply has no payload";
  EXPECT_EQ(tool_result_block(aborted[2]).at("tool_use_id"), "t_pending");
  EXPECT_EQ(tool_result_block(aborted[3]).at("text"), "[Request interrupted by user for tool use]");
  EXPECT_EQ(aborted[4].at("subtype"), "error_during_execution");
  EXPECT_EQ(aborted[4].at("terminal_reason"), "aborted_tools");
  wire.user();
  auto next = wire.until_type("result");
  ASSERT_FALSE(next.empty());
  EXPECT_EQ(type_of(next.front()), "system/init");
  EXPECT_EQ(next.back().at("result"), "turn two");
  EXPECT_EQ(wire.finish(), 0);
}

TEST_F(StandinWire, InterruptDuringARunningToolRejectsItAndIdleInterruptIsJustAcknowledged) {
  Wire wire(dir, script(R"([[{"type":"sleep","id":"t_sleep","ms":60000,"touch":"started.txt"}]])"));
  wire.initialize();
  ASSERT_TRUE(wire.next());
  wire.control("int_idle", R"({"subtype":"interrupt"})");
  auto idle = wire.next();
  ASSERT_TRUE(idle);
  EXPECT_EQ(idle->at("response").as_object().at("subtype"), "success");
  wire.user();
  auto asked = wire.until_type("control_request");
  ASSERT_FALSE(asked.empty());
  wire.answer(std::string(asked.back().at("request_id").as_string()), kAllow);
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(dir.path() / "started.txt"); }));
  wire.control("int_1", R"({"subtype":"interrupt"})");
  auto aborted = wire.until_type("result");
  ASSERT_EQ(aborted.size(), 4u);
  EXPECT_EQ(type_of(aborted[0]), "control_response");
  EXPECT_EQ(std::string(tool_result_block(aborted[1]).at("content").as_string())
                .rfind("The user doesn't want to proceed with this tool use.", 0),
            0u);
  EXPECT_EQ(aborted[3].at("terminal_reason"), "aborted_tools");
  EXPECT_EQ(aborted[3].at("stop_reason"), "tool_use");
  EXPECT_EQ(wire.finish(), 1) << "stdin EOF after an error result exits 1";
}

TEST_F(StandinWire, ControlRequestsAnswerWithTheCliWords) {
  Wire wire(dir, script(R"([[{"type":"text","text":"hi"}]])"));
  wire.control("pm_plan", R"({"subtype":"set_permission_mode","mode":"plan"})");
  auto plan = wire.until_type("system");
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].at("response").as_object().at("response").as_object().at("mode"), "plan");
  EXPECT_EQ(plan[1].at("subtype"), "status");
  wire.control("pm_bypass", R"({"subtype":"set_permission_mode","mode":"bypassPermissions"})");
  auto bypass = wire.next();
  ASSERT_TRUE(bypass);
  EXPECT_EQ(bypass->at("response").as_object().at("error"),
            "Cannot set permission mode to bypassPermissions because the session was not launched with "
            "--dangerously-skip-permissions");
  wire.control("pm_yolo", R"({"subtype":"set_permission_mode","mode":"yolo"})");
  wire.control("nope", R"({"subtype":"no_such_subtype"})");
  auto yolo = wire.next();
  auto nope = wire.next();
  ASSERT_TRUE(yolo && nope);
  EXPECT_EQ(yolo->at("response").as_object().at("subtype"), "success") << "no validation, and no status record";
  EXPECT_EQ(nope->at("response").as_object().at("error"), "Unsupported control request subtype: no_such_subtype");
  wire.user();
  auto turn = wire.until_type("result");
  ASSERT_FALSE(turn.empty());
  EXPECT_EQ(turn.front().at("permissionMode"), "yolo");
  EXPECT_EQ(wire.finish(), 0);
}

TEST_F(StandinWire, EndSessionAbortsTheTurnAndExitsOne) {
  Wire wire(dir, script(R"([[{"type":"wait","ms":60000}]])"));
  wire.user();
  ASSERT_FALSE(wire.until_type("system").empty());
  wire.control("end_1", R"({"subtype":"end_session","reason":"supervisor_halt"})");
  auto ended = wire.until_type("result");
  ASSERT_EQ(ended.size(), 3u);
  EXPECT_EQ(ended[0].at("response").as_object().at("request_id"), "end_1");
  EXPECT_EQ(tool_result_block(ended[1]).at("text"), "[Request interrupted by user]");
  EXPECT_EQ(ended[2].at("terminal_reason"), "aborted_streaming");
  EXPECT_EQ(wire.process->finish(10s), 1);
}

TEST_F(StandinWire, ClosingStdinMidTurnLetsTheTurnFinishThenExitsZero) {
  Wire wire(dir, script(R"([[{"type":"wait","ms":300},{"type":"text","text":"finished anyway"}]])"));
  wire.user();
  wire.process->close_stdin();
  auto turn = wire.until_type("result");
  ASSERT_FALSE(turn.empty());
  EXPECT_EQ(turn.back().at("result"), "finished anyway");
  EXPECT_EQ(wire.finish(), 0);
}

TEST_F(StandinWire, ANonJsonLineIsFatal) {
  Wire wire(dir, script("[]"));
  wire.send("this is not json");
  EXPECT_EQ(wire.finish(), 1);
  EXPECT_NE(wire.process->stderr_text().find("Error parsing streaming input line"), std::string::npos);
}

TEST_F(StandinWire, WhenTheScriptRunsOutEachMessageStillGetsAShortAnswer) {
  Wire wire(dir, script("[]"));
  for (int i = 0; i < 2; ++i) {
    wire.user();
    auto turn = wire.until_type("result");
    ASSERT_EQ(turn.size(), 3u);
    EXPECT_EQ(turn[2].at("subtype"), "success");
  }
  EXPECT_EQ(wire.finish(), 0);
}

TEST_F(StandinWire, ChatterWritesTheAskedNumberOfRecordsOfTheAskedSize) {
  Wire wire(dir, script(R"([[{"type":"chatter","count":2000,"bytes":300}]])"));
  wire.user();
  auto turn = wire.until_type("result");
  ASSERT_EQ(turn.size(), 2002u);
  for (std::size_t i = 1; i + 1 < turn.size(); ++i) {
    const auto& text = turn[i].at("message").as_object().at("content").as_array()[0].as_object().at("text");
    ASSERT_EQ(text.as_string().size(), 300u);
  }
  EXPECT_EQ(wire.finish(), 0);
}

TEST_F(StandinWire, APersistent401IsTheSyntheticMessageThenAnErrorResult) {
  Wire wire(dir, script(R"([[{"type":"api_error","status":401,"message":"invalid x-api-key","retries":2}]])"));
  wire.user();
  auto turn = wire.until_type("result");
  ASSERT_EQ(turn.size(), 5u);
  EXPECT_EQ(type_of(turn[1]), "system/api_retry");
  EXPECT_EQ(type_of(turn[2]), "system/api_retry");
  EXPECT_EQ(turn[3].at("error"), "authentication_failed");
  EXPECT_EQ(turn[3].at("message").as_object().at("model"), "<synthetic>");
  EXPECT_EQ(turn[4].at("is_error"), true);
  EXPECT_EQ(turn[4].at("api_error_status").to_number<int>(), 401);
  EXPECT_EQ(turn[4].at("result"), "Failed to authenticate. API Error: 401 invalid x-api-key");
  EXPECT_EQ(wire.finish(), 1);
}

TEST_F(StandinWire, ACrashStepDiesByItsSignalWithNoResult) {
  Wire wire(dir, script(R"([[{"type":"text","text":"bye"},{"type":"crash","signal":"SIGSEGV"}]])"));
  wire.user();
  EXPECT_EQ(wire.finish(), 128 + SIGSEGV);
  for (const auto& r : wire.seen)
    EXPECT_NE(r.at("type"), "result");
}

}  // namespace
}  // namespace mh::test
