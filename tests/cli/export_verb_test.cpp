// `metaharness export --format atif` of REAL runs: Claude Code and Codex driven by the scripted
// endpoint on loopback, with allowed, denied, replaced (Claude) and sub-agent calls and the
// vendor records nobody could read; exported from the run directory and from the daemon, and
// every trajectory validated against docs/atif/ by python3-jsonschema.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>

#include "tests/cli/atif_support.hpp"
#include "tests/support/daemon_harness.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {
namespace {

constexpr const char* kDenyReason = "SUPERVISOR: not that one";

// The decisions the Claude scenario (tests/cli/scenarios/atif_claude.json) is answered with.
const std::map<std::string, std::string>& claude_decisions() {
  static const std::map<std::string, std::string> d = {
      {"toolu_allow", R"({"decision":"allow"})"},
      {"toolu_deny", std::string(R"({"decision":"deny","reason":")") + kDenyReason + "\"}"},
      {"toolu_replace", R"({"decision":"replace","input":{"command":"touch replaced.txt","description":"replaced"}})"},
      {"toolu_agent", R"({"decision":"allow"})"},
      {"toolu_sub_bash", R"({"decision":"allow"})"},
  };
  return d;
}

std::filesystem::path claude_scenario() {
  return source_dir() / "tests/cli/scenarios/atif_claude.json";
}

struct Exported {
  int status = -1;
  std::string err;
  json::object doc;
};

// `metaharness export --format FORMAT RUN --out FILE [more]`.
Exported export_run(const std::string& run, const std::filesystem::path& out, std::vector<std::string> more = {},
                    const std::string& format = "atif") {
  std::vector<std::string> argv = {
      metaharness_binary().string(), "export", "--format", format, run, "--out", out.string()};
  argv.insert(argv.end(), more.begin(), more.end());
  CliProcess p(argv);
  p.close_stdin();
  Exported e;
  e.status = p.finish(60s);
  e.err = p.stderr_text();
  if (e.status == 0) {
    auto v = protocol::parse_json(read_file(out));
    if (v && v->is_object()) e.doc = v->as_object();
  }
  return e;
}

const json::object& mh(const json::object& o) {
  return o.at("extra").as_object().at("metaharness").as_object();
}

// The step holding a call, and the call's index in it.
std::pair<const json::object*, std::size_t> step_with_call(const json::object& trajectory, const std::string& id) {
  for (const auto& s : trajectory.at("steps").as_array()) {
    const auto& step = s.as_object();
    if (!step.contains("tool_calls")) continue;
    const auto& calls = step.at("tool_calls").as_array();
    for (std::size_t i = 0; i < calls.size(); ++i)
      if (calls[i].at("tool_call_id") == json::string_view(id)) return {&step, i};
  }
  return {nullptr, 0};
}
const json::object& call_of(const json::object& step, std::size_t i) {
  return step.at("tool_calls").as_array().at(i).as_object();
}
const json::object& result_of(const json::object& step, std::size_t i) {
  return step.at("observation").as_object().at("results").as_array().at(i).as_object();
}

std::vector<json::object> stream_of(const std::filesystem::path& run_dir) {
  std::vector<json::object> out;
  for (const auto& line : read_lines(run_dir / "events.jsonl"))
    if (auto v = protocol::parse_json(line); v && v->is_object()) out.push_back(v->as_object());
  return out;
}

// What every exported real run must show: valid, every event accounted for exactly once, and
// every opaque record of the stream kept with its digest and line.
void expect_whole(const Exported& e, const std::filesystem::path& file, const std::filesystem::path& run_dir) {
  ASSERT_EQ(e.status, 0) << e.err;
  auto v = validate_atif_file(file);
  EXPECT_EQ(v.status, 0) << v.output;
  auto stream = stream_of(run_dir);
  std::multiset<std::uint64_t> all;
  std::size_t opaque = 0;
  for (const auto& ev : stream) {
    all.insert(ev.at("seq").to_number<std::uint64_t>());
    if (ev.at("event") == "opaque") ++opaque;
  }
  EXPECT_EQ(seqs_in(e.doc), all) << "every event lands in exactly one place";
  std::size_t kept = 0;
  for (const auto& c : mh(e.doc).at("events").as_array()) {
    if (c.at("event") != "opaque") continue;
    ++kept;
    EXPECT_EQ(c.at("digest").as_string().size(), 64u);
    EXPECT_TRUE(c.as_object().contains("source_line"));
  }
  EXPECT_GT(opaque, 0u) << "the run was meant to hold vendor records nobody could read";
  EXPECT_EQ(kept, opaque) << "every opaque record is in extra.metaharness.events";
  EXPECT_EQ(mh(e.doc).at("stream").at("status"), "complete");
  EXPECT_EQ(e.doc.at("schema_version"), "ATIF-v1.8");
}

// The Claude run's trajectory, whichever way it was read.
void expect_claude_trajectory(const json::object& doc, const std::filesystem::path& run_dir) {
  EXPECT_EQ(doc.at("agent").at("name"), "claude-code");
  EXPECT_EQ(doc.at("agent").at("version"), "2.1.197");
  const auto& first = doc.at("steps").as_array().at(0).as_object();
  EXPECT_EQ(first.at("source"), "user");
  EXPECT_EQ(first.at("message"), "go") << "the prompt, from the run's spec";

  auto [step, allow] = step_with_call(doc, "toolu_allow");
  ASSERT_NE(step, nullptr);
  EXPECT_EQ(step->at("message"), "Making the files.");
  EXPECT_EQ(step->at("reasoning_content"), "Three files, one call each.");
  ASSERT_EQ(step->at("tool_calls").as_array().size(), 3u) << "one message, three calls: one step";
  EXPECT_EQ(mh(result_of(*step, allow)).at("outcome"), "ran");
  EXPECT_EQ(mh(call_of(*step, allow)).at("decided").at("decided_by"), "embedder");

  auto [deny_step, deny] = step_with_call(doc, "toolu_deny");
  ASSERT_EQ(deny_step, step);
  const auto& refused = result_of(*step, deny);
  std::string said(refused.at("content").as_string());
  EXPECT_NE(said.find("Refused by metaharness: decided by the embedder at the hook seam"), std::string::npos) << said;
  EXPECT_NE(said.find(kDenyReason), std::string::npos) << said;
  EXPECT_EQ(mh(refused).at("ran"), false);
  EXPECT_EQ(mh(refused).at("vendor_result").at("is_error"), true) << "the refusal Claude showed the model is kept";

  auto [replace_step, replace] = step_with_call(doc, "toolu_replace");
  ASSERT_EQ(replace_step, step);
  const auto& replaced = call_of(*step, replace);
  EXPECT_EQ(replaced.at("arguments").at("command"), "touch replaced.txt") << "the call as it ran";
  EXPECT_EQ(mh(replaced).at("original_arguments").at("command"), "touch original.txt");

  auto [spawn_step, spawn] = step_with_call(doc, "toolu_agent");
  ASSERT_NE(spawn_step, nullptr);
  const auto& spawned = result_of(*spawn_step, spawn);
  ASSERT_TRUE(spawned.contains("subagent_trajectory_ref"));
  EXPECT_EQ(spawned.at("subagent_trajectory_ref").at(0).at("trajectory_id"), "toolu_agent");
  ASSERT_TRUE(doc.contains("subagent_trajectories"));
  const auto& sub = doc.at("subagent_trajectories").at(0).as_object();
  EXPECT_EQ(sub.at("trajectory_id"), "toolu_agent");
  EXPECT_EQ(sub.at("steps").at(0).at("message"), "Run touch sub_marker.txt") << "its task is its user turn";
  auto [sub_step, sub_call] = step_with_call(sub, "toolu_sub_bash");
  ASSERT_NE(sub_step, nullptr) << "the sub-agent's call is in the sub-agent's trajectory";
  EXPECT_EQ(mh(result_of(*sub_step, sub_call)).at("outcome"), "ran");
  EXPECT_EQ(step_with_call(doc, "toolu_sub_bash").first, nullptr) << "and not in the main agent's";

  const auto& last = doc.at("steps").as_array().back().as_object();
  EXPECT_EQ(last.at("message"), "All done.");

  // The vendor's own price for the session; tokens summed over the requests.
  const auto& totals = doc.at("final_metrics").as_object();
  for (const auto& ev : stream_of(run_dir))
    if (ev.at("event") == "session.ended") {
      EXPECT_EQ(totals.at("total_cost_usd"), ev.at("total_cost_usd"));
      EXPECT_EQ(mh(totals).at("census"), ev.at("census"));
    }
  EXPECT_TRUE(totals.at("total_prompt_tokens").is_number());
  EXPECT_TRUE(totals.at("total_completion_tokens").is_number());
}

class ClaudeExport : public GovernedRun {
 protected:
  ClaudeExport() : GovernedRun("claude") {}
};

TEST_F(ClaudeExport, ARealRunIsOneValidTrajectoryWithItsDenialReplaceSubAgentAndOpaqueRecords) {
  process = std::make_unique<CliProcess>(
      std::vector<std::string>{metaharness_binary().string(), "run", "claude", "-p", "go", "--model-scenario",
                               claude_scenario().string(), "--decisions", "ask", "--run-dir", run_dir().string()});
  std::set<std::string> decided;
  while (decided.size() < claude_decisions().size()) {
    auto r = process->wait_for([&](const EventLine& e) {
      return e.event() == "tool.requested" && e.object.at("decision_required").as_bool() &&
             !decided.count(e.str("call_id"));
    });
    ASSERT_TRUE(r) << "decided " << decided.size() << " calls; " << process->stderr_text();
    std::string call = r->str("call_id");
    ASSERT_TRUE(claude_decisions().count(call)) << "an unexpected call: " << r->raw;
    std::string id = "d" + std::to_string(decided.size());
    send(id, decide_line(id, call, claude_decisions().at(call)));
    decided.insert(call);
  }
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_TRUE(std::filesystem::exists(work() / "allowed.txt"));
  EXPECT_TRUE(std::filesystem::exists(work() / "replaced.txt"));
  EXPECT_FALSE(std::filesystem::exists(work() / "denied.txt")) << "the denied call ran";
  EXPECT_FALSE(std::filesystem::exists(work() / "original.txt")) << "the replaced input ran";

  auto file = dir.path() / "trajectory.json";
  auto e = export_run(run_dir().string(), file);
  expect_whole(e, file, run_dir());
  expect_claude_trajectory(e.doc, run_dir());
  EXPECT_EQ(mh(e.doc).at("source"), "run_dir");
}

class CodexExport : public GovernedRun {
 protected:
  CodexExport() : GovernedRun("codex") {}
};

// The sub-agent scenario of the Codex suite: a spawn (allowed), the main agent's waiting command
// (allowed) and the sub-agent's command (denied).
TEST_F(CodexExport, ARealRunIsOneValidTrajectoryWithItsSubAgentItsDenialAndOpaqueRecords) {
  start("sub_agent", {"--decisions", "ask", "--model", "mock-model"});
  auto spawn = process->wait_for(
      [](const EventLine& e) { return e.event() == "tool.requested" && e.str("call_id") == "call_spawn"; });
  ASSERT_TRUE(spawn) << process->stderr_text();
  send("d0", decide_line("d0", "call_spawn", R"({"decision":"allow"})"));
  std::string agent;
  for (int asked = 0; asked < 2; ++asked) {
    auto r = process->wait_for([](const EventLine& e) {
      return e.event() == "tool.requested" &&
             (e.str("call_id") == "call_sub_marker" || e.str("call_id") == "call_main_wait");
    });
    ASSERT_TRUE(r) << process->stderr_text();
    if (r->str("call_id") == "call_sub_marker") {
      agent = r->str("agent");
      send("d2",
           decide_line("d2", "call_sub_marker", std::string(R"({"decision":"deny","reason":")") + kDenyReason + "\"}"));
    } else {
      send("d1", decide_line("d1", "call_main_wait", R"({"decision":"allow"})"));
    }
  }
  ASSERT_FALSE(agent.empty());
  // The main agent's command waits for go.txt; let it finish once the sub-agent has its answer.
  auto sub_agent_read_the_reason = [&] {
    for (const auto& body : logged_request_bodies(run_dir()))
      if (protocol::canonical_json(json::value(body)).find(kDenyReason) != std::string::npos) return true;
    return false;
  };
  ASSERT_TRUE(eventually(sub_agent_read_the_reason)) << "the deny reason never reached the sub-agent";
  std::ofstream(work() / "go.txt") << "go\n";
  ASSERT_EQ(finish(), 0) << process->stderr_text();

  auto file = dir.path() / "trajectory.json";
  auto e = export_run(run_dir().string(), file);
  expect_whole(e, file, run_dir());
  const auto& doc = e.doc;
  EXPECT_EQ(doc.at("agent").at("name"), "codex");

  auto [spawn_step, spawn_call] = step_with_call(doc, "call_spawn");
  ASSERT_NE(spawn_step, nullptr);
  const auto& spawned = result_of(*spawn_step, spawn_call);
  ASSERT_TRUE(spawned.contains("subagent_trajectory_ref")) << protocol::pretty_json(json::value(spawned), false);
  EXPECT_EQ(spawned.at("subagent_trajectory_ref").at(0).at("trajectory_id"), json::value(agent))
      << "the spawn names the sub-agent's thread";
  auto [wait_step, wait_call] = step_with_call(doc, "call_main_wait");
  ASSERT_NE(wait_step, nullptr);
  EXPECT_EQ(mh(result_of(*wait_step, wait_call)).at("outcome"), "ran");

  const auto& sub = doc.at("subagent_trajectories").at(0).as_object();
  EXPECT_EQ(sub.at("trajectory_id"), json::value(agent));
  auto [sub_step, sub_call] = step_with_call(sub, "call_sub_marker");
  ASSERT_NE(sub_step, nullptr);
  const auto& refused = result_of(*sub_step, sub_call);
  EXPECT_EQ(mh(refused).at("outcome"), "refused");
  EXPECT_NE(refused.at("content").as_string().find(kDenyReason), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(work() / "sub_marker.txt"));

  const auto& totals = doc.at("final_metrics").as_object();
  EXPECT_TRUE(totals.at("total_prompt_tokens").is_number());
  EXPECT_TRUE(totals.at("total_cost_usd").is_null()) << "Codex prices nothing: unknown, not 0";
  EXPECT_TRUE(mh(totals).at("cost_source").is_null());
}

class ExportFromDaemon : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon = std::make_unique<DaemonUnderTest>(dir.path());
    ASSERT_TRUE(daemon->wait_notify("READY=1")) << daemon->stderr_text();
  }
  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
  std::unique_ptr<DaemonUnderTest> daemon;
};

