// Run::Impl (run_impl.hpp), the run's shell, in five parts:
//  - the order of things: main brings the run up the way chosen when it was made (a Launch or an
//    Adoption), waits for the body to be gone and winds up; route keeps where a command's result
//    goes; after_core (after every input) tells the core what is durable and rearms the idle
//    timer; the timer effects hand the core's deadlines and wall budget to the RunTimers;
//  - the inputs' one door: input() journals every input to the core (when the run keeps a journal:
//    a supervised run does) and apply() hands it to the core. An adoption's replay hands the
//    journal's entries to the same apply(), so what a live run did and what a replay rebuilds
//    cannot drift apart;
//  - the record and the close: every event the run emits goes through emit_cut into the event log
//    (held while one input is handled, released in one write), the core is told how far the
//    stream is durable (report_recorded; it answers the commands whose results are), and finish
//    writes stream.closed and tears down;
//  - the vendor effects: what the core asks of the vendor handed to the run's body
//    (vendor_body.hpp), whichever it is; the grace kill; the tail of the vendor's stderr a warning
//    quotes;
//  - what the vendor did, from its body (body_host.hpp), and what its gateway reported, from the
//    ledger (ledger_host.hpp): each one input through the same door.
#include "daemon/run/run_impl.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "daemon/log.hpp"
#include "daemon/process/vendor_provenance.hpp"
#include "daemon/run/adoption.hpp"
#include "daemon/run/disk_floor.hpp"
#include "daemon/run/launch.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/supervised_body.hpp"
#include "protocol/overloaded.hpp"

