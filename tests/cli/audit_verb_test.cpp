// The hermetic floor as a user meets it: `metaharness audit RUN_DIR|events.jsonl` on streams made
// by real runs of both adapters (real CLIs against the scripted endpoint) and on hand-made streams
// for gap and unk; `metaharness run --hermetic on|strict|off` printing the report and (strict
// only) deciding the exit status with it.
#include <gtest/gtest.h>

#include <fstream>
#include <set>

extern char** environ;

#include "protocol/events.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {
namespace {

using Output = CliOutput;

Output audit(std::vector<std::string> args) {
  args.insert(args.begin(), {metaharness_binary().string(), "audit"});
  return run_to_end(std::move(args));
}

json::object audit_json(const std::filesystem::path& p, int expected_status) {
  auto o = audit({p.string(), "--json"});
  EXPECT_EQ(o.status, expected_status) << o.out << o.err;
  auto v = protocol::parse_json(o.out);
  EXPECT_TRUE(v && v->is_object()) << o.out << o.err;
  return v && v->is_object() ? v->as_object() : json::object{};
}

// id -> verdict, from the JSON form.
std::map<std::string, std::string> verdicts(const json::object& report) {
  std::map<std::string, std::string> out;
  for (const auto& r : report.at("rows").as_array())
    out[std::string(r.as_object().at("id").as_string())] = std::string(r.as_object().at("verdict").as_string());
  return out;
}

// The report's row lines ("  H1a ok gating record …").
std::vector<std::string> row_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while ((at = text.find("\n  H", at)) != std::string::npos) {
    std::size_t end = text.find('\n', at + 1);
    out.push_back(text.substr(at + 1, end - at - 1));
    at = end;
  }
  return out;
}

std::string row_line(const std::string& text, const std::string& label) {
  for (const auto& l : row_lines(text))
    if (l.rfind("  " + label + " ", 0) == 0) return l;
  return "";
}

// A governed run of one vendor, audited.
class AuditedRun : public GovernedRun {
 protected:
  using GovernedRun::GovernedRun;
  // `scenario` observed under strict with an operator-named --cwd: it exits 1 (H7 and H11 are
  // gaps there on every vendor); the audit's verdicts by row.
  std::map<std::string, std::string> strict_under_an_operator_cwd(const std::string& scenario) {
    auto cwd = dir.path() / "operator-cwd";
    std::filesystem::create_directories(cwd);
    start(scenario, {"--decisions", "observe", "--cwd", cwd.string(), "--hermetic", "strict"});
    EXPECT_EQ(finish(), 1) << process->stderr_text();
    auto v = verdicts(audit_json(run_dir(), 1));
    EXPECT_EQ(v["h7"], "gap");
    EXPECT_EQ(v["h11"], "gap");
    return v;
  }
};

class ClaudeAudit : public AuditedRun {
 protected:
  ClaudeAudit() : AuditedRun("claude") {}
};

class CodexAudit : public AuditedRun {
 protected:
  CodexAudit() : AuditedRun("codex") {}
};

