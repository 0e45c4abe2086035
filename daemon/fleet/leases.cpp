#include "daemon/fleet/leases.hpp"

#include <chrono>

#include "daemon/fleet/event_publisher.hpp"
#include "protocol/events.hpp"
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

}  // namespace

NatsResult<void> renew_lease(FleetLink& link, const std::string& host, const std::string& info) {
  uint64_t rev = 0;
  natsStatus s = kvStore_Put(&rev, link.hosts(), host.c_str(), info.data(), static_cast<int>(info.size()));
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

NatsResult<ClosedRun> close_run_in_fleet(FleetLink& link, const std::string& run_id, const std::string& lost_host,
                                         const std::string& closer) {
  // A few rounds at most: each refused publish means a line landed meanwhile (the lost host's
  // last words, still in flight); we read the new end and close after it.
  for (int round = 0; round < 8; ++round) {
    auto publisher = RunPublisher::resume(link, run_id);
    if (!publisher) return publisher.error();
    const FleetStreamTail tail = publisher->tail();
    if (tail.last_event == "stream.closed") return ClosedRun{run_id, lost_host, tail.last_seq};
    std::uint64_t seq = tail.last_seq;
    // After a warning of our own (an earlier half-done close), only stream.closed is missing.
    bool warned = tail.last_event == "warning" && tail.last_line.find("\"HOST_LOST\"") != std::string::npos;
    if (!warned) {
      auto warning = line_of(
          run_id, seq + 1,
          protocol::ev::Warning{"HOST_LOST",
                                "host " + lost_host + " lost its fleet lease; its run was closed by host " + closer});
      auto sent = publisher->publish(seq + 1, warning);
      if (!sent) return sent.error();
      if (*sent == RunPublisher::Outcome::superseded) continue;
      ++seq;
    }
    protocol::ev::StreamClosed closed;
    closed.events = seq;
    closed.reason = protocol::CloseReason::error;
    closed.run_id = run_id;
    auto sent = publisher->publish(seq + 1, line_of(run_id, seq + 1, closed));
    if (!sent) return sent.error();
    if (*sent == RunPublisher::Outcome::superseded) continue;
    return ClosedRun{run_id, lost_host, seq + 1};
  }
  return nats_error("closing " + run_id + ": its subject kept moving", NATS_ERR);
}

NatsResult<std::vector<ClosedRun>> close_lost_runs(FleetLink& link, const std::string& self) {
  std::vector<ClosedRun> out;
  auto live = live_hosts(link);
  if (!live) return live.error();
  // Without our own lease we are the lost one, not a judge of the others.
  if (!live->count(self)) return out;
  auto records = list_run_records(link);
  if (!records) return records.error();
  for (auto& record : *records) {
    if (record.state == "closed" || live->count(record.host)) continue;
    // A close claimed by a survivor that is itself gone is claimed again.
    if (record.state == "closing" && live->count(record.closed_by)) continue;
    RunRecord claim = record;
    claim.state = "closing";
    claim.closed_by = self;
    auto won = update_run_record(link, claim);
    if (!won) return won.error();
    if (*won == Claim::lost) continue;
    auto closed = close_run_in_fleet(link, record.run_id, record.host, self);
    if (!closed) return closed.error();
    auto now = read_run_record(link, record.run_id);
    if (!now) return now.error();
    if (*now) {
      RunRecord done = **now;
      done.state = "closed";
      if (auto marked = update_run_record(link, done); !marked) return marked.error();
    }
    out.push_back(*closed);
  }
  return out;
}

}  // namespace mh::fleet
