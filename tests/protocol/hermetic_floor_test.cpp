// The hermetic floor (reference §10): every row's ok / gap / unk, the rule that null is unknown
// (never none), the gating summary, what the stream reader collects, and the §10.4 report.
#include "protocol/hermetic_floor.hpp"

#include <gtest/gtest.h>

namespace mh::protocol {
namespace {

// A session.started as a clean Claude run writes it: every piece of evidence present and right.
ev::SessionStarted clean_start() {
  ev::SessionStarted s;
  s.adapter = "claude";
  s.harness_version = "2.1.197";
  s.credential_source = "none";
  s.output_style = "default";
  s.cwd = "/runs/r-1/scratch/work";
  s.plugins = std::vector<PluginRef>{};
  s.mcp_servers = std::vector<McpServerRef>{};
  s.hermetic.mode = HermeticMode::on;
  for (auto row : {HermeticRow::h1a, HermeticRow::h1b, HermeticRow::h2, HermeticRow::h3, HermeticRow::h4,
                   HermeticRow::h5, HermeticRow::h6, HermeticRow::h7, HermeticRow::h8, HermeticRow::h11})
    s.hermetic.imposed.push_back({row, "imposed " + std::string(to_string(row))});
  s.hermetic.unavailable = {{HermeticRow::h9, "the plan runs no doctor"}, {HermeticRow::h10, "no input tree"}};
  return s;
}

LaunchFacts clean_facts() {
  LaunchFacts f;
  f.adapter = "claude";
  f.cwd = PlannedCwd{"/runs/r-1/scratch/work", std::nullopt, false};
  f.plugins = std::vector<std::string>{};
  f.mcp_servers = std::vector<std::string>{};
  f.api_key = false;
  f.pins = std::vector<std::string>{"2.1.197"};
  f.source = "the run directory";
  return f;
}

RowVerdict row(const std::vector<RowVerdict>& rows, HermeticRow r) {
  for (const auto& v : rows)
    if (v.row == r) return v;
  ADD_FAILURE() << "no row " << to_string(r);
  return {};
}

RowVerdict judge(HermeticRow r, const ev::SessionStarted& s, const LaunchFacts& f = clean_facts()) {
  return row(judge_floor(&s, f), r);
}

// Null is unknown, on either side: row `r` of a clean run is unk once `null_stream` has nulled
// its evidence in the session.started, and unk once `null_launch` has nulled it in the launch
// facts.
void expect_unknown_when_either_side_is_null(HermeticRow r, void (*null_stream)(ev::SessionStarted&),
                                             void (*null_launch)(LaunchFacts&)) {
  auto s = clean_start();
  null_stream(s);
  EXPECT_EQ(judge(r, s).verdict, Verdict::unk) << to_string(r) << ": null in the stream";
  auto f = clean_facts();
  null_launch(f);
  EXPECT_EQ(judge(r, clean_start(), f).verdict, Verdict::unk) << to_string(r) << ": null in the launch facts";
}

TEST(HermeticFloor, TwelveRowsInOrderWithTheReferencesSeveritiesAndAssertions) {
  const auto& rows = hermetic_rows();
  ASSERT_EQ(rows.size(), 12u);
  std::string labels;
  for (const auto& r : rows)
    labels += std::string(r.label) + " ";
  EXPECT_EQ(labels, "H1a H1b H2 H3 H4 H5 H6 H7 H8 H9 H10 H11 ");
  EXPECT_EQ(row_info(HermeticRow::h2).severity, Severity::advisory);
  EXPECT_EQ(row_info(HermeticRow::h6).severity, Severity::advisory);
  EXPECT_EQ(row_info(HermeticRow::h6).assertion, Assertion::effect);
  for (auto r : {HermeticRow::h1a, HermeticRow::h1b, HermeticRow::h4, HermeticRow::h5, HermeticRow::h7, HermeticRow::h9,
                 HermeticRow::h10})
    EXPECT_EQ(row_info(r).assertion, Assertion::record) << to_string(r);
  for (auto r : {HermeticRow::h2, HermeticRow::h3, HermeticRow::h8, HermeticRow::h11})
    EXPECT_EQ(row_info(r).assertion, Assertion::launch) << to_string(r);
}

TEST(HermeticFloor, ACleanRunIsOkOnEveryRow) {
  auto s = clean_start();
  auto rows = judge_floor(&s, clean_facts());
  ASSERT_EQ(rows.size(), 12u);
  for (const auto& r : rows)
    EXPECT_EQ(r.verdict, Verdict::ok) << to_string(r.row) << ": " << r.detail;
  EXPECT_EQ(gating_verdict(rows), Verdict::ok);
}

TEST(HermeticFloor, NoSessionStartedMakesEveryRowUnknown) {
  auto rows = judge_floor(nullptr, clean_facts());
  ASSERT_EQ(rows.size(), 12u);
  for (const auto& r : rows) {
    EXPECT_EQ(r.verdict, Verdict::unk);
    EXPECT_NE(r.detail.find("nothing was observed"), std::string::npos);
  }
  EXPECT_EQ(gating_verdict(rows), Verdict::unk);
}

// --- H1a ---------------------------------------------------------------------------------------

TEST(HermeticFloor, H1aComparesLoadedPluginNamesWithTheDeclaredSetSorted) {
  auto s = clean_start();
  auto f = clean_facts();
  s.plugins = std::vector<PluginRef>{{"b", "x", "1"}, {"a", "y", "2"}};
  f.plugins = std::vector<std::string>{"a", "b"};
  EXPECT_EQ(judge(HermeticRow::h1a, s, f).verdict, Verdict::ok);
  f.plugins = std::vector<std::string>{"a"};
  auto gap = judge(HermeticRow::h1a, s, f);
  EXPECT_EQ(gap.verdict, Verdict::gap);
  EXPECT_EQ(gap.detail, "loaded [a, b] where [a] was declared");
  s.plugins = std::vector<PluginRef>{{std::nullopt, std::nullopt, std::nullopt}};
  EXPECT_EQ(judge(HermeticRow::h1a, s, f).detail, "loaded [<unnamed>] where [a] was declared");
}

TEST(HermeticFloor, H1aNullPluginsIsUnknownNotNone) {
  auto s = clean_start();
  s.plugins = std::nullopt;
  auto v = judge(HermeticRow::h1a, s);
  EXPECT_EQ(v.verdict, Verdict::unk);
  EXPECT_NE(v.detail.find("null"), std::string::npos);
  // ...and an unknown declared set is unknown too, even when nothing loaded.
  auto f = clean_facts();
  f.plugins = std::nullopt;
  EXPECT_EQ(judge(HermeticRow::h1a, clean_start(), f).verdict, Verdict::unk);
}

// --- H1b ---------------------------------------------------------------------------------------

TEST(HermeticFloor, H1bDefaultEmptyOrNullSpelledOutIsOkAnotherStyleIsAGapJsonNullUnknown) {
  auto s = clean_start();
  for (const char* ok : {"default", "", "null"}) {
    s.output_style = ok;
    EXPECT_EQ(judge(HermeticRow::h1b, s).verdict, Verdict::ok) << ok;
  }
  s.output_style = "Explanatory";
  EXPECT_EQ(judge(HermeticRow::h1b, s).verdict, Verdict::gap);
  s.output_style = std::nullopt;
  EXPECT_EQ(judge(HermeticRow::h1b, s).verdict, Verdict::unk);
}

// --- launch and effect rows (H2, H3, H6, H8, H11) ---------------------------------------------

TEST(HermeticFloor, AttestationRowsImposedOkUnavailableGapNeitherUnknown) {
  for (auto r : {HermeticRow::h2, HermeticRow::h3, HermeticRow::h6, HermeticRow::h8, HermeticRow::h11}) {
    auto s = clean_start();
    EXPECT_EQ(judge(r, s).verdict, Verdict::ok) << to_string(r);
    EXPECT_EQ(judge(r, s).detail, "imposed: imposed " + std::string(to_string(r)));
    std::erase_if(s.hermetic.imposed, [&](const ImposedRow& i) { return i.row == r; });
    EXPECT_EQ(judge(r, s).verdict, Verdict::unk) << to_string(r);
    s.hermetic.unavailable.push_back({r, "could not"});
    EXPECT_EQ(judge(r, s).verdict, Verdict::gap) << to_string(r);
    EXPECT_EQ(judge(r, s).detail, "unavailable: could not");
  }
}

TEST(HermeticFloor, AnAttestationThatBothImposesAndMarksUnavailableIsAGap) {
  auto s = clean_start();
  s.hermetic.unavailable.push_back({HermeticRow::h3, "could not"});
  auto v = judge(HermeticRow::h3, s);
  EXPECT_EQ(v.verdict, Verdict::gap);
  EXPECT_NE(v.detail.find("both"), std::string::npos);
}

// --- H4 ----------------------------------------------------------------------------------------

TEST(HermeticFloor, H4ACredentialSourceNamingAKeyIsAGapUnlessAKeyWasDeclared) {
  auto s = clean_start();
  auto f = clean_facts();
  for (const char* key : {"ANTHROPIC_API_KEY", "apiKeyHelper", "Api Key", "key-file"}) {
    s.credential_source = key;
    EXPECT_EQ(judge(HermeticRow::h4, s, f).verdict, Verdict::gap) << key;
  }
  f.api_key = true;
  s.credential_source = "ANTHROPIC_API_KEY";
  EXPECT_EQ(judge(HermeticRow::h4, s, f).verdict, Verdict::ok);
  // Declared, but the vendor says it uses none: the mismatch is a gap the other way.
  s.credential_source = "none";
  EXPECT_EQ(judge(HermeticRow::h4, s, f).verdict, Verdict::gap);
  f.api_key = false;
  for (const char* fine : {"none", "oauth", "loopback"}) {
    s.credential_source = fine;
    EXPECT_EQ(judge(HermeticRow::h4, s, f).verdict, Verdict::ok) << fine;
  }
}

TEST(HermeticFloor, H4NullCredentialSourceOrAnUnknownDeclarationIsUnknown) {
  expect_unknown_when_either_side_is_null(
      HermeticRow::h4, [](ev::SessionStarted& s) { s.credential_source = std::nullopt; },
      [](LaunchFacts& f) { f.api_key = std::nullopt; });
}

// --- H5 ----------------------------------------------------------------------------------------

TEST(HermeticFloor, H5McpServersMustBeExactlyTheLaunchesNullIsUnknownNeverZero) {
  auto s = clean_start();
  auto f = clean_facts();
  EXPECT_EQ(judge(HermeticRow::h5, s, f).verdict, Verdict::ok);  // [] is a real zero
  s.mcp_servers = std::vector<McpServerRef>{{"echo", "connected"}};
  auto gap = judge(HermeticRow::h5, s, f);
  EXPECT_EQ(gap.verdict, Verdict::gap);
  EXPECT_EQ(gap.detail, "MCP servers [echo] where the launch configured none");
  s.mcp_servers = std::vector<McpServerRef>{{std::nullopt, "connected"}};
  EXPECT_NE(judge(HermeticRow::h5, s, f).detail.find("<unnamed>"), std::string::npos);
  f.mcp_servers = std::vector<std::string>{"metaharness"};
  s.mcp_servers = std::vector<McpServerRef>{{"metaharness", "connected"}};
  EXPECT_EQ(judge(HermeticRow::h5, s, f).verdict, Verdict::ok);
  s.mcp_servers = std::nullopt;
  auto unknown = judge(HermeticRow::h5, s, f);
  EXPECT_EQ(unknown.verdict, Verdict::unk);
  EXPECT_NE(unknown.detail.find("never zero"), std::string::npos);
  f.mcp_servers = std::nullopt;
  EXPECT_EQ(judge(HermeticRow::h5, clean_start(), f).verdict, Verdict::unk);
}

// --- H7 ----------------------------------------------------------------------------------------

TEST(HermeticFloor, H7TheVendorsCwdMustBeThePlannedOne) {
  auto s = clean_start();
  auto f = clean_facts();
  s.cwd = "/runs/r-1/scratch/work/";
  EXPECT_EQ(judge(HermeticRow::h7, s, f).verdict, Verdict::ok);  // the same path, spelled with a slash
  s.cwd = "/home/someone/project";
  auto gap = judge(HermeticRow::h7, s, f);
  EXPECT_EQ(gap.verdict, Verdict::gap);
  EXPECT_EQ(gap.detail, "cwd \"/home/someone/project\" where \"/runs/r-1/scratch/work\" was planned");
  // A vendor reporting getcwd() sees the planned directory with its links resolved.
  s.cwd = "/private/runs/r-1/scratch/work";
  f.cwd->resolved = "/private/runs/r-1/scratch/work";
  EXPECT_EQ(judge(HermeticRow::h7, s, f).verdict, Verdict::ok);
}

TEST(HermeticFloor, H7UnknownWhenEitherSideIsUnknown) {
  expect_unknown_when_either_side_is_null(
      HermeticRow::h7, [](ev::SessionStarted& s) { s.cwd = std::nullopt; },
      [](LaunchFacts& f) { f.cwd = std::nullopt; });
  auto f = clean_facts();
  f.cwd = std::nullopt;
  EXPECT_EQ(judge(HermeticRow::h7, clean_start(), f).detail,
            "the planned working directory is not known from the run directory");
}

TEST(HermeticFloor, H7AnOperatorNamedCwdIsNotOursAGapEvenWhenTheVendorRunsThere) {
  auto s = clean_start();
  auto f = clean_facts();
  f.cwd = PlannedCwd{"/home/someone/project", std::nullopt, true};
  s.cwd = "/home/someone/project";
  EXPECT_EQ(judge(HermeticRow::h7, s, f).verdict, Verdict::gap);
  // The attestation saying so is a gap on its own, even with no launch facts (a bare stream).
  std::erase_if(s.hermetic.imposed, [](const ImposedRow& i) { return i.row == HermeticRow::h7; });
  s.hermetic.unavailable.push_back({HermeticRow::h7, "the operator named the working directory"});
  f.cwd = std::nullopt;
  auto v = judge(HermeticRow::h7, s, f);
  EXPECT_EQ(v.verdict, Verdict::gap);
  EXPECT_NE(v.detail.find("unavailable: the operator named"), std::string::npos);
}

// --- H9, H10 -----------------------------------------------------------------------------------

TEST(HermeticFloor, H9TheObservedVersionAgainstThePin) {
  auto s = clean_start();
  EXPECT_EQ(judge(HermeticRow::h9, s).verdict, Verdict::ok);  // the attestation's "unavailable" is no verdict
  s.harness_version = "2.1.198";
  auto gap = judge(HermeticRow::h9, s);
  EXPECT_EQ(gap.verdict, Verdict::gap);
  EXPECT_EQ(gap.detail, "version 2.1.198, off the pin [2.1.197]");
  expect_unknown_when_either_side_is_null(
      HermeticRow::h9, [](ev::SessionStarted& s) { s.harness_version = std::nullopt; },
      [](LaunchFacts& f) { f.pins = std::nullopt; });
}

// Issue 27 section 6: with an install record consulted, H9 also holds the binary the attestation
// says ran to the one `vendor install` recorded for the adapter.
const std::string kInstalled(64, 'a');

InstallRecordFact record_naming(std::string sha256) {
  return {"/vendor/installed.json",
          InstalledBinary{"claude", "@anthropic-ai/claude-code", "2.1.197", "/vendor/node_modules/claude", sha256}, ""};
}

ev::SessionStarted start_with_binary(std::optional<std::string> sha256) {
  auto s = clean_start();
  s.hermetic.vendor_binary = VendorBinary{"/vendor/node_modules/claude", std::move(sha256),
                                          "@anthropic-ai/claude-code-linux-x64", "2.1.197", std::nullopt};
  return s;
}

TEST(HermeticFloor, H9TheAttestedBinaryAgainstTheInstallRecordSameDigestIsOk) {
  auto f = clean_facts();
  f.install_record = record_naming(kInstalled);
  auto v = judge(HermeticRow::h9, start_with_binary(kInstalled), f);
  EXPECT_EQ(v.verdict, Verdict::ok) << v.detail;
  EXPECT_EQ(v.detail,
            "version 2.1.197, on the pin; binary \"/vendor/node_modules/claude\" sha256 aaaaaaaaaaaa…, as `vendor "
            "install` recorded for @anthropic-ai/claude-code 2.1.197");
}

TEST(HermeticFloor, H9ABinaryWhoseDigestIsNotTheRecordedOneIsAGapEvenOnThePinnedVersion) {
  auto f = clean_facts();
  f.install_record = record_naming(kInstalled);
  auto v = judge(HermeticRow::h9, start_with_binary(std::string(64, 'b')), f);
  EXPECT_EQ(v.verdict, Verdict::gap);
  EXPECT_NE(v.detail.find("sha256 bbbbbbbbbbbb… is not the @anthropic-ai/claude-code 2.1.197 binary `vendor install` "
                          "recorded (\"/vendor/node_modules/claude\", sha256 aaaaaaaaaaaa…, in "
                          "/vendor/installed.json)"),
            std::string::npos)
      << v.detail;
  // A gap outranks an unknown version.
  auto s = start_with_binary(std::string(64, 'b'));
  s.harness_version = std::nullopt;
  EXPECT_EQ(judge(HermeticRow::h9, s, f).verdict, Verdict::gap);
  EXPECT_EQ(gating_verdict(judge_floor(&s, f)), Verdict::gap);
}

TEST(HermeticFloor, H9NoRecordOrNoDigestIsUnknownNeverAGapNorOk) {
  auto f = clean_facts();
  f.install_record =
      InstallRecordFact{"/vendor/installed.json", std::nullopt, "no install record at /vendor/installed.json"};
  auto none = judge(HermeticRow::h9, start_with_binary(kInstalled), f);
  EXPECT_EQ(none.verdict, Verdict::unk);
  EXPECT_EQ(none.detail, "version 2.1.197, on the pin; no install record at /vendor/installed.json");

  f.install_record = record_naming(kInstalled);
  auto unattested = judge(HermeticRow::h9, clean_start(), f);  // a run made before the attestation said
  EXPECT_EQ(unattested.verdict, Verdict::unk);
  EXPECT_NE(unattested.detail.find("the attestation names no vendor binary digest"), std::string::npos);

  auto refused = start_with_binary(std::nullopt);
  refused.hermetic.vendor_binary->refused = "cannot digest the vendor binary /x: Permission denied";
  auto v = judge(HermeticRow::h9, refused, f);
  EXPECT_EQ(v.verdict, Verdict::unk);
  EXPECT_NE(v.detail.find("was not digested at launch: cannot digest the vendor binary /x: Permission denied"),
            std::string::npos)
      << v.detail;

  // An off-pin version is a gap whatever the record says.
  auto off = start_with_binary(kInstalled);
  off.harness_version = "2.1.198";
  f.install_record = InstallRecordFact{"/vendor/installed.json", std::nullopt, "none"};
  EXPECT_EQ(judge(HermeticRow::h9, off, f).verdict, Verdict::gap);
}

// On the wire: additive, omitted when not said, read back field by field; a digest that is not
// one is refused.
TEST(HermeticFloor, TheAttestedBinaryIsAdditiveOnTheWireAndReadsBack) {
  auto s = start_with_binary(kInstalled);
  std::string line = serialize(Event{1, "r-1", std::nullopt, s, std::nullopt});
  EXPECT_NE(line.find(R"("vendor_binary":{"path":"/vendor/node_modules/claude","sha256":")" + kInstalled +
                      R"(","package":"@anthropic-ai/claude-code-linux-x64","version":"2.1.197"})"),
            std::string::npos)
      << line;
  auto back = session_started_in(line);
  ASSERT_TRUE(back && back->hermetic.vendor_binary);
  EXPECT_EQ(back->hermetic.vendor_binary->sha256, kInstalled);
  EXPECT_EQ(back->hermetic.vendor_binary->version, "2.1.197");
  EXPECT_FALSE(back->hermetic.vendor_binary->refused);

