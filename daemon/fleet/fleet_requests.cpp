// The socket API's fleet side (docs/fleet.md): `submit` with "fleet": true queues the spec for
// whichever host has room; `get`, `list` with "fleet": true, `tail` and `attach` reach a run that
// another host owns. Each answers as its one-host request does, plus which host.
#include "daemon/fleet/fleet_requests.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/json/serialize.hpp>
#include <deque>
#include <set>
#include <vector>

#include "daemon/fleet/command_relay.hpp"
#include "daemon/fleet/event_publisher.hpp"
#include "daemon/fleet/fleet_host.hpp"
#include "daemon/fleet/fleet_reader.hpp"
#include "daemon/fleet/leases.hpp"
#include "daemon/fleet/owner_answer.hpp"
#include "daemon/fleet/placement.hpp"
#include "daemon/fleet/request_claims.hpp"
#include "daemon/fleet/run_records.hpp"
#include "daemon/log.hpp"
#include "daemon/run/disk_floor.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/run_access.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"
#include "protocol/digest.hpp"
#include "protocol/reader.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

bool admin_uid_here(const DaemonConfig& config, std::uint32_t uid) {
  return config.role_of(uid, groups_of_user(uid)) == Role::admin;
}

std::string peer_uid_problem(const DaemonConfig& config, std::uint32_t uid) {
  if (!admin_uid_here(config, uid)) return "";
  return "uid " + std::to_string(uid) +
         " is an admin on this host; a peer host is trusted as a control peer at most, so it may not act for an "
         "admin's uid (docs/fleet.md, Trust)";
}

asio::awaitable<void> queue_submit(std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r,
                                   const json::object& run) {
  // The refusals a host would make, made here first: a spec no host could run never queues.
  if (auto checked = check_submit(s.server(), s.role(), run); !checked) {
    s.refuse(checked.error().code, checked.error().reason, r.id);
    co_return;
  }
  // Every placing host refuses a spec owned by an admin's uid (it cannot tell the claim from a
  // forged one): said here at once rather than queued for nobody to take.
  if (auto problem = peer_uid_problem(s.server().config, s.peer().uid); !problem.empty()) {
    s.refuse("FORBIDDEN", problem + "; submit it as a non-admin user, or on the host itself without \"fleet\"", r.id);
    co_return;
  }
  // The id is the submitter's: a redelivered spec can never make a second run.
  std::string id = new_run_id();
  json::object envelope;
  envelope["run"] = run;
  envelope["uid"] = s.peer().uid;
  envelope["from_host"] = host->host_id();
  std::string body = boost::json::serialize(envelope);
  if (body.size() > fleet::kMaxSpecBytes) {
    s.refuse("MALFORMED", "the run spec is over 1 MiB", r.id);
    co_return;
  }
  // A request id (checked by handle_submit) is claimed fleet-wide before the spec is queued: the
  // first claimant's run id is every later submit's answer (request_claims.hpp).
  bool duplicate = false, placed_already = false;
  if (const json::value* given = r.body.if_contains("request_id"); given && given->is_string()) {
    const std::string request_id(given->get_string());
    const std::uint32_t uid = s.peer().uid;
    const fleet::RequestClaim mine{id, protocol::sha256_hex(protocol::canonical_json(run))};
    auto claim = [host, uid, request_id, mine] { return fleet::claim_request(host->link(), uid, request_id, mine); };
    auto claimed = co_await host->on_fleet(std::move(claim));
    if (!claimed) {
      s.refuse("FLEET_UNAVAILABLE", claimed.error().text, r.id);
      co_return;
    }
    if (*claimed && (*claimed)->spec_sha256 != mine.spec_sha256) {
      s.refuse("CONFLICT", "request_id " + request_id + " made run " + (*claimed)->run_id + " with another spec", r.id);
      co_return;
    }
    if (*claimed) {
      duplicate = true;
      id = (*claimed)->run_id;
      // A record: placed, or being placed (then waited for below, as the first submitter does);
      // nothing is queued again.
      auto read = [host, id] { return fleet::read_run_record(host->link(), id); };
      auto record = co_await host->on_fleet(std::move(read));
      if (!record) {
        s.refuse("FLEET_UNAVAILABLE", record.error().text, r.id);
        co_return;
      }
      placed_already = record->has_value();
      // Not placed: still queued, or its first queueing failed. Queued again under the claimed
      // id, which cannot make a second run (the message id, the runs bucket's create-only
      // record, the placing host's registry), and heals a claim whose first queueing never happened.
    }
  }
  if (!placed_already) {
    auto send = [host, id, body] { return fleet::submit_spec(host->link(), id, body); };
    auto sent = co_await host->on_fleet(std::move(send));
    if (!sent) {
      // A claim made here stays: the client's retry (same request id and spec) queues it again.
      s.refuse("FLEET_UNAVAILABLE", sent.error().text, r.id);
      co_return;
    }
  }
  auto timeout = 2 * host->link().config().request_timeout;
  auto wait = [host, id, timeout] { return host->await_placement(id, timeout); };
  auto placed = co_await host->on_fleet(std::move(wait));
  json::object fields;
  fields["run_id"] = id;
  if (!placed) {
    // The spec is queued (JetStream took it, so it is not refused: a retry without a request id
    // would make a second run), but where it went could not be read: said as unknown, with why,
    // never as "queued" (no host had room), which may be false.
    fields["host"] = nullptr;
    fields["placement"] = "unknown";
    fields["placement_error"] = placed.error().text;
  } else if (*placed) {
    fields["host"] = (*placed)->host;
    fields["placement"] = "placed";
  } else {
    fields["host"] = nullptr;
    fields["placement"] = "queued";  // no host had room within the wait: the first that has takes it
  }
  if (duplicate) fields["duplicate"] = true;
  s.reply("submitted", r.id, fields);
}

