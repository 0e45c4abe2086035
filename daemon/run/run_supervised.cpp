// A supervised run: the vendor is the child of a supervisor process of the run's own
// (daemon/supervisor, docs/supervisor.md), which holds its pipes and its hook channel and writes
// its output to the transcript, so the vendor never notices this daemon going away. Here: the
// launch (the supervisor's spec, its spawn, the attach), the loop that turns the supervisor's
// messages into the core's inputs, the end of the body, and the adoption of a run a previous
// daemon left (the journal replayed into a fresh core, reconciled with what the supervisor says
// happened meanwhile).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "daemon/log.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/run_impl.hpp"
#include "daemon/supervisor/supervisor_spec.hpp"

namespace mh::daemon {

namespace {

constexpr std::string_view kJournalFile = "core-inputs.jsonl";
constexpr std::string_view kBodyRecordFile = "body.json";
constexpr std::string_view kSupervisorSpecFile = "supervisor-spec.json";

std::string seconds_text(std::chrono::nanoseconds d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3f s", std::chrono::duration<double>(d).count());
  return text;
}

}  // namespace

// Spawns the run's supervisor with the plan as contained, and attaches to it. False when the run
// was refused (the refusal is recorded).
asio::awaitable<bool> Run::Impl::launch_supervised(const adapters::LaunchPlan& to_spawn,
                                                   const SpawnOptions& spawn_options) {
  const RunDir dir(options.run_dir);
  supervisor::SupervisorSpec spec;
  spec.run_id = log->run_id();
  spec.socket = options.run_dir / "supervisor.sock";
  spec.program = to_spawn.program;
  spec.args = to_spawn.args;
  spec.env = to_spawn.env;
  spec.vendor_env = to_spawn.handed_env;  // sandboxed: the vendor's, apart from the hops' fixed one
  spec.cwd = to_spawn.cwd;
  spec.transcript = to_spawn.transcript_path;
  spec.stderr_log = dir.vendor_stderr();
  spec.stdin_log = to_spawn.stdin_log_path;
  spec.secret_env = options.spec.secret_vendor_env;  // redacted from what the supervisor writes
  if (containment) spec.cgroup = containment->cgroup_dir();
  if (spawn_options.identity)
    spec.identity = supervisor::SpecIdentity{spawn_options.identity->uid, spawn_options.identity->gid};
  // The run's user, also when the sandbox drops to it (spawn_options then has none): the sockets
  // the run connects to are given to it.
  if (containment)
    if (auto who = containment->record().identity) spec.run_user = supervisor::SpecIdentity{who->uid, who->gid};
  const auto& plan = std::get<adapters::LaunchPlan>(planned);
  // The hook channel as contained: a run with a network of its own has it on a path in its gate
  // (bound_at, where the supervisor binds it), not on the adapter's abstract name.
  if (to_spawn.hook_channel) {
    uid_t run_uid = containment && containment->uid() ? *containment->uid() : ::geteuid();
    const adapters::HookChannel& channel = *to_spawn.hook_channel;
    spec.hook_channel = supervisor::SpecHookChannel{
        channel.bound_at.empty() ? channel.address : channel.bound_at.string(), static_cast<std::uint32_t>(run_uid),
        plan.run_marker.first + "=" + plan.run_marker.second};
  }
  // The run's gateway and egress proxy live in the supervisor (docs/gateway.md).
  spec.gateway = options.gateway;
  spec.egress = options.egress;
  spec.adopt_within_ms = static_cast<std::uint64_t>(options.supervision->adopt_within.count());
  if (options.supervision->ungoverned_halt_after)
    spec.ungoverned_halt_after_ms = static_cast<std::uint64_t>(options.supervision->ungoverned_halt_after->count());

  if (containment)
    if (auto problem = RunContainment::write_record(options.run_dir / kBodyRecordFile, containment->record())) {
      refuse("LAUNCH_FAILED", *problem, {});
      co_return false;
    }
  auto spawned = spawn_supervisor(options.supervision->binary, spec, options.run_dir / kSupervisorSpecFile);
  if (!spawned) {
    refuse("LAUNCH_FAILED", spawned.error(), {});
    co_return false;
  }
  auto attached = co_await SupervisorLink::attach(strand, spec.socket, options.supervision->attach_within);
  if (!attached) {
    // A supervisor that never answered may still have spawned the vendor: end the body.
    co_await end_body(std::nullopt);
    refuse("LAUNCH_FAILED", "the run's supervisor: " + attached.error(), {});
    co_return false;
  }
  link = std::move(*attached);
  const supervisor::Hello& hello = link->hello();
  if (hello.spawn_error) {
    link->send(supervisor::Release{});
    refuse("LAUNCH_FAILED", *hello.spawn_error, {});
    co_return false;
  }
  vendor_pid = hello.vendor_pid.value_or(0);
  if (!transcript_reader.open(spec.transcript)) {
    std::string why = "cannot read the transcript " + spec.transcript.string() + ": " + std::strerror(errno);
    co_await end_body(vendor_pid ? std::optional<pid_t>(vendor_pid) : std::nullopt);
    link->send(supervisor::Release{});
    refuse("LAUNCH_FAILED", why, {});
    co_return false;
  }
  co_return true;
}

// The transcript up to `end`, fed to the core in chunks, each journaled before it is handed in;
// a chatty vendor yields to other runs every kDrainPerTurn bytes. `out`: the message that
// reported `end`, whose carried bytes are fed without a read of the file when they continue what
// was fed (TranscriptFollower).
asio::awaitable<void> Run::Impl::read_transcript_to(std::uint64_t end, const supervisor::Out* out) {
  std::size_t this_turn = 0;
  while (stdout_fed < end) {
    auto chunk = transcript_reader.next(stdout_fed, end, out, thread_buffer(), kChunk);
    if (!chunk) {
      daemon::log(LogPriority::error, "run " + log->run_id() + ": the transcript ends before the " +
                                          std::to_string(end) + " bytes the supervisor wrote");
      co_return;
    }
    Instant now = Clock::now();
    if (options.seam_probe) options.seam_probe->input_read(now);
    InputExtras extras;
    extras.bytes = *chunk;
    input(journal::VendorOut{stdout_fed + chunk->size(), unix_ms_now()}, now, std::move(extras));
    if (options.seam_probe) options.seam_probe->input_done();
    this_turn += chunk->size();
    if (this_turn >= kDrainPerTurn) {
      co_await asio::post(strand, asio::use_awaitable);
      this_turn = 0;
    }
  }
}

// Kills every process of the run (through its cgroup, else the marker sweep) and waits, bounded.
asio::awaitable<void> Run::Impl::end_body(std::optional<pid_t> root) {
  std::string problems;
  if (containment) {
    problems = co_await containment->end(strand, root, std::chrono::seconds(10));
  } else {
    const auto& plan = std::get<adapters::LaunchPlan>(planned);
    KillReport report = co_await kill_run_processes(strand, root, plan.run_marker, std::chrono::seconds(10));
    if (!report.clean()) problems = report.summary();
  }
  if (!problems.empty()) daemon::log(LogPriority::warning, "run " + log->run_id() + ": at its end: " + problems);
}

// The supervisor's messages as the core's inputs, until the vendor has exited and its stdout
// and stderr have ended; then what is left of the run is killed. A supervisor that goes away
// before that takes the vendor's pipes with it: the run is ended through its cgroup.
asio::awaitable<protocol::ProcessTermination> Run::Impl::supervise_body() {
  while (!(vendor_exit && vendor_stdout_ended && vendor_stderr_ended)) {
    auto message = co_await link->next();
    if (!message) {
      input(journal::ShellWarning{"SUPERVISOR_LOST", "the run's supervisor went away (" + message.error() +
                                                         "): its vendor is killed and the run is closed"},
            Clock::now());
      after_core();
      co_await end_body(vendor_pid ? std::optional<pid_t>(vendor_pid) : std::nullopt);
      struct stat st {};
      if (::fstat(transcript_reader.fd(), &st) == 0)
        co_await read_transcript_to(static_cast<std::uint64_t>(st.st_size));
      if (!vendor_stdout_ended) {
        input(journal::VendorEnd{}, Clock::now());
        after_core();
      }
      vendor_reaped = true;
      co_return vendor_exit.value_or(protocol::ProcessTermination{});
    }
    if (auto* out = std::get_if<supervisor::Out>(&*message)) {
      co_await read_transcript_to(out->bytes, out);
    } else if (auto* out_end = std::get_if<supervisor::OutEnd>(&*message)) {
      co_await read_transcript_to(out_end->bytes);
      vendor_stdout_ended = true;
      input(journal::VendorEnd{}, Clock::now());
      after_core();
    } else if (std::holds_alternative<supervisor::ErrEnd>(*message)) {
      vendor_stderr_ended = true;
    } else if (auto* exited = std::get_if<supervisor::Exited>(&*message)) {
      vendor_exit = exited->termination;
      vendor_reaped = true;
      timers.cancel_grace();
      // Whatever of the run is left (background jobs, escapees) goes now, so its stdout can end.
      co_await end_body(std::nullopt);
    } else if (auto* hook = std::get_if<supervisor::Hook>(&*message)) {
      auto parsed = protocol::parse_json(hook->line);
      if (!parsed || core->phase() == RunCore::Phase::closed) {
        link->send(supervisor::HookReply{hook->connection,
                                         parsed ? "refused: the run is closed" : "refused: the request is not JSON"});
        continue;
      }
      Instant now = Clock::now();
      if (options.seam_probe) options.seam_probe->input_read(now);
      InputExtras extras;
      extras.hook_request = std::move(*parsed);
      input(journal::HookRequest{hook->connection, hook->line}, now, std::move(extras));
      after_core();
      if (options.seam_probe) options.seam_probe->input_done();
    } else if (auto* gone = std::get_if<supervisor::HookGone>(&*message)) {
      input(journal::HookGone{gone->connection}, Clock::now());
      after_core();
    } else if (std::holds_alternative<supervisor::Reserve>(*message) ||
               std::holds_alternative<supervisor::GatewayUsage>(*message) ||
               std::holds_alternative<supervisor::GatewayRefused>(*message) ||
               std::holds_alternative<supervisor::Egress>(*message)) {
      on_gateway_message(*message);
    } else if (auto* refused = std::get_if<supervisor::Refused>(&*message)) {
      std::string why = refused->why;
      redactor.redact(why);  // it may quote what it refused: no secret in the daemon's log either
      daemon::log(LogPriority::error, "run " + log->run_id() + ": the supervisor refused a line: " + why);
    } else {
      on_gateway_message(*message);  // the gateway's and the egress proxy's (run_gateway.cpp)
    }
  }
  protocol::ProcessTermination termination = *vendor_exit;
  co_return containment ? containment->vendor_termination(termination) : termination;
}

// --- adoption ---------------------------------------------------------------------------------

void Run::Impl::when_adopted(std::function<void()> f) {
  if (adoption_pending)
    until_adopted.push_back(std::move(f));
  else
    f();
}

void Run::Impl::adoption_over() {
  adoption_pending = false;
  auto waiting = std::move(until_adopted);
  for (auto& f : waiting)
    f();
}

void Run::Impl::give_up_adoption(const std::string& why) {
  replay.reset();
  daemon::log(LogPriority::warning, "run " + log->run_id() + ": not adopted: " + why);
  emit(protocol::ev::Warning{"RECOVERED_AFTER_RESTART", "metaharness restarted and could not take this run over (" +
                                                            why + "): its processes are killed and it is closed"},
       std::nullopt);
}

// A run that cannot be taken over is ended through its cgroup and closed, saying why.
asio::awaitable<void> Run::Impl::end_unadoptable(std::string why) {
  give_up_adoption(why);
  co_await end_body(vendor_pid ? std::optional<pid_t>(vendor_pid) : std::nullopt);
  link->send(supervisor::Release{});
  finish(protocol::CloseReason::error, link->hello().exited.value_or(protocol::ProcessTermination{}));
  adoption_over();
}

asio::awaitable<void> Run::Impl::adopt_main(std::shared_ptr<Run> keep) {
  (void)keep;
  auto attached =
      co_await SupervisorLink::attach(strand, options.run_dir / "supervisor.sock", options.supervision->attach_within);
  if (!attached) {
    give_up_adoption("its supervisor: " + attached.error());
    co_await end_body(std::nullopt);
    finish(protocol::CloseReason::error, protocol::ProcessTermination{});
    adoption_over();  // what waited is answered by the closed run
    co_return;
  }
  link = std::move(*attached);
  hello_at = Clock::now();
  const supervisor::Hello hello = link->hello();
  vendor_pid = hello.vendor_pid.value_or(0);

  if (auto problem = replay_journal()) {
    co_await end_unadoptable(*problem);
    co_return;
  }
  reconcile_after_replay(Clock::now());
  if (replay && replay->diverged) {
    std::string why = *replay->diverged;
    replay.reset();
    co_await end_unadoptable(why);
    co_return;
  }
  // The previous daemon died between spawning the supervisor and recording the run's start (the
  // journal holds no Start): the vendor was spawned and waits for what the start sends it. The
  // start is made here, as the launch would have made it; without it the core stayed `launching`
  // and no halt or shutdown could end the run (issue 24).
  if (core->phase() == RunCore::Phase::created || core->phase() == RunCore::Phase::launching) {
    if (hello.spawn_error) {
      link->send(supervisor::Release{});
      refuse("LAUNCH_FAILED", *hello.spawn_error, {});
      adoption_over();
      co_return;
    }
    input(journal::Start{}, Clock::now());
    after_core();
  }
  // The vendor output written while no daemon was there, then its end if it came.
  co_await read_transcript_to(hello.stdout_bytes);
  if (hello.stdout_ended && !vendor_stdout_ended) {
    vendor_stdout_ended = true;
    input(journal::VendorEnd{}, Clock::now());
    after_core();
  }
  adoption_over();                                   // live: what arrived meanwhile is handled now, in order
  if (vendor_exit) co_await end_body(std::nullopt);  // what it left behind, so its stdout can end
  if (core->phase() != RunCore::Phase::closed) {
    auto termination = co_await supervise_body();
    protocol::CloseReason reason = core->wind_up(termination, Clock::now(), stderr_tail());
    report_recorded(true);
    finish(reason, termination);
  }
}

// Rebuilds the core from the journal: every entry handed to apply() as the live run handed it,
// with what the core does checked against the record and collected for the reconciliation.
// nullopt, or why the run cannot be adopted.
std::optional<std::string> Run::Impl::replay_journal() {
  const RunDir dir(options.run_dir);
  auto read = read_journal(options.run_dir / kJournalFile);
  if (!read) return read.error();
  if (!transcript_reader.open(std::get<adapters::LaunchPlan>(planned).transcript_path))
    return "its transcript cannot be read: " + std::string(std::strerror(errno));
  // The record's event types, by seq: the replay must make the same events in the same order.
  Replay r;
  r.recorded_last = log->last_seq();
  {
    UniqueFd events(::open(dir.events().c_str(), O_RDONLY | O_CLOEXEC));
    if (!events) return "its stream cannot be read";
    std::string all;
    char chunk[64 * 1024];
    for (ssize_t n; (n = ::read(events.get(), chunk, sizeof chunk)) > 0;)
      all.append(chunk, static_cast<std::size_t>(n));
    std::size_t at = 0;
    while (r.recorded_types.size() < r.recorded_last) {
      std::size_t nl = all.find('\n', at);
      if (nl == std::string::npos) return "its stream holds fewer lines than its last seq";
      auto event = protocol::read_event_line(std::string_view(all).substr(at, nl - at));
      if (!event) return "line " + std::to_string(r.recorded_types.size() + 1) + " of its stream cannot be read";
      r.recorded_types.emplace_back(protocol::event_name(event->payload));
      at = nl + 1;
    }
  }
  replay.emplace(std::move(r));
  for (const journal::Entry& entry : read->entries) {
    InputExtras none;
    apply(entry.input, entry.now, none);
    after_core();
    if (replay->diverged) break;
  }
  // Appending goes on after the journal's last entry (a torn line was never handed in).
  auto reopened = InputJournal::open_append(options.run_dir / kJournalFile, read->complete_bytes);
  if (!reopened) return reopened.error();
  journal.emplace(std::move(*reopened));
  return std::nullopt;
}

// After the replay: what the core did that the supervisor has not seen yet is done now (the rest
// of its stdin, the replies to hooks still waiting, closing stdin), the timers are armed where
// they were (a deadline or a grace that ran out while no daemon was there applies now), the gap
// is stated where it was (RUN_ADOPTED), and the vendor output written meanwhile is read.
void Run::Impl::reconcile_after_replay(Instant now) {
  const supervisor::Hello& hello = link->hello();
  Replay& r = *replay;
  if (r.seq < r.recorded_last && !r.diverged)
    r.diverged =
        "the replay made " + std::to_string(r.seq) + " of the stream's " + std::to_string(r.recorded_last) + " events";
  // The vendor was sent a prefix of what the core wrote, byte for byte (the supervisor's copy).
  if (!r.diverged && hello.stdin_bytes > r.stdin_bytes.size())
    r.diverged = "the vendor was sent " + std::to_string(hello.stdin_bytes) + " bytes, the replay made " +
                 std::to_string(r.stdin_bytes.size());
  if (!r.diverged && hello.stdin_bytes > 0) {
    const auto& plan = std::get<adapters::LaunchPlan>(planned);
    UniqueFd sent(::open(plan.stdin_log_path.c_str(), O_RDONLY | O_CLOEXEC));
    std::string prefix(hello.stdin_bytes, '\0');
    if (!sent || ::pread(sent.get(), prefix.data(), prefix.size(), 0) != static_cast<ssize_t>(prefix.size()) ||
        r.stdin_bytes.compare(0, prefix.size(), prefix) != 0)
      r.diverged = "what the vendor was sent is not what the replay made";
  }
  if (r.diverged) return;

  Replay done = std::move(r);
  replay.reset();  // live from here on
  if (options.on_spend_replayed) options.on_spend_replayed(core->spend());
  // The gap is the supervisor's to measure: from when its previous daemon's connection dropped to
  // its hello, plus this daemon's replay since. (The time since the run's last input is not it: a
  // quiet run's last input may be minutes older than the daemon's death.)
  std::string gap;
  if (hello.ungoverned_ms)
    gap = "no daemon governed it for " +
          seconds_text(std::chrono::milliseconds(*hello.ungoverned_ms) + (now - hello_at)) +
          " (from its previous daemon's going to this adoption)";
  else
    gap = "its supervisor does not say how long no daemon governed it (an older supervisor); its last input was " +
          seconds_text(now - done.now) + " ago";
  // Journaled like every shell warning: a later adoption states it again in its place.
  input(
      journal::ShellWarning{"RUN_ADOPTED",
                            "metaharness restarted and took this run over: " + gap + "; " +
                                std::to_string(hello.stdout_bytes > stdout_fed ? hello.stdout_bytes - stdout_fed : 0) +
                                " bytes of vendor output written meanwhile follow"},
      now);
  after_core();

  for (std::size_t at = hello.stdin_bytes; at < done.stdin_bytes.size();) {
    std::size_t nl = done.stdin_bytes.find('\n', at);
    link->send(supervisor::In{done.stdin_bytes.substr(at, nl - at)});
    at = nl + 1;
  }
  if (done.stdin_closed && !hello.stdin_closed) link->send(supervisor::CloseStdin{});
  std::set<std::uint64_t> waiting;
  for (const auto& hook : hello.hooks_open) {
    waiting.insert(hook.connection);
    if (auto reply = done.hook_replies.find(hook.connection); reply != done.hook_replies.end()) {
      log_hook(hook.connection, "out", json::value(reply->second));
      link->send(supervisor::HookReply{hook.connection, reply->second});
    }
  }
  // Timers where they were; what ran out meanwhile applies now, in the order it ran out.
  std::vector<std::pair<Instant, std::string>> due;
  for (const auto& [call_id, when] : done.deadlines)
    due.emplace_back(when, call_id);
  std::sort(due.begin(), due.end());
  for (const auto& [when, call_id] : due) {
    if (when <= now) {
      input(journal::Deadline{call_id}, now);
      after_core();
    } else {
      arm_deadline(call_id, when);
    }
  }
  if (done.wall) arm_wall_budget(*done.wall);
  if (done.kill_at) arm_grace_at(*done.kill_at);
  after_core();

  // What happened while no daemon was there: hooks that arrived or went, the exit (the output
  // written meanwhile is read by adopt_main, before the supervisor's next messages).
  for (const auto& hook : hello.hooks_open) {
    if (hooks_handed.count(hook.connection)) continue;  // handed in before: answered above, or pending
    auto parsed = protocol::parse_json(hook.line);
    if (!parsed) {
      link->send(supervisor::HookReply{hook.connection, "refused: the request is not JSON"});
      continue;
    }
    InputExtras extras;
    extras.hook_request = std::move(*parsed);
    input(journal::HookRequest{hook.connection, hook.line}, now, std::move(extras));
    after_core();
  }
  for (std::uint64_t gone : hello.hooks_gone)
    if (hooks_handed.count(gone) && !hooks_gone_handed.count(gone) && !waiting.count(gone)) {
      input(journal::HookGone{gone}, now);
      after_core();
    }
  if (hello.exited) {
    vendor_exit = hello.exited;
    vendor_reaped = true;
  }
  vendor_stderr_ended = hello.stderr_ended;
}

}  // namespace mh::daemon
