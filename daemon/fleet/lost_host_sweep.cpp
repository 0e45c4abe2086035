#include "daemon/fleet/lost_host_sweep.hpp"

namespace mh::fleet {

NatsResult<bool> LostHostSweep::renew(const std::string& info) {
  auto renewed = renew_lease(*link_, self_, info);
  if (!renewed) {
    taken_since_ = kNever;
    return renewed.error();
  }
  const Clock::rep now = Clock::now().time_since_epoch().count();
  const Clock::rep last = last_taken_.exchange(now);
  const auto ttl = std::chrono::duration_cast<Clock::duration>(link_->config().lease_ttl).count();
  const bool lapsed = last != kNever && now - last >= ttl;
  if (last == kNever || lapsed || taken_since_ == kNever) taken_since_ = now;
  return lapsed;
}

bool LostHostSweep::may_judge() const {
  const Clock::rep since = taken_since_, last = last_taken_;
  if (since == kNever || last == kNever) return false;
  const Clock::rep now = Clock::now().time_since_epoch().count();
  const auto ttl = std::chrono::duration_cast<Clock::duration>(link_->config().lease_ttl).count();
  return now - since >= ttl && now - last < ttl;
}

NatsResult<std::vector<ClosedRun>> LostHostSweep::sweep() {
  std::vector<ClosedRun> out;
  if (!records_) {
    auto opened = RunRecordWatch::open(*link_);
    if (!opened) return opened.error();
    records_.emplace(std::move(*opened));
  }
  if (auto drained = records_->drain(); !drained) return drained.error();
  std::erase_if(closed_unnamed_, [&](const auto& entry) {
    auto known = records_->records().find(entry.first);
    return known == records_->records().end() || known->second.state == "closed";
  });
  if (!may_judge()) return out;
  std::map<std::string, bool> holds;  // each host's lease, asked once a sweep
  std::vector<RunRecord> open;
  for (const auto& [id, record] : records_->records())
    if (record.state != "closed" && record.host != self_) open.push_back(record);
  for (auto& record : open) {
    auto known = holds.find(record.host);
    if (known == holds.end()) {
      auto held = holds_lease(*link_, record.host);
      if (!held) return held.error();
      known = holds.emplace(record.host, *held).first;
    }
    if (known->second) continue;
    auto closed = close_run_in_fleet(*link_, record.run_id, record.host, self_);
    if (!closed) return closed.error();
    // The record says so last. Its bucket may still be electing a leader: then the record stays
    // open here, and the next sweep finds the stream closed and marks it.
    if (closed->closer == self_) {
      out.push_back(*closed);
      closers_[record.run_id] = self_;
    }
    RunRecord done = record;
    done.state = "closed";
    done.closed_by = closed->closer.empty() && closers_.count(record.run_id) ? self_ : closed->closer;
    if (done.closed_by.empty()) {
      // Closed whole before this host looked, by a survivor that marks the record itself (a
      // record marked with no closer would read as closed by its owner, and the owner, back,
      // would not be told). Only a close nobody marked for a whole lease is marked here.
      auto first_seen = closed_unnamed_.try_emplace(record.run_id, Clock::now()).first->second;
      if (Clock::now() - first_seen < link_->config().lease_ttl) continue;
    }
    if (marks_to_fail_ > 0) {
      --marks_to_fail_;
      continue;  // the test hook: as a mark NATS did not take (the next sweep tries again)
    }
    if (auto marked = update_run_record(*link_, done, Wait::sweep); marked) {
      closers_.erase(record.run_id);
      closed_unnamed_.erase(record.run_id);
    }
  }
  return out;
}

}  // namespace mh::fleet
