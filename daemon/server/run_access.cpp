#include "daemon/server/run_access.hpp"

#include "daemon/run/run_dir.hpp"
#include "daemon/server/server.hpp"

namespace mh::daemon {

bool may_control(Role role, std::uint32_t uid, const RunEntry& run) {
  if (role == Role::admin) return true;
  return role >= Role::control && run.owner_uid == uid;
}

boost::asio::awaitable<json::array> pending_calls_json(std::shared_ptr<Run> run) {
  json::array out;
  if (!run) co_return out;
  auto ask = [run](auto done) { run->pending_calls(done); };
  auto calls = co_await await_callback<std::vector<PendingCallView>>(std::move(ask));
  for (const auto& call : calls) {
    json::object p;
    p["call_id"] = call.call_id;
    p["requested_seq"] = call.requested_seq;
    p["remaining_ms"] = call.remaining_ms;
    out.push_back(std::move(p));
  }
  co_return out;
}

boost::asio::awaitable<DeliveredResult> deliver_command(const RunEntry& run, protocol::Command command,
                                                        std::optional<protocol::PeerIdentity> peer) {
  if (!run.run)
    co_return DeliveredResult{
        protocol::ev::CommandResult{
            command.id, protocol::CommandOutcome::refused(protocol::RefusalCode::TOO_LATE, "the run has closed")},
        false};
  auto handle = run.run;
  auto send = [handle, command = std::move(command), peer](auto done) mutable {
    handle->command(std::move(command), peer, [done](const protocol::ev::CommandResult& result, bool recorded) {
      done(DeliveredResult{result, recorded});
    });
  };
  co_return co_await await_callback<DeliveredResult>(std::move(send));
}

boost::json::object result_fields(const protocol::ev::CommandResult& result, bool recorded) {
  std::string outcome;
  protocol::JsonWriter w(outcome);
  protocol::write_outcome(w, result.outcome);
  boost::json::object fields;
  fields["command_id"] = result.id;
  fields["outcome"] = protocol::parse_json(outcome).value_or(nullptr);
  fields["recorded"] = recorded;
  return fields;
}

boost::system::result<OpenedStream, std::string> open_stream(const RunEntry& run) {
  using Result = boost::system::result<OpenedStream, std::string>;
  if (run.stream) return OpenedStream{run.stream, std::nullopt};
  auto recovered = EventLog::recover(RunDir(run.dir).events(), run.id);
  if (!recovered) return Result(boost::system::in_place_error, "cannot read run " + run.id + ": " + recovered.error());
  OpenedStream opened{recovered->log.shared(), std::nullopt};
  opened.keep.emplace(std::move(recovered->log));
  return opened;
}

}  // namespace mh::daemon
