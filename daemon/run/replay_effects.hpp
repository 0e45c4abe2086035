// ReplayEffects: what a run's core does while an adoption rebuilds it from the input journal
// (adoption.hpp). The core is pointed at it (EffectsSwitch) for the replay. Each event the
// core emits up to the stream's last seq is on record already: it is checked against the type the
// record holds at that seq, not written again (past it, events go to the live record). What the
// core asks of the vendor and of the timers is collected, not done: the adoption reconciles it
// with what the supervisor says happened (the stdin the vendor was sent, the hooks still waiting,
// the deadlines, the wall budget and a grace that began before the adoption).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/run/run_effects.hpp"

namespace mh::daemon {

class ReplayEffects final : public RunEffects {
 public:
  // `live`: where events past the record and command results go. `recorded_types`: the type of
  // each recorded event, by seq - 1. `exit_grace`: the grace a normal end gives the vendor.
  ReplayEffects(RunEffects& live, std::vector<std::string> recorded_types, std::chrono::milliseconds exit_grace);

  // The journal entry being replayed: its `now` is when a grace that begins in it began.
  void at(Instant now) { now_ = now; }
  // The replay made something the record does not hold (or the transcript lacks bytes the
  // journal says were read): the core is not the one that governed the run. The first why.
  void diverge(std::string why) {
    if (!diverged_) diverged_ = std::move(why);
  }

  // What was collected.
  std::uint64_t recorded_last() const { return recorded_types_.size(); }
  std::uint64_t seq() const { return seq_; }  // the seq the core's last replayed event got
  Instant now() const { return now_; }
  const std::optional<std::string>& diverged() const { return diverged_; }
  const std::string& stdin_bytes() const { return stdin_bytes_; }  // every line written, with its '\n'
  bool stdin_closed() const { return stdin_closed_; }
  const std::optional<Instant>& kill_at() const { return kill_at_; }
  const std::map<std::uint64_t, std::string>& hook_replies() const { return hook_replies_; }
  const std::map<std::string, Instant>& deadlines() const { return deadlines_; }
  const std::optional<Instant>& wall() const { return wall_; }
  // The stall timer as the rebuilt core last set it (issue 27 §2): unset if it never set one.
  const std::optional<std::optional<Instant>>& stall() const { return stall_; }
  // The park timer as the rebuilt core last set it (issue 27 §5): the call and when; nullopt if
  // disarmed or never armed.
  const std::optional<std::pair<std::string, Instant>>& park() const { return park_; }

  std::uint64_t emit(proto::EventPayload payload, std::optional<std::string> at) override;
  std::uint64_t emit_cut(proto::EventPayload payload, std::optional<std::string> at,
                         std::vector<proto::CutField> cut) override;
  void write_vendor(std::string line) override;
  void reply_hook(std::uint64_t connection, std::string line) override;
  void arm_deadline(const std::string& call_id, Instant when) override;
  void cancel_deadline(const std::string& call_id) override;
  void close_vendor_stdin() override;
  void terminate_vendor(std::chrono::milliseconds grace) override;
  void arm_wall_budget(Instant when) override;
  void arm_stall(std::optional<Instant> when) override { stall_ = when; }
  void arm_park(const std::string& call_id, std::optional<Instant> when) override;
  void vendor_started_again() override;
  // Reported once, when the replay is over (the adoption's on_spend_replayed).
  void spend_changed(const Spend& spend) override { (void)spend; }
  void command_answered(Ticket ticket, const proto::ev::CommandResult& result, bool recorded) override;

 private:
  RunEffects& live_;
  std::vector<std::string> recorded_types_;
  std::chrono::milliseconds exit_grace_;
  std::uint64_t seq_ = 0;
  Instant now_{};
  std::optional<std::string> diverged_;
  std::string stdin_bytes_;
  bool stdin_closed_ = false;
  std::optional<Instant> kill_at_;  // a grace that began before the adoption ends then
  std::map<std::uint64_t, std::string> hook_replies_;
  std::map<std::string, Instant> deadlines_;
  std::optional<Instant> wall_;
  std::optional<std::optional<Instant>> stall_;
  std::optional<std::pair<std::string, Instant>> park_;
};

}  // namespace mh::daemon
