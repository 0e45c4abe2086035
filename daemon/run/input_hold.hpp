// InputHold: while an adopted run is being rebuilt, what arrives from outside (commands,
// snapshots) waits here, in order, and runs once the run is live: the replay hands the core only
// what the journal holds, and a snapshot shows the rebuilt run, not a half-built one. A launched
// run never holds. Not the core's phase: the replay moves the core through its phases as the live
// run did, so "being rebuilt" is the shell's to know, not the core's.
#pragma once

#include <functional>
#include <optional>
#include <utility>
#include <vector>

namespace mh::daemon {

class InputHold {
 public:
  // From now on, what arrives waits (an adopted run, from its making).
  void hold() { held_.emplace(); }
  // Runs `f` now, or when the hold is released.
  void run_or_hold(std::function<void()> f) {
    if (held_)
      held_->push_back(std::move(f));
    else
      f();
  }
  // The run is live (or closed): what waited runs now, in order, and nothing waits again.
  void release() {
    if (!held_) return;
    auto waiting = std::move(*held_);
    held_.reset();
    for (auto& f : waiting)
      f();
  }

 private:
  std::optional<std::vector<std::function<void()>>> held_;
};

}  // namespace mh::daemon
