// The fixture of the run core's tests: the core driven through the real Claude adapter session
// with the CLI's own record shapes, its effects recorded. Deterministic: no process, no clock.
#pragma once

#include <gtest/gtest.h>

#include "adapters/claude/claude_adapter.hpp"
#include "adapters/claude/claude_reader.hpp"
#include "adapters/registry.hpp"
#include "adapters/session.hpp"
#include "daemon/run/run_core.hpp"
#include "protocol/digest.hpp"
#include "tests/run/claude_lines.hpp"
#include "tests/support/governed_run.hpp"

namespace mh::daemon {
// Each test file gets its own copy: the fixture is header-only test code, never linked twice.
namespace {

namespace lines = mh::test::claude_lines;
using namespace std::chrono_literals;

struct Recorded {
  std::uint64_t seq;
  proto::EventPayload payload;
  std::optional<std::string> at;
  std::vector<proto::CutField> cut = {};
};

struct Answered {
  Ticket ticket;
  proto::ev::CommandResult result;
  bool recorded;
};

class RecordingEffects final : public RunEffects {
 public:
  std::uint64_t emit(proto::EventPayload payload, std::optional<std::string> at) override {
    if (refuse_emit) return 0;
    events.push_back(Recorded{events.size() + 1, std::move(payload), std::move(at)});
    return events.size();
  }
  std::uint64_t emit_cut(proto::EventPayload payload, std::optional<std::string> at,
                         std::vector<proto::CutField> cut) override {
    events.push_back(Recorded{events.size() + 1, std::move(payload), std::move(at), std::move(cut)});
    return events.size();
  }
  void write_vendor(std::string line) override { vendor.push_back(std::move(line)); }
  void reply_hook(std::uint64_t connection, std::string line) override { hook_replies[connection] = std::move(line); }
  void arm_deadline(const std::string& call_id, Instant when) override { deadlines[call_id] = when; }
  void cancel_deadline(const std::string& call_id) override { deadlines.erase(call_id); }
  void close_vendor_stdin() override { stdin_closed = true; }
  void terminate_vendor(std::chrono::milliseconds) override { terminated = true; }
  void arm_wall_budget(Instant when) override { wall_budget_at = when; }
  void arm_stall(std::optional<Instant> when) override {
    stall_at = when;
    ++stall_arms;
  }
  void arm_park(const std::string& call_id, std::optional<Instant> when) override {
    park = when ? std::optional<std::pair<std::string, Instant>>({call_id, *when}) : std::nullopt;
  }
  void resume_vendor() override { ++resumes; }
  void spend_changed(const Spend& s) override { spend = s; }
  void command_answered(Ticket ticket, const proto::ev::CommandResult& result, bool recorded) override {
    answered.push_back(Answered{ticket, result, recorded});
  }

  std::vector<Recorded> events;
  std::vector<std::string> vendor;
  std::map<std::uint64_t, std::string> hook_replies;
  std::map<std::string, Instant> deadlines;
  bool stdin_closed = false;
  bool terminated = false;
  std::optional<Instant> wall_budget_at;
  std::optional<Instant> stall_at;                      // the stall timer as the core last set it (nullopt: disarmed)
  std::size_t stall_arms = 0;                           // how many times the core changed it
  std::optional<std::pair<std::string, Instant>> park;  // the park timer as last set (issue 27 §5)
  std::size_t resumes = 0;                              // resume_vendor() calls
  Spend spend;
  std::vector<Answered> answered;
  bool refuse_emit = false;  // the stream cannot take an event (its write failed): emit returns 0
};

inline json::object parse_object(const std::string& text) {
  auto v = proto::parse_json(text);
  EXPECT_TRUE(v && v->is_object()) << text;
  return v && v->is_object() ? v->get_object() : json::object{};
}

inline proto::Frame frame_admitting(std::vector<proto::OpKind> ops) {
  return mh::test::sealed_test_frame(std::move(ops), proto::StepRef{"development/default", "implement", 2, 1});
}

class RunCoreTest : public ::testing::Test {
 protected:
  void open(proto::DecisionMode mode, std::optional<proto::Frame> frame = std::nullopt, bool keep_open = false) {
    spec.run_id = "r-1";
    spec.adapter = "claude";
    spec.prompt = "do the thing";
    spec.decisions = mode;
    spec.frame = std::move(frame);
    spec.keep_open = keep_open;
    spec.decision_deadline_ms = 55'000;
    adapters::LaunchPlan plan;
    plan.transcript_path = "/runs/r-1/vendor-stdout.jsonl";
    plan.cwd = "/scratch/work";
    const adapters::Adapter* adapter = registry.find("claude");
    auto session = adapter->open_session(spec, plan);
    if (wrap_session) session = wrap_session(std::move(session));
    core = std::make_unique<RunCore>(spec, *adapter, std::move(session), fx, options);
    if (start_now) core->start(now);
  }