namespace {

// The fleet's record of a run this host does not have. A run submitted on its own host enters the
// records when that host's publisher claims it, a moment after its submitter was answered, and a
// run placed from the queue once it is made there: a record not there yet is waited for, on a
// watch of its key, for at most request_timeout_ms (docs/fleet.md, Fleet reads) before the run
// is called unknown. Fleet thread only.
fleet::NatsResult<std::optional<fleet::RunRecord>> record_of(FleetHost& host, const std::string& id) {
  auto record = fleet::read_run_record(host.link(), id);
  if (!record || *record) return record;
  return fleet::await_run_record(host.link(), id, host.link().config().request_timeout);
}

// A fleet read that failed (JetStream electing a leader after a node's loss, NATS out of reach):
// refused by name, never answered as if the run were unknown or held no lines.
void refuse_unread(Session& s, const SocketRequest& r, const std::string& id, const fleet::NatsError& why) {
  s.refuse("FLEET_UNAVAILABLE", "run " + protocol::excerpt(id, 80) + ": the fleet could not be read: " + why.text,
           r.id);
}

// A remote run's `state`, in the fleet's vocabulary (its host alone knows starting, turn, idle
// or ending): closed once its stream's last line in the fleet is stream.closed, else open.
std::string remote_state(const fleet::FleetStreamTail& tail) {
  return tail.last_event == "stream.closed" ? "closed" : "open";
}

// Whether run `id` is made on this host: in the registry with its directory. A run this host is
// still making (placed here from the queue, its id reserved, no directory yet) is not: the
// one-host handlers would call it unknown, so it is read from the fleet until it is made.
asio::awaitable<bool> made_here(std::shared_ptr<Server> server, std::string id) {
  auto made = [server, id] {
    auto entry = server->registry.lookup(id);
    return entry && !entry->dir.empty();
  };
  co_return co_await server->on_registry(std::move(made));
}

// The run a request names, when this host has a fleet and does not have the run itself: the
// fleet host and the id (nullopt: the one-host handler answers).
asio::awaitable<std::optional<std::pair<std::shared_ptr<FleetHost>, std::string>>> elsewhere(
    std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r) {
  const json::value* v = r.body.if_contains("run_id");
  if (!v || !v->is_string()) co_return std::nullopt;
  std::string id(v->get_string());
  auto server = s.server_ptr();
  if (co_await made_here(server, id)) co_return std::nullopt;
  co_return std::make_pair(std::move(host), std::move(id));
}

}  // namespace

