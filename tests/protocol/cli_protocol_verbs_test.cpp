// The protocol verbs of the real binary: check-stream, frame seal, frame verify. Runs
// build/bin/metaharness (path compiled in) with files in a private temporary directory and
// checks exit codes and what is printed.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "golden_frame.hpp"
#include "protocol/digest.hpp"
#include "protocol/events.hpp"
#include "protocol/line_cut.hpp"

#ifndef MH_METAHARNESS_BIN
#error "MH_METAHARNESS_BIN must name the metaharness binary"
#endif

namespace mh::protocol {
namespace {

namespace fs = std::filesystem;

struct Invocation {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s)
    q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class CliVerbs : public testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = (fs::temp_directory_path() / "mh-cli-verbs-XXXXXX").string();
    ASSERT_NE(mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, std::string_view content) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }

  // Runs the binary with `args` (already quoted), optionally feeding `stdin_file`.
  Invocation run(const std::string& args, const fs::path& stdin_file = {}) {
    fs::path out = dir_ / "stdout", err = dir_ / "stderr";
    std::string command = shell_quote(MH_METAHARNESS_BIN) + " " + args;
    if (!stdin_file.empty()) command += " < " + shell_quote(stdin_file.string());
    command += " > " + shell_quote(out.string()) + " 2> " + shell_quote(err.string());
    int status = std::system(command.c_str());
    Invocation r;
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.out = slurp(out);
    r.err = slurp(err);
    return r;
  }

  fs::path dir_;
};

std::string stream_of(std::uint64_t n, bool close) {
  std::string s;
  for (std::uint64_t i = 1; i <= n; ++i)
    s += serialize(Event{i, "r-1", std::nullopt, ev::Text{"t", std::nullopt}}) + "\n";
  if (close) {
    ev::StreamClosed closed;
    closed.events = n;
    closed.reason = CloseReason::completed;
    closed.run_id = "r-1";
    s += serialize(Event{n + 1, "r-1", std::nullopt, closed}) + "\n";
  }
  return s;
}

TEST_F(CliVerbs, CheckStreamExitsZeroForACompleteWellFormedStream) {
  Invocation r = run("check-stream " + shell_quote(write("ok.jsonl", stream_of(2, true)).string()));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "Complete: 2 event(s) before stream.closed (reason completed), run r-1\n");
}

TEST_F(CliVerbs, CheckStreamReadsStandardInputForDash) {
  Invocation r = run("check-stream -", write("ok.jsonl", stream_of(3, true)));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.rfind("Complete: 3 event(s)", 0), 0u) << r.out;
}

