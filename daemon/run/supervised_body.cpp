// SupervisedBody (supervised_body.hpp): the launch (the supervisor's spec, its spawn, the
// attach), the attach of an adoption, the loop that turns the supervisor's messages into the
// run's inputs, and the end of the body.
#include "daemon/run/supervised_body.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>

#include "daemon/log.hpp"
#include "daemon/process/run_containment.hpp"
#include "daemon/process/run_processes.hpp"
#include "daemon/run/hook_log.hpp"
#include "daemon/run/read_buffer.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/run/seam_probe.hpp"
#include "daemon/stream/redactor.hpp"
#include "daemon/supervisor/supervisor_spec.hpp"

namespace mh::daemon {

using Clock = std::chrono::steady_clock;

namespace {

constexpr std::string_view kBodyRecordFile = "body.json";
constexpr std::string_view kSupervisorSpecFile = "supervisor-spec.json";
constexpr std::string_view kSupervisorSocket = "supervisor.sock";

}  // namespace

SupervisedBody::SupervisedBody(BodyHost& run) : run_(run) {}
SupervisedBody::~SupervisedBody() = default;

asio::awaitable<std::optional<std::string>> SupervisedBody::launch(const adapters::LaunchPlan& to_spawn,
                                                                   const SpawnOptions& spawn_options) {
  const RunOptions& options = run_.run_options();
  const RunContainment* containment = run_.box();
  const RunDir dir(options.run_dir);
  supervisor::SupervisorSpec spec;
  spec.run_id = run_.run_id();
  spec.socket = options.run_dir / kSupervisorSocket;
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
  const auto& plan = run_.plan();
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
    if (auto problem = RunContainment::write_record(options.run_dir / kBodyRecordFile, containment->record()))
      co_return *problem;
  auto spawned = spawn_supervisor(options.supervision->binary, spec, options.run_dir / kSupervisorSpecFile);
  if (!spawned) co_return spawned.error();
  auto attached = co_await SupervisorLink::attach(run_.executor(), spec.socket, options.supervision->attach_within);
  if (!attached) {
    // A supervisor that never answered may still have spawned the vendor: end the body.
    co_await end_body(std::nullopt);
    co_return "the run's supervisor: " + attached.error();
  }
  link_ = std::move(*attached);
  const supervisor::Hello& hello = link_->hello();
  if (hello.spawn_error) {
    link_->send(supervisor::Release{});
    co_return *hello.spawn_error;
  }
  vendor_pid_ = hello.vendor_pid.value_or(0);
  if (!transcript_.open(spec.transcript)) {
    std::string why = "cannot read the transcript " + spec.transcript.string() + ": " + std::strerror(errno);
    co_await end_vendor();
    link_->send(supervisor::Release{});
    co_return why;
  }
  co_return std::nullopt;
}

asio::awaitable<std::optional<std::string>> SupervisedBody::attach() {
  auto attached = co_await SupervisorLink::attach(run_.executor(), run_.run_options().run_dir / kSupervisorSocket,
                                                  run_.run_options().supervision->attach_within);
  if (!attached) co_return "its supervisor: " + attached.error();
  link_ = std::move(*attached);
  vendor_pid_ = link_->hello().vendor_pid.value_or(0);
  co_return std::nullopt;
}

void SupervisedBody::take_hello_ends() {
  const supervisor::Hello& hello = link_->hello();
  if (hello.exited) {
    vendor_exit_ = hello.exited;
    reaped_ = true;
  }
  stderr_ended_ = hello.stderr_ended;
}

// The transcript up to `end`, fed to the core in chunks, each journaled before it is handed in;
// a chatty vendor yields to other runs every kDrainPerTurn bytes. `out`: the message that
// reported `end`, whose carried bytes are fed without a read of the file when they continue what
// was fed (TranscriptFollower).
asio::awaitable<void> SupervisedBody::read_transcript_to(std::uint64_t end, const supervisor::Out* out) {
  std::size_t this_turn = 0;
  while (run_.stdout_handed() < end) {
    auto chunk = transcript_.next(run_.stdout_handed(), end, out, io_thread_read_buffer(), kReadChunk);
    if (!chunk) {
      daemon::log(LogPriority::error, "run " + run_.run_id() + ": the transcript ends before the " +
                                          std::to_string(end) + " bytes the supervisor wrote");
      co_return;
    }
    Instant now = Clock::now();
    if (run_.run_options().seam_probe) run_.run_options().seam_probe->input_read(now);
    run_.vendor_out(*chunk, now);
    if (run_.run_options().seam_probe) run_.run_options().seam_probe->input_done();
    this_turn += chunk->size();
    if (this_turn >= kDrainPerTurn) {
      co_await asio::post(run_.executor(), asio::use_awaitable);
      this_turn = 0;
    }
  }
}

// Kills every process of the run (through its cgroup, else the marker sweep) and waits, bounded.
asio::awaitable<void> SupervisedBody::end_body(std::optional<pid_t> root) {
  std::string problems;
  if (run_.box()) {
    problems = co_await run_.box()->end(run_.executor(), root, std::chrono::seconds(10));
  } else {
    const auto& plan = run_.plan();
    KillReport report = co_await kill_run_processes(run_.executor(), root, plan.run_marker, std::chrono::seconds(10));
    if (!report.clean()) problems = report.summary();
  }
  if (!problems.empty()) daemon::log(LogPriority::warning, "run " + run_.run_id() + ": at its end: " + problems);
}

asio::awaitable<void> SupervisedBody::end_vendor() {
  co_await end_body(vendor_pid_ ? std::optional<pid_t>(vendor_pid_) : std::nullopt);
}

// The vendor exited: whatever of the run it left (background jobs, escapees) goes now, so its
// stdout can end. Parked (issue 27 §5): the run's cgroup is kept for the process that resumes it
// (swept, not ended), as the direct body keeps it.
asio::awaitable<void> SupervisedBody::after_vendor_exit() {
  if (run_.box() && run_.parked()) {
    std::string problems = co_await run_.box()->sweep(run_.executor(), std::chrono::seconds(10));
    if (!problems.empty()) daemon::log(LogPriority::warning, "run " + run_.run_id() + ": parked: " + problems);
    co_return;
  }
  co_await end_body(std::nullopt);
}

// Parking (issue 27 §5): the run's supervisor spawns the vendor again (docs/supervisor.md,
// `respawn`), on the same transcript, hook channel, gateway and cgroup; what it says until its
// answer is handled as run_until_gone would. A supervisor that cannot (an older one, adopted
// after an upgrade: its hello does not say `respawn`) is not asked.
asio::awaitable<std::optional<std::string>> SupervisedBody::respawn(std::vector<std::string> extra_args) {
  if (!link_) co_return std::string("the run has no supervisor");
  if (!link_->hello().can_respawn)
    co_return "the run's supervisor (version " + link_->hello().version +
        ") cannot start its vendor again; it was started by an older metaharness";
  // A grace the old process's close began (armed again by an adoption, which found it exited) must
  // not end the new one.
  run_.cancel_grace();
  link_->send(supervisor::Respawn{extra_args});
  for (;;) {
    auto message = co_await link_->next();
    if (!message) co_return "the run's supervisor went away (" + message.error() + ")";
    auto* answer = std::get_if<supervisor::Respawned>(&*message);
    if (!answer) {
      co_await handle(*message);
      continue;
    }
    if (!answer->vendor_pid) co_return answer->spawn_error.value_or("the supervisor did not say why");
    vendor_pid_ = *answer->vendor_pid;
    vendor_exit_.reset();
    stdout_ended_ = stderr_ended_ = reaped_ = false;
    co_return std::nullopt;
  }
}

// --- the run's effects ------------------------------------------------------------------------

void SupervisedBody::write_line(std::string line) {
  link_->send(supervisor::In{std::move(line)});  // the supervisor writes it to the vendor and keeps the copy
}

void SupervisedBody::close_stdin(std::chrono::milliseconds grace) {
  link_->send(supervisor::CloseStdin{});
  arm_grace_at(Clock::now() + grace);
}

void SupervisedBody::arm_grace_at(Instant when) {
  if (reaped_) return;  // nothing is left to kill
  run_.arm_grace_at(when);
}

asio::awaitable<void> SupervisedBody::terminate() {
  if (!vendor_exit_) co_await end_vendor();
}

void SupervisedBody::reply_hook(std::uint64_t connection, std::string line) {
  if (run_.run_options().seam_probe) run_.run_options().seam_probe->answer_written();
  run_.hook_traffic().append(connection, "out", json::value(line));
  link_->send(supervisor::HookReply{connection, std::move(line)});
}

void SupervisedBody::release() {
  if (link_) link_->send(supervisor::Release{});  // the record is closed: the supervisor has nothing left to keep
}

// --- the loop ---------------------------------------------------------------------------------

// The supervisor's messages as the core's inputs, until the vendor has exited and its stdout
// and stderr have ended; then what is left of the run is killed. A supervisor that goes away
// before that takes the vendor's pipes with it: the run is ended through its cgroup.
asio::awaitable<protocol::ProcessTermination> SupervisedBody::run_until_gone() {
  // A vendor that exited while no daemon was there (an adoption's hello said so): what it left
  // behind goes first, so its stdout can end.
  if (vendor_exit_) co_await after_vendor_exit();
  while (!(vendor_exit_ && stdout_ended_ && stderr_ended_)) {
    auto message = co_await link_->next();
    if (!message) {
      run_.shell_warning("SUPERVISOR_LOST", "the run's supervisor went away (" + message.error() +
                                                "): its vendor is killed and the run is closed");
      co_await end_vendor();
      struct stat st {};
      if (::fstat(transcript_.fd(), &st) == 0) co_await read_transcript_to(static_cast<std::uint64_t>(st.st_size));
      if (!stdout_ended_) {
        run_.vendor_end();
      }
      reaped_ = true;
      co_return vendor_exit_.value_or(protocol::ProcessTermination{});
    }
    co_await handle(*message);
  }
  protocol::ProcessTermination termination = *vendor_exit_;
  co_return run_.box() ? run_.box()->vendor_termination(termination) : termination;
}

// One message of the supervisor as the run's input (or the gateway's), as run_until_gone reads
// them; a `respawned` outside a respawn (none was asked) is logged and dropped.
asio::awaitable<void> SupervisedBody::handle(supervisor::FromSupervisor& message) {
  if (auto* out = std::get_if<supervisor::Out>(&message)) {
    co_await read_transcript_to(out->bytes, out);
  } else if (auto* out_end = std::get_if<supervisor::OutEnd>(&message)) {
    co_await read_transcript_to(out_end->bytes);
    stdout_ended_ = true;
    run_.vendor_end();
  } else if (std::holds_alternative<supervisor::ErrEnd>(message)) {
    stderr_ended_ = true;
  } else if (auto* exited = std::get_if<supervisor::Exited>(&message)) {
    vendor_exit_ = exited->termination;
    reaped_ = true;
    run_.cancel_grace();
    // Whatever of the run is left (background jobs, escapees) goes now, so its stdout can end.
    co_await after_vendor_exit();
  } else if (auto* hook = std::get_if<supervisor::Hook>(&message)) {
    auto parsed = protocol::parse_json(hook->line);
    if (!parsed || run_.closed()) {
      link_->send(supervisor::HookReply{hook->connection,
                                        parsed ? "refused: the run is closed" : "refused: the request is not JSON"});
      co_return;
    }
    Instant now = Clock::now();
    if (run_.run_options().seam_probe) run_.run_options().seam_probe->input_read(now);
    run_.hook_request(hook->connection, hook->line, std::move(*parsed), now);
    if (run_.run_options().seam_probe) run_.run_options().seam_probe->input_done();
  } else if (auto* gone = std::get_if<supervisor::HookGone>(&message)) {
    run_.hook_gone(gone->connection);
  } else if (auto* refused = std::get_if<supervisor::Refused>(&message)) {
    std::string why = refused->why;
    run_.secrets().redact(why);  // it may quote what it refused: no secret in the daemon's log either
    daemon::log(LogPriority::error, "run " + run_.run_id() + ": the supervisor refused a line: " + why);
  } else if (auto* respawned = std::get_if<supervisor::Respawned>(&message)) {
    daemon::log(LogPriority::warning, "run " + run_.run_id() + ": the supervisor answered a respawn not asked for (" +
                                          (respawned->spawn_error ? *respawned->spawn_error : "spawned") + ")");
  } else {
    // The gateway's and the egress proxy's (Reserve, GatewayUsage, GatewayRefused, Egress):
    // gateway_ledger.hpp; a reservation is answered on this link.
    run_.gateway_message(message, *link_);
  }
}

}  // namespace mh::daemon
