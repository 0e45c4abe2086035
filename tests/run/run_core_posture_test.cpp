// The vendor's posture held against the run's (issue 27 section 6): PostureCheck alone, then the
// run core driven through the real Claude session, where a report that differs from what the
// run asks is one warning POSTURE_DRIFT and the decisions that hand a call to the vendor's own
// posture are refused by name until a permission.set the vendor applies sets it again.
#include "daemon/run/posture_check.hpp"
#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

using adapters::Posture;

const proto::Decision kAbstain = proto::decision::Abstain{};
const proto::Decision kAllow = proto::decision::Allow{};
const proto::Decision kDeny = proto::decision::Deny{"no"};

// --- PostureCheck ------------------------------------------------------------------------------

TEST(PostureCheck, AReportOfWhatTheRunAsksWarnsNothingAndRefusesNothing) {
  PostureCheck check(Posture{"untrusted", "workspace-write"});
  EXPECT_FALSE(check.reported(Posture{"untrusted", "workspace-write"}, "start", false));
  EXPECT_FALSE(check.drifted());
  EXPECT_FALSE(check.refusal(kAbstain, false));
  EXPECT_FALSE(check.refusal(kAllow, true));
}

TEST(PostureCheck, ADifferentPartIsOneWarningNamingItAndItsControls) {
  PostureCheck check(Posture{"untrusted", "read-only"});
  auto warning = check.reported(Posture{"untrusted", "workspace-write"}, "resume", true);
  ASSERT_TRUE(warning);
  EXPECT_EQ(warning->code, "POSTURE_DRIFT");
  ASSERT_TRUE(warning->posture);
  EXPECT_EQ(warning->posture->occasion, "resume");
  EXPECT_EQ(warning->posture->drifted, std::vector<std::string>{"sandbox"});
  EXPECT_EQ(warning->posture->asked.sandbox, "read-only");
  EXPECT_EQ(warning->posture->reported.sandbox, "workspace-write");
  EXPECT_EQ(warning->posture->refused.size(), 2u) << "abstain, and allow on a deny-only run";
  EXPECT_NE(warning->message.find("sandbox \"workspace-write\" where the run asks \"read-only\""), std::string::npos)
      << warning->message;
  EXPECT_FALSE(check.reported(Posture{"untrusted", "workspace-write"}, "resume", true))
      << "a drift already warned of is not warned again";
}

TEST(PostureCheck, WhileDriftedAbstainAndADenyOnlyAllowAreRefusedAndDenyIsNot) {
  PostureCheck check(Posture{"acceptEdits", std::nullopt});
  ASSERT_TRUE(check.reported(Posture{"default", std::nullopt}, "resume", true));
  auto abstain = check.refusal(kAbstain, false);
  ASSERT_TRUE(abstain);
  EXPECT_EQ(abstain->rfind("POSTURE_DRIFT", 0), 0u) << "refused by name: " << *abstain;
  EXPECT_TRUE(check.refusal(kAllow, true)) << "a deny-only allow is delivered as abstain";
  EXPECT_FALSE(check.refusal(kAllow, false)) << "an allow that grants overrides any posture";
  EXPECT_FALSE(check.refusal(kDeny, true)) << "a deny means the same under any posture";
}

TEST(PostureCheck, APermissionSetTheVendorAppliedSetsThePartAgain) {
  PostureCheck check(Posture{"untrusted", "workspace-write"});
  ASSERT_TRUE(check.reported(Posture{"on-request", "danger-full-access"}, "resume", false));
  check.set_sent("rpc:7", Posture{std::nullopt, "danger-full-access"});
  check.set_answered("rpc:7", false);
  EXPECT_TRUE(check.drifted()) << "a set the vendor refused sets nothing";
  check.set_applied(Posture{std::nullopt, "read-only"});
  EXPECT_TRUE(check.drifted()) << "the permission mode is still not the one asked";
  EXPECT_EQ(check.asked().sandbox, "read-only");
  check.set_sent("rpc:8", Posture{"untrusted", std::nullopt});
  EXPECT_TRUE(check.refusal(kAbstain, false)) << "not yet applied";
  check.set_answered("rpc:8", true);
  EXPECT_FALSE(check.drifted());
  EXPECT_FALSE(check.refusal(kAbstain, false));
}