  std::string old_line = serialize(Event{1, "r-1", std::nullopt, clean_start(), std::nullopt});
  EXPECT_EQ(old_line.find("vendor_binary"), std::string::npos) << "omitted when not said";
  auto old = session_started_in(old_line);
  ASSERT_TRUE(old);
  EXPECT_FALSE(old->hermetic.vendor_binary);

  auto refused = start_with_binary(std::nullopt);
  refused.hermetic.vendor_binary->refused = "cannot digest the vendor binary /x: Permission denied";
  auto refused_back = session_started_in(serialize(Event{1, "r-1", std::nullopt, refused, std::nullopt}));
  ASSERT_TRUE(refused_back && refused_back->hermetic.vendor_binary);
  EXPECT_FALSE(refused_back->hermetic.vendor_binary->sha256);
  EXPECT_EQ(refused_back->hermetic.vendor_binary->refused, refused.hermetic.vendor_binary->refused);

  std::string bad = line;
  bad.replace(bad.find(kInstalled), 64, std::string(64, 'A'));
  EXPECT_FALSE(session_started_in(bad)) << "an upper-case digest is no digest";
}

// A caller that consulted no record (the daemon's `get`) judges the version alone, as before.
TEST(HermeticFloor, H9WithoutAConsultedRecordJudgesTheVersionAlone) {
  auto v = judge(HermeticRow::h9, start_with_binary(std::string(64, 'b')));
  EXPECT_EQ(v.verdict, Verdict::ok);
  EXPECT_EQ(v.detail, "version 2.1.197, on the pin");
}

