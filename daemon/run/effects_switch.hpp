// EffectsSwitch: the RunEffects a run's core is made with. It hands every effect to the effects it
// is pointed at: the shell's live effects (Run::Impl), or, while an adoption replays the journal
// into a fresh core, that replay's ReplayEffects (replay_effects.hpp). So the core is pointed at
// the replay for as long as it lasts, and neither the live effects nor the core ask which it is.
#pragma once

#include "daemon/run/run_core.hpp"

namespace mh::daemon {

class EffectsSwitch final : public RunEffects {
 public:
  explicit EffectsSwitch(RunEffects& live) : live_(live), to_(&live) {}

  void point_at(RunEffects& effects) { to_ = &effects; }
  void point_at_live() { to_ = &live_; }

  std::uint64_t emit(proto::EventPayload payload, std::optional<std::string> at) override {
    return to_->emit(std::move(payload), std::move(at));
  }
  std::uint64_t emit_cut(proto::EventPayload payload, std::optional<std::string> at,
                         std::vector<proto::CutField> cut) override {
    return to_->emit_cut(std::move(payload), std::move(at), std::move(cut));
  }
  void write_vendor(std::string line) override { to_->write_vendor(std::move(line)); }
  void reply_hook(std::uint64_t connection, std::string line) override { to_->reply_hook(connection, std::move(line)); }
  void arm_deadline(const std::string& call_id, Instant when) override { to_->arm_deadline(call_id, when); }
  void cancel_deadline(const std::string& call_id) override { to_->cancel_deadline(call_id); }
  void close_vendor_stdin() override { to_->close_vendor_stdin(); }
  void terminate_vendor(std::chrono::milliseconds grace) override { to_->terminate_vendor(grace); }
  void arm_wall_budget(Instant when) override { to_->arm_wall_budget(when); }
  void arm_stall(std::optional<Instant> when) override { to_->arm_stall(when); }
  void arm_park(const std::string& call_id, std::optional<Instant> when) override { to_->arm_park(call_id, when); }
  void resume_vendor() override { to_->resume_vendor(); }
  void vendor_started_again() override { to_->vendor_started_again(); }
  void spend_changed(const Spend& spend) override { to_->spend_changed(spend); }
  void command_answered(Ticket ticket, const proto::ev::CommandResult& result, bool recorded) override {
    to_->command_answered(ticket, result, recorded);
  }

 private:
  RunEffects& live_;
  RunEffects* to_;
};

}  // namespace mh::daemon