asio::awaitable<bool> get_remote(std::shared_ptr<FleetHost> fleet, Session& s, const SocketRequest& r) {
  auto remote = co_await elsewhere(std::move(fleet), s, r);
  if (!remote) co_return false;
  auto [host, id] = std::move(*remote);
  auto read = [host, id]() -> fleet::NatsResult<std::pair<std::optional<fleet::RunRecord>, fleet::FleetStreamTail>> {
    auto record = record_of(*host, id);
    if (!record) return record.error();
    fleet::FleetStreamTail tail;
    if (*record) {
      // Not read is not "none of its lines": the answer waits for a read that worked.
      auto t = fleet::fleet_stream_tail(host->link(), id);
      if (!t) return t.error();
      tail = *t;
    }
    return std::make_pair(*record, tail);
  };
  auto found = co_await host->on_fleet(std::move(read));
  if (!found) {
    refuse_unread(s, r, id, found.error());
    co_return true;
  }
  if (!found->first) co_return false;  // the one-host answer: UNKNOWN_RUN
  const auto& record = *found->first;
  json::object fields;
  fields["run_id"] = id;
  fields["host"] = record.host;
  fields["state"] = remote_state(found->second);
  fields["fleet_state"] = record.state;
  if (!record.closed_by.empty()) fields["closed_by"] = record.closed_by;
  fields["last_seq"] = found->second.last_seq;
  s.reply("run", r.id, fields);
  co_return true;
}

asio::awaitable<void> list_fleet(std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r) {
  auto read = [host]() -> fleet::NatsResult<std::pair<std::vector<fleet::RunRecord>, std::set<std::string>>> {
    auto records = fleet::list_run_records(host->link());
    if (!records) return records.error();
    auto live = fleet::live_hosts(host->link());
    if (!live) return live.error();
    return std::make_pair(std::move(*records), std::move(*live));
  };
  auto listed = co_await host->on_fleet(std::move(read));
  if (!listed) {
    s.refuse("FLEET_UNAVAILABLE", listed.error().text, r.id);
    co_return;
  }
  json::array runs;
  for (const auto& record : listed->first) {
    json::object one;
    one["run_id"] = record.run_id;
    one["host"] = record.host;
    one["state"] = record.state;
    if (!record.closed_by.empty()) one["closed_by"] = record.closed_by;
    runs.push_back(std::move(one));
  }
  json::array hosts;
  for (const auto& h : listed->second)
    hosts.push_back(json::string(h));
  json::object fields;
  fields["runs"] = std::move(runs);
  fields["hosts"] = std::move(hosts);
  s.reply("runs", r.id, fields);
}

asio::awaitable<bool> relay_command(std::shared_ptr<FleetHost> fleet, Session& s, const SocketRequest& r,
                                    std::string_view kind) {
  auto remote = co_await elsewhere(std::move(fleet), s, r);
  if (!remote) co_return false;
  auto [host, id] = std::move(*remote);
  auto server = s.server_ptr();
  auto read = [host, id] { return record_of(*host, id); };
  auto record = co_await host->on_fleet(std::move(read));
  if (!record) {
    refuse_unread(s, r, id, record.error());
    co_return true;
  }
  if (!*record) co_return false;  // the one-host answer: UNKNOWN_RUN
  const std::string owner = (*record)->host;
  json::object relay;
  relay["kind"] = std::string(kind);
  relay["run_id"] = id;
  relay["request"] = r.body;
  if (r.id) relay["id"] = *r.id;
  relay["uid"] = s.peer().uid;
  relay["pid"] = s.peer().pid;
  relay["from_host"] = host->host_id();
  std::string body = boost::json::serialize(relay);
  auto timeout = host->link().config().request_timeout + std::chrono::milliseconds(server->config.decision_deadline_ms);
  auto send = [host, owner, body, timeout] {
    return fleet::relay_request(host->link(), host->link().names().command_subject(owner), body, timeout);
  };
  auto answer = co_await host->on_fleet(std::move(send));
  if (!answer) {
    s.refuse("FLEET_UNAVAILABLE",
             "run " + id + " is on host " + owner + ", which did not answer: " + answer.error().text, r.id);
    co_return true;
  }
  // The owner's answer, read field by field and written again here (a peer's bytes are not trusted).
  auto checked = read_owner_answer(*answer, owner, r.id, r.id, false);
  if (!checked) {
    s.refuse("FLEET_UNAVAILABLE", checked.error(), r.id);
    co_return true;
  }
  s.connection().send(std::move(checked->line));
  co_return true;
}

