// The record and the close: every event the run emits goes through emit_cut into the event log
// (held while one input is handled, released in one write), the core is told how far the stream
// is durable (report_recorded; it answers the commands whose results are), and finish writes
// stream.closed and tears down.
// Separate from the vendor I/O because this is the path that decides what the record says.
#include "daemon/log.hpp"
#include "daemon/run/run_impl.hpp"

namespace mh::daemon {

std::uint64_t Run::Impl::emit(protocol::EventPayload payload, std::optional<std::string> at) {
  return emit_cut(std::move(payload), std::move(at), {});
}

std::uint64_t Run::Impl::emit_cut(protocol::EventPayload payload, std::optional<std::string> at,
                                  std::vector<protocol::CutField> cut) {
  // The observer hears of the event while the payload is still in hand, before readers can
  // see it; only a failed write (which stops the run, logged above all) could make it differ
  // from the record.
  if (options.observer && !log->closed()) options.observer->appended(payload);
  if (options.seam_probe) options.seam_probe->appending(payload);
  auto seq = log->append(std::move(payload), std::move(at), std::move(cut));
  if (!seq) {
    // The record cannot be kept: say so where the operator looks, and stop the run rather
    // than govern it off the record.
    daemon::log(LogPriority::error, "run " + log->run_id() + ": " + seq.error());
    log_failed = true;  // after_core() stops the run once the core has returned
    return 0;           // not in the stream: the core tells nobody it was recorded
  }
  return *seq;
}

// Tells the core (and the probe) that everything appended so far is durable, once nothing is
// held: what waited on "recorded" (a command's result) is the core's to answer.
void Run::Impl::report_recorded(bool durable) {
  if (log->holding()) return;
  core->on_recorded(log->last_seq());
  if (options.seam_probe) options.seam_probe->recorded(durable);
}

// Writes the events held while one input was handled (one write, one wake-up of the readers),
// then reports how far the stream is durable (a failed write cut the held events back, so their
// seqs are past it).
void Run::Impl::release_log() {
  auto written = log->release();
  if (!written) {
    daemon::log(LogPriority::error, "run " + log->run_id() + ": " + written.error());
    log_failed = true;
  }
  report_recorded(written.has_value());
  if (!written) after_core();  // stops the run: it is not governed off the record
}

void Run::Impl::finish(protocol::CloseReason reason, protocol::ProcessTermination process) {
  if (log->closed()) return;
  report_recorded(true);
  outcome.reason = reason;
  outcome.process = process;
  outcome.turns = core ? core->turns() : 0;
  if (core) outcome.spend = core->reported_spend();
  // The daemon hears of the close before any reader can see stream.closed (and before the
  // teardown below): a client that has just read it and submits again finds the slot free.
  bool reported = false;
  auto report = [this, &reported](std::uint64_t events) {
    outcome.events = events;
    reported = true;
    if (on_closed) on_closed(outcome);
  };
  // stream.closed is durable and not yet readable: the observer hears of it, then the daemon.
  auto written = [this, &report, reason, process](std::uint64_t seq) {
    if (options.observer)
      options.observer->appended(protocol::ev::StreamClosed{seq - 1, reason, log->run_id(), process});
    report(seq);
  };
  // The run holds nothing of its owner's day from here on (its requests can no longer be settled).
  gateway.release();
  auto resources = containment ? containment->resources() : std::nullopt;
  if (core && (!core->egress_counts().allowed.empty() || !core->egress_counts().denied.empty())) {
    if (!resources) resources.emplace();  // a run with no cgroup: only the egress counts are known
    resources->egress = core->egress_counts();
  }
  auto closed_seq = log->close(reason, process, written, std::move(resources));
  if (!reported) report(closed_seq ? *closed_seq : log->last_seq());
  timers.cancel_all();
  // The record is closed: the body lets go (a direct run's hook sockets; a supervised run's
  // supervisor, which has nothing left to keep).
  if (body) body->release();
  if (endpoint) endpoint->stop();
  // The final input: a run that never started answers what waited for it (TOO_LATE), and every
  // command from here on is answered by the core, unrecorded.
  core->on_stream_closed();
}

}  // namespace mh::daemon