namespace mh::daemon {

// --- the order of things -------------------------------------------------------------------------

// One run, launched or adopted: brought up the way chosen when the run was made (launch, or
// adopt for Run::adopt), then the body runs until the vendor is gone, then the one wind-up.
asio::awaitable<void> Run::Impl::main(std::shared_ptr<Run> keep) {
  (void)keep;
  auto way_up = (this->*bring_up)();
  const bool live = co_await std::move(way_up);
  // An adopted run's inputs that waited while it was rebuilt run now, in order: on the live run,
  // or answered by the closed one. (A launched run holds none.)
  until_live.release();
  if (!live || core->phase() == RunCore::Phase::closed) co_return;
  protocol::ProcessTermination termination = co_await body->run_until_gone();
  // Parked (issue 27 §5): the vendor deferred a call and is gone; a decision starts it again.
  while (core->phase() == RunCore::Phase::parked) {
    auto waiting = wait_parked();
    if (!co_await std::move(waiting)) break;
    termination = co_await body->run_until_gone();
  }
  // The vendor's stdout has ended and no process of the run is left: wind up.
  protocol::CloseReason reason = core->wind_up(termination, Clock::now(), stderr_tail());
  report_recorded(true);
  finish(reason, termination);
}

// The run is parked and its vendor's process is gone: wait until the core wants it back (the
// decision came) or is no longer parked (halted, shut down). Back: the vendor is started again
// with the session's resume arguments and the core told; a vendor that cannot be started again
// fails the run, saying why.
asio::awaitable<bool> Run::Impl::wait_parked() {
  while (core->phase() == RunCore::Phase::parked && !core->resume_wanted()) {
    park_waiting = true;
    park_wake.expires_at(asio::steady_timer::time_point::max());
    auto [ec] = co_await park_wake.async_wait(asio::as_tuple(asio::use_awaitable));
    (void)ec;  // cancelled: look again
    park_waiting = false;
  }
  if (!core->resume_wanted()) co_return false;
  auto respawning = body->respawn(core->resume_args());
  if (auto failed = co_await std::move(respawning)) {
    input(journal::ShellWarning{"RESUME_FAILED", "the parked run's vendor could not be started again: " + *failed},
          Clock::now());
    input(journal::Shutdown{}, Clock::now());
    co_return false;
  }
  // Journaled (a supervised run's): an adoption's replay resumes the rebuilt core at this place.
  input(journal::Resumed{}, Clock::now());
  after_core();
  co_return true;
}

// Takes the run over (main's way up for a run made by Run::adopt): its supervisor is the body.
asio::awaitable<bool> Run::Impl::adopt() {
  // The vendor binary's digest (issue 27 section 6), which Run::adopt left out: read on the hashing
  // thread (a first digest is 0.4-0.6 s of a 245 MB file), never the thread that adopts, and this
  // coroutine resumes on the run's strand. Nothing has reached the core yet (what arrives waits in
  // until_live), so the session is opened again, now with the whole attestation: a session.started
  // the replay makes past the record carries it.
  if (auto* plan = std::get_if<adapters::LaunchPlan>(&planned); plan && !plan->attestation.vendor_binary) {
    auto keeping = shared_vendor_provenance().keep(plan->program);
    co_await std::move(keeping);
    plan->attestation.vendor_binary = shared_vendor_provenance().of(plan->program);
    core = std::make_unique<RunCore>(options.spec, adapter, adapter.open_session(options.spec, *plan), effects,
                                     RunCoreOptions{options.halt_grace, &options.prices});
    core->launch();
  }
  auto made = std::make_unique<SupervisedBody>(*this);
  Adoption adoption(*this, *made);
  body = std::move(made);
  auto taking_over = adoption.take_over();
  co_return co_await std::move(taking_over);
}

// Launches the run (main's way up for a run made by Run::create), through a Launch (launch.hpp).
asio::awaitable<bool> Run::Impl::launch() {
  Launch launching(*this);
  auto launched = launching.run();
  co_return co_await std::move(launched);
}

// Refused before anything spawned: the command results (one per needed command the adapter
// cannot honour) or a warning naming the launch refusal, then the marker.
void Run::Impl::refuse(const std::string& code, const std::string& message,
                       const std::vector<protocol::ev::CommandResult>& results) {
  for (const auto& r : results)
    emit(r, std::nullopt);
  if (results.empty()) emit(protocol::ev::Warning{code, message}, std::nullopt);
  outcome.refused_at_start = true;
  finish(protocol::CloseReason::error, protocol::ProcessTermination{});
}

// After every input: what the core emitted is durable unless the log holds it (release_log
// reports it then); a failed record stops the run; an idle run's idle timer is (re)armed.
void Run::Impl::after_core() {
  report_recorded(true);
  RunCore::Phase phase = core->phase();
  if (phase == RunCore::Phase::closed) return;
  if (park_waiting) park_wake.cancel();  // main looks again (parking, issue 27 §5)
  // The same while an adoption replays the journal, without asking whether it does: the replay
  // writes nothing to the log (the core's effects go to the replay), so log_failed stays false;
  // the idle timer it arms is set again where the rebuilt core left it by the reconciliation's
  // after_core, or cancelled when the adoption is given up (Adoption::give_up), and nothing else
  // runs on the strand while the replay does.
  if (log_failed && !core->ending()) input(journal::Shutdown{}, Clock::now());  // not governed off the record
  if (core->phase() == RunCore::Phase::idle && options.idle_timeout.count() > 0) {
    timers.arm_idle(options.idle_timeout);
  } else {
    timers.cancel_idle();
  }
}

Ticket Run::Impl::route(ResultCallback on_result) {
  Ticket ticket = ++next_ticket;
  if (on_result) result_routes.emplace(ticket, std::move(on_result));
  return ticket;
}

void Run::Impl::command_answered(Ticket ticket, const protocol::ev::CommandResult& result, bool recorded) {
  auto it = result_routes.find(ticket);
  if (it == result_routes.end()) return;  // nobody waits on it: it is in the stream only
  ResultCallback callback = std::move(it->second);
  result_routes.erase(it);
  callback(result, recorded);
}

void Run::Impl::arm_deadline(const std::string& call_id, Instant when) {
  timers.arm_deadline(call_id, when);
}

void Run::Impl::cancel_deadline(const std::string& call_id) {
  timers.cancel_deadline(call_id);
}

void Run::Impl::arm_wall_budget(Instant when) {
  timers.arm_wall_budget(when);
}

void Run::Impl::spend_changed(const Spend& spend) {
  if (options.on_spend) options.on_spend(spend);
}

// --- the inputs' one door ------------------------------------------------------------------------

void Run::Impl::input(journal::Input in, Instant now) {
  input(std::move(in), now, InputExtras{});
}

void Run::Impl::input(journal::Input in, Instant now, InputExtras extras) {
  // Whether the gateway meters the run is stated with its start, so a replay meters alike.
  if (auto* start = std::get_if<journal::Start>(&in)) start->gateway = options.gateway.has_value();
  if (journal) {
    // The command's wire line is made only for a journal: an unsupervised run pays nothing.
    if (auto* c = std::get_if<journal::CommandLine>(&in); c && extras.command)
      c->line = protocol::serialize(*extras.command);
    bool failed_before = journal->failed();
    journal->append(journal::Entry{now, in});
    if (journal->failed() && !failed_before)
      daemon::log(LogPriority::error,
                  "run " + log->run_id() + ": its input journal cannot be written: a later daemon cannot adopt it");
  }
  // One input's events go to the log together, with one write(2) and one wake-up of the
  // readers (release_log): a decision's tool.decided and command.result are one write, as a
  // chunk's lines are. Nested inputs (a shutdown after a failed write) join the outer hold.
  const bool holds = !log->holding();
  if (holds) log->hold();
  apply(in, now, extras);
  if (holds) release_log();
}

void Run::Impl::apply(const journal::Input& in, Instant now, InputExtras& x) {
  std::visit(protocol::Overloaded{
                 [&](const journal::Start& s) {
                   if (s.gateway) core->meter_by_gateway();
                   core->start(now);
                 },
                 [&](const journal::VendorOut& v) {
                   // The chunk as read live, or as a replay read it back from the transcript.
                   feed_stdout(x.bytes, v.received_unix_ms, now);
                   stdout_fed = v.to;
                 },
                 [&](const journal::VendorEnd&) {
                   if (framer) {
                     auto on_line = [this, now](const protocol::FramedLine& line) {
                       core->on_vendor_line(line, now);
                       after_core();
                     };
                     framer->finish(on_line);
                   }
                   core->on_vendor_end(now);
                 },
                 [&](const journal::HookRequest& h) {
                   std::optional<json::value> request = std::move(x.hook_request);
                   if (!request) {
                     auto parsed = protocol::parse_json(h.line);
                     if (!parsed) return;  // live requests are parsed before they are journaled
                     request = std::move(*parsed);
                   }
                   hooks_handed.insert(h.connection);
                   hook_log.append(h.connection, "in", *request);
                   core->on_hook_request(h.connection, *request, now);
                 },
                 [&](const journal::HookGone& h) {
                   hooks_gone_handed.insert(h.connection);
                   core->on_hook_gone(h.connection, now);
                 },
                 [&](const journal::CommandLine& c) {
                   if (x.command) {
                     core->on_command(x.ticket, std::move(*x.command), c.peer, now);
                     return;
                   }
                   auto command = protocol::read_command_line(c.line);
                   if (command)
                     core->on_command(x.ticket, std::move(*command), c.peer, now);
                   else
                     core->on_unreadable_command(x.ticket, command.error(), now);
                 },
                 [&](const journal::Unreadable& u) { core->on_unreadable_command(x.ticket, u.refusal, now); },
                 [&](const journal::SourceClosed&) { core->on_command_source_closed(now); },
                 [&](const journal::BudgetExhausted& b) { core->on_budget_exhausted(b.message, now); },
                 [&](const journal::Shutdown&) { core->on_shutdown(now); },
                 [&](const journal::Deadline& d) { core->on_deadline(d.call_id, now); },
                 [&](const journal::IdleTimeout&) { core->on_idle_timeout(now); },
                 [&](const journal::WallBudget&) { core->on_wall_budget(now); },
                 [&](const journal::StallTimeout&) { core->on_stall_timeout(now); },
                 [&](const journal::ParkTimeout& p) { core->on_park_timeout(p.call_id, now); },
                 [&](const journal::Resumed&) { core->on_resumed(now); },
                 [&](const journal::ShellWarning& w) {
                   // Through the core's effects: a replay checks it against the record.
                   effects.emit(protocol::ev::Warning{w.code, w.message}, std::nullopt);
                 },
                 [&](const journal::GatewayUsage& g) {
                   GatewayAnswer answer;
                   answer.request = g.request;
                   answer.status = g.status;
                   answer.model = g.model;
                   answer.usage.input_tokens = g.input_tokens;
                   answer.usage.output_tokens = g.output_tokens;
                   answer.usage.cache_read_input_tokens = g.cache_read_tokens;
                   answer.usage.cache_creation_input_tokens = g.cache_creation_tokens;
                   answer.complete = g.complete;
                   core->on_gateway_usage(answer, now);
                 },
                 [&](const journal::GatewayRefused& r) { core->on_gateway_refused(r.method, r.path, now); },
                 [&](const journal::Egress& e) { core->on_egress(e.destination, e.allowed, e.why, now); },
             },
             in);
}

// One chunk of the vendor's stdout, framed into lines for the core. Every line of a chunk is
// handed in with the chunk's `now` (they were read together), so a replay hands them in alike.
void Run::Impl::feed_stdout(std::string_view bytes, std::int64_t received_unix_ms, Instant now) {
  if (!framer) framer.emplace(options.max_vendor_line_bytes, /*digest_oversized=*/true);
  auto on_line = [this, now](const protocol::FramedLine& line) {
    core->on_vendor_line(line, now);
    after_core();
  };
  // One chunk's events go to the log in one write: a chatty vendor costs a write and a
  // readers' wake-up per chunk, not per line. Answers to the vendor are written as the lines
  // are handled, before the records (the effect goes out before its record).
  // A live chunk is held by input(); a replay's is held here.
  const bool holds = !log->holding();
  if (holds) log->hold();
  framer->set_received_at(received_unix_ms);
  framer->feed(bytes, on_line);
  if (holds) release_log();
}

// --- the record and the close --------------------------------------------------------------------

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
    record_failed(seq.error());
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
    record_failed(written.error());
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
  std::optional<protocol::ev::RunResources> kept = resources;  // for a close tried again
  boost::system::result<std::uint64_t, std::string> closed_seq = std::string();
  if (auto unwritten = warn_incomplete())
    closed_seq = *unwritten;
  else
    closed_seq = log->close(reason, process, written, std::move(resources));
  const bool retry = !closed_seq && names_no_space(closed_seq.error());
  if (!closed_seq) record_failed("stream.closed: " + closed_seq.error());
  // A late close writes RECORD_INCOMPLETE (unless written already), then stream.closed: the seq it will have.
  if (!reported) report(closed_seq ? *closed_seq : log->last_seq() + (retry ? (incomplete_warned ? 1 : 2) : 0));
  timers.cancel_all();
  // The record is closed: the body lets go (a direct run's hook sockets; a supervised run's
  // supervisor, which has nothing left to keep).
  if (body) body->release();
  if (endpoint) endpoint->stop();
  // The final input: a run that never started answers what waited for it (TOO_LATE), and every
  // command from here on is answered by the core, unrecorded.
  core->on_stream_closed();
  if (retry) retry_close(reason, process, std::move(kept));
}