TEST(PostureCheck, AReportDuringASetInFlightMayShowEitherPosture) {
  PostureCheck check(Posture{"default", std::nullopt});
  check.set_sent("mh-ctl-1", Posture{"plan", std::nullopt});
  EXPECT_FALSE(check.reported(Posture{"plan", std::nullopt}, "resume", false));
  EXPECT_FALSE(check.reported(Posture{"default", std::nullopt}, "resume", false));
  EXPECT_TRUE(check.reported(Posture{"acceptEdits", std::nullopt}, "resume", false));
}

TEST(PostureCheck, APartNotAskedOrNotReportedIsNotCompared) {
  PostureCheck unstated(std::nullopt);  // an adapter that states no launch posture
  EXPECT_FALSE(unstated.reported(Posture{"yolo", "none"}, "start", false));
  EXPECT_FALSE(unstated.drifted());
  EXPECT_EQ(unstated.last_reported().permission_mode, "yolo") << "kept, never judged";
  PostureCheck claude(Posture{"default", std::nullopt});
  EXPECT_FALSE(claude.reported(Posture{"default", "workspace-write"}, "start", false))
      << "a sandbox the run asks nothing of";
  PostureCheck codex(Posture{"untrusted", "workspace-write"});
  EXPECT_FALSE(codex.reported(Posture{std::nullopt, std::nullopt}, "resume", false)) << "a report that says nothing";
  EXPECT_FALSE(codex.drifted());
}

// --- the run core, through the real Claude session ---------------------------------------------

std::string init_in(const std::string& mode) {
  auto o = parse_object(lines::init());
  o["permissionMode"] = mode;
  return lines::line(o);
}

// The real Claude session, plus a resume: a line "resume:<mode>" is the resumed vendor's report
// of its mode (what parking's `claude --resume` reports in its system/init).
class ResumingSession final : public adapters::AdapterSession {
 public:
  explicit ResumingSession(std::unique_ptr<adapters::AdapterSession> inner) : inner_(std::move(inner)) {}

  void on_vendor_line(const proto::FramedLine& line, adapters::AdapterOutputs& sink) override {
    if (line.text.rfind("resume:", 0) == 0) {
      sink.posture_reported(Posture{std::string(line.text.substr(7)), std::nullopt}, "resume");
      return;
    }
    inner_->on_vendor_line(line, sink);
  }
  void start(adapters::AdapterOutputs& sink) override { inner_->start(sink); }
  void on_vendor_end(adapters::AdapterOutputs& sink) override { inner_->on_vendor_end(sink); }
  void answer(const adapters::ReplyToken& reply, const adapters::ToolCall& call, const proto::Decision& decision,
              adapters::AdapterOutputs& sink) override {
    inner_->answer(reply, call, decision, sink);
  }
  std::optional<proto::Refusal> check_decision(const adapters::ToolCall& call,
                                               const proto::Decision& decision) const override {
    return inner_->check_decision(call, decision);
  }
  bool allow_overrides_posture(const std::string& posture) const override {
    return inner_->allow_overrides_posture(posture);
  }
  void send_user_turn(const std::vector<std::string>& texts, adapters::AdapterOutputs& sink) override {
    inner_->send_user_turn(texts, sink);
  }
  adapters::ControlAck interrupt(adapters::AdapterOutputs& sink) override { return inner_->interrupt(sink); }
  adapters::ControlAck steer(const std::string& text, adapters::AdapterOutputs& sink) override {
    return inner_->steer(text, sink);
  }
  adapters::ControlAck set_permission(const std::string& posture, adapters::AdapterOutputs& sink) override {
    return inner_->set_permission(posture, sink);
  }
  std::optional<Posture> asked_posture() const override { return inner_->asked_posture(); }
  void end_session(adapters::AdapterOutputs& sink) override { inner_->end_session(sink); }
  std::optional<proto::ev::SessionEnded> session_ended() const override { return inner_->session_ended(); }

 private:
  std::unique_ptr<adapters::AdapterSession> inner_;
};

class RunCorePosture : public RunCoreTest {
 protected:
  RunCorePosture() {
    wrap_session = [](std::unique_ptr<adapters::AdapterSession> inner) {
      return std::make_unique<ResumingSession>(std::move(inner));
    };
  }

  std::vector<proto::ev::Warning> drifts() const {
    std::vector<proto::ev::Warning> out;
    for (const auto& w : all<proto::ev::Warning>())
      if (w.code == "POSTURE_DRIFT") out.push_back(w);
    return out;
  }