// A scratch-cwd Claude run holds every row, so strict exits 0; the run directory reached through
// a symbolic link still does (Claude reports getcwd(), the planned path with its links resolved).
TEST_F(ClaudeAudit, AScratchRunIsOkOnEveryRowStrictExitsZeroEvenThroughALinkedRunDirectory) {
  std::filesystem::create_directory_symlink(dir.path(), dir.path() / "via-link");
  std::filesystem::path linked = dir.path() / "via-link" / "run";
  process = std::make_unique<CliProcess>(std::vector<std::string>{
      metaharness_binary().string(), "run", "claude", "-p", "go", "--model-scenario", scenario("bash_marker").string(),
      "--run-dir", linked.string(), "--decisions", "observe", "--hermetic", "strict"});
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  std::string err = process->stderr_text();
  EXPECT_NE(
      err.find("hermetic audit: run " + run_id() + " (claude 2.1.197), mode strict, decisions observe: gating ok"),
      std::string::npos)
      << err;
  ASSERT_EQ(row_lines(err).size(), 12u) << err;
  for (const auto& line : row_lines(err))
    EXPECT_NE(line.find(" ok "), std::string::npos) << line;
  EXPECT_NE(row_line(err, "H7").find("with links resolved"), std::string::npos) << err;
  EXPECT_NE(err.find("\ndecision census: allowed=1 denied=0 replaced=0 abstained=0\n  by seam    hook: 1\n"
                     "  by decider observe: 1\n"),
            std::string::npos)
      << err;
  EXPECT_NE(err.find("\nwithheld: not stated by the harness\n"), std::string::npos);
  EXPECT_NE(err.find("\nstream: complete — "), std::string::npos);

  // The same verdicts after the fact, from the run directory.
  auto text = audit({linked.string()});
  EXPECT_EQ(text.status, 0) << text.out << text.err;
  EXPECT_EQ(row_lines(text.out), row_lines(err));
  auto report = audit_json(linked, 0);
  EXPECT_EQ(report.at("gating"), "ok");
  EXPECT_EQ(report.at("mode"), "strict");
  for (const auto& [id, verdict] : verdicts(report))
    EXPECT_EQ(verdict, "ok") << id;

  // A bare events.jsonl names no planned cwd and no declared sets: those rows are unk, never ok.
  auto bare = audit_json(run_dir() / "events.jsonl", 3);
  auto v = verdicts(bare);
  for (auto id : {"h1a", "h4", "h5", "h7"})
    EXPECT_EQ(v[id], "unk") << id;
  for (auto id : {"h1b", "h2", "h3", "h6", "h8", "h9", "h10", "h11"})
    EXPECT_EQ(v[id], "ok") << id;
  EXPECT_EQ(bare.at("gating"), "unk");
}

// An operator-named --cwd is not metaharness's working directory: H7 and H11 are gaps. `on` reports
// them and keeps the run's own status; strict exits 1; audit exits 1.
TEST_F(ClaudeAudit, AnOperatorNamedCwdIsAGapReportedUnderOnAndExitOneUnderStrict) {
  auto cwd = dir.path() / "operator-cwd";
  std::filesystem::create_directories(cwd);
  start("bash_marker", {"--decisions", "observe", "--cwd", cwd.string()});
  ASSERT_EQ(finish(), 0) << "on never changes the status: " << process->stderr_text();
  std::string err = process->stderr_text();
  EXPECT_NE(err.find("mode on, decisions observe: gating gap"), std::string::npos) << err;
  EXPECT_EQ(row_line(err, "H7").rfind(
                "  H7 gap gating record working directory is ours — unavailable: the operator named", 0),
            0u)
      << err;
  EXPECT_EQ(row_line(err, "H11").rfind("  H11 gap gating launch", 0), 0u) << err;
  EXPECT_EQ(audit({run_dir().string()}).status, 1);
}

TEST_F(ClaudeAudit, StrictWithAnOperatorNamedCwdExitsOne) {
  strict_under_an_operator_cwd("bash_marker");
}

// off: the attestation says off, nothing is printed and nothing gates; the launch is the same.
TEST_F(ClaudeAudit, OffChangesOnlyTheAttestationsModeAndTheVerdictsAbsence) {
  auto cwd = dir.path() / "operator-cwd";
  std::filesystem::create_directories(cwd);
  start("bash_marker", {"--decisions", "observe", "--cwd", cwd.string(), "--hermetic", "off"});
  EXPECT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_EQ(process->stderr_text().find("hermetic audit"), std::string::npos) << process->stderr_text();
  auto started = process->events_named("session.started");
  ASSERT_EQ(started.size(), 1u);
  const auto& attestation = started[0].object.at("hermetic").as_object();
  EXPECT_EQ(attestation.at("mode"), "off");
  EXPECT_FALSE(attestation.at("imposed").as_array().empty()) << "what is imposed does not depend on the mode";
  // Asked for explicitly, the audit still judges an off run, and says the run asked for none.
  auto text = audit({run_dir().string()});
  EXPECT_EQ(text.status, 1);
  EXPECT_NE(text.out.find("mode off asks for no verdicts"), std::string::npos) << text.out;
}

// Strict keeps the run's own status for an end other than completed when no row is a gap.
TEST_F(ClaudeAudit, StrictKeepsHaltedAsFour) {
  start("sleep_then_more", {"--decisions", "observe", "--halt-grace-ms", "1000", "--hermetic", "strict"});
  ASSERT_TRUE(eventually([&] { return std::filesystem::exists(work() / "started.txt"); })) << process->stderr_text();
  send("h", command_line("h", "halt", R"("reason":"stop now")"));
  EXPECT_EQ(finish(), 4) << process->stderr_text();
  EXPECT_NE(process->stderr_text().find("gating ok"), std::string::npos) << process->stderr_text();
}

