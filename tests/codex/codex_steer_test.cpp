// A Codex steer through the run core: the real Codex adapter session fed app-server's own record
// shapes (captured from codex 0.171.0), the core's effects recorded. A steer Codex accepted must
// show in its turn as a userMessage (injection, origin steer); one whose turn ended without it is
// reported STEER_UNDELIVERED, once, naming the command and the text's digest. Every order the two
// answers can come in is covered here; the real CLI's interrupt case is in codex_run_test.cpp.
// Deterministic: no process, no clock.
#include <gtest/gtest.h>

#include "adapters/codex/codex_adapter.hpp"
#include "adapters/registry.hpp"
#include "app_server_answers.hpp"
#include "daemon/run/run_core.hpp"
#include "protocol/digest.hpp"

namespace mh::daemon {
namespace {

using namespace std::chrono_literals;

class Effects final : public RunEffects {
 public:
  std::uint64_t emit(proto::EventPayload payload, std::optional<std::string>) override {
    events.push_back(std::move(payload));
    return events.size();
  }
  std::uint64_t emit_cut(proto::EventPayload payload, std::optional<std::string> at,
                         std::vector<proto::CutField>) override {
    return emit(std::move(payload), std::move(at));
  }
  void write_vendor(std::string line) override {
    auto v = proto::parse_json(line);
    ASSERT_TRUE(v && v->is_object()) << line;
    written.push_back(v->get_object());
  }
  void reply_hook(std::uint64_t, std::string) override {}
  void arm_deadline(const std::string&, Instant) override {}
  void cancel_deadline(const std::string&) override {}
  void close_vendor_stdin() override {}
  void terminate_vendor(std::chrono::milliseconds) override {}

  std::vector<proto::EventPayload> events;
  std::vector<json::object> written;
};

class CodexSteer : public ::testing::Test {
 protected:
  CodexSteer() {
    spec.run_id = "r-1";
    spec.adapter = "codex";
    spec.prompt = "go";
    spec.decisions = proto::DecisionMode::observe;
    spec.keep_open = true;
    adapters::LaunchPlan plan;
    plan.cwd = "/work";
    plan.transcript_path = "/runs/r-1/vendor-stdout.jsonl";
    const adapters::Adapter* adapter = registry.find("codex");
    core = std::make_unique<RunCore>(spec, *adapter, adapter->open_session(spec, plan), fx);
    core->start(now);
    // initialize, then thread/start and the evidence requests, each answered as 0.171.0 does.
    answer("initialize", codex_answers::initialize());
    answer("thread/start", codex_answers::thread_start());
    answer("account/read", codex_answers::no_account());
    answer("plugin/installed", codex_answers::no_plugins());
    answer("config/read", codex_answers::default_config());
    answer("mcpServerStatus/list", codex_answers::no_mcp_servers());
    EXPECT_TRUE(request_of("turn/start")) << "the session opened and the first turn was asked for";
    feed({{"method", "turn/started"},
          {"params", json::object{{"threadId", "thr_1"}, {"turn", json::object{{"id", "turn_1"}}}}}});
  }

  void feed(const json::object& o) {
    const std::string text = proto::canonical_json(json::value(o));
    proto::FramedLine line;  // a view of the text
    line.text = text;
    line.number = ++line_no;
    line.length = line.text.size();
    core->on_vendor_line(line, now);
  }
  const json::object* request_of(std::string_view method) const {
    return codex_answers::last_request(fx.written, method);
  }
  void answer(std::string_view method, json::object result) {
    const json::object* r = request_of(method);
    ASSERT_TRUE(r) << "no " << method << " request was sent";
    feed({{"id", r->at("id")}, {"result", std::move(result)}});
  }
  void steer(const std::string& id, const std::string& text) {
    auto read = proto::read_command_line(R"({"format":"metaharness.command/1","id":")" + id +
                                         R"(","command":"steer","text":")" + text + "\"}");
    ASSERT_TRUE(read);
    core->on_command(std::move(*read), std::nullopt, now);
  }
  // turn/steer's answers as Codex gives them: the turn's id, or a -32600 error.
  void steer_accepted() { answer("turn/steer", {{"turnId", "turn_1"}}); }
  void steer_refused() {
    const json::object* r = request_of("turn/steer");
    ASSERT_TRUE(r);
    feed({{"id", r->at("id")}, {"error", json::object{{"code", -32600}, {"message", "no active turn to steer"}}}});
  }
  void steer_landed(const std::string& text) {
    feed({{"method", "item/completed"},
          {"params",
           json::object{
               {"threadId", "thr_1"},
               {"turnId", "turn_1"},
               {"item", json::object{{"type", "userMessage"},
                                     {"id", "u2"},
                                     {"content", json::array{json::object{{"type", "text"}, {"text", text}}}}}}}}});
  }
  void turn_ends(const std::string& status) {
    feed({{"method", "turn/completed"},
          {"params",
           json::object{{"threadId", "thr_1"}, {"turn", json::object{{"id", "turn_1"}, {"status", status}}}}}});
  }

