// This daemon as a host of a fleet ([fleet], docs/fleet.md): its link to NATS, its lease, the
// sweep that closes a lost host's runs, and the publishing of every local run's stream to the
// fleet after each line is on local disk. The server reaches it only through FleetGate
// (daemon/server/fleet_gate.hpp); the socket requests' fleet side is fleet_requests.hpp.
//
// Threading: every blocking NATS call runs on the fleet's own threads (an io_context of two
// threads that only this class uses, the lease's io_context of two more, and the placement
// thread), never on the daemon's io threads; what they learn about the daemon's runs they ask
// the registry strand for (Server::on_registry). Each run's publisher is a coroutine with a
// StreamReader on the run's events.jsonl (the file is the buffer, as for a `tail --follow`
// reader), on a strand of its own on the fleet's io_context, awaiting each message's ack (one line,
// or the lines written meanwhile: fleet.publish_batch_lines) without holding a thread
// (publish_pipe.hpp); with fleet.serial_publish they all share strand_ and each
// publish blocks it (the publisher before issue 26). A socket request's fleet call (on_fleet)
// runs on the fleet's io_context too, never behind a publish's round trip.
// The lease's renewal and the host-loss sweep have a thread each (lease_io_): a publish waiting
// on a dead leader never delays a renewal (this host's lease would run out), and a long sweep
// never does either. The placement thread pulls specs only while this daemon is below
// runs.max_active.
#pragma once

#include <atomic>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/system/result.hpp>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/fleet/command_relay.hpp"
#include "daemon/fleet/event_publisher.hpp"
#include "daemon/fleet/fleet_link.hpp"
#include "daemon/fleet/lost_host_sweep.hpp"
#include "daemon/fleet/placement.hpp"
#include "daemon/server/fleet_gate.hpp"
#include "daemon/server/server.hpp"

namespace mh::daemon {

class Server;

// A test hook (tests/fleet/fleet_daemon_test.cpp, soak finding 6) that makes the window of a spec
// taken as its host stops deterministic: "fetched_until_stopping" holds every spec the placement
// thread fetches, before it claims it, until the daemon begins to stop (stop_placing);
// "claimed_until_stopped" holds it once claimed (this host's record made) until the fleet stops
// (stop(): the daemon's io threads are gone). Said in the log at start; no production unit sets it.
inline constexpr const char* kHoldOffersEnv = "MH_TEST_FLEET_HOLD_OFFERS";
// A test hook (tests/fleet/fleet_daemon_test.cpp) that makes a failed mark of a run's own close
// deterministic: the first N tries of this host to mark its records closed when its runs end fail
// as if NATS had not answered. Said in the log at start; no production unit sets it.
inline constexpr const char* kFailOwnCloseEnv = "MH_TEST_FLEET_FAIL_OWN_CLOSE";
// A test hook (tests/fleet/fleet_daemon_test.cpp) that makes a fleet submit's failed read of where
// its queued spec was placed deterministic: the first N such reads on this host fail as if NATS had
// not answered. Said in the log at start; no production unit sets it.
inline constexpr const char* kFailPlacementReadEnv = "MH_TEST_FLEET_FAIL_PLACEMENT_READ";
// A test hook (tests/fleet/fleet_daemon_test.cpp) that makes a failed read deterministic where a
// run, once this host's lease lapsed, asks the fleet whether a survivor closed it: the first N
// such reads fail as if NATS had not answered. Said in the log at start; no production unit sets it.
inline constexpr const char* kFailLapseReadEnv = "MH_TEST_FLEET_FAIL_LAPSE_READ";
// A test hook (tests/fleet/fleet_daemon_test.cpp) that makes a survivor's unmarked close
// deterministic: the first N marks of this host's sweep (a lost host's run it found closed) fail
// as if NATS had not taken them. Said in the log at start; no production unit sets it.
inline constexpr const char* kFailSweepMarkEnv = "MH_TEST_FLEET_FAIL_SWEEP_MARK";
// A test hook (tests/fleet/fleet_daemon_test.cpp) that makes a failed read deterministic where
// this host, finding its run's fleet copy closed by another host, reads the run's record: the
// first N such reads fail as if NATS had not answered. Said in the log at start; no production
// unit sets it.
inline constexpr const char* kFailClosedRecordReadEnv = "MH_TEST_FLEET_FAIL_CLOSED_RECORD_READ";
// A test hook (tests/fleet/fleet_daemon_test.cpp) that makes deterministic what JetStream does
// rarely, after its cluster loses and elects again its metadata leader: a tail's consumer that
// lives (its heartbeats arrive) and delivers nothing. The first N followers this host opens for a
// `tail`/`attach` of a fleet run drop every line they are handed. Said in the log at start; no
// production unit sets it.
inline constexpr const char* kDeafFollowersEnv = "MH_TEST_FLEET_DEAF_FOLLOWERS";

class FleetHost final : public FleetGate, public std::enable_shared_from_this<FleetHost> {
 public:
  // Connects and takes the lease (blocking; at start, before the daemon says READY). A refusal
  // names the key and why. The daemon's FleetStarter.
  static boost::system::result<std::shared_ptr<FleetGate>, std::string> start(std::shared_ptr<Server> server);
  ~FleetHost() override;

