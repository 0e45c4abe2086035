// AllSignalsBlocked: every signal blocked on the calling thread while it lives, so that a child
// forked meanwhile is born with them blocked and no handler of the daemon's (its signal set
// writes to a pipe the child would share) can run inside the child before it resets or exits.
#pragma once

#include <pthread.h>
#include <signal.h>

namespace mh::daemon {

class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &previous_);
  }
  ~AllSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t previous_;
};

}  // namespace mh::daemon