// The same run read over the socket (`get` + `tail`) and from its directory: one trajectory.
TEST_F(ExportFromDaemon, ARunOnTheDaemonExportsAsItsRunDirectoryDoes) {
  auto scenario = protocol::parse_json(read_file(claude_scenario()));
  ASSERT_TRUE(scenario);
  SocketClient submit(daemon->socket());
  auto reply = submit.request(
      socket_request("submit", R"("run":{"adapter":"claude","prompt":"go","decisions":"ask","model_scenario":)" +
                                   protocol::canonical_json(*scenario) + "}"));
  ASSERT_TRUE(reply && reply->str("reply") == "submitted") << (reply ? reply->raw : "no reply");
  std::string id = reply->str("run_id");

  SocketClient control(daemon->socket());
  control.send(socket_request("attach", R"("run_id":")" + id + R"(","from_seq":1)"));
  std::set<std::string> decided;
  while (decided.size() < claude_decisions().size()) {
    auto r = control.wait_for([&](const EventLine& e) {
      return e.event() == "tool.requested" && e.object.at("decision_required").as_bool() &&
             !decided.count(e.str("call_id"));
    });
    ASSERT_TRUE(r) << "decided " << decided.size() << " calls; " << daemon->stderr_text();
    std::string call = r->str("call_id");
    control.send(tool_decide("d" + std::to_string(decided.size()), call, claude_decisions().at(call)));
    decided.insert(call);
  }
  ASSERT_TRUE(control.wait_reply("end", 120s)) << daemon->stderr_text();

  auto over_socket = dir.path() / "daemon.json";
  auto a = export_run(id, over_socket, {"--socket", daemon->socket().string()});
  expect_whole(a, over_socket, daemon->run_dir(id));
  expect_claude_trajectory(a.doc, daemon->run_dir(id));
  EXPECT_EQ(mh(a.doc).at("source"), "daemon");

  auto from_dir = dir.path() / "dir.json";
  auto b = export_run(daemon->run_dir(id).string(), from_dir);
  ASSERT_EQ(b.status, 0) << b.err;
  json::object left = a.doc, right = b.doc;
  left["extra"].as_object()["metaharness"].as_object()["source"] = "-";
  right["extra"].as_object()["metaharness"].as_object()["source"] = "-";
  EXPECT_EQ(left, right) << "the daemon's stream and the run directory are the same run";
}

