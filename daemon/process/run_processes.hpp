// Finding and killing every process of a run, including the ones that escaped its tree.
//
// A vendor's tool shell runs as its own session leader, and whatever it starts with `setsid` or
// a double fork is re-parented to init and survives the vendor's exit or SIGKILL. What they all
// keep is the environment: every process of a run inherits the run marker (an environment entry
// such as METAHARNESS_RUN=<run id>). So a run's processes are
//   - the live descendants of its root (the vendor process), by /proc/<pid>/stat parent links,
//     root included, and
//   - every live process whose /proc/<pid>/environ holds the marker entry exactly,
// never the calling process, pid 1, or an ancestor of the caller. A root that is one of those
// is not walked at all (only the marker counts then). A zombie is dead and never listed.
//
// Killing is freeze-then-kill, so nothing can fork or escape while we look: SIGSTOP everything
// found, wait until every frozen process really shows as stopped (a SIGSTOP takes effect on the
// way back to user space, and a fork already in flight at that moment still completes, so only a
// stopped parent proves its children are all visible), scan again, repeat until such a scan finds
// nothing new (freeze_pass.hpp), then SIGKILL everything and wait (bounded) until none is alive (a
// zombie counts as dead). One more scan after the kill catches anything that still slipped
// through (e.g. the child of a process stuck in an uninterruptible wait, which never shows as
// stopped; such a process is waited for 200 ms at most, a merely slow one 2 s); if it finds
// something, the whole pass repeats.
// Every process is signalled through a pidfd opened after it qualified and checked against the
// start time seen when it qualified, so a recycled pid is never signalled; a process that lost
// its pid in between is simply left for the next scan to judge afresh.
//
// Cost: each scan reads /proc/<pid>/stat of every process on the host, and /proc/<pid>/environ
// (in 16 KiB chunks, never held whole) of those that are not already known to be in the tree.
// Scans are bounded by the number of processes; rounds (scans) by kMaxFreezeRounds (freeze_pass.hpp).
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mh::daemon {

// name=value; LaunchPlan::run_marker.
using RunMarker = std::pair<std::string, std::string>;

// The run's live processes right now (unordered, no duplicates). Synchronous; see cost above.
std::vector<pid_t> find_run_processes(std::optional<pid_t> root, const RunMarker& marker);

struct KillReport {
  std::vector<pid_t> killed;     // stopped, SIGKILLed and seen dead (or already gone)
  std::vector<pid_t> survivors;  // still alive when the timeout ran out (e.g. stuck in D state)
  int freeze_rounds = 0;
  bool fixed_point = false;           // a scan found nothing new before the round limit / timeout
  std::vector<std::string> problems;  // e.g. descriptors exhausted; empty normally

  bool clean() const { return survivors.empty() && problems.empty(); }
  std::string summary() const;
};

// Freeze-then-kill on the calling coroutine's strand. Between scans and while waiting for the
// killed processes to go it yields to the executor (timers, never a sleep), so other runs on
// the same io threads keep going. The timeout bounds the whole operation.
boost::asio::awaitable<KillReport> kill_run_processes(boost::asio::any_io_executor executor, std::optional<pid_t> root,
                                                      RunMarker marker, std::chrono::milliseconds timeout);

// The same algorithm, blocking the calling thread (poll(2) on the pidfds while waiting): for
// shutdown and start-up recovery paths, never for an io thread that serves runs.
KillReport kill_run_processes_sync(std::optional<pid_t> root, const RunMarker& marker,
                                   std::chrono::milliseconds timeout);

}  // namespace mh::daemon
