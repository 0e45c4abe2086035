// The requests about runs as a whole: submit, list, get, status, and shutdown.
#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <filesystem>
#include <fstream>

#include "adapters/plan_common.hpp"
#include "daemon/log.hpp"
#include "daemon/process/directory_as_uid.hpp"
#include "daemon/process/vendor_install_record.hpp"
#include "daemon/process/vendor_provenance.hpp"
#include "daemon/run/disk_floor.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/server/containment_policy.hpp"
#include "daemon/server/fleet_gate.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/run_network.hpp"
#include "daemon/server/run_summary.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/digest.hpp"
#include "protocol/hermetic_floor.hpp"
#include "protocol/json.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// The hermetic floor's verdicts, judged as `metaharness audit` judges the run directory. They
// are decided by session.started (and the launch facts), so the reader stops there.
json::object hermetic_view(Server& server, const RunEntry& e, const json::value& spec, bool closed) {
  RunDir dir(e.dir);
  protocol::LaunchFacts facts = protocol::launch_facts_from_run_files(spec, dir.read_plan());
  if (facts.cwd) {
    std::error_code ec;
    auto resolved = std::filesystem::weakly_canonical(facts.cwd->planned, ec);
    if (!ec) facts.cwd->resolved = resolved.string();  // Claude reports getcwd()
  }
  std::optional<protocol::ev::SessionStarted> started;
  std::ifstream events(dir.events());
  for (std::string line; !started && std::getline(events, line);)
    started = protocol::session_started_in(line);
  std::string adapter = facts.adapter.value_or(started ? started->adapter : e.adapter);
  if (const adapters::Adapter* a = server.adapters.find(adapter)) facts.pins = a->capabilities().versions_pinned;
  facts.install_record = InstallRecord::fact_for(InstallRecord::path_in(server.adapters.config().vendor_dir), adapter);
  return protocol::hermetic_view_json(protocol::spec_mode(spec), started ? &*started : nullptr, facts, closed);
}

// The network a run's session.started attested ("gateway" | "host"), or null.
json::value attested_network(const RunDir& dir) {
  std::ifstream events(dir.events());
  std::optional<protocol::ev::SessionStarted> started;
  for (std::string line; !started && std::getline(events, line);)
    started = protocol::session_started_in(line);
  if (started && started->hermetic.network) return json::value(*started->hermetic.network);
  return nullptr;
}

using CwdAsPeer = boost::system::result<JudgedDirectory, std::string>;

// A root daemon's bind passes by every directory above a run's cwd: below admin, the cwd is
// resolved and judged as the submitter (its uid and groups: directory_as_uid), so a run never gets
// a directory its submitter could not enter, read and write itself (one under another user's 0700
// home, or another user's process's cwd named through /proc/PID/cwd). On the checks' own threads,
// never this io thread (a check may take its whole bound). nullopt: nothing to judge (no absolute
// cwd, an admin, or a daemon that is not root and takes no other uid).
asio::awaitable<std::optional<CwdAsPeer>> judge_cwd_as_peer(PeerCredentials peer, Role role,
                                                            std::optional<std::string> named) {
  if (role >= Role::admin || ::geteuid() != 0 || !named) co_return std::nullopt;
  std::string given = std::move(*named);
  if (!std::filesystem::path(given).is_absolute()) co_return std::nullopt;
  auto groups = groups_of(peer.uid, peer.gid);
  auto judge = [given = std::move(given), peer, groups = std::move(groups)]() -> asio::awaitable<CwdAsPeer> {
    co_return directory_as_uid(given, peer.uid, peer.gid, groups);
  };
  auto judged = asio::co_spawn(cwd_check_executor(), std::move(judge), asio::use_awaitable);
  CwdAsPeer result = co_await std::move(judged);
  co_return result;
}

