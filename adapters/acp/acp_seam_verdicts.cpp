#include "adapters/acp/acp_seam_verdicts.hpp"

#include "adapters/acp/acp_updates.hpp"

namespace mh::adapters::acp {

void SeamVerdicts::decided(const std::string& call_id, SeamVerdict verdict) {
  if (open_.size() < kMaxOpenCalls || open_.count(call_id)) open_[call_id] = verdict;
}

void SeamVerdicts::ended(const std::string& call_id) {
  auto it = open_.find(call_id);
  if (it == open_.end()) return;
  keep_ended(it->first, it->second);
  open_.erase(it);
}

void SeamVerdicts::turn_ended() {
  for (const auto& [call_id, verdict] : open_)
    keep_ended(call_id, verdict);
  open_.clear();
}

std::optional<SeamVerdict> SeamVerdicts::find(const std::string& call_id) const {
  if (auto it = open_.find(call_id); it != open_.end()) return it->second;  // a reused id: its newest call
  if (auto it = ended_.find(call_id); it != ended_.end()) return it->second;
  return std::nullopt;
}

void SeamVerdicts::keep_ended(const std::string& call_id, SeamVerdict verdict) {
  if (auto it = ended_.find(call_id); it != ended_.end()) {
    it->second = verdict;  // already in ended_order_: kept where it was, so each id is there once
    return;
  }
  if (ended_.size() >= kMaxEndedVerdicts) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
  }
  ended_[call_id] = verdict;
  ended_order_.push_back(call_id);
}

}  // namespace mh::adapters::acp