  // Starts the run up to its first turn: initialize answered, prompt written, init record read.
  void open_and_begin(proto::DecisionMode mode, std::optional<proto::Frame> frame = std::nullopt,
                      bool keep_open = false) {
    open(mode, std::move(frame), keep_open);
    feed(lines::initialize_ok());
    feed(lines::init());
  }

  void feed(const std::string& text) {
    proto::FramedLine line;
    line.text = text;
    line.number = ++line_no;
    line.length = text.size();
    core->on_vendor_line(line, now);
  }

  void command(const std::string& text, std::optional<proto::PeerIdentity> peer = std::nullopt,
               Ticket ticket = kUnrouted) {
    auto read = proto::read_command_line(text);
    if (read)
      core->on_command(ticket, std::move(*read), peer, now);
    else
      core->on_unreadable_command(ticket, read.error(), now);
  }

  // The answers given for one ticket (exactly one is the rule).
  std::vector<Answered> answers_for(Ticket ticket) const {
    std::vector<Answered> out;
    for (const auto& a : fx.answered)
      if (a.ticket == ticket) out.push_back(a);
    return out;
  }

  template <class T>
  std::vector<T> all() const {
    std::vector<T> out;
    for (const auto& e : fx.events)
      if (auto* p = std::get_if<T>(&e.payload)) out.push_back(*p);
    return out;
  }

  template <class T>
  T only() const {
    auto v = all<T>();
    EXPECT_EQ(v.size(), 1u) << "expected exactly one " << T::kName;
    return v.empty() ? T{} : v.front();
  }

  std::vector<std::string_view> names() const {
    std::vector<std::string_view> out;
    for (const auto& e : fx.events)
      out.push_back(proto::event_name(e.payload));
    return out;
  }

  proto::ev::CommandResult result_for(const std::string& id) const {
    for (const auto& r : all<proto::ev::CommandResult>())
      if (r.id == id) return r;
    ADD_FAILURE() << "no command.result for " << id;
    return {};
  }

  json::object last_vendor() const { return parse_object(fx.vendor.back()); }

  // The hook answer written for a given hook_callback request id.
  json::object answer_for(const std::string& request_id) const {
    for (const auto& w : fx.vendor) {
      auto o = parse_object(w);
      if (o["type"] == "control_response" && o["response"].as_object()["request_id"] == json::value(request_id))
        return o;
    }
    ADD_FAILURE() << "no answer for " << request_id;
    return {};
  }

  static json::value decision_of(const json::object& answer) {
    return answer.at("response").as_object().at("response");
  }

  adapters::AdapterRegistry registry{adapters::HostConfig{"/nonexistent", {}}};
  adapters::RunSpec spec;
  RunCoreOptions options;
  bool start_now = true;  // open() starts the core (false: it stays created, as before a spawn)
  // Set before open(): wraps the Claude session (a test's own session around the real one).
  std::function<std::unique_ptr<adapters::AdapterSession>(std::unique_ptr<adapters::AdapterSession>)> wrap_session;
  RecordingEffects fx;
  std::unique_ptr<RunCore> core;
  Instant now = Instant{} + 1000s;
  std::uint64_t line_no = 0;
};

inline const json::value kBash = json::object{{"command", "touch marker"}, {"description", "make marker"}};

}  // namespace
}  // namespace mh::daemon
