// tail and attach: a run's stream copied to a connection, from any seq, then (follow / attach)
// live, straight from events.jsonl. The file is the buffer: the pump reads one batch at a time,
// and the next only when the previous one has left the outbox (Connection::writable), so a
// client that stops reading holds the daemon to one batch and slows nobody. attach also makes
// the connection the run's controller and first offers it every decision still pending.
//
// The handlers are handle_tail / handle_attach (requests.hpp); the pump runs on the connection's
// strand, holding the connection open for a half-closed peer until its `end`.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <optional>
#include <string>

#include "daemon/stream/event_log.hpp"
#include "daemon/stream/stream_reader.hpp"

namespace mh::daemon {

class Session;

// Copies the reader's lines to the session's connection until the stream ends (its end, or
// stream.closed when following), the connection closes, or a read fails (REFUSED); then `end`
// {run_id, next_seq}, unless the connection is gone. `keep` keeps a recovered log's state alive
// while a closed run is read.
boost::asio::awaitable<void> pump_stream(std::shared_ptr<Session> session, StreamReader reader,
                                         std::optional<EventLog> keep, bool follow,
                                         std::optional<std::string> request_id, std::string run_id);

}  // namespace mh::daemon