// The refusals `metaharness run` makes too, before anything is created; the spec gets the
// daemon's defaults. Refused: the code and why.
boost::system::result<adapters::RunSpec, SubmitRefusal> checked_spec(Server& server, Role role, const json::object& run,
                                                                     const adapters::Adapter*& adapter,
                                                                     const CwdAsPeer* cwd_as_peer) {
  using Result = boost::system::result<adapters::RunSpec, SubmitRefusal>;
  auto refuse = [](std::string code, std::string reason) {
    return Result(boost::system::in_place_error, SubmitRefusal{std::move(code), std::move(reason)});
  };
  const DaemonConfig& config = server.config;
  auto spec = adapters::spec_from_json(run);
  if (!spec) return refuse("MALFORMED", spec.error());
  adapter = server.adapters.find(spec->adapter);
  if (!adapter) {
    return refuse("MALFORMED", "unknown adapter \"" + protocol::excerpt(spec->adapter, 40) + "\"");
  }
  // A declared variable that loads code is refused here, where every submit passes (the socket's
  // and the fleet's), and again by every plan (adapters/plan_common.hpp).
  if (auto refused = adapters::refuse_declared_vendor_env(spec->vendor_env))
    return refuse("VENDOR_ENV_REFUSED", *refused);
  if (const json::value* scenario = run.if_contains("model_scenario");
      scenario && !scenario->is_null() && spec->model_endpoint) {
    return refuse("MALFORMED",
                  "a run takes \"model_scenario\" (a scripted endpoint the daemon hosts) or \"model_endpoint\" "
                  "(an endpoint to use), not both");
  }
  // The run's way to its model and its network (docs/gateway.md): the upstream named (or the
  // adapter's default), its wire, and egress only where something enforces it.
  {
    const json::value* scenario = run.if_contains("model_scenario");
    const bool has_scenario = scenario && !scenario->is_null();
    if (auto refused = check_run_network({config, server.own_network}, *adapter, *spec, has_scenario))
      return refuse(refused->code, refused->reason);
  }
  // The cwd is resolved once, here, and kept as its real path: it is checked as that path, and
  // the sandbox binds that path only, opened without following a link (exec_handoff.hpp), so a
  // link the submitter puts in its place later is refused, never followed.
  const std::optional<std::string> given_cwd = spec->cwd;
  bool resolved_as_peer = false;
  if (spec->cwd && std::filesystem::path(*spec->cwd).is_absolute()) {
    if (cwd_as_peer) {
      // Resolved and judged as the submitter (judge_cwd_as_peer): the refusal names the cwd as
      // given, never what root would resolve it to.
      if (!*cwd_as_peer)
        return refuse("FORBIDDEN", "cwd \"" + protocol::excerpt(*spec->cwd, 200) + "\": " + cwd_as_peer->error() +
                                       "; a run's cwd is bound into it, so it must be a directory its submitter "
                                       "can reach itself (docs/containment.md)");
      spec->cwd = (*cwd_as_peer)->real_path;
      resolved_as_peer = true;
    } else {
      std::error_code ec;
      auto real = std::filesystem::weakly_canonical(*spec->cwd, ec);
      if (ec)
        return refuse("MALFORMED",
                      "cwd \"" + protocol::excerpt(*spec->cwd, 200) + "\" cannot be resolved: " + ec.message());
      spec->cwd = real.string();
    }
  }
  // A cwd is where an allowed call writes: below admin, only under the configured roots (none by
  // default: a run works in its own scratch). Named as given; as resolved only where the peer
  // resolved it itself.
  if (spec->cwd && role < Role::admin && !cwd_within_roots(*spec->cwd, config.workspace_roots)) {
    return refuse("CWD_OUTSIDE_ROOTS",
                  "cwd \"" + protocol::excerpt(*given_cwd, 200) + "\"" +
                      (resolved_as_peer && *spec->cwd != *given_cwd ? " (" + protocol::excerpt(*spec->cwd, 200) + ")"
                                                                    : std::string()) +
                      " is not under runs.workspace_roots" +
                      (config.workspace_roots.empty() ? " (none are configured: a run works in its own scratch)" : "") +
                      "; only an admin peer may name it");
  }
  if (spec->decision_deadline_ms == 0) spec->decision_deadline_ms = config.decision_deadline_ms;
  if (auto too_long = adapters::refuse_deadline(*adapter, spec->decision_deadline_ms)) {
    return refuse("MALFORMED", *too_long);
  }
  // Stalls: what the spec leaves unset is the daemon's (kept in spec.json, so an adopting daemon
  // times the run as this one did).
  if (!spec->stall_after_ms) spec->stall_after_ms = static_cast<std::uint64_t>(config.stall_after.count()) * 1000;
  if (!spec->on_stall) spec->on_stall = protocol::parse_enum<protocol::OnStall>(config.on_stall);
  // The daemon's park_after_s is a default for the runs that can park (the adapter honours
  // parking): a Codex run is not refused for a host-wide preference it never asked for. A spec's
  // own park_after_ms is a request, refused by name where it cannot be honoured.
  if (!spec->park_after_ms && config.park_after && adapter->capabilities().parking.honoured)
    spec->park_after_ms = static_cast<std::uint64_t>(config.park_after->count()) * 1000;
  adapters::fill_unset_budgets(spec->budget, config.default_budget);
  if (auto unpriced = refuse_unpriced_budget(*spec, *adapter, config.prices)) {
    return refuse("BUDGET_UNPRICED", *unpriced);
  }
  // A daily USD budget meters every run's spend: a run it could not price would spend unseen.
  if (config.daily_budget.usd) {
    if (auto unpriced = refuse_unpriced_model(*spec, *adapter, config.prices,
                                              "the daemon's daily usd budget ([budgets.daily] usd)")) {
      return refuse("BUDGET_UNPRICED", *unpriced);
    }
  }
  return std::move(*spec);
}

}  // namespace