// Refused by name: another format, a run the daemon does not have, a path that is not a run, a
// daemon nobody runs.
TEST_F(ExportFromDaemon, WhatCannotBeExportedIsRefusedByNameWithItsExitStatus) {
  auto out = dir.path() / "never.json";
  auto format = export_run(dir.path().string(), out, {}, "jsonl");
  EXPECT_EQ(format.status, 2);
  EXPECT_NE(format.err.find("unknown format \"jsonl\""), std::string::npos) << format.err;

  auto unknown = export_run("20991231T000000Z-00000000", out, {"--socket", daemon->socket().string()});
  EXPECT_EQ(unknown.status, 1) << unknown.err;
  EXPECT_NE(unknown.err.find("UNKNOWN_RUN"), std::string::npos) << unknown.err;

  auto not_a_run = export_run((dir.path() / "nothing-here").string(), out);
  EXPECT_EQ(not_a_run.status, 2);
  EXPECT_NE(not_a_run.err.find("cannot read"), std::string::npos) << not_a_run.err;

  auto unreachable = export_run("some-run", out, {"--socket", (dir.path() / "nobody.sock").string()});
  EXPECT_EQ(unreachable.status, 2);
  EXPECT_NE(unreachable.err.find("cannot reach the daemon"), std::string::npos) << unreachable.err;
  EXPECT_FALSE(std::filesystem::exists(out)) << "nothing is written when nothing could be read";
}

}  // namespace
}  // namespace mh::test
