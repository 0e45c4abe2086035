#include "tests/support/governed_run.hpp"

#include <fstream>
#include <map>

#include "protocol/completeness.hpp"
#include "protocol/digest.hpp"

namespace mh::test {

std::string decide_line(const std::string& id, const std::string& call, const std::string& decision_json) {
  return R"({"format":"metaharness.command/1","id":")" + id + R"(","command":"tool.decide","call_id":")" + call +
         R"(","decision":)" + decision_json + "}";
}

std::string command_line(const std::string& id, const std::string& name, const std::string& fields) {
  return R"({"format":"metaharness.command/1","id":")" + id + R"(","command":")" + name + "\"" +
         (fields.empty() ? "" : "," + fields) + "}";
}

protocol::Frame sealed_test_frame(std::vector<protocol::OpKind> ops, const protocol::StepRef& step) {
  protocol::Frame f;
  f.workflow_id = step.workflow;
  f.workflow_version = "1";
  f.node_id = step.state;
  f.step = step;
  for (auto op : ops)
    f.operations.push_back(protocol::Operation{op, {}, {}});
  protocol::seal(f);
  return f;
}

std::string outcome_code(const EventLine& result) {
  const auto& outcome = result.object.at("outcome").as_object();
  if (outcome.at("result") == "ok") return "ok";
  return std::string(outcome.at("refused").as_object().at("code").as_string());
}

namespace {
std::vector<json::object> logged_requests(const std::filesystem::path& run_dir, std::string_view key) {
  std::vector<json::object> out;
  for (const auto& line : read_lines(run_dir / "model-requests.jsonl")) {
    auto v = protocol::parse_json(line);
    if (!v || !v->is_object() || v->as_object().at("kind") != "request") continue;
    const json::value* field = v->as_object().if_contains(key);
    out.push_back(field && field->is_object() ? field->as_object() : json::object{});
  }
  return out;
}
}  // namespace

std::vector<json::object> logged_request_bodies(const std::filesystem::path& run_dir) {
  return logged_requests(run_dir, "body");
}

std::vector<json::object> logged_request_headers(const std::filesystem::path& run_dir) {
  return logged_requests(run_dir, "headers");
}

void GovernedRun::start(const std::string& scenario_name, std::vector<std::string> extra) {
  start_with(scenario(scenario_name), std::move(extra));
}

