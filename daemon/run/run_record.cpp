// The record and the close: every event the run emits goes through emit_cut into the event log
// (held while a chunk of vendor output is handled, released in one write), what waits on a
// command.result being recorded is told here, and finish writes stream.closed and tears down.
// Separate from the vendor I/O because this is the path that decides what the record says.
#include "daemon/log.hpp"
#include "daemon/run/run_impl.hpp"

namespace mh::daemon {

std::uint64_t Run::Impl::emit(protocol::EventPayload payload, std::optional<std::string> at) {
  return emit_cut(std::move(payload), std::move(at), {});
}

std::uint64_t Run::Impl::emit_cut(protocol::EventPayload payload, std::optional<std::string> at,
                                  std::vector<protocol::CutField> cut) {
  bool requested = std::holds_alternative<protocol::ev::ToolRequested>(payload);
  std::optional<protocol::ev::CommandResult> answered;
  if (auto* r = std::get_if<protocol::ev::CommandResult>(&payload); r && !result_waiters.empty()) answered = *r;
  // The observer hears of the event while the payload is still in hand, before readers can
  // see it; only a failed write (which stops the run, logged above all) could make it differ
  // from the record.
  if (options.observer && !log->closed()) options.observer->appended(payload);
  auto seq = log->append(std::move(payload), std::move(at), std::move(cut));
  if (!seq) {
    // The record cannot be kept: say so where the operator looks, and stop the run rather
    // than govern it off the record.
    daemon::log(LogPriority::error, "run " + log->run_id() + ": " + seq.error());
    log_failed = true;  // after_core() stops the run once the core has returned
    return log->last_seq();
  }
  // While the log holds a chunk's events, they are not recorded yet: what waits on "recorded"
  // and the delivery latency wait for release_log().
  if (log->holding()) {
    if (requested) ++held_requested;
    if (answered) held_results.push_back(std::move(*answered));
    return *seq;
  }
  if (requested) sample_line_to_requested();
  if (answered) result_recorded(*answered, true);
  return *seq;
}

void Run::Impl::sample_line_to_requested() {
  if (line_read_at != Clock::time_point{} && latencies.line_to_requested.size() < kMaxLatencySamples)
    latencies.line_to_requested.push_back(Clock::now() - line_read_at);
}

void Run::Impl::result_recorded(const protocol::ev::CommandResult& result, bool recorded) {
  if (auto it = result_waiters.find(result.id); it != result_waiters.end()) {
    ResultCallback callback = std::move(it->second);
    result_waiters.erase(it);
    callback(result, recorded);
  }
}

// Writes the events held while a chunk of vendor output was handled (one write, one wake-up
// of the readers), then does what waited on them being recorded.
void Run::Impl::release_log() {
  auto written = log->release();
  if (!written) {
    daemon::log(LogPriority::error, "run " + log->run_id() + ": " + written.error());
    log_failed = true;
  }
  for (; held_requested > 0; --held_requested)
    if (written) sample_line_to_requested();
  auto results = std::move(held_results);
  held_results.clear();
  for (const auto& r : results)
    result_recorded(r, written.has_value());
  if (!written) after_core();  // stops the run: it is not governed off the record
}

void Run::Impl::finish(protocol::CloseReason reason, protocol::ProcessTermination process) {
  if (closed) return;
  closed = true;
  outcome.reason = reason;
  outcome.process = process;
  outcome.turns = core ? core->turns() : 0;
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
  auto closed_seq = log->close(reason, process, written);
  if (!reported) report(closed_seq ? *closed_seq : log->last_seq());
  deadlines.clear();
  idle_timer.cancel();
  grace_timer.cancel();
  wall_timer.cancel();
  if (hook_acceptor) {
    boost::system::error_code ec;
    hook_acceptor->close(ec);
  }
  for (auto& [id, socket] : hook_waiting) {
    boost::system::error_code ec;
    socket->close(ec);
  }
  hook_waiting.clear();
  if (endpoint) endpoint->stop();
  for (auto& e : early)
    deliver(std::move(e));
  early.clear();
  // Results that will never come now (e.g. the stream failed): every caller still hears once.
  for (auto& [id, callback] : result_waiters)
    callback(protocol::ev::CommandResult{id, protocol::CommandOutcome::refused(protocol::RefusalCode::TOO_LATE,
                                                                               "the run ended before answering")},
             false);
  result_waiters.clear();
}

}  // namespace mh::daemon