void Run::Impl::record_failed(const std::string& why) {
  daemon::log(LogPriority::error, "run " + log->run_id() + ": " + why);
  if (record_failures++ == 0) first_record_failure = why;
}

void Run::Impl::retry_close(protocol::CloseReason reason, protocol::ProcessTermination process,
                            std::optional<protocol::ev::RunResources> resources) {
  close_retry.expires_after(kCloseRetry);
  auto keep = self.lock();
  close_retry.async_wait(
      [this, keep, reason, process, resources = std::move(resources)](boost::system::error_code ec) mutable {
        if (ec || log->closed()) return;
        if (!try_close_late(reason, process, resources)) retry_close(reason, process, std::move(resources));
      });
}

// What the run did while a write to its record failed is not in the stream: said there, by name,
// before stream.closed (whether the close is written at once or late), so a reader never takes a
// record some write of which failed for the whole run. nullopt when written, written already, or
// no write failed; else why it could not be written.
std::optional<std::string> Run::Impl::warn_incomplete() {
  if (record_failures == 0 || incomplete_warned) return std::nullopt;
  protocol::ev::Warning warning{"RECORD_INCOMPLETE",
                                std::to_string(record_failures) +
                                    " write(s) to this record failed, the first: " + first_record_failure +
                                    "; what the run did meanwhile (its stop included) is not in this stream"};
  if (options.observer) options.observer->appended(warning);
  auto seq = log->append(std::move(warning), std::nullopt);
  if (!seq) return seq.error();
  incomplete_warned = true;
  return std::nullopt;
}