void GovernedRun::start_with(const std::filesystem::path& scenario_file, std::vector<std::string> extra) {
  std::vector<std::string> argv = {
      metaharness_binary().string(), "run",       adapter_,          "-p", "go", "--model-scenario",
      scenario_file.string(),        "--run-dir", run_dir().string()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  process = std::make_unique<CliProcess>(argv);
}

void GovernedRun::expect_injected_message_is_the_next_turn(
    const std::string& first_stop_reason, const std::function<void(const std::vector<EventLine>&)>& check_texts) {
  auto first = process->wait_for_event("turn.ended");
  ASSERT_TRUE(first) << process->stderr_text();
  EXPECT_EQ(first->str("stop_reason"), first_stop_reason);
  std::size_t before = logged_request_bodies(run_dir()).size();
  send("m1", command_line("m1", "message.inject", R"("text":"INJECTED: one more thing")"));
  auto ended = process->wait_for(
      [](const EventLine& e) { return e.event() == "turn.ended" && e.object.at("turn").to_number<int>() == 2; });
  ASSERT_TRUE(ended) << process->stderr_text();
  EXPECT_EQ(outcome_code(*result_for("m1")), "ok");
  check_texts(process->events_named("text"));
  EXPECT_TRUE(a_later_request_carries("INJECTED: one more thing", before));
  EXPECT_EQ(finish(), 0) << process->stderr_text();
}

bool GovernedRun::a_later_request_carries(const std::string& text, std::size_t after) const {
  auto bodies = logged_request_bodies(run_dir());
  for (std::size_t i = after; i < bodies.size(); ++i)
    if (protocol::canonical_json(json::value(bodies[i])).find(text) != std::string::npos) return true;
  return false;
}

std::set<std::string> GovernedRun::opaque_kinds_citing_their_lines(
    std::string_view field, const std::function<void(const EventLine&, const std::string&)>& check) {
  auto transcript = read_lines(run_dir() / "vendor-stdout.jsonl");
  std::set<std::string> kinds;
  for (const auto& e : process->events_named("opaque")) {
    kinds.insert(e.str(field));
    auto line = e.object.at("source_line").to_number<std::size_t>();
    EXPECT_GE(line, 1u) << e.raw;
    EXPECT_LE(line, transcript.size()) << e.raw;
    if (line < 1 || line > transcript.size()) continue;
    EXPECT_EQ(e.str("digest"), protocol::sha256_hex(transcript[line - 1])) << e.raw;
    if (check) check(e, transcript[line - 1]);
  }
  return kinds;
}

std::string GovernedRun::run_id() {
  if (process->events().empty()) process->wait_for([](const EventLine&) { return true; }, 60s);
  return process->events().empty() ? "" : process->events().front().str("run");
}

int GovernedRun::finish() {
  process->close_stdin();
  return process->finish(120s);
}

std::optional<EventLine> GovernedRun::result_for(const std::string& id) {
  for (const auto& e : process->events_named("command.result"))
    if (e.str("id") == id) return e;
  return process->wait_for([&](const EventLine& e) { return e.event() == "command.result" && e.str("id") == id; });
}

std::string GovernedRun::result_code(const std::string& id) {
  auto result = result_for(id);
  return result ? outcome_code(*result) : "no command.result for " + id;
}

std::filesystem::path GovernedRun::write_frame(std::vector<protocol::OpKind> ops) {
  auto path = dir.path() / "frame.json";
  std::ofstream(path) << protocol::frame_document(sealed_test_frame(std::move(ops)));
  return path;
}

void GovernedRun::send(const std::string& id, const std::string& line) {
  sent.push_back(id);
  process->send(line);
}

void GovernedRun::expect_deadline_denial_then_named_refusals(const std::string& call, const std::string& marker_file) {
  auto requested = process->wait_for_event("tool.requested");
  ASSERT_TRUE(requested) << process->stderr_text();
  EXPECT_EQ(requested->str("call_id"), call);
  EXPECT_EQ(requested->object.at("deadline_ms").to_number<int>(), 1500);
  auto decided = process->wait_for_event("tool.decided", 30s);
  ASSERT_TRUE(decided);
  EXPECT_EQ(decided->str("decided_by"), "deadline");
  EXPECT_EQ(decided->object.at("decision").as_object().at("decision"), "deny");
  auto latency = decided->object.at("latency_ms").to_number<std::int64_t>();
  EXPECT_GE(latency, 1500);
  EXPECT_LT(latency, 1500 + 10'000) << "the deadline fires within its budget, not much later";

  send("late", decide_line("late", call, R"({"decision":"allow"})"));
  send("nobody", decide_line("nobody", "call_nobody", R"({"decision":"allow"})"));
  send("blank", decide_line("blank", call, R"({"decision":"deny","reason":"   "})"));
  send("-", "{this is not json");
  send("oops", R"({"format":"metaharness.command/1","id":"oops","command":"tool.decide"})");
  ASSERT_EQ(finish(), 0) << process->stderr_text();
  EXPECT_EQ(result_code("late"), "TOO_LATE");
  EXPECT_EQ(result_code("nobody"), "UNKNOWN_CALL");
  EXPECT_EQ(result_code("blank"), "MALFORMED");
  EXPECT_EQ(result_code("-"), "MALFORMED");
  EXPECT_EQ(result_code("oops"), "MALFORMED");
  EXPECT_FALSE(std::filesystem::exists(work() / marker_file));
}

void GovernedRun::TearDown() {
  auto events = run_dir() / "events.jsonl";
  if (!std::filesystem::exists(events)) return;
  auto verdict = protocol::check_stream(read_file(events));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
  std::map<std::string, int> results;
  for (const auto& line : read_lines(events)) {
    auto v = protocol::parse_json(line);
    if (v && v->as_object().at("event") == "command.result")
      ++results[std::string(v->as_object().at("id").as_string())];
  }
  for (const auto& id : sent)
    EXPECT_EQ(results[id], 1) << "command " << id << " must get exactly one command.result";
}

}  // namespace mh::test
