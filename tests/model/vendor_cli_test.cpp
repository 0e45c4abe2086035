// Smoke tests with the REAL vendor CLIs (installed by ./run setup under .vendor/) against the
// scripted endpoint on loopback: no credentials, no network. Each test runs one CLI process in
// a scratch HOME with a constructed environment and checks both sides: what the CLI printed and
// did, and what the endpoint was sent.
#include <gtest/gtest.h>

#include <boost/json/serialize.hpp>
#include <fstream>
#include <sstream>

#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

const fs::path kVendor = fs::path(MH_SOURCE_DIR) / ".vendor/node_modules";
const fs::path kClaude = kVendor / "@anthropic-ai/claude-code-linux-x64/claude";
const fs::path kCodex = kVendor / "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex";
constexpr auto kCliTimeout = std::chrono::seconds(120);

std::vector<json::value> jsonl(const std::string& text) {
  std::vector<json::value> records;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) records.push_back(parse(line));
  return records;
}

const json::object* find_record(const std::vector<json::value>& records, std::string_view type,
                                std::string_view subtype = {}) {
  for (const auto& r : records) {
    const json::object& o = r.as_object();
    if (o.at("type").as_string() != type) continue;
    if (!subtype.empty() && (!o.contains("subtype") || o.at("subtype").as_string() != subtype)) continue;
    return &o;
  }
  return nullptr;
}

// Requests that consumed a scenario step (the CLIs' main loop), in order.
std::vector<ServedRequest> step_requests(const RunningEndpoint& ep) {
  std::vector<ServedRequest> out;
  for (auto& r : ep.requests())
    if (r.answer == Answer::step || r.answer == Answer::exhausted) out.push_back(std::move(r));
  return out;
}

std::string describe(const ProcessResult& p) {
  std::ostringstream s;
  s << "finished=" << p.finished << " exit=" << p.exit_code << " after " << p.elapsed.count() << " ms\n--- stdout ---\n"
    << p.out.substr(0, 4000) << "\n--- stderr ---\n"
    << p.err.substr(0, 4000);
  return s.str();
}

// Every request the endpoint saw was either a scripted answer or Claude's `HEAD /` warm-up;
// none was refused for a bad token.
void expect_only_scripted_traffic(const RunningEndpoint& ep) {
  for (const auto& r : ep.requests()) {
    const bool warm_up = r.method == "HEAD" && r.target == "/";
    EXPECT_TRUE(r.answer == Answer::step || warm_up)
        << "unexpected request " << r.method << " " << r.target << " answered " << to_string(r.answer);
    if (!warm_up) {
      EXPECT_EQ(r.credential, Credential::matched);
    }
  }
}

using Runner = ProcessResult (*)(const RunningEndpoint&, const TempDir&, const std::string&, std::vector<std::string>);

// One CLI run against its scenario, with what every test here checks first: the CLI is
// installed, it ran in a scratch directory against the scenario's endpoint, finished and exited
// 0; `records` is what it printed. Then `served(n)`: the endpoint saw n scripted steps.
class CliRun : public ::testing::Test {
 protected:
  void launch(Runner runner, const fs::path& cli, std::string_view scenario, std::string_view label,
              const std::string& prompt, std::vector<std::string> extra_args = {}) {
    ASSERT_TRUE(fs::exists(cli)) << cli << " is missing; run ./run setup";
    ep.emplace(scenario_file_text(scenario));
    dir.emplace(label);
    run = runner(*ep, *dir, prompt, std::move(extra_args));
    ASSERT_TRUE(run.finished) << describe(run);
    EXPECT_EQ(run.exit_code, 0) << describe(run);
    records = jsonl(run.out);
  }
  void served(std::size_t count) {
    ASSERT_TRUE(ep->wait_until_ended(count));
    steps = step_requests(*ep);
    ASSERT_EQ(steps.size(), count);
  }

  std::optional<RunningEndpoint> ep;
  std::optional<TempDir> dir;
  ProcessResult run;
  std::vector<json::value> records;
  std::vector<ServedRequest> steps;
};

// ---------------------------------------------------------------------------------------------
// Claude Code
// ---------------------------------------------------------------------------------------------