TEST(HermeticFloor, H10IsOkWithADigestAndOkWithoutOneNothingPinnedNothingCanMove) {
  auto s = clean_start();
  s.inputs_digest = std::string(64, 'a');
  EXPECT_EQ(judge(HermeticRow::h10, s).verdict, Verdict::ok);
  s.inputs_digest = std::nullopt;
  auto v = judge(HermeticRow::h10, s);
  EXPECT_EQ(v.verdict, Verdict::ok);
  EXPECT_NE(v.detail.find("nothing can move"), std::string::npos);
}

// --- the gating summary ------------------------------------------------------------------------

TEST(HermeticFloor, GapOutranksUnknownAndAdvisoryRowsNeverGate) {
  auto s = clean_start();
  s.output_style = std::nullopt;  // H1b unk
  EXPECT_EQ(gating_verdict(judge_floor(&s, clean_facts())), Verdict::unk);
  s.harness_version = "0.0.1";  // H9 gap
  EXPECT_EQ(gating_verdict(judge_floor(&s, clean_facts())), Verdict::gap);

  auto advisory = clean_start();
  std::erase_if(advisory.hermetic.imposed,
                [](const ImposedRow& i) { return i.row == HermeticRow::h2 || i.row == HermeticRow::h6; });
  advisory.hermetic.unavailable.push_back({HermeticRow::h2, "could not"});
  auto rows = judge_floor(&advisory, clean_facts());
  EXPECT_EQ(row(rows, HermeticRow::h2).verdict, Verdict::gap);
  EXPECT_EQ(row(rows, HermeticRow::h6).verdict, Verdict::unk);
  EXPECT_EQ(gating_verdict(rows), Verdict::ok);
}

