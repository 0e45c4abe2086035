#include "daemon/process/freeze_pass.hpp"

namespace mh::daemon {

FreezePass::Next FreezePass::step(FreezeTarget& target, Clock::time_point now, Clock::time_point deadline) {
  if (target.rounds() >= kMaxFreezeRounds || now >= deadline) return Next::over;
  // Whether everything frozen was stopped is noted before the scan: a fork in flight while we
  // scan completes before its parent stops, so only a scan begun after they all stopped proves
  // that nothing new can appear.
  const Settling settling = target.settling();
  if (!settling.settled()) {
    if (waiting_since_ == Clock::time_point::max()) waiting_since_ = now;
    const auto patience = settling.uninterruptible > 0 ? kStuckPatience : kRunnablePatience;
    if (now - waiting_since_ < patience) return Next::pause;
    // Out of patience: scan all the same, for what the unsettled ones started, and give up on
    // the fixed point if that finds nothing new.
  }
  if (target.freeze_round() > 0) {
    waiting_since_ = Clock::time_point::max();
    return Next::scan_again;
  }
  fixed_point_ = settling.settled();
  return Next::over;
}

}  // namespace mh::daemon