namespace {

// As a command on this host's own socket (session.cpp, requests_control.cpp): one the run could
// not record is refused by name before the run acts on it; a halt goes through. The refusal's
// words, or nullopt.
std::optional<std::string> unrecordable(const RunEntry& e, const protocol::Command& cmd) {
  if (std::holds_alternative<protocol::cmd::Halt>(cmd.payload)) return std::nullopt;
  auto full = disk_full_problem(e.dir, kCommandFloorBytes, "the run needs to record a command");
  if (!full) return std::nullopt;
  return "the run's record cannot take command " + cmd.id + ": " + *full;
}

// The bound on a relayed line's "too_long": the requesting host's sentence about it.
constexpr std::size_t kMaxTooLongBytes = 1024;

// What an attach on another host relays (`kind` "line" or "pending"), for a run here whose
// controller `peer` may be: a line the client sent while attached, handled as an attached
// connection's line is (a command, or an unreadable line answered MALFORMED in the stream), and
// answered with its `result` line; or the decisions still pending, answered {"pending": [...]}.
asio::awaitable<void> serve_attached(const RunEntry& e, const std::string& kind, const json::object& o,
                                     protocol::PeerIdentity peer, std::size_t max_line_bytes,
                                     fleet::Responder responder) {
  std::shared_ptr<Run> run = e.run;  // null once the run has closed
  if (kind == "pending") {
    json::object answer;
    answer["pending"] = co_await pending_calls_json(run);
    responder.respond(boost::json::serialize(answer));
    co_return;
  }
  auto answer = std::make_shared<fleet::Responder>(std::move(responder));
  auto respond = [answer](const protocol::ev::CommandResult& r, bool recorded) {
    answer->respond(result_line(std::nullopt, r, recorded));
  };
  // The requesting host's words for a line over its bound, and the line: a peer's bytes, bounded
  // here as this host's own connection would bound them (docs/fleet.md, Attach across hosts).
  std::optional<std::string> too_long = protocol::string_at(o, "too_long");
  if (too_long && too_long->size() > kMaxTooLongBytes) {
    answer->respond(refusal_line("MALFORMED",
                                 "a relayed \"too_long\" is over " + std::to_string(kMaxTooLongBytes) +
                                     " bytes; it is the framer's sentence about a line, not the line",
                                 std::nullopt));
    co_return;
  }
  const std::string line = protocol::string_at(o, "line").value_or("");
  if (!too_long && line.size() > max_line_bytes)
    too_long = "a line relayed from " + peer.via.value_or("a peer host") + " is over this host's " +
               std::to_string(max_line_bytes) + "-byte bound (" + std::to_string(line.size()) + " bytes; it began \"" +
               protocol::excerpt(line, 60) + "\"); it is refused unread";
  auto cmd = protocol::read_command_line(too_long ? std::string_view() : std::string_view(line));
  if (too_long || !cmd) {
    protocol::LineRefusal refusal =
        too_long ? protocol::LineRefusal{protocol::LineRefusalKind::TooLong, *too_long, std::nullopt} : cmd.error();
    if (run)
      run->unreadable_command(std::move(refusal), respond);
    else
      answer->respond(refusal_line("TOO_LATE", "the run has closed", refusal.id));
    co_return;
  }
  if (auto full = unrecordable(e, *cmd)) {
    answer->respond(refusal_line("DISK_FULL", std::move(*full), cmd->id));
    co_return;
  }
  DeliveredResult delivered = co_await deliver_command(e, std::move(*cmd), peer);
  respond(delivered.result, delivered.recorded);
}

// A command relayed from a peer host for a run here: handled as the socket's `command` /
// `halt` is, for a peer that may control only the runs its uid owns, and attributed to it
// (`via: "fleet:<host>"`). The answer is the line the requester's client gets.
asio::awaitable<void> serve_relayed(std::shared_ptr<Server> server, std::shared_ptr<FleetHost> host, std::string body,
                                    fleet::Responder responder) {
  auto parsed = protocol::parse_json(body);
  const json::object* o = parsed && parsed->is_object() ? &parsed->as_object() : nullptr;
  std::optional<std::string> id = o ? protocol::string_at(*o, "id") : std::nullopt;
  auto refuse = [&](std::string_view code, std::string why) {
    responder.respond(refusal_line(code, std::move(why), id));
  };
  if (!o) co_return refuse("MALFORMED", "a relayed command must be one JSON object");
  std::string run_id = protocol::string_at(*o, "run_id").value_or("");
  std::string kind = protocol::string_at(*o, "kind").value_or("");
  std::string from = protocol::string_at(*o, "from_host").value_or("");
  const json::value* request = o->if_contains("request");
  const bool attached = kind == "line" || kind == "pending";  // from an attach on the requester's host
  if (!fleet::host_id_problem(from).empty() || !fleet::run_id_problem(run_id).empty() ||
      (!attached && (!request || !request->is_object() || (kind != "command" && kind != "halt"))))
    co_return refuse("MALFORMED", "a relayed command needs kind, run_id, from_host and request");
  std::optional<std::uint64_t> claimed_uid = protocol::u64_at(*o, "uid");
  if (!claimed_uid || *claimed_uid > 0xffffffffu) co_return refuse("MALFORMED", "a relayed command needs a uid");
  protocol::PeerIdentity peer;
  peer.uid = static_cast<std::uint32_t>(*claimed_uid);
  peer.pid = static_cast<std::int32_t>(protocol::u64_at(*o, "pid").value_or(0) & 0x7fffffff);
  peer.via = "fleet:" + from;
  // A peer host may be anyone holding the fleet's credentials: its claim is a control peer's at
  // most, never an admin's (who could command every run here, root's own among them).
  if (auto problem = peer_uid_problem(server->config, peer.uid); !problem.empty())
    co_return refuse("FORBIDDEN", "refused a command relayed from host " + from + ": " + problem);
  auto find = [server, run_id] { return server->registry.lookup(run_id); };
  auto e = co_await server->on_registry(find);
  // Placed here from the queue and still being made (its submitter had its id at once: a submit
  // answered `queued` or `unknown`): the command waits for the making's end, then looks again,
  // instead of finding no run for a run its client was told of.
  bool waited = false;
  if (!e || e->dir.empty()) waited = co_await host->until_made(run_id);
  if (waited) e = co_await server->on_registry(find);
  if (!e || e->dir.empty())
    co_return refuse("UNKNOWN_RUN", "no run \"" + run_id + "\" on host " + server->fleet->host_id());
  if (!may_control(Role::control, peer.uid, *e))
    co_return refuse("FORBIDDEN", "run " + run_id + " belongs to uid " + std::to_string(e->owner_uid) +
                                      "; a peer host may command only its own uid's runs");
  if (attached) {
    co_await serve_attached(*e, kind, *o, peer, server->config.max_line_bytes, std::move(responder));
    co_return;
  }
  protocol::Command cmd;
  if (kind == "halt") {
    std::optional<std::string> reason = protocol::string_at(request->as_object(), "reason");
    cmd = protocol::Command{
        "fleet-halt-" + std::to_string(++server->command_counter),
        protocol::cmd::Halt{reason.value_or("halted from host " + from + " by uid " + std::to_string(peer.uid))}};
  } else {
    const json::value* c = request->as_object().if_contains("command");
    if (!c || !c->is_object()) co_return refuse("MALFORMED", "a command request needs a \"command\" object");
    auto read = protocol::read_command_line(protocol::canonical_json(*c));
    if (!read)
      co_return refuse("MALFORMED", "the command is refused (" + std::string(protocol::to_string(read.error().kind)) +
                                        "): " + read.error().message);
    cmd = std::move(*read);
  }
  if (auto full = unrecordable(*e, cmd)) co_return refuse("DISK_FULL", std::move(*full));
  DeliveredResult answer = co_await deliver_command(*e, std::move(cmd), peer);
  responder.respond(result_line(id, answer.result, answer.recorded));
}

}  // namespace