// --- launch facts ------------------------------------------------------------------------------

TEST(HermeticFloor, LaunchFactsFromARunDirectory) {
  auto spec = parse_json(R"({"adapter":"codex","cwd":null,"vendor_env":{"LANG":"C"},"hermetic":"strict"})");
  auto plan = parse_json(R"({"cwd":"/runs/r-1/scratch/work"})");
  LaunchFacts f = launch_facts_from_run_files(*spec, *plan);
  EXPECT_EQ(f.adapter, "codex");
  ASSERT_TRUE(f.cwd);
  EXPECT_EQ(f.cwd->planned, "/runs/r-1/scratch/work");
  EXPECT_FALSE(f.cwd->operator_named);
  EXPECT_EQ(f.plugins, std::vector<std::string>{});
  EXPECT_EQ(f.mcp_servers, std::vector<std::string>{});
  EXPECT_EQ(f.api_key, false);
  EXPECT_FALSE(f.pins);  // the caller's to add
  EXPECT_EQ(spec_mode(*spec), HermeticMode::strict);

  auto named = parse_json(R"({"adapter":"claude","cwd":"/src","vendor_env":{"OPENAI_API_KEY":"x"}})");
  f = launch_facts_from_run_files(*named, *parse_json(R"({"cwd":"/src"})"));
  ASSERT_TRUE(f.cwd);
  EXPECT_TRUE(f.cwd->operator_named);
  EXPECT_EQ(f.api_key, true);
  EXPECT_FALSE(spec_mode(*named));
}