  void decide(const std::string& id, const std::string& call, const std::string& decision) {
    const std::string reason = decision == "deny" ? R"(,"reason":"not now")" : "";
    command(R"({"format":"metaharness.command/1","id":")" + id + R"(","command":"tool.decide","call_id":")" + call +
            R"(","decision":{"decision":")" + decision + "\"" + reason + "}}");
  }

  void set_permission(const std::string& id, const std::string& posture) {
    command(R"({"format":"metaharness.command/1","id":")" + id + R"(","command":"permission.set","posture":")" +
            posture + R"("})");
  }

  // Answers the set_permission_mode request the session just wrote.
  void vendor_acks_last_control() {
    auto request = last_vendor();
    feed(lines::control_ok(std::string(request.at("request_id").as_string())));
  }

  void present_call(const std::string& call, const std::string& hook) {
    feed(lines::tool_use(call, "Bash", kBash));
    feed(lines::hook_callback(hook, call, "Bash", kBash));
  }
};

TEST_F(RunCorePosture, ClaudeStartingInTheModeTheRunAsksIsNoDrift) {
  open_and_begin(proto::DecisionMode::ask);
  EXPECT_TRUE(drifts().empty());
  present_call("toolu_1", "hk-1");
  decide("d1", "toolu_1", "abstain");
  EXPECT_TRUE(result_for("d1").outcome.is_ok());
}

TEST_F(RunCorePosture, ClaudeStartingInAnotherModeIsDriftAndAbstainIsRefusedUntilSetAgain) {
  open(proto::DecisionMode::ask);
  feed(lines::initialize_ok());
  feed(init_in("plan"));
  auto warnings = drifts();
  ASSERT_EQ(warnings.size(), 1u);
  ASSERT_TRUE(warnings[0].posture);
  EXPECT_EQ(warnings[0].posture->occasion, "start");
  EXPECT_EQ(warnings[0].posture->asked.permission_mode, "default");
  EXPECT_EQ(warnings[0].posture->reported.permission_mode, "plan");
  EXPECT_EQ(names()[0], "session.started") << "session.started opens the stream; the warning follows it";
  present_call("toolu_1", "hk-1");
  decide("d1", "toolu_1", "abstain");
  auto refused = result_for("d1").outcome;
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.refusal->code, proto::RefusalCode::UNSUPPORTED_CONTROL);
  EXPECT_NE(refused.refusal->reason.find("POSTURE_DRIFT"), std::string::npos) << refused.refusal->reason;
  EXPECT_EQ(fx.hook_replies.size(), 0u);
  // Without deny-only only bypassPermissions may be set (the rest are SHADOWED); it sets the mode.
  set_permission("p1", "bypassPermissions");
  decide("d2", "toolu_1", "abstain");
  EXPECT_FALSE(result_for("d2").outcome.is_ok()) << "not applied until the vendor acknowledges it";
  vendor_acks_last_control();
  EXPECT_TRUE(result_for("p1").outcome.is_ok());
  decide("d3", "toolu_1", "abstain");
  EXPECT_TRUE(result_for("d3").outcome.is_ok());
}

TEST_F(RunCorePosture, AResumeThatForgetsTheModeSetIsDriftOnADenyOnlyRunUntilSetAgain) {
  spec.deny_only = true;
  open_and_begin(proto::DecisionMode::ask);
  set_permission("p1", "acceptEdits");
  vendor_acks_last_control();
  ASSERT_TRUE(result_for("p1").outcome.is_ok());
  feed("resume:default");  // Claude 2.1.197 resumed without --permission-mode reports default
  auto warnings = drifts();
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0].posture->occasion, "resume");
  EXPECT_EQ(warnings[0].posture->asked.permission_mode, "acceptEdits");
  present_call("toolu_1", "hk-1");
  decide("d1", "toolu_1", "allow");
  ASSERT_FALSE(result_for("d1").outcome.is_ok()) << "an allow is delivered as abstain on a deny-only run";
  decide("d2", "toolu_1", "deny");
  EXPECT_TRUE(result_for("d2").outcome.is_ok()) << "a deny is never held back";
  present_call("toolu_2", "hk-2");
  set_permission("p2", "acceptEdits");
  vendor_acks_last_control();
  decide("d3", "toolu_2", "allow");
  EXPECT_TRUE(result_for("d3").outcome.is_ok());
}

}  // namespace
}  // namespace mh::daemon