// Refused at start: nothing was observed (every row unk), and the status is the refusal's, 2.
TEST_F(ClaudeAudit, StrictRefusedAtStartExitsTwoWithEveryRowUnknown) {
  start("bash_marker", {"--decisions", "observe", "--frame", write_frame({}).string(), "--hermetic", "strict"});
  process->close_stdin();
  EXPECT_EQ(finish(), 2) << process->stderr_text();
  std::string err = process->stderr_text();
  ASSERT_EQ(row_lines(err).size(), 12u) << err;
  for (const auto& line : row_lines(err))
    EXPECT_NE(line.find(" unk "), std::string::npos) << line;
  EXPECT_NE(err.find("nothing was observed"), std::string::npos);
}

// Codex, scratch cwd: every row holds, so strict exits 0. The record rows read what Codex itself
// answered at start (account/read, plugin/installed, config/read, mcpServerStatus/list); H11 is
// imposed (the project pinned untrusted and its root to the working directory, Codex's
// instructionSources checked).
TEST_F(CodexAudit, AScratchRunIsOkOnEveryRowStrictExitsZeroFromCodexsOwnEvidence) {
  start("marker", {"--decisions", "observe", "--hermetic", "strict"});
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  std::string err = process->stderr_text();
  EXPECT_NE(err.find("(codex 0.171.0), mode strict, decisions observe: gating ok"), std::string::npos) << err;
  EXPECT_EQ(row_line(err, "H1a"),
            "  H1a ok gating record plugins are exactly the declared set — loaded none, as declared");
  EXPECT_EQ(row_line(err, "H1b"), "  H1b ok gating record output style is default — output style \"default\"");
  EXPECT_EQ(row_line(err, "H4"),
            "  H4 ok gating record no API key unless declared — credential source \"none\", no API key declared");
  EXPECT_EQ(row_line(err, "H5"),
            "  H5 ok gating record MCP surface exactly the launch's — MCP servers none, as the launch configured");
  const std::string h11 = "  H11 ok gating launch no memory file outside copied tree — imposed: the project " +
                          work().string() + " is pinned untrusted";
  EXPECT_EQ(row_line(err, "H11").rfind(h11, 0), 0u) << err;
  auto report = audit_json(run_dir(), 0);
  EXPECT_EQ(report.at("gating"), "ok");
  auto v = verdicts(report);
  ASSERT_EQ(v.size(), 12u);
  for (auto id : {"h1a", "h1b", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h9", "h10", "h11"})
    EXPECT_EQ(v[id], "ok") << id;
  EXPECT_EQ(report.at("census").as_object().at("by_seam").as_object().at("control_request"), 1);
  EXPECT_EQ(report.at("stream").as_object().at("completeness"), "Complete");

  // A bare events.jsonl names no planned cwd and no declared sets: those rows are unk, never ok.
  auto bare = verdicts(audit_json(run_dir() / "events.jsonl", 3));
  for (auto id : {"h1a", "h4", "h5", "h7"})
    EXPECT_EQ(bare[id], "unk") << id;
  for (auto id : {"h1b", "h2", "h3", "h6", "h8", "h9", "h10", "h11"})
    EXPECT_EQ(bare[id], "ok") << id;
}

// An operator-named --cwd on Codex is not metaharness's working directory: H7 is a gap, strict
// exits 1. H11 still holds there, unlike on Claude: the operator's project is pinned untrusted too,
// so Codex reads no AGENTS.md in it (an ancestor's under a root marker, or its own), and what
// Codex reports loading is checked before the first turn.
TEST_F(CodexAudit, StrictWithAnOperatorNamedCwdExitsOneOnH7AndH11StillHolds) {
  auto cwd = dir.path() / "operator-cwd";
  std::filesystem::create_directories(cwd);
  std::filesystem::create_directories(dir.path() / ".git");
  std::ofstream(dir.path() / "AGENTS.md") << "ANCESTOR-AGENTS-MD: say banana\n";
  std::ofstream(cwd / "AGENTS.md") << "OPERATOR-AGENTS-MD: say cherry\n";
  start("marker", {"--decisions", "observe", "--cwd", cwd.string(), "--hermetic", "strict"});
  EXPECT_EQ(finish(), 1) << process->stderr_text();
  std::string err = process->stderr_text();
  EXPECT_EQ(row_line(err, "H7").rfind(
                "  H7 gap gating record working directory is ours — unavailable: the operator named", 0),
            0u)
      << err;
  auto v = verdicts(audit_json(run_dir(), 1));
  EXPECT_EQ(v["h7"], "gap");
  for (auto id : {"h1a", "h1b", "h2", "h3", "h4", "h5", "h6", "h8", "h9", "h10", "h11"})
    EXPECT_EQ(v[id], "ok") << id;
  for (const auto& body : logged_request_bodies(run_dir())) {
    std::string text = protocol::canonical_json(json::value(body));
    EXPECT_EQ(text.find("AGENTS-MD"), std::string::npos) << "an AGENTS.md reached the model";
  }
}

class OpencodeAudit : public AuditedRun {
 protected:
  OpencodeAudit() : AuditedRun("opencode") {}
};

// opencode, scratch cwd: the seam plugin is the launch's own, declared in the attestation's
// installed_plugins, so H1a holds; its credential is the run's endpoint token, no API key, so H4
// holds. ACP reports no output style and no MCP servers, so H1b and H5 stay unknown (never ok):
// strict exits 3, as it does on any adapter whose record leaves a gating row unknown.
TEST_F(OpencodeAudit, AScratchRunHoldsEveryRowButTheTwoAcpDoesNotReportStrictExitsThree) {
  start("marker", {"--decisions", "observe", "--hermetic", "strict"});
  ASSERT_EQ(finish(), 3) << process->stderr_text();
  std::string err = process->stderr_text();
  EXPECT_NE(err.find("(opencode 1.18.33), mode strict, decisions observe: gating unk"), std::string::npos) << err;
  EXPECT_EQ(row_line(err, "H1a"),
            "  H1a ok gating record plugins are exactly the declared set — loaded [metaharness-seam], as declared");
  EXPECT_EQ(row_line(err, "H4"),
            "  H4 ok gating record no API key unless declared — credential source \"none (the run's endpoint token "
            "only, in the generated provider config)\", no API key declared");
  EXPECT_EQ(row_line(err, "H1b"),
            "  H1b unk gating record output style is default — session.started.output_style is null: the vendor did "
            "not say");
  EXPECT_EQ(row_line(err, "H5").rfind("  H5 unk gating record MCP surface exactly the launch's — "
                                      "session.started.mcp_servers is null",
                                      0),
            0u)
      << err;
  auto report = audit_json(run_dir(), 3);
  EXPECT_EQ(report.at("gating"), "unk");
  auto v = verdicts(report);
  ASSERT_EQ(v.size(), 12u);
  for (auto id : {"h1a", "h2", "h3", "h4", "h6", "h7", "h8", "h9", "h10", "h11"})
    EXPECT_EQ(v[id], "ok") << id;
  for (auto id : {"h1b", "h5"})
    EXPECT_EQ(v[id], "unk") << id;

  // What session.started says, as docs/hermetic.md's opencode column states it: the seam plugin
  // loaded and declared under the same name, and the launch rows the plan imposes.
  auto started = process->events_named("session.started");
  ASSERT_EQ(started.size(), 1u);
  const auto& plugins = started[0].object.at("plugins").as_array();
  ASSERT_EQ(plugins.size(), 1u);
  EXPECT_EQ(plugins[0].as_object().at("name"), "metaharness-seam");
  EXPECT_TRUE(started[0].object.at("output_style").is_null());
  EXPECT_TRUE(started[0].object.at("mcp_servers").is_null());
  const auto& hermetic = started[0].object.at("hermetic").as_object();
  EXPECT_EQ(hermetic.at("mode"), "strict");
  const auto& installed = hermetic.at("installed_plugins").as_array();
  ASSERT_EQ(installed.size(), 1u);
  EXPECT_EQ(installed[0].as_object().at("name"), "metaharness-seam");
  const std::filesystem::path plugin_file(std::string(installed[0].as_object().at("installed_at").as_string()));
  EXPECT_TRUE(std::filesystem::is_regular_file(plugin_file)) << plugin_file;
  std::set<std::string> imposed, unavailable;
  for (const auto& r : hermetic.at("imposed").as_array())
    imposed.insert(std::string(r.as_object().at("row").as_string()));
  for (const auto& r : hermetic.at("unavailable").as_array())
    unavailable.insert(std::string(r.as_object().at("row").as_string()));
  EXPECT_EQ(imposed, (std::set<std::string>{"h1a", "h2", "h3", "h4", "h5", "h6", "h7", "h8", "h11"}));
  EXPECT_EQ(unavailable, (std::set<std::string>{"h9", "h10"}));
}

// An operator-named --cwd on opencode: H7 and H11 are gaps (opencode may read an AGENTS.md there
// and does not say), so strict exits 1, the gap outranking H1b's and H5's unknowns.
TEST_F(OpencodeAudit, StrictWithAnOperatorNamedCwdExitsOneOnH7AndH11) {
  auto v = strict_under_an_operator_cwd("marker");
  EXPECT_EQ(v["h1a"], "ok");
  EXPECT_EQ(v["h4"], "ok");
}

// --- the binary that ran (issue 27 section 6) ---------------------------------------------------

// A vendor dir of the test's own: the real one's packages linked in, but Claude's native package
// copied, so its binary can be changed without touching the real one. `vendor install` records
// it, a real Claude run attests it, and the audit holds the run to the record.
class RecordedBinaryAudit : public ::testing::Test {
 protected:
  void SetUp() override {
    namespace fs = std::filesystem;
    const fs::path real = fs::canonical(source_dir() / ".vendor");
    ASSERT_TRUE(fs::exists(real / "node_modules")) << "the pinned vendor CLIs (./run setup) are needed";
    fs::create_directories(vendor() / "node_modules/@anthropic-ai");
    for (const auto& e : fs::directory_iterator(real / "node_modules"))
      if (e.path().filename() != "@anthropic-ai")
        fs::create_symlink(e.path(), vendor() / "node_modules" / e.path().filename());
    for (const auto& e : fs::directory_iterator(real / "node_modules/@anthropic-ai"))
      if (e.path().filename() == "claude-code-linux-x64")
        fs::copy(e.path(), vendor() / "node_modules/@anthropic-ai" / e.path().filename(), fs::copy_options::recursive);
      else
        fs::create_symlink(e.path(), vendor() / "node_modules/@anthropic-ai" / e.path().filename());
    for (const auto& e : fs::directory_iterator(real))
      if (e.path().filename() != "node_modules" && e.path().filename() != "installed.json")
        fs::create_symlink(e.path(), vendor() / e.path().filename());
    for (char** e = environ; *e; ++e)
      if (std::string(*e).rfind("METAHARNESS_", 0) != 0) env.emplace_back(*e);
    env.push_back("METAHARNESS_VENDOR_DIR=" + vendor().string());
  }

  std::filesystem::path vendor() const { return dir.path() / "vendor"; }
  std::filesystem::path binary() const {
    return std::filesystem::canonical(vendor() / "node_modules/@anthropic-ai/claude-code-linux-x64/claude");
  }
  Output metaharness(std::vector<std::string> args) {
    args.insert(args.begin(), metaharness_binary().string());
    return run_to_end(std::move(args), env, std::chrono::seconds(120));
  }
  // A strict, observed run of the real CLI from the test's vendor dir; its exit status.
  int strict_run(const std::string& name) {
    return metaharness({"run", "claude", "-p", "go", "--model-scenario",
                        (source_dir() / "tests/scenarios/claude/bash_marker.json").string(), "--run-dir",
                        (dir.path() / name).string(), "--decisions", "observe", "--hermetic", "strict"})
        .status;
  }
  json::object attested_binary(const std::string& name) {
    for (const auto& line : read_lines(dir.path() / name / "events.jsonl"))
      if (auto doc = protocol::parse_json(line); doc && doc->is_object() && doc->at("event") == "session.started")
        return doc->at("hermetic").at("vendor_binary").as_object();
    ADD_FAILURE() << "no session.started in " << name;
    return {};
  }

  std::vector<std::string> env;
  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_F(RecordedBinaryAudit, ARunAttestsTheBinaryItRanAndAChangedBinaryIsAGap) {
  auto install = metaharness({"vendor", "install"});
  ASSERT_EQ(install.status, 0) << install.out << install.err;
  EXPECT_NE(install.out.find("vendor install: nothing to do\n"), std::string::npos) << install.out;
  EXPECT_NE(install.out.find("vendor install: recorded the sha256 of the "), std::string::npos) << install.out;
  auto record = protocol::parse_json(read_file(vendor() / "installed.json"));
  ASSERT_TRUE(record && record->is_object());
  std::string recorded;
  for (const auto& b : record->at("binaries").as_array())
    if (b.at("adapter") == "claude") {
      recorded = std::string(b.at("sha256").as_string());
      EXPECT_EQ(b.at("path").as_string(), binary().string());
      EXPECT_EQ(b.at("package"), "@anthropic-ai/claude-code");
      EXPECT_EQ(b.at("version"), "2.1.197");
    }
  ASSERT_EQ(recorded.size(), 64u) << read_file(vendor() / "installed.json");
  // Run again: a record naming every pin is left as it is.
  auto again = metaharness({"vendor", "install"});
  EXPECT_EQ(again.out.find("recorded"), std::string::npos) << again.out;

  // The run's session.started names the file exec'd, its digest and its package's version.
  ASSERT_EQ(strict_run("run-1"), 0);
  auto attested = attested_binary("run-1");
  EXPECT_EQ(attested.at("path").as_string(), binary().string());
  EXPECT_EQ(attested.at("sha256").as_string(), recorded);
  EXPECT_EQ(attested.at("package"), "@anthropic-ai/claude-code-linux-x64");
  EXPECT_EQ(attested.at("version"), "2.1.197");
  auto ok = metaharness({"audit", (dir.path() / "run-1").string(), "--json"});
  EXPECT_EQ(ok.status, 0) << ok.out;
  auto ok_doc = protocol::parse_json(ok.out);
  ASSERT_TRUE(ok_doc && ok_doc->is_object()) << ok.out;
  EXPECT_EQ(verdicts(ok_doc->as_object())["h9"], "ok");

  // The binary changed after it was recorded (one byte appended: it still runs, as 2.1.197).
  std::ofstream(binary(), std::ios::binary | std::ios::app) << '\n';
  EXPECT_EQ(strict_run("run-2"), 1) << "strict: a gating gap";
  EXPECT_NE(attested_binary("run-2").at("sha256").as_string(), recorded);
  auto gap = metaharness({"audit", (dir.path() / "run-2").string()});
  EXPECT_EQ(gap.status, 1) << gap.out;
  EXPECT_NE(row_line(gap.out, "H9")
                .find("  H9 gap gating record vendor version pinned — version 2.1.197, on the pin; "
                      "binary \"" +
                      binary().string() + "\" sha256 "),
            std::string::npos)
      << gap.out;
  EXPECT_NE(row_line(gap.out, "H9")
                .find("is not the @anthropic-ai/claude-code 2.1.197 binary `vendor install` "
                      "recorded"),
            std::string::npos)
      << gap.out;
  // The first run still ran the recorded binary.
  EXPECT_EQ(metaharness({"audit", (dir.path() / "run-1").string()}).status, 0);
}

// --- hand-made streams -------------------------------------------------------------------------

class HandMadeAudit : public ::testing::Test {
 protected:
  // A stream whose session.started is a clean Claude record, changed by `edit`, in a run directory
  // with a spec and a plan (pass write_run_files false for a bare events.jsonl).
  std::filesystem::path write_run(const std::function<void(protocol::ev::SessionStarted&)>& edit, bool closed = true) {
    protocol::ev::SessionStarted s;
    s.adapter = "claude";
    s.harness_version = "2.1.197";
    s.credential_source = "none";
    s.output_style = "default";
    s.cwd = (dir.path() / "scratch/work").string();
    s.plugins = std::vector<protocol::PluginRef>{};
    s.mcp_servers = std::vector<protocol::McpServerRef>{};
    s.hermetic.mode = protocol::HermeticMode::on;
    // The binary `vendor install` recorded (the record is the test's own: record()).
    s.hermetic.vendor_binary =
        protocol::VendorBinary{"/vendor/claude", kRecordedSha, "@anthropic-ai/claude-code", "2.1.197", std::nullopt};
    using protocol::HermeticRow;
    for (auto r : {HermeticRow::h2, HermeticRow::h3, HermeticRow::h6, HermeticRow::h8, HermeticRow::h11})
      s.hermetic.imposed.push_back({r, "imposed"});
    edit(s);
    std::string text = protocol::serialize(protocol::Event{1, "r-1", std::nullopt, s, std::nullopt}) + "\n";
    if (closed) {
      protocol::ev::StreamClosed c;
      c.events = 1;
      c.reason = protocol::CloseReason::completed;
      c.run_id = "r-1";
      text += protocol::serialize(protocol::Event{2, "r-1", std::nullopt, c, std::nullopt}) + "\n";
    }
    std::ofstream(dir.path() / "events.jsonl") << text;
    std::ofstream(dir.path() / "spec.json") << R"({"adapter":"claude","cwd":null,"vendor_env":{},"hermetic":"on"})";
    std::ofstream(dir.path() / "plan.json") << R"({"cwd":")" + (dir.path() / "scratch/work").string() + R"("})";
    return dir.path();
  }

  // The audit, holding H9's binary to the test's own install record (naming kRecordedSha).
  Output audit(std::vector<std::string> args) {
    std::ofstream(record()) << R"({"format":"metaharness.vendor-install/1","recorded_at":"",)"
                               R"("binaries":[{"adapter":"claude","package":"@anthropic-ai/claude-code",)"
                               R"("version":"2.1.197","path":"/vendor/claude","sha256":")" +
                                   kRecordedSha + R"("}]})";
    args.insert(args.end(), {"--install-record", record().string()});
    return test::audit(std::move(args));
  }
  std::filesystem::path record() const { return dir.path() / "installed.json"; }

  const std::string kRecordedSha = std::string(64, 'c');
  TempDir dir{::testing::UnitTest::GetInstance()->current_test_info()->name()};
};

