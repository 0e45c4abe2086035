// VendorBody: the vendor's process as the run's shell drives it, whichever way it runs. The shell
// chooses the body once, when it launches or adopts the run (as containerd's createIO chooses a
// task's IO once): a DirectBody (direct_body.hpp) when the vendor is the daemon's own child, a
// SupervisedBody (supervised_body.hpp) when it is the child of the run's supervisor process. The
// shell's effect overrides (write_vendor, close_vendor_stdin, terminate_vendor, reply_hook) then
// call the body and never ask which it is.
//
// A body owns the state of its way of running (the pipes, the stdin queue and the hook sockets of
// a direct child; the supervisor's link and what it last said of the vendor) and hands what the
// vendor does to the run as the core's inputs. Everything here runs on the run's strand.
#pragma once

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/types.hpp"

namespace mh::daemon {

class VendorBody {
 public:
  virtual ~VendorBody() = default;

  // One line to the vendor's stdin (the body appends the newline and keeps the copy).
  virtual void write_line(std::string line) = 0;
  // Closes the vendor's stdin after what was written before; whatever of the run is left is
  // killed once `grace` has passed (terminate), unless the vendor is gone by then.
  virtual void close_stdin(std::chrono::milliseconds grace) = 0;
  // The grace ran out: every process of the run is killed now.
  virtual boost::asio::awaitable<void> terminate() = 0;
  // The answer to a hook-channel request: written to that connection, which is then closed (a
  // connection that went away is not answered).
  virtual void reply_hook(std::uint64_t connection, std::string line) = 0;
  // Hands the vendor's output, its hooks and its end to the run until its stdout and stderr have
  // ended and no process of the run is left; then how the vendor ended.
  virtual boost::asio::awaitable<protocol::ProcessTermination> run_until_gone() = 0;
  // The run is closed: the body lets go of what it holds (hook sockets, the supervisor).
  virtual void release() = 0;
  // Parking (issue 27 §5): once the vendor is gone (run_until_gone returned), start it again as
  // planned with `extra_args` after its own (the session's resume arguments); then run_until_gone
  // serves the new process. nullopt, or why it was not started. (By value: a coroutine keeps its
  // arguments, and the caller's vector is a temporary.)
  virtual boost::asio::awaitable<std::optional<std::string>> respawn(std::vector<std::string> extra_args) = 0;
  // The vendor's pid (0 when none was spawned), for the run's status.
  virtual pid_t pid() const = 0;
};

}  // namespace mh::daemon