  // Publishes run `id` from what the fleet already holds of it on (any thread). A run that is
  // published already is left as it is.
  void track(const std::string& id) override;
  // Drops the lease (a clean stop: the survivors need not wait out the TTL) and stops the thread.
  void stop() override;
  // The daemon has begun to stop: no more specs from the queue (any thread, never blocks).
  void stop_placing() override;

  // The socket requests' fleet side (fleet_requests.hpp).
  boost::asio::awaitable<void> submit(Session& s, const SocketRequest& r, const boost::json::object& run) override;
  boost::asio::awaitable<void> list(Session& s, const SocketRequest& r) override;
  boost::asio::awaitable<bool> get(Session& s, const SocketRequest& r) override;
  boost::asio::awaitable<bool> command(Session& s, const SocketRequest& r, std::string_view kind) override;
  boost::asio::awaitable<bool> tail(Session& s, const SocketRequest& r, bool attach) override;
  boost::asio::awaitable<void> attached_line(Session& s, std::string line,
                                             std::optional<std::string> too_long) override;

  // Runs f() (a blocking fleet call) on a fleet thread and resumes the awaiting coroutine, on
  // its own executor, with its result.
  template <class F>
  auto on_fleet(F f) {
    using R = decltype(f());
    auto run_there = [this, f = std::move(f)](auto done) mutable {
      boost::asio::post(io_, [f = std::move(f), done = std::move(done)]() mutable { done(f()); });
    };
    return await_fleet_callback<R>(std::move(run_there));
  }

  const std::string& host_id() const override;
  fleet::FleetLink& link() { return *link_; }
  // Where a submit's queued spec was placed, read for `timeout` (fleet thread): the placing host's
  // launched record, none if no host took it in time, or the read's failure.
  fleet::NatsResult<std::optional<fleet::RunRecord>> await_placement(const std::string& id,
                                                                     std::chrono::milliseconds timeout);
  boost::asio::io_context& io() { return io_; }
  // Whether this host is making run `id` (placed here from the queue: claimed, not yet made or
  // given back). If it is, resumes once the making has ended (true), which a command relayed for
  // the run meanwhile waits for (serve_relayed); false at once if it is not.
  boost::asio::awaitable<bool> until_made(std::string id);
  // kDeafFollowersEnv: whether the follower being opened is to drop what it is handed (any
  // thread; taken once per follower).
  bool take_deaf_follower();