TEST_F(HandMadeAudit, ACleanHandMadeRunIsOk) {
  auto o = audit({write_run([](auto&) {}).string()});
  EXPECT_EQ(o.status, 0) << o.out << o.err;
}

// The network and the model credential the attestation states (issue 25): shown beside the rows,
// never a row, and "not attested" for a run whose session.started predates them.
TEST_F(HandMadeAudit, TheAttestedNetworkAndModelCredentialAreShownBesideTheRows) {
  auto o = audit({write_run([](auto& s) {
                    s.hermetic.network = "gateway";
                    s.hermetic.model_credential = "gateway";
                  }).string()});
  EXPECT_EQ(o.status, 0) << o.out << o.err;
  EXPECT_NE(o.out.find("\nnetwork: gateway; model credential: gateway\n"), std::string::npos) << o.out;
  EXPECT_EQ(row_lines(o.out).size(), 12u) << "no row is added";
  auto j = audit({write_run([](auto& s) { s.hermetic.network = "host"; }).string(), "--json"});
  auto doc = protocol::parse_json(j.out);
  ASSERT_TRUE(doc && doc->is_object()) << j.out;
  EXPECT_EQ(doc->at("network"), "host");
  EXPECT_TRUE(doc->at("model_credential").is_null());
  auto old = audit({write_run([](auto&) {}).string()});
  EXPECT_NE(old.out.find("\nnetwork: not attested; model credential: not attested\n"), std::string::npos) << old.out;
}

