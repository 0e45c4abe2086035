// Asynchronous JetStream publishes for every run of one host (issue 26 section 5): one JetStream
// context whose acks come back on libnats' reply thread and are handed, by message id, to the
// callback its publish left. Each run keeps ONE message in flight (its next message carries the
// expected last subject sequence that only the previous message's ack tells), so a run's order
// and the fence of event_publisher.hpp hold; what is pipelined is the runs: all their messages
// are in flight at once, and none waits for another's round trip. A message holds one line or
// several (fleet.publish_batch_lines): the lines a run wrote while its previous message was in
// flight, so a chatty run is not held to one line per round trip.
//
// Why batches and not a window of messages within a run: nats-server 2.9 checks Nats-Expected-Last-Subject-Sequence
// against the stream sequence of the subject's last stored message, which a line still in flight
// does not have yet; a window's later lines would go unchecked, and one of them could land after
// an earlier line that failed (a leader change drops in-flight proposals), or after a survivor's
// stream.closed. A batch is one message: it lands whole, fenced, or not at all. docs/fleet.md,
// Publishing.
//
// Threading: send() from any thread, never blocking (no MaxPending stall: the in-flight count is
// bounded by the runs, one each); a callback runs on libnats' reply thread, and must only hand
// its result on (post it to an executor).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "daemon/fleet/nats_handles.hpp"

namespace mh::fleet {

// What came back for one publish: an ack (sequence, duplicate) or a failure (a timeout, the
// server's refusal with its JetStream code, the connection's error).
struct PublishAck {
  natsStatus status = NATS_OK;
  jsErrCode js = static_cast<jsErrCode>(0);
  std::string text;
  std::uint64_t sequence = 0;
  bool duplicate = false;
};

class PublishPipe {
 public:
  using Done = std::function<void(PublishAck)>;

  // A context on `nc`, its acks awaited at most `max_wait` each.
  static NatsResult<std::unique_ptr<PublishPipe>> open(natsConnection* nc, std::chrono::milliseconds max_wait);
  ~PublishPipe();
  PublishPipe(const PublishPipe&) = delete;
  PublishPipe& operator=(const PublishPipe&) = delete;

  // Publishes `data` to `subject` with message id `msg_id` (unique among those in flight) and
  // `expect` (its expectations; its MsgId and MaxWait are set here). `done` gets the ack or the
  // failure exactly once, unless this call returns an error (then never).
  NatsResult<void> send(const std::string& subject, const std::string& msg_id, std::string_view data,
                        jsPubOptions expect, Done done);

  // Forgets every publish in flight: their callbacks are destroyed uncalled, their acks ignored
  // (a host stopping, whose publishers' executor has stopped).
  void abandon();

  // How many publishes were in flight at most at once (the pipelining a test and the bench see).
  std::size_t most_in_flight() const;

 private:
  PublishPipe() = default;
  static void on_ack(jsCtx* js, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure);

  std::chrono::milliseconds max_wait_{0};
  mutable std::mutex mu_;
  std::map<std::string, Done, std::less<>> waiting_;  // mu_: by message id
  std::size_t most_ = 0;                              // mu_
  JsHandle js_;
};

}  // namespace mh::fleet