TEST_F(CliVerbs, CheckStreamExitsOneForATruncatedStream) {
  Invocation r = run("check-stream " + shell_quote(write("cut.jsonl", stream_of(2, false)).string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out.rfind("Truncated: no stream.closed marker after 2 line(s)", 0), 0u) << r.out;
}

TEST_F(CliVerbs, CheckStreamNamesTheFirstBadLineAndExitsOne) {
  std::string s = stream_of(3, true);
  auto second = s.find('\n') + 1;
  s.replace(s.find("\"seq\":2", second), 7, "\"seq\":9");
  Invocation r = run("check-stream " + shell_quote(write("gap.jsonl", s).string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("first bad line: 2: seq 9 where 2 was due"), std::string::npos) << r.out;
}

TEST_F(CliVerbs, CheckStreamExitsOneForAnInconsistentStream) {
  std::string s = stream_of(2, true) + stream_of(1, false);
  Invocation r = run("check-stream " + shell_quote(write("after.jsonl", s).string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out.rfind("Inconsistent: ", 0), 0u) << r.out;
}

// The observed case: a Codex command output near 1 MiB in a tool.result that the writer now cuts
// to the bound; and a line at the largest bound a writer can be configured with. check-stream
// takes both (it refused the 1,048,898-byte line before).
TEST_F(CliVerbs, CheckStreamTakesEveryLineTheWriterCanProduce) {
  for (std::size_t bound : {kDefaultMaxEventLineBytes, kMaxEventLineBytes}) {
    ev::ToolResult r;
    r.call_id = "call_out";
    r.exit_code = 0;
    std::string output(bound + 322, 'o');
    r.bytes = output.size();
    r.content = json::string(output);
    r.tool_use_result = nullptr;
    Event big{1, "r-1", std::nullopt, std::move(r)};
    std::string s;
    serialize_within(s, big, bound);
    ASSERT_GT(s.size(), bound - 4096) << "a line near the bound";
    s += "\n";
    ev::StreamClosed closed;
    closed.events = 1;
    closed.reason = CloseReason::completed;
    closed.run_id = "r-1";
    s += serialize(Event{2, "r-1", std::nullopt, closed}) + "\n";
    Invocation inv = run("check-stream " + shell_quote(write("big.jsonl", s).string()));
    EXPECT_EQ(inv.exit_code, 0) << bound << ": " << inv.out << inv.err;
    EXPECT_EQ(inv.out.rfind("Complete: 1 event(s)", 0), 0u) << inv.out;
  }
}

TEST_F(CliVerbs, CheckStreamOfAMissingFileExitsTwo) {
  Invocation r = run("check-stream " + shell_quote((dir_ / "absent.jsonl").string()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("cannot read"), std::string::npos) << r.err;
}

TEST_F(CliVerbs, FrameSealWritesTheGoldenDocument) {
  std::string unsealed = "{\"format\":\"metaharness.frame/1\"," + std::string(golden::kCanonicalFrame.substr(1));
  fs::path in = write("unsealed.json", unsealed);
  fs::path out = dir_ / "sealed.json";
  Invocation r = run("frame seal " + shell_quote(in.string()) + " " + shell_quote(out.string()));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "sealed " + std::string(golden::kFrameDigest) + "\n");
  std::string written = slurp(out);
  EXPECT_EQ(written, golden::kFrameDocument);
  EXPECT_EQ(sha256_hex(written), golden::kFrameDocumentSha);
}

TEST_F(CliVerbs, FrameSealToDashWritesStandardOutput) {
  std::string unsealed = "{\"format\":\"metaharness.frame/1\"," + std::string(golden::kCanonicalFrame.substr(1));
  Invocation r = run("frame seal " + shell_quote(write("u.json", unsealed).string()) + " -");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, golden::kFrameDocument);
}

TEST_F(CliVerbs, FrameSealRefusesAMisshapenFrame) {
  Invocation r = run("frame seal " + shell_quote(write("bad.json", R"({"format":"metaharness.frame/1"})").string()) +
                     " " + shell_quote((dir_ / "never.json").string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("refused (Invalid): not a frame:"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "never.json"));
}

TEST_F(CliVerbs, FrameVerifyAcceptsTheGoldenDocument) {
  Invocation r = run("frame verify " + shell_quote(write("golden.json", golden::kFrameDocument).string()));
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out, "sealed: " + std::string(golden::kFrameDigest) + "\n");
}

TEST_F(CliVerbs, FrameVerifyRefusesAnEditedDocument) {
  std::string doc(golden::kFrameDocument);
  doc.replace(doc.find("suite is green"), 14, "suite is amber");
  Invocation r = run("frame verify " + shell_quote(write("edited.json", doc).string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out.rfind("DigestMismatch: the stated digest " + std::string(golden::kFrameDigest), 0), 0u) << r.out;
}

TEST_F(CliVerbs, FrameVerifyRefusesAnUnsealedDocument) {
  std::string unsealed = "{\"format\":\"metaharness.frame/1\"," + std::string(golden::kCanonicalFrame.substr(1));
  Invocation r = run("frame verify " + shell_quote(write("u.json", unsealed).string()));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out.rfind("DigestMismatch: the frame states no digest", 0), 0u) << r.out;
}

TEST_F(CliVerbs, FrameVerifyNamesEachRefusalKind) {
  EXPECT_EQ(run("frame verify " + shell_quote(write("a.json", "not json").string())).out.rfind("NotJson: ", 0), 0u);
  EXPECT_EQ(run("frame verify " + shell_quote(write("b.json", "{}").string())).out.rfind("UnknownFormat: ", 0), 0u);
  Invocation missing = run("frame verify " + shell_quote((dir_ / "absent.json").string()));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.out.rfind("Unreadable: ", 0), 0u) << missing.out;
}

TEST_F(CliVerbs, FrameVerifyReadsStandardInputForDash) {
  Invocation r = run("frame verify -", write("golden.json", golden::kFrameDocument));
  EXPECT_EQ(r.exit_code, 0) << r.out;
}

}  // namespace
}  // namespace mh::protocol
