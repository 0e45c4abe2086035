// Reading one run's stream from the fleet, from any host: an ordered consumer (libnats makes
// and remakes it, no gap, no duplicate) filtered on the run's subject, from the first line;
// lines before the wanted seq are skipped. Each line is the owner's byte for byte; a message of
// several lines (fleet.publish_batch_lines) is handed on line by line, in order.
//
// Threading: next() blocks (bounded by its wait): fleet thread, or a client process.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "daemon/fleet/fleet_link.hpp"

namespace mh::fleet {

struct FleetLine {
  std::string line;  // without its newline
  std::uint64_t seq = 0;
  bool closed = false;  // it is stream.closed: nothing follows
  // The events stream's own sequence of the message that held it (the server's, which no host
  // can forge; 0 where unknown). A follower sets it.
  std::uint64_t stream_seq = 0;
};

class FleetStreamReader {
 public:
  static NatsResult<FleetStreamReader> open(FleetLink& link, const std::string& run_id, std::uint64_t from_seq);
  // The next line at or after from_seq, or nullopt when none came within `wait`.
  NatsResult<std::optional<FleetLine>> next(std::chrono::milliseconds wait);

 private:
  FleetStreamReader(SubscriptionHandle sub, std::uint64_t from) : sub_(std::move(sub)), from_(from) {}
  SubscriptionHandle sub_;
  std::uint64_t from_;
  std::deque<FleetLine> pending_;  // the rest of a message of several lines
};

// The same ordered consumer, pushed: each line is handed, in order, to `on_line` on `executor`
// (a strand: libnats delivers on its own thread, and nothing of ours runs there). For a socket
// `tail --fleet`, whose pump sends what it is handed. Stops when destroyed.
class FleetStreamFollower {
 public:
  using OnLine = std::function<void(FleetLine)>;
  // `deaf`: a test hook's (kDeafFollowersEnv): the consumer lives and nothing it delivers is
  // taken, as a consumer JetStream orphaned (nothing counted, nothing handed on).
  static NatsResult<std::unique_ptr<FleetStreamFollower>> open(FleetLink& link, const std::string& run_id,
                                                               std::uint64_t from_seq,
                                                               boost::asio::any_io_executor executor, OnLine on_line,
                                                               bool deaf = false);
  ~FleetStreamFollower();
  FleetStreamFollower(const FleetStreamFollower&) = delete;
  FleetStreamFollower& operator=(const FleetStreamFollower&) = delete;

  // How many messages the consumer has delivered, those before from_seq too (any thread): a
  // follower catching up through a long run hands on nothing for a while and is not silent.
  std::uint64_t messages_received() const;
  // The events stream's sequence of the last message delivered (0: none yet; any thread): a
  // follower is behind the fleet only while the stream holds a later message for the run.
  std::uint64_t last_stream_seq() const;

  struct State;

 private:
  FleetStreamFollower(SubscriptionHandle sub, const State* state) : sub_(std::move(sub)), state_(state) {}
  SubscriptionHandle sub_;
  const State* state_;  // libnats' until the subscription completes, which the destructor's unsubscribe begins
};

}  // namespace mh::fleet