std::filesystem::path supervisor_binary(const DaemonConfig& config) {
  if (!config.supervisor.empty()) return config.supervisor;
  return adapters::helper_program("metaharness-supervisor");
}

RunOptions run_options(Server& server, const RunDir& dir) {
  const DaemonConfig& config = server.config;
  RunOptions options{.run_dir = dir.root(),
                     .halt_grace = config.halt_grace,
                     .exit_grace = config.exit_grace,
                     .idle_timeout = config.idle_timeout,
                     .fsync_each_event = config.fsync_each_event,
                     .max_vendor_line_bytes = config.max_vendor_line_bytes,
                     .prices = config.prices,
                     .max_event_line_bytes = config.max_event_line_bytes,
                     .containment = server.containment};
  if (config.supervise) {
    RunOptions::Supervision supervision;
    supervision.binary = supervisor_binary(config);
    supervision.adopt_within = config.adopt_within;
    supervision.ungoverned_halt_after = config.ungoverned_halt_after;
    options.supervision = supervision;
  }
  return options;
}

namespace {

// Writes what the daemon keeps beside the run (run.json, an inline scenario) and creates it.
boost::system::result<std::shared_ptr<Run>, std::string> create_run(Server& server, const PeerCredentials& peer,
                                                                    const RunDir& dir, const adapters::Adapter& adapter,
                                                                    adapters::RunSpec spec, const json::object& run,
                                                                    std::optional<DirectoryIdentity> cwd_identity) {
  using Result = boost::system::result<std::shared_ptr<Run>, std::string>;
  RunOptions options = run_options(server, dir);
  options.cwd_identity = cwd_identity;
  options.on_spend = server.spend_reporter(spec.run_id, peer.uid);
  server.wire_daily_reservations(options, spec.run_id, peer.uid);
  std::error_code ec;
  make_directories(dir.root(), ec);  // 0750 whatever the umask
  if (const json::value* scenario = run.if_contains("model_scenario"); scenario && !scenario->is_null()) {
    if (auto problem = dir.write_scenario(*scenario)) return Result(boost::system::in_place_error, *problem);
    options.model_scenario = dir.scenario_json();
  }
  options.spec = std::move(spec);
  const std::optional<std::filesystem::path> scenario_file = options.model_scenario;
  if (auto problem = wire_run_network({server.config, server.own_network}, adapter, dir, options, scenario_file))
    return Result(boost::system::in_place_error, *problem);
  options.observer = server.run_observer(options.spec, options.gateway.has_value());
  RunMeta meta{
      peer.uid, peer.pid, options.spec.adapter, options.spec.labels,
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count()};
  if (auto problem = dir.write_meta(meta)) return Result(boost::system::in_place_error, *problem);
  return Run::create(server.pool.next_for_run(), adapter, std::move(options));
}

}  // namespace

// Whether a run the registry still counts active has in fact closed: a client that has just read
// its stream.closed must not be refused BUSY for it (status counts the same way).
asio::awaitable<bool> a_run_has_just_closed(std::shared_ptr<Server> server) {
  auto count = [server] { return server->registry.counts(); };
  RegistryCounts counts = co_await server->on_registry(std::move(count));
  for (auto& run : counts.open) {
    auto status = co_await status_of(run);
    if (status && status->phase == RunPhase::closed) co_return true;
  }
  co_return false;
}

