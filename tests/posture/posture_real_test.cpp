// The vendor's posture held against the run's (issue 27 section 6), on the REAL CLIs (installed
// by ./run setup under .vendor/) against the scripted endpoint on loopback:
//   - a governed run of Claude and of Codex reports the posture the run asked (Claude's
//     system/init `permissionMode` "default"; Codex's thread/start answer `approvalPolicy`
//     "untrusted" and sandbox `workspaceWrite`): no POSTURE_DRIFT;
//   - a real drift: Claude 2.1.197 started in acceptEdits and resumed (`--resume`) without
//     `--permission-mode` reports "default" in its system/init. Each init is read by the Claude
//     adapter's own session, and the run's PostureCheck, asked acceptEdits, warns POSTURE_DRIFT on
//     the resume and refuses an abstain until a permission.set is applied. (Nothing in the daemon
//     resumes Claude yet: parking will, and its report takes this same path.)
#include <gtest/gtest.h>

#include <sstream>

#include "adapters/registry.hpp"
#include "daemon/run/posture_check.hpp"
#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"
#include "tests/support/governed_run.hpp"
#include "tests/support/output_recorder.hpp"

namespace mh::test {
namespace {

namespace fs = std::filesystem;
namespace mt = mh::model::testing;

// --- governed runs: what the vendor reports is what the run asked ------------------------------

std::vector<EventLine> drift_warnings(CliProcess& process) {
  std::vector<EventLine> out;
  for (const auto& w : process.events_named("warning"))
    if (w.str("code") == "POSTURE_DRIFT") out.push_back(w);
  return out;
}

class ClaudePostureRun : public GovernedRun {
 protected:
  ClaudePostureRun() : GovernedRun("claude") {}
};

class CodexPostureRun : public GovernedRun {
 protected:
  CodexPostureRun() : GovernedRun("codex") {}
};

TEST_F(ClaudePostureRun, ClaudeReportsTheModeTheRunAsksAndNoDriftIsWarned) {
  start("fifty_output_tokens");
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  auto started = process->events_named("session.started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].str("permission_mode"), "default") << "the plan passes no --permission-mode";
  EXPECT_TRUE(drift_warnings(*process).empty());
}

TEST_F(CodexPostureRun, CodexReportsThePolicyAndSandboxTheRunAsksAndNoDriftIsWarned) {
  start("two_turns", {"--deny-only"});
  process->close_stdin();
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  auto started = process->events_named("session.started");
  ASSERT_EQ(started.size(), 1u);
  EXPECT_EQ(started[0].str("permission_mode"), "never") << "a deny-only thread runs under approval policy never";
  // What was compared: thread/start's answer in the transcript carries the sandbox too.
  bool sandbox_reported = false;
  for (const auto& line : read_lines(run_dir() / "vendor-stdout.jsonl")) {
    auto v = protocol::parse_json(line);
    if (!v || !v->is_object()) continue;
    const auto* result = v->as_object().if_contains("result");
    if (!result || !result->is_object() || !result->as_object().contains("approvalPolicy")) continue;
    const auto& sandbox = result->as_object().at("sandbox");
    ASSERT_TRUE(sandbox.is_object()) << line;
    EXPECT_EQ(sandbox.as_object().at("type"), "workspaceWrite") << line;
    sandbox_reported = true;
  }
  EXPECT_TRUE(sandbox_reported) << "thread/start's answer names the sandbox the report carries";
  EXPECT_TRUE(drift_warnings(*process).empty());
}

// --- a real drift: Claude resumed without its mode --------------------------------------------

const fs::path kClaude = source_dir() / ".vendor/node_modules/@anthropic-ai/claude-code-linux-x64/claude";

constexpr std::string_view kTwoAnswers = R"({
  "format": "metaharness.scenario/1",
  "description": "One answer for the first run, one for the resumed one.",
  "wires": ["anthropic"],
  "steps": [
    {"name": "first", "content": [{"type": "text", "text": "First."}], "usage": {"input_tokens": 5, "output_tokens": 1}},
    {"name": "resumed", "content": [{"type": "text", "text": "Resumed."}], "usage": {"input_tokens": 5, "output_tokens": 1}}
  ]
})";

mt::ProcessResult run_claude(const mt::RunningEndpoint& ep, const mt::TempDir& dir, std::vector<std::string> args) {
  mt::ProcessSpec spec;
  spec.executable = kClaude;
  spec.args = {"--output-format", "stream-json", "--verbose", "--setting-sources", "", "--strict-mcp-config"};
  spec.args.insert(spec.args.end(), args.begin(), args.end());
  spec.environment = {
      "HOME=" + (dir / "home").string(),           "CLAUDE_CONFIG_DIR=" + (dir / "home/.claude").string(),
      "PATH=/usr/local/bin:/usr/bin:/bin",         "TMPDIR=" + (dir / "tmp").string(),
      "ANTHROPIC_BASE_URL=" + ep.base_url(),       "ANTHROPIC_API_KEY=" + ep.token(),
      "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1"};
  spec.working_dir = dir / "work";
  spec.output_dir = dir.path();
  return mt::run_process(spec, std::chrono::seconds(120));
}

// The first line Claude printed that is its system/init.
std::optional<std::string> init_line(const std::string& out) {
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.find(R"("subtype":"init")") != std::string::npos) return line;
  return std::nullopt;
}

