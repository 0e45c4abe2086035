// A Claude record over the vendor line bound (runs.max_vendor_line_bytes), against the real CLI
// (2.1.197): a final answer longer than the bound makes both its assistant record and the result
// record oversized. The records are still read (their long strings cut): the text event says what
// it no longer holds, and the result still ends the turn, so the run completes instead of waiting
// for a turn end that went by.
#include <gtest/gtest.h>

#include <fstream>

#include "protocol/digest.hpp"
#include "tests/claude/claude_run.hpp"

namespace mh::test {
namespace {

TEST_F(ClaudeRun, ARecordOverTheVendorLineBoundIsStillReadAndItsResultEndsTheTurn) {
  constexpr std::size_t kBound = 64 * 1024;
  std::string answer;
  for (int i = 0; answer.size() < 2 * kBound; ++i)
    answer += "line " + std::to_string(i) + " of a long answer\n";
  auto scenario = dir.path() / "long_answer.json";
  std::ofstream(scenario) << protocol::canonical_json(json::object{
      {"format", "metaharness.scenario/1"},
      {"wires", json::array{"anthropic"}},
      {"steps",
       json::array{json::object{{"content", json::array{json::object{{"type", "text"}, {"text", answer}}}}}}}});
  auto config = dir.path() / "config.toml";
  std::ofstream(config) << "[runs]\nmax_vendor_line_bytes = " << kBound << "\n";
  process = std::make_unique<CliProcess>(
      std::vector<std::string>{metaharness_binary().string(), "run", "claude", "-p", "go", "--model-scenario",
                               scenario.string(), "--run-dir", run_dir().string(), "--config", config.string()});
  process->close_stdin();
  ASSERT_EQ(process->finish(120s), 0) << process->stderr_text();
  EXPECT_EQ(process->events().back().str("reason"), "completed");
  EXPECT_EQ(process->events_named("turn.ended").size(), 1u);
  EXPECT_EQ(process->events_named("session.ended").size(), 1u);

  auto texts = process->events_named("text");
  ASSERT_EQ(texts.size(), 1u);
  const json::value* cut = texts[0].object.if_contains("cut");
  ASSERT_TRUE(cut && cut->is_array() && cut->as_array().size() == 1) << texts[0].raw.substr(0, 300);
  const auto& c = cut->as_array()[0].as_object();
  EXPECT_EQ(c.at("field"), "text");
  EXPECT_EQ(c.at("pointer"), "/text");
  EXPECT_EQ(c.at("bytes").to_number<std::uint64_t>(), answer.size());
  EXPECT_EQ(c.at("digest").as_string(), protocol::sha256_hex(answer)) << "the whole answer's digest";
  auto kept = c.at("kept").to_number<std::uint64_t>();
  EXPECT_GT(kept, 0u);
  EXPECT_LT(kept, answer.size());
  EXPECT_EQ(texts[0].str("text"), answer.substr(0, kept));

  std::size_t named = 0;
  for (const auto& w : process->events_named("warning"))
    if (w.str("code") == "VENDOR_LINE_CUT") ++named;
  EXPECT_EQ(named, 2u) << "the assistant record and the result, each named";
}

}  // namespace
}  // namespace mh::test