ProcessResult run_claude(const RunningEndpoint& ep, const TempDir& dir, const std::string& prompt,
                         std::vector<std::string> extra_args = {}) {
  for (const char* sub : {"home/.claude", "work", "tmp"})
    fs::create_directories(dir / sub);
  ProcessSpec spec;
  spec.executable = kClaude;
  spec.args = {
      "-p", prompt, "--output-format", "stream-json", "--verbose", "--setting-sources", "", "--strict-mcp-config"};
  spec.args.insert(spec.args.end(), extra_args.begin(), extra_args.end());
  spec.environment = {
      "HOME=" + (dir / "home").string(),           "CLAUDE_CONFIG_DIR=" + (dir / "home/.claude").string(),
      "PATH=/usr/local/bin:/usr/bin:/bin",         "TMPDIR=" + (dir / "tmp").string(),
      "ANTHROPIC_BASE_URL=" + ep.base_url(),       "ANTHROPIC_API_KEY=" + ep.token(),
      "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"};
  spec.working_dir = dir / "work";
  spec.output_dir = dir.path();
  return run_process(spec, kCliTimeout);
}

class ClaudeCli : public CliRun {};

TEST_F(ClaudeCli, CompletesATextTurn) {
  ASSERT_NO_FATAL_FAILURE(launch(run_claude, kClaude, "claude_text.json", "claude-text", "hi"));
  const json::object* init = find_record(records, "system", "init");
  ASSERT_NE(init, nullptr) << describe(run);
  EXPECT_EQ(init->at("apiKeySource"), "ANTHROPIC_API_KEY");
  const json::object* result = find_record(records, "result");
  ASSERT_NE(result, nullptr) << describe(run);
  EXPECT_EQ(result->at("subtype"), "success");
  EXPECT_EQ(result->at("is_error"), false);
  EXPECT_EQ(result->at("result"), "Hello from the scripted model.");
  EXPECT_EQ(result->at("usage").at("output_tokens"), 6);

  ASSERT_NO_FATAL_FAILURE(served(1));
  const ServedRequest& request = steps[0];
  EXPECT_EQ(request.wire, Wire::anthropic);
  EXPECT_TRUE(request.target.starts_with("/v1/messages"));
  EXPECT_TRUE(request.header("user-agent").starts_with("claude-cli/2.1.197")) << request.header("user-agent");
  EXPECT_EQ(request.header("anthropic-version"), "2023-06-01");
  EXPECT_TRUE(request.stream);
  EXPECT_FALSE(request.body.at("tools").as_array().empty());
  EXPECT_NE(json::serialize(request.body.at("messages")).find("hi"), std::string::npos);
  expect_only_scripted_traffic(*ep);
}

TEST_F(ClaudeCli, RunsABashToolCallAndSendsItsResultBack) {
  ASSERT_NO_FATAL_FAILURE(
      launch(run_claude, kClaude, "claude_bash.json", "claude-bash", "create the marker", {"--allowedTools", "Bash"}));
  EXPECT_TRUE(fs::exists(*dir / "work/marker.txt")) << "the Bash call did not run\n" << describe(run);

  const json::object* result = find_record(records, "result");
  ASSERT_NE(result, nullptr) << describe(run);
  EXPECT_EQ(result->at("subtype"), "success");
  EXPECT_EQ(result->at("result"), "Marker created.");
  EXPECT_EQ(result->at("num_turns"), 2);

  ASSERT_NO_FATAL_FAILURE(served(2));
  EXPECT_EQ(steps[0].step, 0u);
  EXPECT_EQ(steps[1].step, 1u);
  // The second request carries the tool's output back to the model.
  const json::array& messages = steps[1].body.at("messages").as_array();
  ASSERT_FALSE(messages.empty());
  const json::value& last = messages.back();
  EXPECT_EQ(last.at("role"), "user");
  bool found = false;
  for (const auto& block : last.at("content").as_array()) {
    if (block.at("type") != "tool_result") continue;
    found = true;
    EXPECT_EQ(block.at("tool_use_id"), "toolu_marker_1");
    EXPECT_NE(json::serialize(block.at("content")).find("marker-made"), std::string::npos);
  }
  EXPECT_TRUE(found) << json::serialize(last);
  expect_only_scripted_traffic(*ep);
}

// ---------------------------------------------------------------------------------------------
// Codex
// ---------------------------------------------------------------------------------------------