// The plugins the launch installs itself (the plan's attestation's installed_plugins: opencode's
// seam plugin) are declared: loading them is no gap. A list that cannot be read is not "none".
TEST(HermeticFloor, ThePlansInstalledPluginsAreDeclared) {
  auto spec = parse_json(R"({"adapter":"opencode","cwd":null,"vendor_env":{}})");
  auto plan = parse_json(R"({"cwd":"/w","hermetic":{"installed_plugins":[{"name":"metaharness-seam"}]}})");
  LaunchFacts f = launch_facts_from_run_files(*spec, *plan);
  EXPECT_EQ(f.plugins, std::vector<std::string>{"metaharness-seam"});
  auto s = clean_start();
  s.plugins = std::vector<PluginRef>{{"metaharness-seam", "metaharness-seam.js", std::nullopt}};
  EXPECT_EQ(row(judge_floor(&s, f), HermeticRow::h1a).verdict, Verdict::ok);
  f = launch_facts_from_run_files(*spec, *parse_json(R"({"cwd":"/w","hermetic":{"installed_plugins":[]}})"));
  EXPECT_EQ(row(judge_floor(&s, f), HermeticRow::h1a).verdict, Verdict::gap) << "loaded but not installed by the plan";
  for (auto unreadable :
       {R"({"hermetic":{"installed_plugins":{}}})", R"({"hermetic":{"installed_plugins":[{}]}})", R"({"hermetic":[]})"})
    EXPECT_FALSE(launch_facts_from_run_files(*spec, *parse_json(unreadable)).plugins) << unreadable;
  // A spec that may declare plugins of its own still leaves the set unknown, whatever the plan says.
  EXPECT_FALSE(launch_facts_from_run_files(*parse_json(R"({"plugins":["p"]})"), *plan).plugins);
}