void serve_fleet_command(std::shared_ptr<Server> server, std::shared_ptr<FleetHost> host, std::string body,
                         fleet::Responder responder) {
  asio::co_spawn(server->io, serve_relayed(server, std::move(host), std::move(body), std::move(responder)),
                 asio::detached);
}

namespace {

// What the follower hands the pump, on the connection's strand.
struct FleetTailState {
  explicit FleetTailState(asio::any_io_executor executor) : wake(executor) {}
  std::deque<fleet::FleetLine> lines;
  asio::steady_timer wake;
};

// How long a fleet tail may hear nothing before the fleet is asked whether it holds more. JetStream
// can orphan a follower's consumer when its cluster loses and elects again its metadata leader:
// the consumer goes on sending heartbeats, so libnats never makes it again, and delivers nothing
// (seen in CI: a tail silent for its whole 120 s while the fleet held every line). Heartbeats say
// the consumer lives, not that it delivers: the fleet's own last line for the run does.
constexpr std::chrono::seconds kFleetTailSilence{5};

// A follower that hands each line to the pump through `state`, from `from_seq`; made on the
// fleet thread.
asio::awaitable<fleet::NatsResult<std::unique_ptr<fleet::FleetStreamFollower>>> open_fleet_follower(
    std::shared_ptr<FleetHost> host, std::shared_ptr<FleetTailState> state, std::string run_id,
    std::uint64_t from_seq) {
  auto on_line = [state](fleet::FleetLine line) {
    state->lines.push_back(std::move(line));
    state->wake.cancel();
  };
  auto executor = state->wake.get_executor();
  const bool deaf = host->take_deaf_follower();  // a test hook's (kDeafFollowersEnv)
  auto open = [host, run_id, from_seq, executor, on_line, deaf] {
    return fleet::FleetStreamFollower::open(host->link(), run_id, from_seq, executor, on_line, deaf);
  };
  auto opened = co_await host->on_fleet(std::move(open));
  co_return opened;
}

// After kFleetTailSilence with no line: a follower made again from `next_seq` when the events
// stream holds a message for the run later than the last the follower was delivered (the
// stream's own sequences, which no host can forge: a line forged with a seq far ahead makes no
// tail remake anything); nullptr to keep the one it has (the run is quiet, or the fleet does not
// answer: asked again after the next silence).
asio::awaitable<std::unique_ptr<fleet::FleetStreamFollower>> remade_if_deaf(std::shared_ptr<FleetHost> host,
                                                                            std::shared_ptr<FleetTailState> state,
                                                                            std::string run_id, std::uint64_t next_seq,
                                                                            std::uint64_t delivered_stream_seq) {
  auto ask = [host, run_id] { return fleet::fleet_stream_tail(host->link(), run_id); };
  auto tail = co_await host->on_fleet(std::move(ask));
  if (!tail || tail->subject_seq <= delivered_stream_seq) co_return nullptr;
  const std::string heard_nothing =
      "fleet: a tail of run " + run_id + " heard nothing for " + std::to_string(kFleetTailSilence.count()) +
      " s while the fleet holds more of it (stream sequence " + std::to_string(tail->subject_seq) +
      ", the tail's last " + std::to_string(delivered_stream_seq) + ")";
  auto reopening = open_fleet_follower(host, state, run_id, next_seq);
  auto reopened = co_await std::move(reopening);
  if (!reopened) {
    log(LogPriority::warning,
        heard_nothing + ", and its consumer could not be made again: " + reopened.error().text + "; trying again");
    co_return nullptr;
  }
  log(LogPriority::notice, heard_nothing + ": its consumer was made again from seq " + std::to_string(next_seq));
  co_return std::move(*reopened);
}

asio::awaitable<void> pump_fleet(std::shared_ptr<Session> session, std::shared_ptr<FleetHost> host,
                                 std::shared_ptr<FleetTailState> state,
                                 std::unique_ptr<fleet::FleetStreamFollower> follower, bool follow,
                                 std::uint64_t next_seq, std::uint64_t end_seq, std::uint64_t end_stream_seq,
                                 std::optional<std::string> request_id, std::string run_id) {
  Connection& connection = session->connection();
  bool done = !follow && end_seq < next_seq;  // nothing to read without following
  auto heard = std::chrono::steady_clock::now();
  std::uint64_t messages = follower->messages_received();
  while (!done) {
    while (!state->lines.empty() && !done) {
      fleet::FleetLine line = std::move(state->lines.front());
      state->lines.pop_front();
      heard = std::chrono::steady_clock::now();
      // Already handed on: a follower made again starts where the last line sent leaves off, and
      // the one it replaced may have posted a line or two more before it stopped.
      if (line.seq != 0 && line.seq < next_seq && !line.closed) continue;
      if (!co_await connection.writable()) {
        done = true;
        break;
      }
      connection.send_streamed(std::move(line.line));  // a stream's line, not an answer
      // Only the next seq moves the tail on: a line another host forged with a seq far ahead
      // (any host may publish: docs/fleet.md, Trust) is passed on as it is, and skips nothing.
      if (line.seq != 0 && line.seq == next_seq) next_seq = line.seq + 1;
      // Without following: to the run's last line when the tail began, reached in order.
      done = line.closed || (!follow && next_seq > end_seq);
    }
    if (done || connection.closing() || connection.peer_gone()) break;
    if (const std::uint64_t now_received = follower->messages_received(); now_received != messages) {
      messages = now_received;  // catching up through lines before from_seq: not silent
      heard = std::chrono::steady_clock::now();
    }
    if (std::chrono::steady_clock::now() - heard >= kFleetTailSilence) {
      // Without following, the tail ends once the follower was delivered the stream's last message
      // for the run when it began, though its seqs never reached end_seq (a line another host
      // forged with a seq far ahead, the last when the tail began, is not waited for).
      if (!follow && state->lines.empty() && follower->last_stream_seq() >= end_stream_seq) break;
      auto remaking = remade_if_deaf(host, state, run_id, next_seq, follower->last_stream_seq());
      // The one replaced unsubscribes; what it had posted meanwhile is skipped by seq.
      if (auto remade = co_await std::move(remaking)) {
        follower = std::move(remade);
        messages = follower->messages_received();
      }
      heard = std::chrono::steady_clock::now();
      if (!state->lines.empty() || connection.closing() || connection.peer_gone()) continue;
    }
    state->wake.expires_after(std::chrono::seconds(1));
    boost::system::error_code ec;
    co_await state->wake.async_wait(asio::redirect_error(asio::use_awaitable, ec));
  }
  follower.reset();
  if (!connection.closing()) {
    json::object fields;
    fields["run_id"] = run_id;
    fields["next_seq"] = next_seq;
    session->reply("end", request_id, fields);
  }
  session->stream() = Session::Stream{};
  connection.release();
}

}  // namespace

