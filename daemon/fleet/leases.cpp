#include "daemon/fleet/leases.hpp"

#include <chrono>

#include "daemon/fleet/event_publisher.hpp"
#include "protocol/events.hpp"
#include "protocol/json.hpp"
#include "protocol/time_text.hpp"

namespace mh::fleet {

namespace {

std::string now_text() {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch());
  return protocol::rfc3339_millis(ms.count()).value_or("");
}

std::string line_of(const std::string& run_id, std::uint64_t seq, protocol::EventPayload payload) {
  protocol::Event e;
  e.seq = seq;
  e.run = run_id;
  e.payload = std::move(payload);
  e.recorded_at = now_text();
  return protocol::serialize(e);
}

constexpr std::string_view kClosedBy = "; its run was closed by host ";

}  // namespace

std::string host_lost_closer(std::string_view line) {
  auto value = protocol::parse_json(line);
  if (!value || !value->is_object()) return "";
  const auto& object = value->as_object();
  if (protocol::string_at(object, "event").value_or("") != "warning") return "";
  if (protocol::string_at(object, "code").value_or("") != "HOST_LOST") return "";
  std::string message = protocol::string_at(object, "message").value_or("");
  auto at = message.find(kClosedBy);
  if (at == std::string::npos) return "";
  std::string host = message.substr(at + kClosedBy.size());
  return host_id_problem(host).empty() ? host : "";
}

NatsResult<void> renew_lease(FleetLink& link, const std::string& host, const std::string& info) {
  uint64_t rev = 0;
  natsStatus s = kvStore_Put(&rev, link.sweep_hosts(), host.c_str(), info.data(), static_cast<int>(info.size()));
  if (s != NATS_OK) return nats_error("renewing the lease of " + host, s);
  return {};
}

NatsResult<void> drop_lease(FleetLink& link, const std::string& host) {
  // A purge, not a delete marker: the key is gone at once, as an expired one is.
  if (natsStatus s = kvStore_Purge(link.hosts(), host.c_str(), nullptr); s != NATS_OK)
    return nats_error("dropping the lease of " + host, s);
  return {};
}

NatsResult<std::set<std::string>> live_hosts(FleetLink& link) {
  std::set<std::string> out;
  KeysList keys;
  natsStatus s = kvStore_Keys(keys.get(), link.hosts(), nullptr);
  if (s == NATS_NOT_FOUND) return out;
  if (s != NATS_OK) return nats_error("listing leases", s);
  for (int i = 0; i < keys.size(); ++i)
    out.insert(keys.at(i));
  return out;
}

NatsResult<bool> holds_lease(FleetLink& link, const std::string& host) {
  if (!host_id_problem(host).empty()) return false;
  const std::string bucket = link.names().hosts_bucket();
  const std::string stream = "KV_" + bucket, subject = "$KV." + bucket + "." + host;
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_GetLastMsg(&raw, link.sweep_js(), stream.c_str(), subject.c_str(), nullptr, &code);
  MsgHandle msg(raw);
  if (s == NATS_NOT_FOUND) return false;  // expired (the bucket's max age), or never taken
  if (s != NATS_OK) return nats_error("the lease of " + host, s, code);
  // A dropped lease leaves a purge marker as the key's last message.
  const char* op = nullptr;
  if (natsMsgHeader_Get(msg.get(), "KV-Operation", &op) == NATS_OK && op != nullptr) return false;
  return true;
}

NatsResult<ClosedRun> close_run_in_fleet(FleetLink& link, const std::string& run_id, const std::string& lost_host,
                                         const std::string& closer) {
  ClosedRun out{run_id, lost_host, 0, ""};
  // A few rounds at most: each refused or deduplicated publish means a line landed meanwhile
  // (the lost host's last words still in flight, or another survivor's close); we read the new
  // end and go on after it.
  for (int round = 0; round < 8; ++round) {
    auto publisher = RunPublisher::resume(link, run_id, Wait::sweep);
    if (!publisher) return publisher.error();
    const FleetStreamTail tail = publisher->tail();
    if (tail.last_event == "stream.closed") {
      out.closed_seq = tail.last_seq;
      return out;
    }
    // The seq of the HOST_LOST warning: the tail's own line when it is one (an earlier half-done
    // close, ours or another's: only stream.closed is missing), else the line we write next.
    std::uint64_t warning_seq = tail.last_seq;
    if (std::string named = host_lost_closer(tail.last_line); !named.empty()) {
      out.closer = named;
    } else {
      warning_seq = tail.last_seq + 1;
      auto warning = line_of(run_id, warning_seq,
                             protocol::ev::Warning{"HOST_LOST", "host " + lost_host + " lost its fleet lease" +
                                                                    std::string(kClosedBy) + closer});
      auto sent = publisher->publish(warning_seq, warning);
      if (!sent) return sent.error();
      if (*sent != RunPublisher::Outcome::published) continue;  // someone's line is at that seq: read it
      out.closer = closer;
    }
    protocol::ev::StreamClosed closed;
    closed.events = warning_seq;
    closed.reason = protocol::CloseReason::error;
    closed.run_id = run_id;
    closed.failure = protocol::ev::RunFailure{"daemon", true, "HOST_LOST: host " + lost_host + " lost its fleet lease"};
    auto sent = publisher->publish(warning_seq + 1, line_of(run_id, warning_seq + 1, closed));
    if (!sent) return sent.error();
    if (*sent != RunPublisher::Outcome::published) continue;
    out.closed_seq = warning_seq + 1;
    return out;
  }
  return nats_error("closing " + run_id + ": its subject kept moving", NATS_ERR);
}

}  // namespace mh::fleet