// Issue 27 section 6: the binary the attestation says ran against `vendor install`'s record.
TEST_F(HandMadeAudit, ABinaryOtherThanTheRecordedOneIsAGapNoRecordIsUnknown) {
  auto other = audit({write_run([](auto& s) { s.hermetic.vendor_binary->sha256 = std::string(64, 'd'); }).string()});
  EXPECT_EQ(other.status, 1) << other.out;
  EXPECT_NE(row_line(other.out, "H9")
                .find("  H9 gap gating record vendor version pinned — version 2.1.197, on the "
                      "pin; binary \"/vendor/claude\" sha256 dddddddddddd… is not the "
                      "@anthropic-ai/claude-code 2.1.197 binary `vendor install` recorded"),
            std::string::npos)
      << other.out;
  EXPECT_NE(other.out.find("\nvendor binary: /vendor/claude (@anthropic-ai/claude-code 2.1.197), sha256 " +
                           std::string(64, 'd') + "\n"),
            std::string::npos)
      << other.out;

  const auto run = write_run([](auto&) {});
  auto none = test::audit({run.string(), "--install-record", (dir.path() / "none.json").string(), "--json"});
  EXPECT_EQ(none.status, 3) << none.out;
  auto doc = protocol::parse_json(none.out);
  ASSERT_TRUE(doc && doc->is_object()) << none.out;
  EXPECT_EQ(verdicts(doc->as_object())["h9"], "unk");
  EXPECT_EQ(doc->at("gating"), "unk");
  EXPECT_TRUE(doc->at("facts").at("install_record").at("entry").is_null());
  EXPECT_EQ(doc->at("vendor_binary").at("sha256").as_string(), kRecordedSha);

  // A run made before the attestation named its binary: unknown, not a pass.
  auto old = audit({write_run([](auto& s) { s.hermetic.vendor_binary = std::nullopt; }).string()});
  EXPECT_EQ(old.status, 3) << old.out;
  EXPECT_NE(old.out.find("\nvendor binary: not attested\n"), std::string::npos) << old.out;
}

