// The real codex app-server (0.171.0) ending before its thread exists. What Codex says before
// thread/start is answered (remoteControl/status/changed, config warnings) is held until
// session.started, so the stream opens with the session; when no thread ever comes, the vendor's
// end releases it (AdapterSession::on_vendor_end through RunCore::on_vendor_end), and it is in the
// stream before why the run closed. The vendor binary is a small script around the real CLI that
// passes on metaharness's first line (initialize) only, and kills the CLI and itself once Codex
// has said anything besides its answer: Codex never hears of a thread, so it cannot open one,
// whatever the machine's timing.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "protocol/digest.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::test {
namespace {

class CodexEarlyEnd : public GovernedRun {
 protected:
  CodexEarlyEnd() : GovernedRun("codex") {}

  // The codex binary a run would spawn, as `metaharness plan` computes it (the adapter's own
  // lookup: vendor directory, overrides).
  std::filesystem::path planned_codex() {
    auto plan = run_to_end({metaharness_binary().string(), "plan", "codex", "-p", "go", "--model-scenario",
                            scenario("marker").string(), "--run-dir", (dir.path() / "plan-run").string()},
                           std::nullopt, 60s);
    const std::string& text = plan.out;
    EXPECT_EQ(plan.status, 0) << plan.err;
    auto v = protocol::parse_json(text);
    if (!v || !v->is_object() || !v->as_object().contains("program")) {
      ADD_FAILURE() << "metaharness plan printed no program: " << text;
      return {};
    }
    return std::string(v->as_object().at("program").as_string());
  }

  // The vendor binary under test: the real CLI behind a cut after initialize.
  std::filesystem::path codex_cut_after_initialize(const std::filesystem::path& real) {
    EXPECT_EQ(real.string().find('\''), std::string::npos) << "the path is quoted in a shell script";
    auto script = dir.path() / "codex-cut-after-initialize";
    std::ofstream(script) << "#!/bin/bash\n"
                             "coproc CODEX { exec '"
                          << real.string()
                          << "' \"$@\"; }\n"
                             "IFS= read -r first || exit 9\n"
                             "printf '%s\\n' \"$first\" >&\"${CODEX[1]}\"\n"
                             "while IFS= read -r line <&\"${CODEX[0]}\"; do\n"
                             "  printf '%s\\n' \"$line\"\n"
                             "  case \"$line\" in\n"
                             "    '{\"id\":1,'*) ;;\n"
                             "    *) kill -KILL \"$CODEX_PID\"; kill -KILL $$ ;;\n"
                             "  esac\n"
                             "done\n"
                             "exit 8\n";
    ::chmod(script.c_str(), 0755);
    return script;
  }
};

TEST_F(CodexEarlyEnd, WhatCodexSaidBeforeItsThreadExistedIsInTheStreamWhenItDiesFirst) {
  auto real = planned_codex();
  ASSERT_FALSE(real.empty());
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e)
    env.emplace_back(*e);
  env.push_back("METAHARNESS_CODEX_BIN=" + codex_cut_after_initialize(real).string());
  process = std::make_unique<CliProcess>(
      std::vector<std::string>{metaharness_binary().string(), "run", "codex", "-p", "go", "--model-scenario",
                               scenario("marker").string(), "--run-dir", run_dir().string()},
      env);
  process->close_stdin();
  EXPECT_EQ(process->finish(120s), 3) << process->stderr_text();

  // What Codex said: its initialize answer, then the line that ended it (its first notification).
  auto transcript = read_lines(run_dir() / "vendor-stdout.jsonl");
  ASSERT_EQ(transcript.size(), 2u) << read_file(run_dir() / "vendor-stdout.jsonl");
  auto said = protocol::parse_json(transcript[1]);
  ASSERT_TRUE(said && said->is_object() && said->as_object().contains("method")) << transcript[1];
  std::string method(said->as_object().at("method").as_string());
  ASSERT_FALSE(said->as_object().contains("id")) << "a notification, held until a thread: " << transcript[1];

  EXPECT_TRUE(process->events_named("session.started").empty()) << "Codex never heard of a thread";
  const auto& events = process->events();
  std::size_t held = events.size(), exited = events.size(), held_count = 0;
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (events[i].event() == "opaque" && events[i].str("vendor_type") == method) {
      if (held_count++ == 0) held = i;
      EXPECT_EQ(events[i].object.at("source_line").to_number<int>(), 2) << events[i].raw;
      EXPECT_EQ(events[i].str("digest"), protocol::sha256_hex(transcript[1])) << events[i].raw;
    }
    if (events[i].event() == "warning" && events[i].str("code") == "VENDOR_EXITED") exited = i;
  }
  EXPECT_EQ(held_count, 1u) << method << " is in the stream exactly once";
  ASSERT_LT(exited, events.size()) << "the stream says why it closes error";
  EXPECT_NE(events[exited].str("message").find("killed by signal 9 before it opened a session"), std::string::npos)
      << events[exited].raw;
  EXPECT_LT(held, exited) << "the vendor's own record, then why the run ended";
  EXPECT_EQ(events.back().event(), "stream.closed");
  EXPECT_EQ(events.back().str("reason"), "error");
}

}  // namespace
}  // namespace mh::test