TEST(HermeticFloor, MissingRunFilesLeaveTheirFactsUnknownNeverGuessed) {
  LaunchFacts no_plan = launch_facts_from_run_files(*parse_json(R"({"adapter":"claude","cwd":null})"), nullptr);
  EXPECT_FALSE(no_plan.cwd);
  EXPECT_FALSE(no_plan.api_key);  // no vendor_env key: not known
  LaunchFacts nothing = launch_facts_from_run_files(nullptr, nullptr);
  EXPECT_FALSE(nothing.cwd || nothing.plugins || nothing.mcp_servers || nothing.api_key || nothing.adapter);
  // A spec that can declare plugins or MCP servers (a newer build's) is not read as declaring none.
  LaunchFacts newer =
      launch_facts_from_run_files(*parse_json(R"({"plugins":["p"],"mcp_servers":[],"vendor_env":{}})"), nullptr);
  EXPECT_FALSE(newer.plugins);
  EXPECT_FALSE(newer.mcp_servers);
  LaunchFacts bare = launch_facts_from_stream_alone();
  EXPECT_FALSE(bare.cwd || bare.plugins || bare.mcp_servers || bare.api_key || bare.pins);
  auto s = clean_start();
  auto rows = judge_floor(&s, bare);
  for (auto r : {HermeticRow::h1a, HermeticRow::h4, HermeticRow::h5, HermeticRow::h7, HermeticRow::h9})
    EXPECT_EQ(row(rows, r).verdict, Verdict::unk) << to_string(r);
  EXPECT_NE(row(rows, HermeticRow::h7).detail.find("the stream alone"), std::string::npos);
}

