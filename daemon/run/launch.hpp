// Launch: the making of a new run's body (Run::create; main's way up for it). It writes the plan's
// directories, files and links, chooses the vendor's body once (a DirectBody, or a SupervisedBody
// when the run is supervised), opens what the body needs (the raw transcripts, the hook log, the
// hook channel), prepares the run's containment, spawns the vendor (or its supervisor) and starts
// the core. Anything that cannot be made refuses the run by name (LAUNCH_REFUSED / LAUNCH_FAILED)
// before the vendor runs.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "daemon/run/run.hpp"

namespace mh::daemon {

class Launch {
 public:
  explicit Launch(Run::Impl& run);

  // True when the vendor runs; false when the run was refused or failed (and is closed).
  boost::asio::awaitable<bool> run();

 private:
  Run::Impl& run_;
};

}  // namespace mh::daemon