namespace {

// One relay from an attach here to the run's owner: `kind` and its fields, as this connection's
// peer. The owner's answer, checked (owner_answer.hpp), or nullopt once a refusal
// (FLEET_UNAVAILABLE, under `id`: the attach request's, or the line's command's) went to the client.
asio::awaitable<std::optional<OwnerAnswer>> relay_attached(std::shared_ptr<FleetHost> host, Session& s,
                                                           const std::string& run_id, const std::string& owner,
                                                           std::string_view kind, json::object fields,
                                                           const std::optional<std::string>& id) {
  fields["kind"] = std::string(kind);
  fields["run_id"] = run_id;
  fields["uid"] = s.peer().uid;
  fields["pid"] = s.peer().pid;
  fields["from_host"] = host->host_id();
  std::string body = boost::json::serialize(fields);
  auto timeout =
      host->link().config().request_timeout + std::chrono::milliseconds(s.server().config.decision_deadline_ms);
  auto send = [host, owner, body, timeout] {
    return fleet::relay_request(host->link(), host->link().names().command_subject(owner), body, timeout);
  };
  auto answer = co_await host->on_fleet(std::move(send));
  if (!answer) {
    std::string why = "run " + run_id + " is on host " + owner + ", which did not answer: " + answer.error().text;
    // A line may have reached the owner all the same: its command.result is then in the stream.
    if (kind == "line") why += "; if it reached the run after all, its command.result is in the stream";
    s.refuse("FLEET_UNAVAILABLE", std::move(why), id);
    co_return std::nullopt;
  }
  // An attach's question is answered under its request's id; an attached line's refusal under
  // its command's id, and a result not recorded as a local attach writes it (id null).
  const bool pending = kind == "pending";
  auto checked = read_owner_answer(*answer, owner, id, pending ? id : std::nullopt, pending);
  if (!checked) {
    s.refuse("FLEET_UNAVAILABLE", checked.error(), id);
    co_return std::nullopt;
  }
  co_return std::move(*checked);
}

// The id a line sent on an attach names, when it can be read (a refusal about the line is sent
// under it, as a local attach's refusal of a command is).
std::optional<std::string> line_id(std::string_view line) {
  auto parsed = protocol::parse_json(line);
  if (!parsed || !parsed->is_object()) return std::nullopt;
  return protocol::string_at(parsed->get_object(), "id");
}

}  // namespace