boost::system::result<adapters::RunSpec, SubmitRefusal> check_submit(Server& server, Role role,
                                                                     const json::object& run) {
  const adapters::Adapter* adapter = nullptr;
  // No peer here (a fleet submit's first look): the host that makes the run judges the cwd as
  // its submitter.
  return checked_spec(server, role, run, adapter, nullptr);
}

asio::awaitable<SubmitResult> submit_run(std::shared_ptr<Server> server, PeerCredentials peer, Role role,
                                         json::object run, std::optional<std::string> run_id,
                                         std::optional<std::string> request_id) {
  auto refused = [](std::string code, std::string reason) {
    return SubmitResult(boost::system::in_place_error, SubmitRefusal{std::move(code), std::move(reason)});
  };
  const adapters::Adapter* adapter = nullptr;
  std::optional<std::string> named_cwd;
  if (const json::value* cwd = run.if_contains("cwd"); cwd && cwd->is_string())
    named_cwd = std::string(cwd->get_string());
  auto judged_cwd = judge_cwd_as_peer(peer, role, std::move(named_cwd));
  std::optional<CwdAsPeer> cwd_as_peer = co_await std::move(judged_cwd);
  auto spec = checked_spec(*server, role, run, adapter, cwd_as_peer ? &*cwd_as_peer : nullptr);
  if (!spec) co_return SubmitResult(boost::system::in_place_error, spec.error());
  // A run that starts on a full disk could not keep its record: refused by name before anything
  // is reserved or created (daemon/run/disk_floor.hpp).
  auto full = disk_full_problem(server->config.state_dir, kNewRunFloorBytes, "a new run needs");
  if (full) co_return refused("DISK_FULL", "the state directory " + *full);
  std::uint32_t uid = peer.uid;
  auto admit = [server, uid, run_id] { return server->registry.admit(uid, std::chrono::system_clock::now(), run_id); };
  auto admitted = co_await server->on_registry(admit);
  bool retry = !admitted && admitted.error().code == "BUSY";
  if (retry) retry = co_await a_run_has_just_closed(server);
  if (retry) {
    // Its close is on its way to the registry (posted before its stream.closed was readable):
    // asking again queues behind it.
    admitted = co_await server->on_registry(admit);
  }
  if (!admitted) co_return refused(admitted.error().code, admitted.error().reason);
  const std::string id = *admitted;
  spec->run_id = id;
  RunDir dir = RunDir::in_state_dir(server->config.state_dir, id);
  const std::string adapter_name = spec->adapter;
  RunRecord record{{},
                   nullptr,
                   nullptr,
                   uid,
                   spec->adapter,
                   spec->labels,
                   spec->budget,
                   std::string(server->own_network ? "gateway" : "host"),
                   spec->upstream};
  // The binary's first digest (0.4-0.6 s) on the hashing thread, not this io thread (vendor_provenance.hpp).
  auto digested = shared_vendor_provenance().keep(adapters::vendor_program(server->adapters.config(), adapter_name));
  co_await std::move(digested);
  // The cwd as the submitter reached it is bound only while it is still that directory.
  std::optional<DirectoryIdentity> cwd_identity;
  if (cwd_as_peer && *cwd_as_peer) cwd_identity = (*cwd_as_peer)->identity;
  auto created = create_run(*server, peer, dir, *adapter, std::move(*spec), run, cwd_identity);
  std::optional<std::string> unrecorded;
  if (created && request_id) {
    // The run exists (its directory and spec) and has not started: from here on a retry of this
    // submit, even after a kill -9, is pointed at it (submit_ledger.hpp).
    unrecorded = server->submits.commit(uid, *request_id, id, std::chrono::system_clock::now());
    if (unrecorded)
      created = boost::system::result<std::shared_ptr<Run>, std::string>(
          boost::system::in_place_error, "its request_id could not be recorded: " + *unrecorded);
  }
  if (!created) {
    // A refused submit leaves nothing behind: not its directory, not its reservation.
    std::error_code rm;
    std::filesystem::remove_all(dir.root(), rm);
    auto release = [server, id] {
      server->registry.release(id);
      return true;
    };
    co_await server->on_registry(std::move(release));
    // The space ran out between the floor's check and the writes (another run's record took it).
    const bool no_space = names_no_space(created.error()) ||
                          disk_full_problem(server->config.state_dir, kNewRunFloorBytes, "a new run needs");
    co_return refused(no_space ? "DISK_FULL" : "REFUSED", created.error());
  }
  std::shared_ptr<Run> handle = *created;
  record.dir = handle->run_dir();
  record.run = handle;
  record.stream = handle->stream();
  auto keep = [server, id, record = std::move(record)]() mutable {
    server->registry.record(id, std::move(record), std::chrono::system_clock::now());
    server->schedule_status();
    return true;
  };
  co_await server->on_registry(std::move(keep));
  handle->start(server->close_reporter(id));
  if (server->fleet) server->fleet->track(id);
  log(LogPriority::info, "run " + id + " submitted by uid " + std::to_string(uid) + " (" + adapter_name + ")");
  co_return SubmittedRun{id, handle->run_dir()};
}

