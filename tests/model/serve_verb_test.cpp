// `metaharness model serve`: our own binary as a process. It announces where it listens on one
// stdout line, serves until SIGTERM and exits 0; a bad scenario is refused with exit 2.
#include <gtest/gtest.h>

#include <csignal>
#include <fstream>

#include "tests/model/process_support.hpp"
#include "tests/model/test_support.hpp"

namespace mh::model::testing {
namespace {

namespace json = boost::json;
namespace fs = std::filesystem;

const fs::path kMetaharness = MH_METAHARNESS_BIN;
const fs::path kScenarios = fs::path(MH_SOURCE_DIR) / "tests/scenarios/model";

TEST(ServeVerb, AnnouncesServesAndExitsZeroOnSigterm) {
  TempDir dir("serve-verb");
  ProcessSpec spec;
  spec.executable = kMetaharness;
  spec.args = {"model",   "serve",         "--scenario", (kScenarios / "two_wires_shell.json").string(),
               "--token", "sk-serve-test", "--log",      (dir / "requests.jsonl").string()};
  spec.environment = {"PATH=/usr/bin:/bin"};
  spec.working_dir = dir.path();
  spec.output_dir = dir.path();
  LiveProcess serve(spec);

  const auto line = serve.read_line(10s);
  ASSERT_TRUE(line.has_value()) << serve.stderr_text();
  const json::value announced = parse(*line);
  const auto port = announced.at("port").to_number<std::uint16_t>();
  EXPECT_EQ(announced.at("base_url").as_string(), "http://127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(announced.at("openai_base_url").as_string(), "http://127.0.0.1:" + std::to_string(port) + "/v1");
  EXPECT_EQ(announced.at("token"), "sk-serve-test");

  const Response claude =
      exchange(port, "POST", "/v1/messages", anthropic_headers("sk-serve-test"), anthropic_body(false));
  ASSERT_EQ(claude.status, 200u) << claude.error;
  EXPECT_EQ(parse(claude.body).at("content").at(1).at("name"), "Bash");
  const Response codex =
      exchange(port, "POST", "/v1/responses", openai_headers("sk-serve-test"), responses_body(false));
  ASSERT_EQ(codex.status, 200u) << codex.error;
  EXPECT_EQ(parse(codex.body).at("output").at(0).at("content").at(0).at("text"), "It printed hi.");

  serve.signal(SIGTERM);
  const auto code = serve.wait(10s);
  ASSERT_TRUE(code.has_value()) << "serve did not exit on SIGTERM";
  EXPECT_EQ(*code, 0);
  EXPECT_NE(serve.stderr_text().find("stopped after 2 request(s)"), std::string::npos) << serve.stderr_text();

  // Two requests, each with a request and an end record.
  const std::string log = read_file(dir / "requests.jsonl");
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 4);
  EXPECT_EQ(log.find("sk-serve-test"), std::string::npos);
}

TEST(ServeVerb, RefusesABadScenarioNamingTheKey) {
  TempDir dir("serve-refusal");
  std::ofstream(dir / "bad.json") << R"({"format": "metaharness.scenario/1",
    "steps": [{"content": [{"type": "tool_call", "name": "Bash", "input": "ls"}]}]})";
  ProcessSpec spec;
  spec.executable = kMetaharness;
  spec.args = {"model", "serve", "--scenario", (dir / "bad.json").string()};
  spec.environment = {"PATH=/usr/bin:/bin"};
  spec.working_dir = dir.path();
  spec.output_dir = dir.path();
  const ProcessResult run = run_process(spec, 10s);
  ASSERT_TRUE(run.finished);
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_TRUE(run.out.empty()) << run.out;
  EXPECT_NE(run.err.find("steps[0].content[0].input"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("must be a JSON object"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace mh::model::testing
