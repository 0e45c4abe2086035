// What every client of a run does the same way, over the socket or over HTTP (the viewer): who
// may command it, handing it a command and awaiting its one result, that result as reply fields,
// and opening its stream for a reader (live, or recovered from disk for a run closed before
// this process).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <memory>
#include <optional>
#include <string>

#include "daemon/config/config.hpp"
#include "daemon/server/registry.hpp"
#include "daemon/stream/event_log.hpp"
#include "protocol/json.hpp"

namespace mh::daemon {

// admin commands every run; control only the runs its uid submitted.
bool may_control(Role role, std::uint32_t uid, const RunEntry& run);

struct DeliveredResult {
  protocol::ev::CommandResult result;
  bool recorded = false;  // it is the command.result in the stream
};
// Hands `command` to the run and resumes with its result: the one recorded in the stream, or
// TOO_LATE (not recorded) for a run that has closed.
boost::asio::awaitable<DeliveredResult> deliver_command(const RunEntry& run, protocol::Command command,
                                                        std::optional<protocol::PeerIdentity> peer);
// {command_id, outcome, recorded}: a `result` reply's fields.
boost::json::object result_fields(const protocol::ev::CommandResult& result, bool recorded);
// The calls waiting for a decision, each {call_id, requested_seq, remaining_ms} (none for a run
// that has closed: `run` null).
boost::asio::awaitable<boost::json::array> pending_calls_json(std::shared_ptr<Run> run);

// A run's stream for a reader. `keep` holds a recovered log's state while it is read.
struct OpenedStream {
  std::shared_ptr<SharedStreamState> shared;
  std::optional<EventLog> keep;
};
boost::system::result<OpenedStream, std::string> open_stream(const RunEntry& run);

}  // namespace mh::daemon