// --- the stream reader and the report ----------------------------------------------------------

std::string line(std::uint64_t seq, EventPayload payload) {
  return serialize(Event{seq, "r-1", std::nullopt, std::move(payload), std::nullopt}) + "\n";
}

ev::ToolDecided decided(std::string call, Decision d, DecidedBy by, Seam seam) {
  ev::ToolDecided t;
  t.call_id = std::move(call);
  t.decision = std::move(d);
  t.decided_by = by;
  t.seam = seam;
  return t;
}

std::string clean_stream() {
  ev::SessionEnded ended;
  ended.is_error = false;
  ended.census.count(decision::Allow{}, Seam::hook, DecidedBy::frame);
  ev::StreamClosed closed;
  closed.events = 4;
  closed.reason = CloseReason::completed;
  closed.run_id = "r-1";
  return line(1, clean_start()) + line(2, decided("c1", decision::Allow{}, DecidedBy::frame, Seam::hook)) +
         line(3, ended) + line(4, decided("c2", decision::Deny{"abandoned"}, DecidedBy::adapter, Seam::hook)) +
         line(5, closed);
}

TEST(HermeticFloor, TheStreamReaderCollectsTheEvidenceTheCensusAndCompleteness) {
  StreamRecord r = read_stream_record(clean_stream());
  ASSERT_TRUE(r.started);
  EXPECT_EQ(r.started->adapter, "claude");
  ASSERT_TRUE(r.ended);
  EXPECT_EQ(r.census.allowed, 1u);
  EXPECT_EQ(r.census.denied, 1u);  // the decision written after session.ended counts too
  EXPECT_EQ(r.census.by_decider.at("adapter"), 1u);
  EXPECT_EQ(r.ended->census.total(), 1u);
  EXPECT_TRUE(r.stream.complete_and_well_formed());
}

TEST(HermeticFloor, TheReportPrintsOneLinePerRowThenCensusWithheldAndStream) {
  AuditReport report = audit(read_stream_record(clean_stream()), clean_facts());
  EXPECT_EQ(report.gating, Verdict::ok);
  EXPECT_EQ(audit_exit_status(report), 0);
  std::string text = audit_report_text(report);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "hermetic audit: run r-1 (claude 2.1.197), mode on, decisions frame: gating ok");
  EXPECT_NE(text.find("\n  H1a ok gating record plugins are exactly the declared set — loaded none, as declared\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("\n  H2 ok advisory launch settings sources excluded — imposed: imposed h2\n"),
            std::string::npos);
  EXPECT_NE(text.find("\n  H6 ok advisory effect credential carriage exactly declared — imposed: imposed h6\n"),
            std::string::npos);
  EXPECT_NE(text.find("\ndecision census: allowed=1 denied=1 replaced=0 abstained=0\n"
                      "  by seam    hook: 2\n"
                      "  by decider adapter: 1\n"
                      "  by decider frame: 1\n"
                      "  (session.ended counted 1 decision(s); 1 more came after the terminal record)\n"
                      "withheld: not stated by the harness\n"
                      "stream: complete — 4 event(s) before the marker, reason completed\n"),
            std::string::npos)
      << text;
  std::size_t row_lines = 0;
  for (std::size_t at = text.find("\n  H"); at != std::string::npos; at = text.find("\n  H", at + 1))
    ++row_lines;
  EXPECT_EQ(row_lines, 12u);
}

TEST(HermeticFloor, WithheldNoneDeclaredAndListedAndTheZeroAdjudicationNote) {
  auto s = clean_start();
  s.withheld = std::vector<WithheldTool>{};
  ev::StreamClosed closed;
  closed.events = 1;
  closed.run_id = "r-1";
  std::string text = audit_report_text(audit(read_stream_record(line(1, s) + line(2, closed)), clean_facts()));
  EXPECT_NE(text.find("\nwithheld: none declared\n"), std::string::npos) << text;
  EXPECT_NE(text.find("no tool call was adjudicated"), std::string::npos);
  EXPECT_NE(text.find("(no session.ended"), std::string::npos);
  s.withheld = std::vector<WithheldTool>{{"Bash", "no shell"}, {"WebFetch", "offline"}};
  text = audit_report_text(audit(read_stream_record(line(1, s) + line(2, closed)), clean_facts()));
  EXPECT_NE(text.find("\nwithheld: Bash (no shell); WebFetch (offline)\n"), std::string::npos) << text;
}

TEST(HermeticFloor, ATruncatedStreamCannotVouchEvenWithEveryRowOk) {
  AuditReport report = audit(read_stream_record(line(1, clean_start())), clean_facts());
  EXPECT_EQ(report.gating, Verdict::ok);
  EXPECT_EQ(audit_exit_status(report), 3);
  EXPECT_NE(audit_report_text(report).find("\nstream: TRUNCATED — no stream.closed marker"), std::string::npos);
}

