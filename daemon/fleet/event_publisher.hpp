// One run's stream in the fleet: its event lines, published to <prefix>.events.<run> in the
// events stream after they are on local disk, each with the message id <run>:<seq> (the
// server's dedup window drops a retry) and the expected last sequence of the subject (so a line
// can never land after someone else's line — a survivor's close of a lost host's run, or a
// second publisher of the same run). The body is the line byte for byte, without its newline;
// or several consecutive lines of the run, '\n' between them (fleet.publish_batch_lines: what a
// chatty run wrote while its previous message was in flight), which every reader splits
// (fleet_reader.hpp, fleet_stream_tail).
//
// Threading: blocking calls (bounded by the link's request_timeout), on the fleet thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/fleet/fleet_link.hpp"

namespace mh::fleet {

// What the fleet's copy of one run's stream ends with.
struct FleetStreamTail {
  std::uint64_t last_seq = 0;     // the run's seq of its last line in the fleet (0: none yet)
  std::uint64_t subject_seq = 0;  // that line's sequence in the events stream
  std::string last_event;         // its event name ("stream.closed": the stream is over)
  std::string last_line;          // the line itself
};

// How long one call waits: request_timeout, or (the host-loss sweep) the link's sweep_timeout.
enum class Wait { request, sweep };

// The last line of the run's subject, read from the stream (no consumer): the resume point.
NatsResult<FleetStreamTail> fleet_stream_tail(FleetLink& link, std::string_view run_id, Wait wait = Wait::request);

class RunPublisher {
 public:
  enum class Outcome {
    published,   // this line is now in the fleet
    duplicate,   // it was already (a retry, or a restart that published it before)
    superseded,  // the subject moved on without us: someone else closed this run
  };

  // Resumes from what the fleet holds: the next line to publish is tail().last_seq + 1.
  static NatsResult<RunPublisher> resume(FleetLink& link, std::string run_id, Wait wait = Wait::request);

  // Publishes line `seq` (which must be tail().last_seq + 1 for `published`; a seq at or below
  // it is answered `duplicate` by the server's dedup window if it is the same message id).
  // A failure (a timeout, no route) is an error: retrying the same call is safe.
  NatsResult<Outcome> publish(std::uint64_t seq, std::string_view line);

  // Lines first..last of the run without waiting (publish_pipe.hpp), in ONE message: `lines` is
  // them as they are in events.jsonl, '\n' between them, none after the last (a message of one
  // line is that line, as publish() sends it). Its message id is <run>:<first> for one line and
  // <run>:<first>-<last> for several, the same on every retry of the same lines, so the dedup
  // window drops a retry. `done` gets what came back, to be handed to settle() on the
  // publisher's own executor; the next message is sent only after that (its expected last
  // subject sequence is this message's ack). An error: nothing was sent (done is never called);
  // retrying is safe. Outcome::duplicate at once (nullopt otherwise) when the fleet already
  // holds `last`.
  NatsResult<std::optional<Outcome>> send(std::uint64_t first, std::uint64_t last, std::string_view lines,
                                          PublishPipe::Done done);
  // What the ack (or failure) of lines first..last means, as publish() would have answered; the
  // tail follows. Blocking (a read of the subject's tail) only after a wrong-last-sequence refusal.
  NatsResult<Outcome> settle(std::uint64_t first, std::uint64_t last, std::string_view lines, const PublishAck& ack);

  const FleetStreamTail& tail() const { return tail_; }
  const std::string& run_id() const { return run_id_; }
  FleetLink& link() const { return *link_; }

 private:
  RunPublisher(FleetLink& link, std::string run_id, FleetStreamTail tail, Wait wait)
      : link_(&link),
        wait_(wait),
        run_id_(std::move(run_id)),
        subject_(link.names().events_subject(run_id_)),
        tail_(tail) {}

  jsPubOptions expectations() const;

  FleetLink* link_;
  Wait wait_;
  std::string run_id_;
  std::string subject_;
  FleetStreamTail tail_;
};

}  // namespace mh::fleet