namespace {

// The submit's request_id: "" when it carries none, nullopt when it was refused (MALFORMED).
std::optional<std::string> submit_request_id(Session& s, const SocketRequest& r) {
  const json::value* given = r.body.if_contains("request_id");
  if (!given || given->is_null()) return std::string();
  if (!given->is_string()) {
    s.refuse("MALFORMED", "request_id must be a string (docs/socket-api.md)", r.id);
    return std::nullopt;
  }
  std::string id(given->get_string());
  if (auto problem = request_id_problem(id); !problem.empty()) {
    s.refuse("MALFORMED", problem, r.id);
    return std::nullopt;
  }
  return id;
}

// Lets a request id's claim go when the submit that holds it ends without a run.
class ClaimRelease {
 public:
  ClaimRelease(std::shared_ptr<Server> server, std::uint32_t uid, std::string request_id)
      : server_(std::move(server)), uid_(uid), request_id_(std::move(request_id)) {}
  ~ClaimRelease() {
    if (!request_id_.empty()) server_->submits.release(uid_, request_id_);
  }
  ClaimRelease(const ClaimRelease&) = delete;
  ClaimRelease& operator=(const ClaimRelease&) = delete;

 private:
  std::shared_ptr<Server> server_;
  std::uint32_t uid_;
  std::string request_id_;
};

}  // namespace

asio::awaitable<void> handle_submit(Session& s, const SocketRequest& r) {
  const json::value* run = r.body.if_contains("run");
  if (!run || !run->is_object()) {
    s.refuse("MALFORMED", "submit needs a \"run\" object (docs/socket-api.md)", r.id);
    co_return;
  }
  auto request_id = submit_request_id(s, r);
  if (!request_id) co_return;  // refused
  if (const json::value* to_fleet = r.body.if_contains("fleet");
      to_fleet && to_fleet->is_bool() && to_fleet->get_bool()) {
    // A request id is claimed fleet-wide there (daemon/fleet/request_claims.hpp).
    co_await submit_to_fleet(s, r, run->get_object());
    co_return;
  }
  auto server = s.server_ptr();
  const std::uint32_t uid = s.peer().uid;
  auto reply = [&s, &r](const std::string& run_id, const std::filesystem::path& run_dir, bool duplicate) {
    json::object fields;
    fields["run_id"] = run_id;
    fields["run_dir"] = run_dir.string();
    if (s.server().fleet) fields["host"] = s.server().fleet->host_id();
    if (duplicate) fields["duplicate"] = true;
    s.reply("submitted", r.id, fields);
  };
  if (!request_id->empty()) {
    // One run per (uid, request_id): a retry whose first reply was lost gets that run back.
    const std::string digest = protocol::sha256_hex(protocol::canonical_json(*run));
    for (;;) {
      auto claimed = server->submits.claim(uid, *request_id, digest, std::chrono::system_clock::now());
      if (claimed.claim == SubmitLedger::Claim::fresh) break;
      if (claimed.claim == SubmitLedger::Claim::duplicate) {
        reply(claimed.run_id, RunDir::in_state_dir(server->config.state_dir, claimed.run_id).root(), true);
        co_return;
      }
      if (claimed.claim == SubmitLedger::Claim::conflict) {
        s.refuse("CONFLICT", "request_id " + *request_id + " made run " + claimed.run_id + " with another spec", r.id);
        co_return;
      }
      // Another submit with this id is being made right now: its outcome decides this one.
      auto settled = [server, uid, key = *request_id](auto done) {
        server->submits.when_settled(uid, key, [done]() mutable { done(true); });
      };
      co_await await_callback<bool>(std::move(settled));
    }
  }
  // Whatever ends this submit, a claim it did not commit is let go (a no-op once committed).
  ClaimRelease release{server, uid, *request_id};
  // Named, not a temporary in the co_await expression (GCC 12 destroys such temporaries twice).
  std::optional<std::string> claimed_id;
  if (!request_id->empty()) claimed_id = *request_id;
  auto submitted = co_await submit_run(server, s.peer(), s.role(), run->get_object(), std::nullopt, claimed_id);
  if (!submitted) {
    s.refuse(submitted.error().code, submitted.error().reason, r.id);
    co_return;
  }
  reply(submitted->run_id, submitted->run_dir, false);
}