asio::awaitable<void> relay_attached_line(std::shared_ptr<FleetHost> host, Session& s, std::string line,
                                          std::optional<std::string> too_long) {
  const std::string run_id = s.stream().run_id, owner = s.stream().fleet_owner;
  json::object fields;
  std::optional<std::string> id;
  if (too_long) {
    fields["too_long"] = *too_long;
  } else {
    id = line_id(line);
    fields["line"] = std::move(line);
  }
  auto answer = co_await relay_attached(std::move(host), s, run_id, owner, "line", std::move(fields), id);
  if (!answer) co_return;
  // A result that is the command.result in the stream reaches the client there, through the
  // fleet: as on an attach to a run of this host, only an unrecorded one is sent as a line.
  if (answer->kind == OwnerAnswer::Kind::result && answer->recorded) co_return;
  s.connection().send(std::move(answer->line));
}

asio::awaitable<bool> tail_remote(std::shared_ptr<FleetHost> host, Session& s, const SocketRequest& r, bool attach) {
  const json::value* v = r.body.if_contains("run_id");
  if (!v || !v->is_string()) co_return false;
  const json::value* wanted = r.body.if_contains("fleet");
  bool asked = wanted && wanted->is_bool() && wanted->get_bool();
  std::string id(v->get_string());
  auto server = s.server_ptr();
  bool here = co_await made_here(server, id);
  if (!asked && here) co_return false;
  if (s.stream().active) co_return false;  // the one-host path refuses it by name
  if (attach && here) co_return false;     // a run of this host is attached here, as always
  std::uint64_t from = 1;
  if (const json::value* f = r.body.if_contains("from_seq"); f && f->is_uint64()) from = f->get_uint64();
  if (const json::value* f = r.body.if_contains("from_seq"); f && f->is_int64() && f->get_int64() >= 0)
    from = static_cast<std::uint64_t>(f->get_int64());
  bool follow = attach;
  if (const json::value* f = r.body.if_contains("follow"); !attach && f && f->is_bool()) follow = f->get_bool();
  auto find = [host, id,
               here]() -> fleet::NatsResult<std::pair<std::optional<fleet::RunRecord>, fleet::FleetStreamTail>> {
    // A run of this host may not be in the fleet yet (its publisher starts on its own): not waited for.
    auto record = here ? fleet::read_run_record(host->link(), id) : record_of(*host, id);
    if (!record) return record.error();
    auto tail = fleet::fleet_stream_tail(host->link(), id);
    if (!tail) return tail.error();
    return std::make_pair(*record, *tail);
  };
  auto found = co_await host->on_fleet(std::move(find));
  if (!found) {
    s.refuse("FLEET_UNAVAILABLE", found.error().text, r.id);
    co_return true;
  }
  if (from == 0) from = found->second.last_seq + 1;  // from the end, as a local tail or attach
  // A run of this host may not be in the fleet yet (its publisher starts on its own): read what comes.
  if ((!here && !found->first && found->second.last_seq == 0) || (attach && !found->first)) {
    s.refuse("UNKNOWN_RUN", "no run \"" + protocol::excerpt(id, 80) + "\" in the fleet", r.id);
    co_return true;
  }
  // An attach asks the owner first for what is pending: its answer is also its judgement of
  // whether this peer may control the run (FORBIDDEN, passed on as it is).
  std::vector<OwnerPendingCall> pending;
  if (attach) {
    auto asked_owner = co_await relay_attached(host, s, id, found->first->host, "pending", {}, r.id);
    if (!asked_owner) co_return true;
    if (asked_owner->kind != OwnerAnswer::Kind::pending) {
      // The owner's refusal (FORBIDDEN: this peer may not control the run), under this request's id.
      if (asked_owner->kind == OwnerAnswer::Kind::refused)
        s.connection().send(std::move(asked_owner->line));
      else
        s.refuse("FLEET_UNAVAILABLE", "host " + found->first->host + " answered an attach's question with a result",
                 r.id);
      co_return true;
    }
    pending = std::move(asked_owner->pending);
  }
  auto state = std::make_shared<FleetTailState>(s.connection().executor());
  auto opening = open_fleet_follower(host, state, id, from);
  auto follower = co_await std::move(opening);
  if (!follower) {
    s.refuse("FLEET_UNAVAILABLE", follower.error().text, r.id);
    co_return true;
  }
  json::object fields;
  fields["run_id"] = id;
  fields["from_seq"] = from;
  if (found->first) fields["host"] = found->first->host;
  s.reply(attach ? "attached" : "tailing", r.id, fields);
  for (const auto& p : pending) {
    json::object f;
    f["run_id"] = id;
    f["call_id"] = p.call_id;
    f["requested_seq"] = p.requested_seq;
    f["remaining_ms"] = p.remaining_ms;
    s.reply("pending", r.id, f);
  }
  s.stream().active = true;
  s.stream().run_id = id;
  if (attach) s.stream().fleet_owner = found->first->host;
  s.connection().hold();
  asio::co_spawn(s.connection().executor(),
                 pump_fleet(s.shared_from_this(), host, state, std::move(*follower), follow, from,
                            found->second.last_seq, found->second.subject_seq, r.id, id),
                 asio::detached);
  co_return true;
}

}  // namespace mh::daemon
