// One freeze pass of a run kill (run_processes.hpp): scan, SIGSTOP the newcomers, wait until every
// frozen process really shows as stopped, scan again, until a scan begun while all of them were
// stopped finds nothing new (the fixed point), the round limit or the deadline ends it, or a
// process will not stop within its patience.
//
// Why wait before scanning rather than scan while waiting: a SIGSTOP takes effect only when the
// process next runs, and on a loaded host that can take a while. A pass that scanned every
// millisecond while it waited spent its round budget (kMaxFreezeRounds) on scans that could prove
// nothing and reported "no fixed point" for a run it had in fact frozen whole (seen in CI:
// RunProcesses.KillsTheWholeRunIncludingEscapeesAndLeavesOthersAlone under ctest -j2). So the
// round budget counts scans, and the wait between them is bounded by time:
//   - a process that is runnable (or asleep: the signal wakes it) stops when it is next
//     scheduled, so it is waited for up to kRunnablePatience (a loaded host's scheduling delay);
//   - a process in an uninterruptible wait ('D': a hung filesystem, a vfork parent whose child we
//     froze) may never stop, so it is waited for up to kStuckPatience only.
// The clock is passed in, so the pass is a value a test can step (tests/process/freeze_pass_test).
#pragma once

#include <chrono>
#include <cstddef>

namespace mh::daemon {

inline constexpr int kMaxFreezeRounds = 32;
inline constexpr auto kRunnablePatience = std::chrono::milliseconds(2000);
inline constexpr auto kStuckPatience = std::chrono::milliseconds(200);

// How the processes frozen so far stand: those not yet stopped (nor dead), by why.
struct Settling {
  std::size_t runnable = 0;         // running, runnable or asleep: it stops when next scheduled
  std::size_t uninterruptible = 0;  // 'D': it may never stop
  bool settled() const { return runnable == 0 && uninterruptible == 0; }
};

// What a pass works on (the killer of run_processes.cpp; a fake in the tests).
class FreezeTarget {
 public:
  virtual ~FreezeTarget() = default;
  // How the frozen processes stand; one that is not stopped is sent SIGSTOP again (something of
  // the run may have sent it SIGCONT in between).
  virtual Settling settling() = 0;
  // One scan of the host: freezes what it finds of the run that is not frozen yet; how many.
  virtual std::size_t freeze_round() = 0;
  // Scans so far, over every pass of this kill.
  virtual int rounds() const = 0;
};

class FreezePass {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Next { over, pause, scan_again };

  // One step at `now`: a scan, or a look at the frozen ones that says to wait (pause) first.
  Next step(FreezeTarget& target, Clock::time_point now, Clock::time_point deadline);
  bool fixed_point() const { return fixed_point_; }

 private:
  bool fixed_point_ = false;
  Clock::time_point waiting_since_ = Clock::time_point::max();
};

}  // namespace mh::daemon