// What the Claude adapter's own session reads from that line: the mode session.started carries.
std::optional<std::string> mode_the_adapter_reads(const std::string& init) {
  adapters::AdapterRegistry registry{adapters::HostConfig{"/nonexistent", {}}};
  adapters::RunSpec spec;
  spec.run_id = "r-posture";
  spec.adapter = "claude";
  spec.prompt = "p";
  adapters::LaunchPlan plan;
  plan.cwd = "/scratch/work";
  auto session = registry.find("claude")->open_session(spec, plan);
  OutputRecorder sink;
  protocol::FramedLine framed;
  framed.text = init;
  framed.number = 1;
  framed.length = init.size();
  session->on_vendor_line(framed, sink.in());
  auto started = sink.of<protocol::ev::SessionStarted>();
  if (started.size() != 1u) return std::nullopt;
  return started[0].permission_mode;
}

TEST(ClaudeResumePosture, ResumedWithoutItsModeClaudeReportsDefaultAndTheCheckWarnsDrift) {
  ASSERT_TRUE(fs::exists(kClaude)) << kClaude << " is missing; run ./run setup";
  mt::RunningEndpoint ep(kTwoAnswers);
  mt::TempDir dir("posture-resume");
  for (const char* sub : {"home/.claude", "work", "tmp"})
    fs::create_directories(dir / sub);

  auto first = run_claude(ep, dir, {"-p", "hi", "--permission-mode", "acceptEdits"});
  ASSERT_TRUE(first.finished && first.exit_code == 0) << first.out << first.err;
  auto first_init = init_line(first.out);
  ASSERT_TRUE(first_init) << first.out;
  auto session_id = protocol::parse_json(*first_init)->as_object().at("session_id");
  ASSERT_TRUE(session_id.is_string());

  auto resumed = run_claude(ep, dir, {"-p", "again", "--resume", std::string(session_id.as_string())});
  ASSERT_TRUE(resumed.finished && resumed.exit_code == 0) << resumed.out << resumed.err;
  auto resumed_init = init_line(resumed.out);
  ASSERT_TRUE(resumed_init) << resumed.out;
  EXPECT_EQ(protocol::parse_json(*resumed_init)->as_object().at("session_id"), session_id) << "the same session";

  // The run asked acceptEdits (the launch posture and a permission.set applied alike).
  daemon::PostureCheck check(adapters::Posture{"acceptEdits", std::nullopt});
  auto at_start = mode_the_adapter_reads(*first_init);
  EXPECT_EQ(at_start, "acceptEdits");
  EXPECT_FALSE(check.reported(adapters::Posture{at_start, std::nullopt}, "start", true)) << "as asked";
  auto at_resume = mode_the_adapter_reads(*resumed_init);
  EXPECT_EQ(at_resume, "default") << "Claude 2.1.197 keeps no permission mode across --resume";
  auto drift = check.reported(adapters::Posture{at_resume, std::nullopt}, "resume", true);
  ASSERT_TRUE(drift);
  EXPECT_EQ(drift->code, "POSTURE_DRIFT");
  EXPECT_EQ(drift->posture->asked.permission_mode, "acceptEdits");
  EXPECT_EQ(drift->posture->reported.permission_mode, "default");
  EXPECT_TRUE(check.refusal(protocol::decision::Abstain{}, true));
  check.set_applied(adapters::Posture{"acceptEdits", std::nullopt});
  EXPECT_FALSE(check.refusal(protocol::decision::Abstain{}, true));
}

}  // namespace
}  // namespace mh::test
