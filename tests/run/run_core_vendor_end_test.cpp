// The vendor's end reaching the adapter session (AdapterSession::on_vendor_end): what a session
// held for a later line is flushed into the stream once, before the wind-up's own records, whether
// the vendor finished, died mid-turn, or the host only wound up. The session here is the real
// Claude session wrapped by one that holds a record until the end, as Codex holds notifications
// that precede its thread.
#include "adapters/session.hpp"
#include "tests/run/run_core_fixture.hpp"

namespace mh::daemon {
namespace {

// The real session, plus one record it releases only when told the vendor's stdout ended.
class HoldingSession final : public adapters::AdapterSession {
 public:
  HoldingSession(std::unique_ptr<adapters::AdapterSession> inner, int& told) : inner_(std::move(inner)), told_(told) {}

  void on_vendor_end(adapters::AdapterOutputs& sink) override {
    ++told_;
    inner_->on_vendor_end(sink);
    sink.event(proto::ev::Opaque{"held", std::nullopt, "digest-of-the-held-line", 2}, std::nullopt);
  }

  void start(adapters::AdapterOutputs& sink) override { inner_->start(sink); }
  void on_vendor_line(const proto::FramedLine& line, adapters::AdapterOutputs& sink) override {
    inner_->on_vendor_line(line, sink);
  }
  void answer(const adapters::ReplyToken& reply, const adapters::ToolCall& call, const proto::Decision& decision,
              adapters::AdapterOutputs& sink) override {
    inner_->answer(reply, call, decision, sink);
  }
  std::optional<proto::Refusal> check_decision(const adapters::ToolCall& call,
                                               const proto::Decision& decision) const override {
    return inner_->check_decision(call, decision);
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
  void end_session(adapters::AdapterOutputs& sink) override { inner_->end_session(sink); }
  std::optional<proto::ev::SessionEnded> session_ended() const override { return inner_->session_ended(); }

 private:
  std::unique_ptr<adapters::AdapterSession> inner_;
  int& told_;
};

class VendorEndTest : public RunCoreTest {
 protected:
  VendorEndTest() {
    wrap_session = [this](std::unique_ptr<adapters::AdapterSession> inner) {
      return std::make_unique<HoldingSession>(std::move(inner), told);
    };
  }

  // Where the held record is in the stream; fails unless it is there exactly once.
  std::size_t held_index() const {
    std::size_t found = fx.events.size(), count = 0;
    for (std::size_t i = 0; i < fx.events.size(); ++i)
      if (auto* o = std::get_if<proto::ev::Opaque>(&fx.events[i].payload); o && o->vendor_type == "held") {
        if (count++ == 0) found = i;
      }
    EXPECT_EQ(count, 1u) << "the held record is in the stream exactly once";
    return found;
  }

  std::size_t index_of(std::string_view name) const {
    auto n = names();
    return static_cast<std::size_t>(std::find(n.begin(), n.end(), name) - n.begin());
  }

  int told = 0;
};

TEST_F(VendorEndTest, AFinishedVendorsEndReleasesWhatTheSessionHeldBeforeSessionEnded) {
  open_and_begin(proto::DecisionMode::observe);
  feed(lines::text("done"));
  feed(lines::result());
  ASSERT_TRUE(fx.stdin_closed) << "the run ended at its first idle boundary";
  EXPECT_EQ(told, 0) << "the session hears of the end only when the vendor's stdout ends";
  core->on_vendor_end(now);
  EXPECT_EQ(told, 1);
  core->on_vendor_end(now);  // a second report of the same end tells the session nothing new
  EXPECT_EQ(core->wind_up({proto::ProcessKind::exited, 0, 0}, now), proto::CloseReason::completed);
  EXPECT_EQ(told, 1) << "told exactly once, though the host reported the end and then wound up";
  std::size_t held = held_index();
  EXPECT_LT(held, index_of("session.ended")) << "the held record precedes the wind-up's records";
  EXPECT_EQ(index_of("session.ended"), fx.events.size() - 1) << "nothing after session.ended but the host's close";
}

TEST_F(VendorEndTest, AVendorThatDiesMidTurnStillGetsWhatItsSessionHeldIntoTheStream) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  ASSERT_EQ(core->pending_count(), 1u);
  core->on_vendor_end(now);
  EXPECT_EQ(core->wind_up({proto::ProcessKind::signaled, 0, 9}, now), proto::CloseReason::error);
  EXPECT_EQ(told, 1);
  std::size_t held = held_index();
  EXPECT_LT(held, index_of("warning")) << "the vendor's own record, then VENDOR_EXITED";
  EXPECT_LT(held, index_of("tool.decided")) << "then the pending call abandoned";
  EXPECT_EQ(only<proto::ev::ToolDecided>().decided_by, proto::DecidedBy::adapter);
}

TEST_F(VendorEndTest, WindUpTellsTheSessionTheVendorEndedWhenTheHostDidNot) {
  open_and_begin(proto::DecisionMode::ask);
  feed(lines::tool_use("toolu_1", "Bash", kBash));
  EXPECT_EQ(core->wind_up({proto::ProcessKind::signaled, 0, 9}, now), proto::CloseReason::error);
  EXPECT_EQ(told, 1) << "no host can wind up a run whose session never heard its vendor end";
  EXPECT_LT(held_index(), index_of("warning"));
  core->on_vendor_end(now);  // after the wind-up: the run is closed, nothing more is recorded
  EXPECT_EQ(told, 1);
  held_index();
}

}  // namespace
}  // namespace mh::daemon