// Whether the late close is done (written, or given up on a failure that is not a full disk).
bool Run::Impl::try_close_late(protocol::CloseReason reason, protocol::ProcessTermination process,
                               const std::optional<protocol::ev::RunResources>& resources) {
  if (auto unwritten = warn_incomplete()) return !names_no_space(*unwritten);
  auto written = [this, reason, process](std::uint64_t seq) {
    if (options.observer)
      options.observer->appended(protocol::ev::StreamClosed{seq - 1, reason, log->run_id(), process});
  };
  auto closed = log->close(reason, process, written, resources);
  if (closed) {
    daemon::log(LogPriority::notice, "run " + log->run_id() + ": stream.closed written as seq " +
                                         std::to_string(*closed) + " once space returned");
    return true;
  }
  if (names_no_space(closed.error())) return false;
  daemon::log(LogPriority::error, "run " + log->run_id() + ": stream.closed cannot be written: " + closed.error());
  return true;
}

// --- the vendor effects --------------------------------------------------------------------------

std::int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void Run::Impl::write_vendor(std::string line) {
  if (options.seam_probe) options.seam_probe->answer_written();
  body->write_line(std::move(line));
}

void Run::Impl::reply_hook(std::uint64_t connection, std::string line) {
  body->reply_hook(connection, std::move(line));
}