asio::awaitable<void> handle_list(Session& s, const SocketRequest& r) {
  if (const json::value* f = r.body.if_contains("fleet"); f && f->is_bool() && f->get_bool()) {
    co_await fleet_list(s, r);
    co_return;
  }
  auto server = s.server_ptr();
  auto snapshot = [server] { return server->registry.snapshot(); };
  auto entries = co_await server->on_registry(std::move(snapshot));
  json::array runs;
  for (auto& e : entries) {
    json::object one = co_await summary(e);
    runs.push_back(std::move(one));
  }
  json::object fields;
  fields["runs"] = std::move(runs);
  s.reply("runs", r.id, fields);
}

asio::awaitable<void> handle_get(Session& s, const SocketRequest& r) {
  if (co_await fleet_get(s, r)) co_return;  // a run another host owns
  auto e = co_await s.find_run(r, false);
  if (!e) co_return;
  json::object fields = co_await summary(*e);
  RunDir dir(e->dir);
  fields["run_dir"] = e->dir.string();
  if (s.server().fleet) fields["host"] = s.server().fleet->host_id();
  // Redacted again as read: a spec.json written by an older build may hold the values.
  fields["spec"] = adapters::redacted_spec_json(dir.read_spec());
  fields["hermetic"] = hermetic_view(s.server(), *e, fields["spec"], fields["state"] == "closed");
  // A run this process did not submit: its upstream from its spec, its network from what its
  // session.started attested (null when neither says).
  if (fields["upstream"].is_null())
    if (const json::object* spec = fields["spec"].if_object())
      if (const json::value* upstream = spec->if_contains("upstream"); upstream && upstream->is_string())
        fields["upstream"] = *upstream;
  if (fields["network"].is_null()) fields["network"] = attested_network(dir);
  s.reply("run", r.id, fields);
}

asio::awaitable<void> handle_status(Session& s, const SocketRequest& r) {
  // One view with the streams: a run whose stream holds stream.closed is closed here too, even
  // in the moment before the registry hears of it (a client that has just read `end` must not
  // see it counted active).
  auto server = s.server_ptr();
  auto count = [server] { return server->registry.counts(); };
  RegistryCounts counts = co_await server->on_registry(std::move(count));
  std::size_t active = counts.starting, idle = 0, pending = 0;
  for (auto& run : counts.open) {
    auto status = co_await status_of(run);
    if (status->phase == RunPhase::closed) continue;  // closed since the registry looked
    ++active;
    if (status->phase == RunPhase::idle) ++idle;
    pending += status->pending_decisions;
  }
  json::object runs;
  runs["active"] = active;
  runs["idle"] = idle;
  runs["closed"] = counts.total - active;
  runs["pending_decisions"] = pending;
  json::object fields;
  fields["version"] = std::string(build_info::version);
  fields["pid"] = ::getpid();
  fields["uptime_ms"] =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - server->started_at).count();
  fields["socket"] = server->config.socket.string();
  fields["state_dir"] = server->config.state_dir.string();
  fields["runs"] = std::move(runs);
  fields["accepting"] = counts.accepting;
  fields["connections"] = server->connections.load();
  // What a run's body gets here (a host property: docs/containment.md).
  if (server->containment)
    fields["containment"] =
        containment_facts(*server->containment, NetworkDecision{server->own_network, server->why_host_network});
  s.reply("status", r.id, fields);
}

asio::awaitable<void> handle_shutdown(Session& s, const SocketRequest& r) {
  s.reply("shutting_down", r.id);
  s.server().begin_shutdown("a shutdown request from uid " + std::to_string(s.peer().uid));
  co_return;
}

}  // namespace mh::daemon