 private:
  FleetHost(std::shared_ptr<Server> server, std::unique_ptr<fleet::FleetLink> link);
  void renew();
  void sweep();
  void placement_loop();
  void place(fleet::SubmitOffer& offer);
  // A spec this host does not make a run of after all: its claim (when `claimed`) let go, then
  // the spec back on the queue at once for another host; `why` goes in the log.
  void hand_back(fleet::SubmitOffer& offer, bool claimed, const std::string& why);
  // The test hook (kHoldOffersEnv): holds a spec at `point` when the hook says so.
  enum class HoldPoint { fetched, claimed };
  void hold_offer(const fleet::SubmitOffer& offer, HoldPoint point);
  // Wakes whatever waits on wake_ (a flag it waits for has just been set).
  void wake_waiters();
  template <class T, class Initiate>
  static auto await_fleet_callback(Initiate initiate);
  static boost::asio::awaitable<void> publish_run(std::shared_ptr<FleetHost> self, std::string id);
  // Run `id`'s record marked closed by `closer` ("": this host's own close, its stream.closed
  // published by this host), tried again until it is, a record moved by another host says
  // otherwise (closed already), or the fleet stops. True when this host's write marked it.
  static boost::asio::awaitable<bool> mark_closed(std::shared_ptr<FleetHost> self, std::string id, std::string closer);
  // Another host closed this host's run `id` in the fleet while this host was away (`fleet_tail`:
  // the fleet's last line, its stream.closed): said in the run's own stream, naming the closer,
  // and the run's record marked closed by that closer when the survivor's own mark was not taken
  // (the sweep looks only at lost hosts' runs, and this host is back). Reads tried again until
  // they work, or the fleet stops.
  static boost::asio::awaitable<void> closed_elsewhere(std::shared_ptr<FleetHost> self, std::string id,
                                                       fleet::FleetStreamTail fleet_tail);

  std::weak_ptr<Server> server_;
  std::unique_ptr<fleet::FleetLink> link_;
  boost::asio::io_context io_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  // The runs being published: taken on strand_ (track, the stop's drain), let go by each run's
  // publisher as it ends, on its own strand: hence the lock.
  std::mutex publishing_mu_;
  std::set<std::string> publishing_;  // publishing_mu_
  std::vector<std::thread> threads_;
  fleet::LostHostSweep lease_;
  boost::asio::io_context lease_io_;
  boost::asio::steady_timer renew_timer_, sweep_timer_;  // lease_io_, one handler each at a time
  std::vector<std::thread> lease_threads_;
  std::thread placement_;
  std::unique_ptr<fleet::CommandServer> commands_;  // <prefix>.cmd.<host>
  std::atomic<bool> stopped_{false};
  // The daemon has begun to stop (stop_placing): set before it stops accepting runs.
  std::atomic<bool> placing_stopped_{false};
  // Where the placement thread waits for one of the two flags above.
  std::mutex wake_mu_;
  std::condition_variable wake_;
  // A test hook, from the environment at start (kHoldOffersEnv): never set in production.
  enum class HoldOffers { no, fetched_until_stopping, claimed_until_stopped, claimed_until_file };
  HoldOffers hold_offers_ = HoldOffers::no;
  std::string hold_until_file_;  // claimed_until_file: the file whose existence ends the hold
  // The runs this host is making (place(): from before its claim until it returns, made or not),
  // each with what waits for that end (until_made).
  class Making;
  std::mutex making_mu_;
  std::map<std::string, std::vector<std::function<void(bool)>>> making_;  // making_mu_
  std::atomic<int> fail_own_close_{0};           // kFailOwnCloseEnv: own-close tries of mark_closed left to fail
  std::atomic<int> fail_placement_read_{0};      // kFailPlacementReadEnv: placement reads left to fail
  std::atomic<int> fail_lapse_read_{0};          // kFailLapseReadEnv: reads after a lapse left to fail
  std::atomic<int> deaf_followers_{0};           // kDeafFollowersEnv: followers left to open deaf
  std::atomic<int> fail_closed_record_read_{0};  // kFailClosedRecordReadEnv: record reads left to fail
  // How often this host's lease ran out and was taken again: an idle publisher that sees it move
  // looks whether its run was closed in the fleet meanwhile, before the run writes another line.
  std::atomic<std::uint64_t> lapses_{0};
};

template <class T, class Initiate>
auto FleetHost::await_fleet_callback(Initiate initiate) {
  return await_callback<T>(std::move(initiate));
}

}  // namespace mh::daemon