TEST(HermeticFloor, ExitStatusGapOneUnknownThree) {
  auto s = clean_start();
  s.output_style = "Explanatory";
  ev::StreamClosed closed;
  closed.events = 1;
  closed.run_id = "r-1";
  EXPECT_EQ(audit_exit_status(audit(read_stream_record(line(1, s) + line(2, closed)), clean_facts())), 1);
  s.output_style = std::nullopt;
  EXPECT_EQ(audit_exit_status(audit(read_stream_record(line(1, s) + line(2, closed)), clean_facts())), 3);
  // Nothing observed at all: every row unk, the mode from the spec.
  AuditReport nothing = audit(read_stream_record(line(1, closed)), clean_facts(), HermeticMode::strict);
  EXPECT_EQ(nothing.gating, Verdict::unk);
  EXPECT_EQ(nothing.mode, HermeticMode::strict);
  EXPECT_EQ(audit_exit_status(nothing), 3);
}

TEST(HermeticFloor, TheJsonFormCarriesRowsByWireIdAndNullsForUnknowns) {
  AuditReport report = audit(read_stream_record(clean_stream()), launch_facts_from_stream_alone());
  json::object o = audit_report_json(report);
  EXPECT_EQ(o.at("gating"), "unk");
  EXPECT_EQ(o.at("mode"), "on");
  const auto& rows = o.at("rows").as_array();
  ASSERT_EQ(rows.size(), 12u);
  EXPECT_EQ(rows[0].as_object().at("id"), "h1a");
  EXPECT_EQ(rows[0].as_object().at("verdict"), "unk");
  EXPECT_EQ(rows[0].as_object().at("severity"), "gating");
  EXPECT_EQ(rows[0].as_object().at("assertion"), "record");
  EXPECT_EQ(rows[11].as_object().at("id"), "h11");
  EXPECT_TRUE(o.at("withheld").is_null());
  EXPECT_TRUE(o.at("facts").as_object().at("plugins").is_null());
  EXPECT_TRUE(o.at("facts").as_object().at("planned_cwd").is_null());
  EXPECT_EQ(o.at("stream").as_object().at("completeness"), "Complete");
  EXPECT_EQ(o.at("exit_status"), 3);
}

// --- the daemon's view -------------------------------------------------------------------------

TEST(HermeticFloor, TheViewIsNullUnderOffAndBeforeSessionStartedOnAnOpenRun) {
  auto s = clean_start();
  json::object off = hermetic_view_json(HermeticMode::off, &s, clean_facts(), true);
  EXPECT_EQ(off.at("mode"), "off");
  EXPECT_TRUE(off.at("gating").is_null());
  EXPECT_TRUE(off.at("rows").is_null());
  json::object pending = hermetic_view_json(HermeticMode::on, nullptr, clean_facts(), /*closed=*/false);
  EXPECT_EQ(pending.at("mode"), "on");
  EXPECT_TRUE(pending.at("gating").is_null());
  EXPECT_TRUE(pending.at("rows").is_null());
}

TEST(HermeticFloor, TheViewJudgesOnceSessionStartedExistsAndAClosedRunWithoutOneIsUnknown) {
  auto s = clean_start();
  json::object live = hermetic_view_json(HermeticMode::strict, &s, clean_facts(), /*closed=*/false);
  EXPECT_EQ(live.at("gating"), "ok");
  ASSERT_EQ(live.at("rows").as_array().size(), 12u);
  const auto& first = live.at("rows").as_array()[0].as_object();
  for (auto key : {"id", "verdict", "severity", "assertion", "control", "detail"})
    EXPECT_TRUE(first.contains(key)) << key;
  json::object never = hermetic_view_json(HermeticMode::on, nullptr, clean_facts(), /*closed=*/true);
  EXPECT_EQ(never.at("gating"), "unk");
  for (const auto& r : never.at("rows").as_array())
    EXPECT_EQ(r.as_object().at("verdict"), "unk");
  // No mode in the spec: the attestation's.
  s.hermetic.mode = HermeticMode::strict;
  EXPECT_EQ(hermetic_view_json(std::nullopt, &s, clean_facts(), true).at("mode"), "strict");
}

TEST(HermeticFloor, SessionStartedInOneLine) {
  std::string l = line(1, clean_start());
  l.pop_back();
  auto s = session_started_in(l);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->adapter, "claude");
  ev::Text text;
  text.text = R"("event":"session.started")";
  std::string other = line(2, text);
  other.pop_back();
  EXPECT_FALSE(session_started_in(other)) << "a payload that mentions it is not it";
  EXPECT_FALSE(session_started_in("{not json"));
}

}  // namespace
}  // namespace mh::protocol