TEST_F(HandMadeAudit, AnotherOutputStyleIsAGapExitOne) {
  auto o = audit({write_run([](auto& s) { s.output_style = "Explanatory"; }).string()});
  EXPECT_EQ(o.status, 1) << o.out;
  EXPECT_EQ(row_line(o.out, "H1b"),
            "  H1b gap gating record output style is default — output style \"Explanatory\", not the default");
}

TEST_F(HandMadeAudit, NullMcpServersIsUnknownExitThreeAndAGapOutranksIt) {
  auto o = audit({write_run([](auto& s) { s.mcp_servers = std::nullopt; }).string()});
  EXPECT_EQ(o.status, 3) << o.out;
  EXPECT_EQ(row_line(o.out, "H5").rfind("  H5 unk gating record", 0), 0u) << o.out;
  o = audit({write_run([](auto& s) {
               s.mcp_servers = std::nullopt;
               s.harness_version = "9.9.9";
             }).string()});
  EXPECT_EQ(o.status, 1) << o.out;
}

TEST_F(HandMadeAudit, AnAdvisoryGapDoesNotGate) {
  auto o = audit({write_run([](auto& s) {
                    std::erase_if(s.hermetic.imposed, [](const auto& i) { return i.row == protocol::HermeticRow::h2; });
                    s.hermetic.unavailable.push_back({protocol::HermeticRow::h2, "settings were loaded"});
                  }).string()});
  EXPECT_EQ(o.status, 0) << o.out;
  EXPECT_EQ(row_line(o.out, "H2"),
            "  H2 gap advisory launch settings sources excluded — unavailable: settings were loaded");
}

