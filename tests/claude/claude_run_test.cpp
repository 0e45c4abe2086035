// One governed Claude Code run, end to end, against the REAL CLI (2.1.197, installed by
// ./run setup) and the project's scripted model endpoint on loopback. The one-shot face is
// driven as a user drives it: `metaharness run claude ...`, events on stdout, commands on stdin.
// The behaviours every vendor shares run from tests/support/shared_behaviours.hpp (Claude.*);
// the tests here (ClaudeRun.*) are what only this adapter shows.
#include "tests/claude/claude_run.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <iterator>
#include <set>

#include "protocol/completeness.hpp"
#include "protocol/digest.hpp"
#include "protocol/frame.hpp"
#include "tests/support/shared_behaviours.hpp"

namespace mh::test {
namespace {

// The shared behaviours (tests/support/shared_behaviours.hpp) on the real CLI: its scenarios,
// its call ids and words, and what only its records show.
class ClaudeVendor : public VendorBase<ClaudeRun> {
 public:
  // Marked while a tool runs: claude, its tool shell and the setsid'd sleep.
  static inline const VendorFacts facts{.adapter = "claude",
                                        .one_shell_call = "bash_marker",
                                        .auth_failure_args = {"--vendor-env", "CLAUDE_CODE_MAX_RETRIES=0"},
                                        .auth_expired_words = "OAuth token has expired",
                                        .allows_every_one_of_three_calls = true};

 protected:
  // The vendor's own denials pass through to session.ended.
  void expect_frame_denial_extras() { expect_one_vendor_denial("Bash", "toolu_marker"); }
  void expect_allow_extras(const EventLine& requested) {
    EXPECT_EQ(requested.object.at("deadline_ms").to_number<int>(), 55000);
  }
  // The endpoint sees the reason in the next request, in a tool_result.
  void expect_deny_reason_delivered(const std::string& reason, std::size_t /*requests_before*/) {
    bool reached_model = false;
    for (const auto& body : logged_request_bodies(run_dir())) {
      if (!body.contains("messages")) continue;
      for (const auto& message : body.at("messages").as_array())
        if (message.as_object().at("content").is_array())
          for (const auto& block : message.as_object().at("content").as_array())
            if (block.as_object().at("type") == "tool_result" &&
                protocol::canonical_json(block).find(reason) != std::string::npos)
              reached_model = true;
    }
    EXPECT_TRUE(reached_model) << "the next model request must carry the deny reason in a tool_result";
  }
  void expect_translation_extras(const CliProcess& translate) {
    auto requested = translate.events_named("tool.requested");
    ASSERT_EQ(requested.size(), 1u);
    EXPECT_EQ(requested[0].str("seam"), "none");
  }
};

INSTANTIATE_TYPED_TEST_SUITE_P(Claude, SharedRun, ClaudeVendor);
INSTANTIATE_TYPED_TEST_SUITE_P(Claude, ReplaceRun, ClaudeVendor);

// A record the reader does not know becomes opaque, citing the exact line it came from.
TEST_F(ClaudeRun, AnUnmappedVendorRecordBecomesOpaqueWithItsDigestAndLine) {
  start("retry_once", {"--vendor-env", "CLAUDE_CODE_MAX_RETRIES=1"});
  process->close_stdin();
  EXPECT_EQ(finish(), 0) << process->stderr_text();
  auto kinds = opaque_kinds_citing_their_lines("vendor_subtype", [](const EventLine& e, const std::string& cited) {
    if (e.str("vendor_subtype") != "api_retry") return;
    EXPECT_EQ(e.str("vendor_type"), "system");
    EXPECT_NE(cited.find("api_retry"), std::string::npos);
  });
  EXPECT_TRUE(kinds.count("api_retry")) << "the api_retry record must appear as opaque";
}

// Run-start refusal: a control the run needs and the adapter cannot honour refuses the run
// before anything spawns, one command.result per command.
TEST_F(ClaudeRun, ARunThatNeedsSteerIsRefusedBeforeAnythingSpawns) {
  start("bash_marker", {"--require", "steer"});
  process->close_stdin();
  EXPECT_EQ(finish(), 2);
  auto refused = process->events_named("command.result");
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_EQ(refused[0].str("id"), "start/steer");
  EXPECT_EQ(outcome_code(refused[0]), "UNSUPPORTED_CONTROL");
  EXPECT_EQ(process->events().back().event(), "stream.closed");
  EXPECT_FALSE(std::filesystem::exists(run_dir() / "vendor-stdout.jsonl")) << "nothing was spawned";
}

// No secret in the record (issue 25 section 4), on a run the daemon drives directly (no
// supervisor, the host's network, its in-process scripted endpoint): an allowed call prints the
// run's model token; the transcript, the stderr log, the model's request log and the stream hold
// it only as [redacted:model_endpoint.token].
TEST_F(ClaudeRun, ATokenAnAllowedCallPrintsReachesNoFileOfTheRunsRecord) {
  start("bash_echo_token", {"--decisions", "ask"});
  auto requested = process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << process->stderr_text();
  send("c1", decide_line("c1", requested->str("call_id"), R"({"decision":"allow"})"));
  auto ended = process->wait_for_event("turn.ended");
  ASSERT_TRUE(ended) << process->stderr_text();
  process->close_stdin();
  EXPECT_EQ(finish(), 0) << process->stderr_text();

  std::ifstream key_file(work() / "key.txt");
  const std::string token((std::istreambuf_iterator<char>(key_file)), {});
  ASSERT_GE(token.size(), 16u) << "the call printed the run's token";
  bool marked = false;
  for (const char* name : {"vendor-stdout.jsonl", "vendor-stderr.log", "model-requests.jsonl", "events.jsonl",
                           "vendor-hooks.jsonl", "spec.json", "plan.json"}) {
    std::ifstream in(run_dir() / name, std::ios::binary);
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    EXPECT_EQ(text.find(token), std::string::npos) << name << " holds the token";
    marked = marked || text.find("[redacted:model_endpoint.token]") != std::string::npos;
  }
  EXPECT_TRUE(marked) << "the printed token is in the record, redacted";
}

}  // namespace
}  // namespace mh::test
