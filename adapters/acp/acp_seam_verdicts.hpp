// What an earlier call seam of the adapter's own (a profile's hook seam, acp_profile.hpp) decided,
// by call id, so ACP's permission request for the same call (the second gate) is answered from it
// and never presented as a new call. Part of the ACP client (acp_client.hpp); no I/O, no clock.
//
// A verdict outlives its call's end. The second gate is not ordered after the call's end: an agent
// has been seen (soak finding 5, docs/soak.md) to report a call `failed` and only then send that
// call's permission request. Forgetting the verdict at the end presented that late request as a new
// call: a second tool.requested, REQUEST_MUTATED and a second tool.decided for one call. So an ended
// call's verdict is kept among the last kMaxEndedVerdicts ended calls (the oldest let go first),
// across turns too: a late request may trail even the prompt's answer, and call ids are unique
// within a session. Past that bound a late request is presented as before; the bound only keeps a
// hostile agent from growing the record.
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>

namespace mh::adapters::acp {

// What the earlier seam decided: granted (allow, or replace: what runs is the replaced input),
// not granted (abstain: under "ask" nobody else can grant it), denied.
enum class SeamVerdict { granted, not_granted, denied };

// Calls still open with a verdict (kMaxOpenCalls, acp_updates.hpp, bounds those) plus the verdicts
// of this many ended calls: far more than the calls of one model message, whose late requests are
// the ones observed.
inline constexpr std::size_t kMaxEndedVerdicts = 1024;

class SeamVerdicts {
 public:
  // The seam decided `call_id`. Past kMaxOpenCalls open verdicts a new one is not kept: that call's
  // permission request is then presented.
  void decided(const std::string& call_id, SeamVerdict verdict);
  // `call_id` ended (completed or failed): its verdict, if any, is kept for a late second gate.
  void ended(const std::string& call_id);
  // The turn ended: every call still open ended with it.
  void turn_ended();
  // The verdict for `call_id`'s second gate, open or ended; nullopt: the seam never decided it.
  std::optional<SeamVerdict> find(const std::string& call_id) const;

  std::size_t open_size() const { return open_.size(); }
  std::size_t ended_size() const { return ended_.size(); }

 private:
  void keep_ended(const std::string& call_id, SeamVerdict verdict);

  std::map<std::string, SeamVerdict> open_;
  std::map<std::string, SeamVerdict> ended_;
  std::deque<std::string> ended_order_;  // ended_'s ids, oldest first, each once
};

}  // namespace mh::adapters::acp