  std::vector<proto::ev::Warning> lost() const {
    std::vector<proto::ev::Warning> out;
    for (const auto& e : fx.events)
      if (auto* w = std::get_if<proto::ev::Warning>(&e); w && w->code == "STEER_UNDELIVERED") out.push_back(*w);
    return out;
  }
  // Where in the stream the first event of this kind is (events.size() if none).
  template <class T>
  std::size_t index_of() const {
    for (std::size_t i = 0; i < fx.events.size(); ++i)
      if (std::holds_alternative<T>(fx.events[i])) return i;
    return fx.events.size();
  }
  std::size_t index_of_lost() const {
    for (std::size_t i = 0; i < fx.events.size(); ++i)
      if (auto* w = std::get_if<proto::ev::Warning>(&fx.events[i]); w && w->code == "STEER_UNDELIVERED") return i;
    return fx.events.size();
  }

  adapters::AdapterRegistry registry{adapters::HostConfig{"/nonexistent", {}}};
  adapters::RunSpec spec;
  Effects fx;
  std::unique_ptr<RunCore> core;
  Instant now = Instant{} + 1000s;
  std::uint64_t line_no = 0;
};

TEST_F(CodexSteer, AnAcceptedSteerWhoseTurnEndsWithoutItIsReportedOnceByCommandAndDigest) {
  steer("s1", "STEER: prefer the short path");
  steer_accepted();
  turn_ends("interrupted");
  auto warnings = lost();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].message.find("steer s1 "), std::string::npos) << warnings[0].message;
  EXPECT_NE(warnings[0].message.find(proto::sha256_hex("STEER: prefer the short path")), std::string::npos);
  EXPECT_NE(warnings[0].message.find("\"STEER: prefer the short path\""), std::string::npos) << "its first chars";
  EXPECT_NE(warnings[0].message.find("interrupted"), std::string::npos) << "how the turn ended";
  EXPECT_GT(index_of_lost(), index_of<proto::ev::TurnEnded>()) << "said when the turn ended";
  // Nothing more is said of it: not at the next turn's end, not at the run's.
  core->wind_up({proto::ProcessKind::exited, 0, 0}, now);
  EXPECT_EQ(lost().size(), 1u);
}

TEST_F(CodexSteer, ADeliveredSteerIsAnInjectionAndNothingElse) {
  steer("s1", "STEER");
  steer_accepted();
  steer_landed("STEER");
  turn_ends("completed");
  EXPECT_TRUE(lost().empty());
  EXPECT_LT(index_of<proto::ev::Injection>(), fx.events.size());
}

TEST_F(CodexSteer, ASteerThatLandsBeforeItsAnswerIsDeliveredAllTheSame) {
  steer("s1", "STEER");
  steer_landed("STEER");
  steer_accepted();
  turn_ends("completed");
  EXPECT_TRUE(lost().empty());
}

TEST_F(CodexSteer, AnAcceptanceReadAfterTheTurnEndedIsReportedAtTheAcceptance) {
  steer("s1", "STEER");
  turn_ends("interrupted");
  EXPECT_TRUE(lost().empty()) << "not accepted yet: nothing to report";
  steer_accepted();
  ASSERT_EQ(lost().size(), 1u);
  EXPECT_NE(lost()[0].message.find("steer s1 "), std::string::npos);
}

TEST_F(CodexSteer, ARefusedSteerIsItsCommandResultAndNoWarning) {
  steer("s1", "STEER");
  steer_refused();
  turn_ends("completed");
  EXPECT_TRUE(lost().empty()) << "the command.result already said TOO_LATE";
}

TEST_F(CodexSteer, AnAcceptedSteerStillInFlightWhenTheRunEndsIsReported) {
  steer("s1", "STEER");
  steer_accepted();
  core->wind_up({proto::ProcessKind::exited, 0, 0}, now);
  ASSERT_EQ(lost().size(), 1u);
  EXPECT_NE(lost()[0].message.find("the run ended"), std::string::npos) << lost()[0].message;
}

TEST_F(CodexSteer, TwoSteersOfTheSameWordsAreTwoDeliveries) {
  steer("s1", "again");
  steer("s2", "again");
  steer_accepted();  // answers s2's request
  const json::object* first = nullptr;
  for (const auto& w : fx.written)
    if (w.contains("method") && w.at("method") == "turn/steer") {
      first = &w;
      break;
    }
  ASSERT_TRUE(first);
  feed({{"id", first->at("id")}, {"result", json::object{{"turnId", "turn_1"}}}});
  steer_landed("again");
  turn_ends("interrupted");
  ASSERT_EQ(lost().size(), 1u) << "one of the two never landed";
}

}  // namespace
}  // namespace mh::daemon