TEST_F(HandMadeAudit, ATruncatedStreamExitsThreeEvenWithEveryRowOk) {
  auto o = audit({write_run([](auto&) {}, /*closed=*/false).string()});
  EXPECT_EQ(o.status, 3) << o.out;
  EXPECT_NE(o.out.find(": gating ok"), std::string::npos);
  EXPECT_NE(o.out.find("\nstream: TRUNCATED — no stream.closed marker"), std::string::npos) << o.out;
}

TEST_F(HandMadeAudit, NoSessionStartedIsEveryRowUnknown) {
  protocol::ev::StreamClosed c;
  c.events = 0;
  c.run_id = "r-1";
  std::ofstream(dir.path() / "events.jsonl")
      << protocol::serialize(protocol::Event{1, "r-1", std::nullopt, c, std::nullopt}) << "\n";
  auto o = audit({(dir.path() / "events.jsonl").string()});
  EXPECT_EQ(o.status, 3) << o.out;
  auto rows = row_lines(o.out);
  ASSERT_EQ(rows.size(), 12u) << o.out;
  for (const auto& l : rows)
    EXPECT_NE(l.find(" unk "), std::string::npos) << l;
}

TEST_F(HandMadeAudit, WhatCannotBeReadExitsTwo) {
  auto missing = audit({(dir.path() / "nothing-here").string()});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("neither a run directory nor an events.jsonl"), std::string::npos) << missing.err;
  auto empty_dir = audit({dir.path().string()});
  EXPECT_EQ(empty_dir.status, 2);
  EXPECT_NE(empty_dir.err.find("holds no events.jsonl"), std::string::npos) << empty_dir.err;
}

}  // namespace
}  // namespace mh::test
