#include "daemon/server/stream_pump.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>

#include "daemon/server/fleet_gate.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/run_access.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/session.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Waits for more of the stream, or for the connection to close. Bounded waits keep a closed
// connection's pump from sleeping forever on a quiet run.
asio::awaitable<WaitOutcome> wait_more(Connection& connection, StreamReader& reader) {
  for (;;) {
    auto outcome = co_await reader.wait_for_more(Clock::now() + std::chrono::seconds(1));
    if (outcome != WaitOutcome::timed_out || connection.peer_gone()) co_return outcome;
  }
}

// Right after `attached`: every decision still pending, with the time left, so a controller
// that re-attaches is handed what is waiting.
asio::awaitable<void> offer_pending(Session& s, const std::optional<std::string>& request_id,
                                    const std::string& run_id) {
  auto run = s.stream().attached;
  auto ask = [run](auto done) { run->pending_calls(done); };
  auto pending = co_await await_callback<std::vector<PendingCallView>>(std::move(ask));
  for (const auto& p : pending) {
    json::object f;
    f["run_id"] = run_id;
    f["call_id"] = p.call_id;
    f["requested_seq"] = p.requested_seq;
    f["remaining_ms"] = p.remaining_ms;
    s.reply("pending", request_id, f);
  }
}

// The start seq of a tail or attach: `from_seq`, any non-negative integer JSON can carry (one
// past the end is refused by the reader, by name); default 1. nullopt: refused.
std::optional<std::uint64_t> from_seq(Session& s, const SocketRequest& r) {
  const json::value* v = r.body.if_contains("from_seq");
  if (!v) return 1;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<std::uint64_t>(v->get_int64());
  s.refuse("MALFORMED", "\"from_seq\" must be a non-negative integer", r.id);
  return std::nullopt;
}

asio::awaitable<void> stream(Session& s, const SocketRequest& r, bool attach) {
  if (co_await fleet_tail(s, r, attach)) co_return;  // a run another host owns, or "fleet": true
  Session::Stream& state = s.stream();
  if (state.active) {
    s.refuse("ALREADY_ATTACHED",
             "this connection is already " + std::string(state.attached ? "attached to" : "streaming") + " run " +
                 state.run_id + "; open another connection",
             r.id);
    co_return;
  }
  auto e = co_await s.find_run(r, attach);
  if (!e) co_return;
  auto from = from_seq(s, r);
  if (!from) co_return;
  bool follow = attach;
  if (const json::value* v = r.body.if_contains("follow"); v && v->is_bool()) follow = follow || v->get_bool();

  auto opened = open_stream(*e);
  if (!opened) {
    s.refuse("REFUSED", opened.error(), r.id);
    co_return;
  }
  auto reader = StreamReader::open(opened->shared, s.connection().executor(),
                                   *from == 0 ? ReaderStart::at_end() : ReaderStart::at_seq(*from));
  if (!reader) {
    s.refuse("MALFORMED", "cannot start at seq " + std::to_string(*from) + ": " + reader.error(), r.id);
    co_return;
  }
  json::object fields;
  fields["run_id"] = e->id;
  fields["from_seq"] = reader->next_seq();
  s.reply(attach ? "attached" : "tailing", r.id, fields);
  if (attach) {
    state.attached = e->run;
    if (state.attached) co_await offer_pending(s, r.id, e->id);
  }
  state.active = true;
  state.run_id = e->id;
  s.connection().hold();
  asio::co_spawn(s.connection().executor(),
                 pump_stream(s.shared_from_this(), std::move(*reader), std::move(opened->keep), follow, r.id, e->id),
                 asio::detached);
}

}  // namespace

asio::awaitable<void> pump_stream(std::shared_ptr<Session> session, StreamReader reader, std::optional<EventLog> keep,
                                  bool follow, std::optional<std::string> request_id, std::string run_id) {
  (void)keep;
  Connection& connection = session->connection();
  std::optional<Server::StreamReading> reading;  // the stream readers gauge, until just before `end`
  reading.emplace(session->server(), session->stream().attached != nullptr);
  for (;;) {
    if (!co_await connection.writable()) break;
    auto batch = reader.read_some();
    if (!batch) {
      session->refuse("REFUSED", "reading run " + run_id + " failed: " + batch.error(), request_id);
      break;
    }
    if (batch->count > 0) {
      std::string bytes(batch->bytes);
      bytes.pop_back();  // send_streamed() adds the newline back
      connection.send_streamed(std::move(bytes));
    }
    if (batch->reached_end) break;
    if (batch->count == 0) {
      // Without --follow a tail ends at the end, but not between a closed run's last event and
      // its stream.closed, which its syncer is making durable (close_syncer.hpp).
      if (!follow && !reader.final_pending()) break;
      auto outcome = co_await wait_more(connection, reader);
      if (outcome == WaitOutcome::writer_gone || connection.closing()) break;
    }
  }
  reading.reset();
  if (!connection.closing()) {
    json::object fields;
    fields["run_id"] = run_id;
    fields["next_seq"] = reader.next_seq();
    session->reply("end", request_id, fields);
  }
  session->stream() = Session::Stream{};
  connection.release();
}

asio::awaitable<void> handle_tail(Session& s, const SocketRequest& r) {
  co_await stream(s, r, false);
}

asio::awaitable<void> handle_attach(Session& s, const SocketRequest& r) {
  co_await stream(s, r, true);
}

}  // namespace mh::daemon