ProcessResult run_codex(const RunningEndpoint& ep, const TempDir& dir, const std::string& prompt,
                        std::vector<std::string> extra_args = {}) {
  for (const char* sub : {"home", "work", "tmp"})
    fs::create_directories(dir / sub);
  std::ofstream(dir / "home/config.toml") << "model = \"gpt-5.5\"\n"
                                          << "model_provider = \"scripted\"\n"
                                          << "[model_providers.scripted]\n"
                                          << "name = \"metaharness scripted endpoint\"\n"
                                          << "base_url = \"" << ep.openai_base_url() << "\"\n"
                                          << "wire_api = \"responses\"\n"
                                          << "env_key = \"MH_MODEL_TOKEN\"\n"
                                          << "request_max_retries = 0\n"
                                          << "stream_max_retries = 0\n";
  ProcessSpec spec;
  spec.executable = kCodex;
  spec.args = {"exec", "--json", "--skip-git-repo-check"};
  spec.args.insert(spec.args.end(), extra_args.begin(), extra_args.end());
  spec.args.push_back(prompt);
  spec.environment = {"HOME=" + (dir / "home").string(), "CODEX_HOME=" + (dir / "home").string(),
                      "PATH=/usr/local/bin:/usr/bin:/bin", "TMPDIR=" + (dir / "tmp").string(),
                      "MH_MODEL_TOKEN=" + ep.token()};
  spec.working_dir = dir / "work";
  spec.output_dir = dir.path();
  return run_process(spec, kCliTimeout);
}

const json::object* find_item(const std::vector<json::value>& records, std::string_view item_type) {
  for (const auto& r : records) {
    const json::object& o = r.as_object();
    if (o.at("type") != "item.completed") continue;
    if (o.at("item").at("type").as_string() == item_type) return &o.at("item").as_object();
  }
  return nullptr;
}

class CodexCli : public CliRun {};

TEST_F(CodexCli, CompletesATextTurn) {
  ASSERT_NO_FATAL_FAILURE(launch(run_codex, kCodex, "codex_text.json", "codex-text", "hi"));
  const json::object* message = find_item(records, "agent_message");
  ASSERT_NE(message, nullptr) << describe(run);
  EXPECT_EQ(message->at("text"), "Hello from the scripted model.");
  const json::object* reasoning = find_item(records, "reasoning");
  ASSERT_NE(reasoning, nullptr) << describe(run);
  EXPECT_EQ(reasoning->at("text"), "**Greeting** the user");
  const json::object* completed = find_record(records, "turn.completed");
  ASSERT_NE(completed, nullptr) << describe(run);
  EXPECT_EQ(completed->at("usage").at("input_tokens"), 40);
  EXPECT_EQ(completed->at("usage").at("cached_input_tokens"), 8);
  EXPECT_EQ(completed->at("usage").at("reasoning_output_tokens"), 3);

  ASSERT_NO_FATAL_FAILURE(served(1));
  const ServedRequest& request = steps[0];
  EXPECT_EQ(request.wire, Wire::responses);
  EXPECT_EQ(request.target, "/v1/responses");
  EXPECT_EQ(request.header("originator"), "codex_exec");
  EXPECT_TRUE(request.header("user-agent").starts_with("codex_exec/0.171.0")) << request.header("user-agent");
  EXPECT_FALSE(request.header("session-id").empty());
  EXPECT_TRUE(request.stream);
  EXPECT_EQ(request.body.at("model"), "gpt-5.5");
  EXPECT_FALSE(request.body.at("tools").as_array().empty());
  EXPECT_NE(json::serialize(request.body.at("input").as_array().back()).find("hi"), std::string::npos);
  expect_only_scripted_traffic(*ep);
}

TEST_F(CodexCli, RunsAnExecCommandCallAndSendsItsOutputBack) {
  // The default read-only sandbox would refuse the write; the smoke is about the endpoint.
  ASSERT_NO_FATAL_FAILURE(launch(run_codex, kCodex, "codex_exec.json", "codex-exec", "create the marker",
                                 {"--dangerously-bypass-approvals-and-sandbox"}));
  EXPECT_TRUE(fs::exists(*dir / "work/marker.txt")) << "exec_command did not run\n" << describe(run);

  const json::object* command = find_item(records, "command_execution");
  ASSERT_NE(command, nullptr) << describe(run);
  EXPECT_EQ(command->at("exit_code"), 0);
  EXPECT_NE(command->at("aggregated_output").as_string().find("marker-made"), std::string::npos);
  const json::object* message = find_item(records, "agent_message");
  ASSERT_NE(message, nullptr) << describe(run);
  EXPECT_EQ(message->at("text"), "Marker created.");
  EXPECT_NE(find_record(records, "turn.completed"), nullptr) << describe(run);

  ASSERT_NO_FATAL_FAILURE(served(2));
  bool found = false;
  for (const auto& item : steps[1].body.at("input").as_array()) {
    if (item.at("type") != "function_call_output") continue;
    found = true;
    EXPECT_EQ(item.at("call_id"), "call_marker_1");
    EXPECT_NE(item.at("output").as_string().find("marker-made"), std::string::npos);
  }
  EXPECT_TRUE(found) << json::serialize(steps[1].body.at("input"));
  expect_only_scripted_traffic(*ep);
}

}  // namespace
}  // namespace mh::model::testing