// The last bytes the vendor wrote to stderr, from its start of line: what a warning quotes
// when the vendor stopped on its own.
std::string Run::Impl::stderr_tail() const {
  constexpr std::size_t kTail = 480;
  UniqueFd fd(::open(RunDir(options.run_dir).vendor_stderr().c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0 || st.st_size <= 0) return {};
  std::size_t want = std::min<std::size_t>(kTail, static_cast<std::size_t>(st.st_size));
  std::string tail(want, '\0');
  ssize_t n = ::pread(fd.get(), tail.data(), want, st.st_size - static_cast<off_t>(want));
  if (n <= 0) return {};
  tail.resize(static_cast<std::size_t>(n));
  if (want < static_cast<std::size_t>(st.st_size))
    if (auto nl = tail.find('\n'); nl != std::string::npos) tail.erase(0, nl + 1);
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r' || tail.back() == ' '))
    tail.pop_back();
  for (char& c : tail)
    if (c == '\n') c = ' ';
  return protocol::excerpt(tail, kTail);
}

void Run::Impl::close_vendor_stdin() {
  body->close_stdin(options.exit_grace);
}

void Run::Impl::terminate_vendor(std::chrono::milliseconds grace) {
  body->close_stdin(grace);
}

// --- what the vendor did, from its body (body_host.hpp) ---------------------------------------

void Run::Impl::vendor_out(std::string_view chunk, Instant now) {
  InputExtras extras;
  extras.bytes = chunk;
  input(journal::VendorOut{stdout_fed + chunk.size(), unix_ms_now()}, now, std::move(extras));
}

void Run::Impl::vendor_end() {
  input(journal::VendorEnd{}, Clock::now());
  after_core();
}

void Run::Impl::hook_request(std::uint64_t connection, std::string line, json::value parsed, Instant now) {
  InputExtras extras;
  extras.hook_request = std::move(parsed);
  input(journal::HookRequest{connection, std::move(line)}, now, std::move(extras));
  after_core();
}

void Run::Impl::hook_gone(std::uint64_t connection) {
  input(journal::HookGone{connection}, Clock::now());
  after_core();
}

void Run::Impl::gateway_inputs(std::vector<journal::Input> inputs) {
  for (auto& in : inputs)
    input(std::move(in), Clock::now());
  after_core();
}

void Run::Impl::shell_warning(std::string code, std::string message) {
  input(journal::ShellWarning{std::move(code), std::move(message)}, Clock::now());
  after_core();
}

// The grace ran out: whatever of the run is left is killed.
asio::awaitable<void> Run::Impl::kill_everything(std::shared_ptr<Run> keep) {
  (void)keep;
  if (body) co_await body->terminate();
}

}  // namespace mh::daemon
