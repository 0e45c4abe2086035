#include "daemon/fleet/fleet_host.hpp"

#include <unistd.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json/serialize.hpp>
#include <cstdlib>
#include <future>

#include "daemon/fleet/event_publisher.hpp"
#include "daemon/fleet/fleet_reader.hpp"
#include "daemon/fleet/fleet_requests.hpp"
#include "daemon/fleet/leases.hpp"
#include "daemon/fleet/run_records.hpp"
#include "daemon/log.hpp"
#include "daemon/run/disk_floor.hpp"
#include "daemon/run/run.hpp"
#include "daemon/run/run_dir.hpp"
#include "daemon/server/requests.hpp"
#include "daemon/server/run_access.hpp"
#include "daemon/server/server.hpp"
#include "daemon/stream/stream_reader.hpp"
#include "protocol/json.hpp"

namespace mh::daemon {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// A failure-count test hook (kFailOwnCloseEnv, kFailPlacementReadEnv, kFailLapseReadEnv, ...): its
// count from the environment, said in the log (`fails`: what its failures are).
void read_failure_hook(const char* env, std::atomic<int>& left, const std::string& fails) {
  const char* value = std::getenv(env);
  if (!value || !*value) return;
  left = std::max(std::atoi(value), 0);
  log(LogPriority::warning, std::string("fleet: test hook ") + env + "=" + value + ": the first " +
                                std::to_string(left.load()) + " " + fails + " fail; for tests only");
}

// Whether a failure-count test hook has a failure left, taking it.
bool take_hook_failure(std::atomic<int>& left) {
  int n = left.load();
  while (n > 0 && !left.compare_exchange_weak(n, n - 1)) {
  }
  return n > 0;
}

// What a failure a test hook made reads as: a NATS that did not answer.
fleet::NatsError hook_failure(const char* env) {
  return fleet::NatsError{.status = NATS_TIMEOUT, .text = "the test hook " + std::string(env) + " failed it"};
}

// Whether the fleet's last line of a run (`fleet_line`, at `seq`, a stream.closed) is this host's
// own line at that seq, byte for byte: the run's own close, published by this host. A survivor's
// close (a HOST_LOST warning and its own stream.closed) is other bytes at its seqs.
bool fleet_close_is_this_hosts(const OpenedStream& local, std::uint64_t seq, std::string_view fleet_line,
                               const asio::any_io_executor& executor) {
  auto here = StreamReader::open(local.shared, executor, ReaderStart::at_seq(seq));
  if (!here) return false;
  auto batch = here->read_some();
  if (!batch || batch->count == 0 || batch->first_seq != seq) return false;
  return batch->bytes.substr(0, batch->bytes.find('\n')) == fleet_line;
}

// How long reading the fleet's line before a survivor's stream.closed waits for it (it is there:
// the close was read after it).
constexpr std::chrono::seconds kCloserReadWait{5};

// The closer a survivor's HOST_LOST warning names: the fleet's line just before its stream.closed
// at `closed_seq` ("" when that line is not one, as in a close the sweep found whole and nobody
// named: nobody to name).
fleet::NatsResult<std::string> closer_before(fleet::FleetLink& link, const std::string& id, std::uint64_t closed_seq) {
  if (closed_seq < 2) return std::string();
  auto reader = fleet::FleetStreamReader::open(link, id, closed_seq - 1);
  if (!reader) return reader.error();
  auto line = reader->next(kCloserReadWait);
  if (!line) return line.error();
  if (!*line)
    return fleet::NatsError{.status = NATS_TIMEOUT,
                            .text = "no line at seq " + std::to_string(closed_seq - 1) + " came within " +
                                    std::to_string(kCloserReadWait.count()) + " s"};
  if ((*line)->seq != closed_seq - 1) return std::string();
  return fleet::host_lost_closer((*line)->line);
}

// How long a publisher waits before it tries a refused or failed publish again (NATS away, a
// leader election): a pause between retries, not a synchronisation.
constexpr std::chrono::milliseconds kRetryPause{500};
// How long a host whose disk is full waits before it looks again (statvfs, no NATS traffic): a
// pause between looks, not a synchronisation.
constexpr std::chrono::milliseconds kDiskFullPause{500};
// How long a stop waits for the publishers to send what is on disk.
constexpr std::chrono::seconds kStopDrain{3};

asio::awaitable<void> pause(std::chrono::milliseconds d) {
  asio::steady_timer timer(co_await asio::this_coro::executor, d);
  boost::system::error_code ec;
  co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
}

std::string lease_info(const fleet::FleetConfig& config) {
  json::object o;
  o["host"] = config.host_id;
  o["pid"] = ::getpid();
  return boost::json::serialize(o);
}

// What another executor promised, unless the fleet stops first (the daemon's io threads may be
// gone by then, and nothing would ever keep the promise).
template <class T>
std::optional<T> wait_unless(const std::atomic<bool>& stopped, const std::shared_ptr<std::promise<T>>& promised) {
  auto future = promised->get_future();
  while (future.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready)
    if (stopped) return std::nullopt;
  return future.get();
}

// This host's run was closed in the fleet by another host while this host was away (its lease
// ran out: a partition, a stop): said in the daemon's log and, while the run is open, in its own
// stream — a warning, so that the stream on this host says why the fleet's copy ends where it
// does. Nothing of the run is published after the survivor's stream.closed.
asio::awaitable<void> say_closed_elsewhere(std::shared_ptr<Server> server, std::string id, std::string closer,
                                           std::uint64_t fleet_seq) {
  const std::string message = "this host lost its fleet lease while the run was open; " +
                              (closer.empty() ? std::string("another host") : "host " + closer) +
                              " closed it in the fleet (stream.closed at seq " + std::to_string(fleet_seq) +
                              " there): what this host writes of it stays on this host only";
  log(LogPriority::warning, "fleet: run " + id + ": " + message);
  auto find = [server, id] { return server->registry.lookup(id); };
  std::optional<RunEntry> entry = co_await server->on_registry(std::move(find));
  if (entry && entry->run) entry->run->host_warning("HOST_LOST_RETURNED", message);
}

// Lines first..last of the run published (`lines`: them as in events.jsonl, without the last
// newline): blocking (fleet.serial_publish, always one line) or sent as one message and its ack
// awaited without holding the thread (publish_pipe.hpp); either way the same outcome.
asio::awaitable<fleet::NatsResult<fleet::RunPublisher::Outcome>> publish_lines(fleet::RunPublisher& publisher,
                                                                               std::uint64_t first, std::uint64_t last,
                                                                               std::string_view lines) {
  if (publisher.link().config().serial_publish) co_return publisher.publish(first, lines);
  std::optional<fleet::NatsError> refused;
  std::optional<fleet::RunPublisher::Outcome> at_once;
  fleet::PublishAck ack = co_await await_callback<fleet::PublishAck>([&](auto done) {
    auto sent = publisher.send(first, last, lines, [done](fleet::PublishAck a) mutable { done(std::move(a)); });
    if (!sent || *sent) {  // nothing in flight: resumed at once
      if (!sent)
        refused = sent.error();
      else
        at_once = **sent;
      done(fleet::PublishAck{});
    }
  });
  if (refused) co_return *refused;
  if (at_once) co_return *at_once;
  co_return publisher.settle(first, last, lines, ack);
}

// How many bytes of lines go in one message at most: a quarter of NATS' default max_payload
// (1 MiB), and never above the server's own less its headers' room. A line longer than this goes
// alone, as every line did before batches.
constexpr std::size_t kBatchBytes = 256 * 1024;
std::size_t batch_bytes(const fleet::FleetLink& link) {
  const std::int64_t room = link.max_payload() - 4096;
  return room > 0 ? std::min(kBatchBytes, static_cast<std::size_t>(room)) : 0;
}

// The next message of a run: the first line of `bytes` and those after it, up to `max_lines`
// lines and `max_bytes` (at least one line). Returns how many lines; `message` is them without
// the last newline.
std::uint64_t next_message(std::string_view bytes, int max_lines, std::size_t max_bytes, std::string_view& message) {
  std::size_t end = bytes.find('\n');
  std::uint64_t count = 1;
  while (count < static_cast<std::uint64_t>(max_lines) && end + 1 < bytes.size()) {
    std::size_t next = bytes.find('\n', end + 1);
    if (next == std::string_view::npos || next > max_bytes) break;
    end = next;
    ++count;
  }
  message = bytes.substr(0, end);
  return count;
}

}  // namespace

FleetHost::FleetHost(std::shared_ptr<Server> server, std::unique_ptr<fleet::FleetLink> link)
    : server_(server),
      link_(std::move(link)),
      strand_(io_.get_executor()),
      lease_(*link_, link_->config().host_id),
      renew_timer_(lease_io_),
      sweep_timer_(lease_io_) {}

FleetHost::~FleetHost() {
  stop();
}

const std::string& FleetHost::host_id() const {
  return link_->config().host_id;
}

bool FleetHost::take_deaf_follower() {
  return take_hook_failure(deaf_followers_);
}

fleet::NatsResult<std::optional<fleet::RunRecord>> FleetHost::await_placement(const std::string& id,
                                                                              std::chrono::milliseconds timeout) {
  if (take_hook_failure(fail_placement_read_)) return hook_failure(kFailPlacementReadEnv);
  return fleet::await_run_record(*link_, id, timeout);
}

boost::system::result<std::shared_ptr<FleetGate>, std::string> FleetHost::start(std::shared_ptr<Server> server) {
  using Result = boost::system::result<std::shared_ptr<FleetGate>, std::string>;
  fleet::FleetConfig config = *server->config.fleet;
  // The fleet's request ids are kept as long as this host's own (runs.request_id_retention_s).
  config.request_id_retention = server->config.request_id_retention;
  // Said at every start, whatever else the log says: this fleet trusts anyone who reaches NATS.
  if (config.insecure_no_credentials)
    log(LogPriority::warning,
        "fleet: INSECURE: fleet.insecure_no_credentials = true: NATS is joined without credentials, so anything that "
        "reaches " +
            config.nats_urls.front() +
            " (a run's own tool calls among them) can submit runs, read every run's events and forge commands and "
            "halts. For a test cluster on loopback only; set fleet.credentials (docs/fleet.md, Trust)");
  auto link = fleet::FleetLink::connect(config, [](const fleet::NatsError& why) {
    log(LogPriority::notice, "fleet: JetStream is not ready yet (" + why.text + "); waiting");
  });
  // Refused by the key whose value is at fault: the credentials the server turned down, else the
  // servers themselves (unreachable, or no JetStream).
  if (!link) {
    const std::string key = link.error().key.empty() ? "fleet.nats_urls" : link.error().key;
    return Result(boost::system::in_place_error, key + ": " + link.error().text);
  }
  std::shared_ptr<FleetHost> host(new FleetHost(server, std::move(*link)));
  if (const char* hold = std::getenv(kHoldOffersEnv); hold && *hold) {
    const std::string mode(hold);
    constexpr std::string_view kUntilFile = "claimed_until_file:";
    host->hold_offers_ = mode == "fetched_until_stopping"  ? HoldOffers::fetched_until_stopping
                         : mode == "claimed_until_stopped" ? HoldOffers::claimed_until_stopped
                         : mode.starts_with(kUntilFile) && mode.size() > kUntilFile.size()
                             ? HoldOffers::claimed_until_file
                             : HoldOffers::no;
    if (host->hold_offers_ == HoldOffers::claimed_until_file) host->hold_until_file_ = mode.substr(kUntilFile.size());
    log(LogPriority::warning,
        std::string("fleet: test hook ") + kHoldOffersEnv + "=" + mode +
            (host->hold_offers_ == HoldOffers::no
                 ? ": not a mode (fetched_until_stopping, claimed_until_stopped, claimed_until_file:PATH); ignored"
                 : ": every spec this host fetches is held until it stops (or the file is there); for tests only"));
  }
  read_failure_hook(kFailOwnCloseEnv, host->fail_own_close_, "tries to mark a run's own close");
  read_failure_hook(kFailLapseReadEnv, host->fail_lapse_read_, "reads of a run's fleet copy after a lease lapse");
  read_failure_hook(kFailPlacementReadEnv, host->fail_placement_read_, "reads of where a submitted spec was placed");
  read_failure_hook(kDeafFollowersEnv, host->deaf_followers_,
                    "followers of a fleet run's stream (tail, attach) drop what they are handed, and so");
  read_failure_hook(kFailClosedRecordReadEnv, host->fail_closed_record_read_,
                    "reads of the record of a run another host closed in the fleet");
  if (std::atomic<int> sweep_marks{0};
      (read_failure_hook(kFailSweepMarkEnv, sweep_marks, "marks of a lost host's closed run by this host's sweep"),
       sweep_marks > 0))
    host->lease_.fail_marks_for_test(sweep_marks);
  // The first lease, within the same patience as the layout: a node that has just come back may
  // hold a replica of the hosts bucket whose stream has no leader yet ("no responders" to the
  // put, which a bucket of one replica never shows) for a moment after the layout is there.
  const auto give_up = std::chrono::steady_clock::now() + fleet::FleetLink::kLayoutPatience;
  for (std::chrono::milliseconds pause(250);; pause = std::min(pause * 2, std::chrono::milliseconds(2000))) {
    auto renewed = host->lease_.renew(lease_info(config));
    if (renewed) break;
    fleet::NatsError why = renewed.error();
    if (!fleet::worth_waiting_for(why) && why.status != NATS_NO_RESPONDERS)
      return Result(boost::system::in_place_error, "fleet: " + why.text);
    if (std::chrono::steady_clock::now() + pause >= give_up)
      return Result(boost::system::in_place_error, "fleet: " + why.text + " (still so after " +
                                                       std::to_string(fleet::FleetLink::kLayoutPatience.count()) +
                                                       " s)");
    log(LogPriority::notice, "fleet: JetStream is not ready yet (" + why.text + "); waiting");
    std::this_thread::sleep_for(pause);  // the daemon's start, before any io thread: nothing else to do
  }
  log(LogPriority::info, "fleet: host " + config.host_id + " joined through " + config.nats_urls.front() + " (lease " +
                             std::to_string(config.lease_ttl.count()) + " ms)");
  auto handler = [weak = std::weak_ptr<Server>(server), weak_host = std::weak_ptr<FleetHost>(host)](
                     std::string body, fleet::Responder responder) {
    auto s = weak.lock();
    auto h = weak_host.lock();
    if (s && h) serve_fleet_command(s, h, std::move(body), std::move(responder));
  };
  auto commands = fleet::CommandServer::open(host->link(), host->link().names().command_subject(config.host_id),
                                             server->io.get_executor(), handler);
  if (!commands) return Result(boost::system::in_place_error, "fleet: " + commands.error().text);
  host->commands_ = std::move(*commands);
  asio::post(host->lease_io_, [raw = host.get()] { raw->renew(); });
  asio::post(host->lease_io_, [raw = host.get()] { raw->sweep(); });
  for (int i = 0; i < 2; ++i) {
    host->threads_.emplace_back([raw = host.get()] {
      auto work = asio::make_work_guard(raw->io_);
      raw->io_.run();
    });
    host->lease_threads_.emplace_back([raw = host.get()] {
      auto work = asio::make_work_guard(raw->lease_io_);
      raw->lease_io_.run();
    });
  }
  host->placement_ = std::thread([raw = host.get()] { raw->placement_loop(); });
  return std::shared_ptr<FleetGate>(std::move(host));
}

asio::awaitable<void> FleetHost::submit(Session& s, const SocketRequest& r, const json::object& run) {
  co_await queue_submit(shared_from_this(), s, r, run);
}

asio::awaitable<void> FleetHost::list(Session& s, const SocketRequest& r) {
  co_await list_fleet(shared_from_this(), s, r);
}

asio::awaitable<bool> FleetHost::get(Session& s, const SocketRequest& r) {
  co_return co_await get_remote(shared_from_this(), s, r);
}

asio::awaitable<bool> FleetHost::command(Session& s, const SocketRequest& r, std::string_view kind) {
  co_return co_await relay_command(shared_from_this(), s, r, kind);
}

asio::awaitable<bool> FleetHost::tail(Session& s, const SocketRequest& r, bool attach) {
  co_return co_await tail_remote(shared_from_this(), s, r, attach);
}

asio::awaitable<void> FleetHost::attached_line(Session& s, std::string line, std::optional<std::string> too_long) {
  co_await relay_attached_line(shared_from_this(), s, std::move(line), std::move(too_long));
}

void FleetHost::wake_waiters() {
  // The flag is set before the lock is taken: a waiter that checked it under the lock is
  // already waiting when notified, one that did not yet will see it set.
  { std::lock_guard lock(wake_mu_); }
  wake_.notify_all();
}

void FleetHost::stop_placing() {
  placing_stopped_ = true;
  wake_waiters();
}

void FleetHost::hold_offer(const fleet::SubmitOffer& offer, HoldPoint point) {
  const bool fetched = hold_offers_ == HoldOffers::fetched_until_stopping && point == HoldPoint::fetched;
  const bool claimed = hold_offers_ == HoldOffers::claimed_until_stopped && point == HoldPoint::claimed;
  const bool until_file = hold_offers_ == HoldOffers::claimed_until_file && point == HoldPoint::claimed;
  if (!fetched && !claimed && !until_file) return;
  log(LogPriority::notice, "fleet: test hook: holding the spec of run " + offer.run_id() +
                               (fetched      ? " until this host begins to stop"
                                : until_file ? ", claimed, until " + hold_until_file_ + " is there"
                                             : ", claimed, until this host stops"));
  std::unique_lock lock(wake_mu_);
  if (until_file) {
    // A test hook's look at a file the test writes: nothing wakes this thread for it.
    std::error_code ec;
    while (!stopped_ && !std::filesystem::exists(hold_until_file_, ec))
      wake_.wait_for(lock, std::chrono::milliseconds(50));
    return;
  }
  wake_.wait(lock, [&] { return stopped_ || (fetched && placing_stopped_); });
}

// A run this host is making (place()): in making_ from before its claim until place() returns,
// made or not; what waited on it is then told.
class FleetHost::Making {
 public:
  Making(FleetHost& host, std::string id) : host_(host), id_(std::move(id)) {
    std::lock_guard lock(host_.making_mu_);
    host_.making_.try_emplace(id_);
  }
  ~Making() {
    std::vector<std::function<void(bool)>> waiting;
    {
      std::lock_guard lock(host_.making_mu_);
      auto it = host_.making_.find(id_);
      if (it == host_.making_.end()) return;
      waiting = std::move(it->second);
      host_.making_.erase(it);
    }
    for (auto& done : waiting)
      done(true);
  }
  Making(const Making&) = delete;
  Making& operator=(const Making&) = delete;

 private:
  FleetHost& host_;
  std::string id_;
};

asio::awaitable<bool> FleetHost::until_made(std::string id) {
  bool making = false;
  {
    std::lock_guard lock(making_mu_);
    making = making_.count(id) > 0;
  }
  if (!making) co_return false;
  auto wait = [this, id](auto done) {
    std::unique_lock lock(making_mu_);
    auto it = making_.find(id);
    if (it == making_.end()) {  // made (or given back) meanwhile
      lock.unlock();
      done(true);
      return;
    }
    it->second.emplace_back(std::move(done));
    log(LogPriority::info, "fleet: run " + id + ": a command for it waits: this host is making it");
  };
  co_return co_await await_callback<bool>(std::move(wait));
}

void FleetHost::stop() {
  if (threads_.empty() || stopped_.exchange(true)) return;
  wake_waiters();
  auto on_this_thread = [](const std::vector<std::thread>& ts) {
    for (auto& t : ts)
      if (std::this_thread::get_id() == t.get_id()) return true;
    return false;
  };
  if (on_this_thread(threads_) || on_this_thread(lease_threads_)) {  // the last owner let go on a fleet thread
    io_.stop();
    lease_io_.stop();
    for (auto* ts : {&threads_, &lease_threads_})
      for (auto& d : *ts)
        d.detach();
    if (placement_.joinable()) placement_.detach();
    return;
  }
  if (placement_.joinable()) placement_.join();  // it sees stopped_ within one fetch
  commands_.reset();
  // The publishers get a moment to send what is on disk, then the lease goes.
  std::promise<void> drained;
  auto deadline = Clock::now() + kStopDrain;
  auto step = std::make_shared<std::function<void()>>();
  *step = [this, &drained, deadline, step] {
    bool publishing = false;
    {
      std::lock_guard lock(publishing_mu_);
      publishing = !publishing_.empty();
    }
    if (publishing && Clock::now() < deadline) {
      auto timer = std::make_shared<asio::steady_timer>(strand_, std::chrono::milliseconds(50));
      timer->async_wait([timer, step](boost::system::error_code) { (*step)(); });
      return;
    }
    drained.set_value();
    *step = nullptr;  // the cycle through the lambda's own copy ends here
  };
  asio::post(strand_, [step] { (*step)(); });
  drained.get_future().wait();
  io_.stop();
  for (auto& t : threads_)
    t.join();
  threads_.clear();
  // Publishers still awaiting an ack are let go (their coroutines end here, not at the link's end).
  link_->pipe().abandon();
  // The lease is renewed through the drain; then it goes.
  lease_io_.stop();
  for (auto& t : lease_threads_)
    t.join();
  lease_threads_.clear();
  if (auto dropped = fleet::drop_lease(*link_, host_id()); !dropped)
    log(LogPriority::warning, "fleet: " + dropped.error().text);
}

void FleetHost::track(const std::string& id) {
  auto self = shared_from_this();
  asio::post(strand_, [self, id] {
    if (self->stopped_) return;
    {
      std::lock_guard lock(self->publishing_mu_);
      if (!self->publishing_.insert(id).second) return;
    }
    // Pipelined (the default): each run on a strand of its own, its publishes asynchronous, so
    // no run waits for another's round trip. Serial (fleet.serial_publish): every run on the one
    // strand, each publish blocking it, as before issue 26.
    if (self->link_->config().serial_publish)
      asio::co_spawn(self->strand_, publish_run(self, id), asio::detached);
    else
      asio::co_spawn(asio::make_strand(self->io_), publish_run(self, id), asio::detached);
  });
}

void FleetHost::placement_loop() {
  std::optional<fleet::PlacementPuller> puller;
  bool disk_was_full = false;
  std::filesystem::path state_dir;
  if (auto server = server_.lock()) state_dir = server->config.state_dir;
  while (!stopped_) {
    if (placing_stopped_) {
      // The daemon is stopping: nothing more is pulled. A host that does not pull is never
      // chosen (placement is the hosts' pulling), so this is how it stops offering itself.
      std::unique_lock lock(wake_mu_);
      wake_.wait(lock, [&] { return stopped_.load(); });
      break;
    }
    if (!puller) {
      auto opened = fleet::PlacementPuller::open(*link_);
      if (!opened) {
        log(LogPriority::debug, "fleet: " + opened.error().text);
        std::this_thread::sleep_for(kRetryPause);  // NATS away: a pause before the next try
        continue;
      }
      puller.emplace(std::move(*opened));
    }
    // Back-pressure from the engine: a spec is pulled only while this host has room for it.
    auto server = server_.lock();
    if (!server) return;
    auto room = std::make_shared<std::promise<bool>>();
    asio::post(server->registry_strand, [server, room] {
      room->set_value(server->registry.accepting() && server->registry.active() < server->config.max_active_runs);
    });
    server.reset();
    bool has_room = wait_unless(stopped_, room).value_or(false);
    if (!has_room) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));  // a run's close makes room; look again soon
      continue;
    }
    // Room on disk too: a host whose state directory cannot take a new run would refuse it
    // DISK_FULL, a refusal of this host, not of the spec. It pulls nothing while it lasts, so a
    // host with room takes the spec, or it waits queued until one has (soak: a spec refused
    // DISK_FULL used to be dropped from the queue, its submitter told "queued" and never run).
    if (auto full = disk_full_problem(state_dir, kNewRunFloorBytes, "a new run needs")) {
      if (!disk_was_full)
        log(LogPriority::warning, "fleet: this host takes no spec from the queue while its disk is full: " + *full);
      disk_was_full = true;
      std::this_thread::sleep_for(kDiskFullPause);
      continue;
    }
    if (disk_was_full) log(LogPriority::info, "fleet: this host's disk has room again; it takes specs from the queue");
    disk_was_full = false;
    auto offers = puller->fetch(1, std::chrono::seconds(1));
    if (!offers) {
      log(LogPriority::debug, "fleet: " + offers.error().text);
      continue;
    }
    for (auto& offer : *offers) {
      hold_offer(offer, HoldPoint::fetched);
      // A spec that arrives once the daemon has begun to stop (the fetch was under way) is not
      // claimed: it goes back at once for a host that stays.
      if (placing_stopped_ || stopped_)
        hand_back(offer, false, "this host is stopping");
      else
        place(offer);
    }
  }
}

void FleetHost::place(fleet::SubmitOffer& offer) {
  const std::string& me = host_id();
  const std::string id = offer.run_id();
  // A peer's message: bounded, parsed as a value, refused by name, never trusted.
  std::optional<json::value> envelope;
  if (!id.empty() && offer.spec().size() <= fleet::kMaxSpecBytes) envelope = protocol::parse_json(offer.spec());
  const json::object* body = envelope && envelope->is_object() ? &envelope->as_object() : nullptr;
  const json::value* run = body ? body->if_contains("run") : nullptr;
  if (!run || !run->is_object()) {
    log(LogPriority::warning, "fleet: refused a queued spec (run id \"" + protocol::excerpt(id, 64) +
                                  "\"): not a {\"run\": {...}} envelope within 1 MiB");
    (void)offer.refuse();
    return;
  }
  // The owner's uid is the submitting host's word: taken as a control peer's at most (the spec
  // goes through submit_run's checks for Role::control below: vendor_env's rules, cwd under
  // runs.workspace_roots, limits, budgets), and refused for a uid this host treats as admin.
  const std::string from = protocol::string_at(*body, "from_host").value_or("?");
  std::optional<std::uint64_t> uid = protocol::u64_at(*body, "uid");
  std::string why_not;
  if (!uid || *uid > 0xffffffffu)
    why_not = "MALFORMED: no owner uid";
  else if (auto server = server_.lock())
    why_not = peer_uid_problem(server->config, static_cast<std::uint32_t>(*uid));
  if (!why_not.empty()) {
    log(LogPriority::warning, "fleet: refused a queued spec (run " + protocol::excerpt(id, 64) + ", from host " +
                                  protocol::excerpt(from, 64) + "): " + why_not);
    (void)offer.refuse();
    return;
  }
  // From before the claim (which names this host the run's owner) until this returns, a command
  // relayed here for the run waits for its making (serve_relayed) instead of finding no run.
  Making making(*this, id);
  auto claim = fleet::claim_placement(*link_, id, me);
  if (!claim) {
    log(LogPriority::debug, "fleet: claiming " + id + ": " + claim.error().text);
    (void)offer.give_back();
    return;
  }
  if (*claim == fleet::Claim::lost) {  // a redelivery of a run another host placed
    (void)offer.ack();
    return;
  }
  hold_offer(offer, HoldPoint::claimed);
  // From here on the record names this host: a spec this host does not make a run of goes back
  // with its claim let go (hand_back), never left claimed and unmade (soak finding 6: a survivor
  // would close it HOST_LOST once this host's lease went, and its redelivery would be dropped).
  if (placing_stopped_ || stopped_) return hand_back(offer, true, "this host began to stop as it claimed it");
  auto server = server_.lock();
  if (!server) return hand_back(offer, true, "this host is stopping");
  PeerCredentials peer;
  peer.uid = static_cast<std::uint32_t>(*uid);
  // A peer host names a uid, not its groups: the run's submitter is judged here (its cwd) with
  // its user's groups from this host's database, never gid 0; a uid with no user here, nogroup.
  constexpr std::uint32_t kNoGroup = 65534;
  peer.gid = primary_gid_of(peer.uid).value_or(kNoGroup);
  auto known = std::make_shared<std::promise<bool>>();
  asio::post(server->registry_strand,
             [server, id, known] { known->set_value(server->registry.lookup(id).has_value()); });
  auto was_known = wait_unless(stopped_, known);
  if (!was_known) return hand_back(offer, true, "this host stopped before it could make the run");
  if (*was_known) {  // this host took it before and its ack was lost
    (void)offer.ack();
    return;
  }
  auto created = std::make_shared<std::promise<SubmitResult>>();
  // A peer host's submitter is granted control here, never admin (its cwd must be under this
  // host's runs.workspace_roots).
  asio::co_spawn(
      server->io, submit_run(server, peer, Role::control, run->as_object(), id),
      [created](std::exception_ptr e, SubmitResult r) {
        if (e)
          created->set_value(SubmitResult(boost::system::in_place_error, SubmitRefusal{"REFUSED", "failed"}));
        else
          created->set_value(std::move(r));
      });
  const std::filesystem::path run_dir = RunDir::in_state_dir(server->config.state_dir, id).root();
  server.reset();
  auto waited = wait_unless(stopped_, created);
  if (!waited) {
    // The daemon's io stopped under the submit: nothing here makes the run any more. Unless its
    // directory was made already (then it is this host's, and the next start finds it on disk),
    // it goes to a host that stays.
    std::error_code ec;
    if (!std::filesystem::exists(run_dir, ec) && !ec)
      return hand_back(offer, true, "this host stopped before it made the run");
    log(LogPriority::warning, "fleet: run " + id + ": this host stopped while making it; its directory " +
                                  run_dir.string() + " is here, so it stays this host's");
    return;
  }
  SubmitResult result = std::move(*waited);
  if (result) {
    // The run is made: its submitter may say so (it waits for this mark, so a `get` or `tail`
    // here right after finds the run).
    if (auto marked = fleet::mark_launched(*link_, id); !marked)
      log(LogPriority::warning, "fleet: " + marked.error().text);
    // The spec is on this host's disk (run.json, spec.json): only now is the message done.
    if (auto acked = offer.ack(); !acked) log(LogPriority::warning, "fleet: " + acked.error().text);
    log(LogPriority::info, "fleet: placed run " + id + " here (" + std::to_string(offer.deliveries()) + " deliveries)");
    return;
  }
  log(LogPriority::warning, "fleet: run " + id + " (from host " + protocol::excerpt(from, 64) +
                                ") refused here: " + result.error().code + " " + result.error().reason);
  // Not this host's after all: the record goes, and the spec goes back for another host (BUSY;
  // SHUTTING_DOWN: this host began to stop after it claimed it; DISK_FULL: its disk filled
  // between the placement loop's look and the run's making) or for good (anything else would be
  // refused anywhere).
  const std::string& code = result.error().code;
  if (code == "BUSY" || code == "SHUTTING_DOWN") return hand_back(offer, true, "refused here " + code);
  if (code == "DISK_FULL") {
    hand_back(offer, true, "refused here " + code);
    // A disk that refused a run with room above the floor (inodes, a quota) would have this host
    // claim and give back the same spec in a loop: a pause, so another host is first to it.
    std::this_thread::sleep_for(kDiskFullPause);
    return;
  }
  if (auto released = fleet::release_placement(*link_, id, me); !released)
    log(LogPriority::warning, "fleet: run " + id + ": " + released.error().text);
  (void)offer.refuse();
}

void FleetHost::hand_back(fleet::SubmitOffer& offer, bool claimed, const std::string& why) {
  const std::string& id = offer.run_id();
  if (claimed) {
    // The claim goes first: the spec, back on the queue, is then another host's to claim.
    auto released = fleet::release_placement(*link_, id, host_id());
    if (!released || !*released) {
      // NATS away, or the record moved (another host's, or closed): the spec is not given back
      // over a record that would make its next host drop it; AckWait brings it back.
      log(LogPriority::warning,
          "fleet: run " + id + ": its claim here could not be let go (" +
              (released ? std::string("its record is no longer this host's open claim") : released.error().text) +
              "); its spec comes back after the queue's AckWait");
      return;
    }
  }
  log(LogPriority::info, "fleet: run " + id + ": its spec goes back to the queue unplaced: " + why);
  if (auto back = offer.give_back(); !back) log(LogPriority::warning, "fleet: " + back.error().text);
}

void FleetHost::renew() {
  if (stopped_) return;
  const auto& config = link_->config();
  if (auto renewed = lease_.renew(lease_info(config)); !renewed) {
    log(LogPriority::warning, "fleet: " + renewed.error().text);
  } else if (*renewed) {
    log(LogPriority::warning, "fleet: this host's lease had run out (no renewal taken for " +
                                  std::to_string(config.lease_ttl.count()) +
                                  " ms or more); its runs may have been closed in the fleet meanwhile");
    ++lapses_;
  }
  renew_timer_.expires_after(config.lease_ttl / 3);
  renew_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->renew();
  });
}

void FleetHost::sweep() {
  if (stopped_) return;
  const auto& config = link_->config();
  auto swept = lease_.sweep();
  if (!swept)
    log(LogPriority::info, "fleet: sweeping for lost hosts: " + swept.error().text);
  else
    for (const auto& closed : *swept)
      log(LogPriority::warning, "fleet: host " + closed.lost_host + " lost its lease; closed its run " + closed.run_id +
                                    " in the fleet (stream.closed at seq " + std::to_string(closed.closed_seq) + ")");
  sweep_timer_.expires_after(config.lease_ttl / 3);
  sweep_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->sweep();
  });
}

asio::awaitable<bool> FleetHost::mark_closed(std::shared_ptr<FleetHost> self, std::string id, std::string closer) {
  // A survivor's close is a compare-and-set on the same entry, so only one of the two can write
  // it. A record left open would read as a run still going (`ls --fleet`, a remote get's
  // fleet_state) for as long as this host holds its lease: the sweep looks only at lost hosts' runs.
  fleet::FleetLink& link = *self->link_;
  for (;;) {
    if (self->stopped_) co_return false;
    std::string failed;
    if (closer.empty() && take_hook_failure(self->fail_own_close_)) {
      failed = hook_failure(kFailOwnCloseEnv).text;
    } else if (auto record = fleet::read_run_record(link, id); !record) {
      failed = record.error().text;
    } else if (!*record || (*record)->state != "open") {
      co_return false;  // no record, or closed already (by a survivor, or by this host's try that was not answered)
    } else {
      fleet::RunRecord closed = **record;
      closed.state = "closed";
      closed.closed_by = closer;
      auto updated = fleet::update_run_record(link, closed);
      if (updated && *updated == fleet::Claim::won) co_return true;
      if (updated) continue;  // another host wrote the record meanwhile: read again what it says
      failed = updated.error().text;
    }
    log(LogPriority::warning, "fleet: run " + id + ": its record is not marked closed yet (" + failed +
                                  "); tried again in " + std::to_string(kRetryPause.count()) + " ms");
    co_await pause(kRetryPause);
  }
}

asio::awaitable<void> FleetHost::closed_elsewhere(std::shared_ptr<FleetHost> self, std::string id,
                                                  fleet::FleetStreamTail fleet_tail) {
  fleet::FleetLink& link = *self->link_;
  auto server = self->server_.lock();
  if (!server) co_return;
  const std::uint64_t closed_seq = fleet_tail.last_seq;
  if (fleet_tail.last_event != "stream.closed") {
    // Superseded by the survivor's HOST_LOST warning, its stream.closed still to come (it writes
    // the two back to back): said now, naming the closer the warning names; the record is the
    // survivor's to mark once its close is whole.
    auto record = fleet::read_run_record(link, id);
    std::string closer = record && *record ? (*record)->closed_by : "";
    if (closer.empty()) closer = fleet::host_lost_closer(fleet_tail.last_line);
    co_await say_closed_elsewhere(server, id, closer, closed_seq);
    co_return;
  }
  // Who closed it: the record says when the survivor marked it; when it is still open, the
  // survivor's HOST_LOST warning (the line before its stream.closed) names it. A read that fails
  // is tried again: taken as "nobody", it would leave the run's stream silent and the record
  // open for as long as this host lives.
  bool record_open = false;
  std::string closer;
  for (;;) {
    if (self->stopped_) co_return;
    std::string failed;
    auto record = take_hook_failure(self->fail_closed_record_read_)
                      ? fleet::NatsResult<std::optional<fleet::RunRecord>>(hook_failure(kFailClosedRecordReadEnv))
                      : fleet::read_run_record(link, id);
    if (!record) {
      failed = "its record: " + record.error().text;
    } else if (!*record || (*record)->state != "open") {
      if (*record) closer = (*record)->closed_by;
      break;
    } else if (auto named = closer_before(link, id, closed_seq); !named) {
      failed = "the line before its close: " + named.error().text;
    } else {
      closer = *named;
      record_open = true;
      break;
    }
    log(LogPriority::warning, "fleet: run " + id + ": closed in the fleet by another host; reading " + failed +
                                  "; tried again in " + std::to_string(kRetryPause.count()) + " ms");
    co_await pause(kRetryPause);
  }
  co_await say_closed_elsewhere(server, id, closer, closed_seq);
  if (!record_open) co_return;
  // The survivor did not mark it (NATS did not take its mark before this host's lease was back):
  // marked here, as the survivor's close.
  const bool marked = co_await mark_closed(self, id, closer);
  if (marked)
    log(LogPriority::info, "fleet: run " + id + ": its record marked closed by " +
                               (closer.empty() ? std::string("another host") : "host " + closer) +
                               ", whose own mark was not taken");
}

asio::awaitable<void> FleetHost::publish_run(std::shared_ptr<FleetHost> self, std::string id) {
  struct Done {
    std::shared_ptr<FleetHost> self;
    std::string id;
    ~Done() {
      std::lock_guard lock(self->publishing_mu_);
      self->publishing_.erase(id);
    }
  } done{self, id};
  auto server = self->server_.lock();
  if (!server) co_return;
  auto find = [server, id] { return server->registry.lookup(id); };
  std::optional<RunEntry> entry = co_await server->on_registry(std::move(find));
  if (!entry || entry->dir.empty()) co_return;
  auto opened = open_stream(*entry);
  if (!opened) {
    log(LogPriority::warning, "fleet: run " + id + " not published: " + opened.error());
    co_return;
  }
  fleet::FleetLink& link = *self->link_;
  const std::string& me = self->host_id();
  // Every local run is in the fleet's records (a run submitted here without --fleet too), so
  // any host can find its owner.
  std::optional<fleet::RunPublisher> publisher;
  while (!self->stopped_) {
    auto claim = fleet::claim_placement(link, id, me, /*launched=*/true);
    if (claim && *claim == fleet::Claim::lost) {
      log(LogPriority::warning, "fleet: run " + id + " is recorded as another host's; its stream stays on this host");
      co_return;
    }
    if (claim) {
      auto resumed = fleet::RunPublisher::resume(link, id);
      if (resumed) {
        publisher.emplace(std::move(*resumed));
        break;
      }
      log(LogPriority::debug, "fleet: run " + id + ": " + resumed.error().text);
    } else {
      log(LogPriority::debug, "fleet: run " + id + ": " + claim.error().text);
    }
    co_await pause(kRetryPause);
  }
  if (!publisher) co_return;
  const auto& tail = publisher->tail();
  if (tail.last_event == "stream.closed") {
    const asio::any_io_executor executor = co_await asio::this_coro::executor;
    if (fleet_close_is_this_hosts(*opened, tail.last_seq, tail.last_line, executor)) {
      // This host published the run's close, then stopped (or NATS did not take the mark) before
      // the record was marked: marked now, or it would read open for as long as this host lives
      // (the sweep looks only at lost hosts' runs). A record closed already is left as it is.
      co_await mark_closed(self, id, "");
    } else {
      co_await closed_elsewhere(self, id, tail);
    }
    co_return;
  }
  std::uint64_t seen_lapses = self->lapses_;
  auto reader =
      StreamReader::open(opened->shared, co_await asio::this_coro::executor, ReaderStart::at_seq(tail.last_seq + 1));
  if (!reader) {
    log(LogPriority::warning, "fleet: run " + id + ": the fleet holds seq " + std::to_string(tail.last_seq) +
                                  ", which this host's stream does not reach: " + reader.error());
    co_return;
  }
  for (;;) {
    if (self->stopped_) co_return;
    auto batch = reader->read_some();
    if (!batch) {
      log(LogPriority::warning, "fleet: run " + id + ": " + batch.error());
      co_return;
    }
    std::string_view bytes = batch->bytes;
    // Serial: one line per publish, as before issue 26.
    const int max_lines = link.config().serial_publish ? 1 : link.config().publish_batch_lines;
    const std::size_t max_bytes = batch_bytes(link);
    for (std::uint64_t seq = batch->first_seq; !bytes.empty();) {
      std::string_view message;
      const std::uint64_t count = next_message(bytes, max_lines, max_bytes, message);
      const std::uint64_t last = seq + count - 1;
      for (;;) {
        auto sent = co_await publish_lines(*publisher, seq, last, message);
        if (sent && *sent == fleet::RunPublisher::Outcome::superseded) {
          co_await closed_elsewhere(self, id, publisher->tail());
          co_return;
        }
        if (sent) break;
        log(LogPriority::debug, "fleet: run " + id + ": " + sent.error().text);
        if (self->stopped_) co_return;
        co_await pause(kRetryPause);
      }
      bytes.remove_prefix(std::min(bytes.size(), message.size() + 1));
      seq = last + 1;
    }
    if (batch->reached_end) {
      co_await mark_closed(self, id, "");
      co_return;
    }
    if (batch->count == 0) {
      if (std::uint64_t lapses = self->lapses_; lapses != seen_lapses) {
        // This host was away past its lease: a survivor may have closed the run in the fleet.
        // Said now, while the run waits, not only when it writes its next line. A read that
        // fails is asked again on the next turn (a second later), not taken as "not closed".
        auto now = take_hook_failure(self->fail_lapse_read_)
                       ? fleet::NatsResult<fleet::FleetStreamTail>(hook_failure(kFailLapseReadEnv))
                       : fleet::fleet_stream_tail(link, id);
        if (!now)
          log(LogPriority::warning, "fleet: run " + id + ": after the lease lapsed: " + now.error().text +
                                        "; whether another host closed it is asked again");
        if (now) seen_lapses = lapses;
        if (now && now->last_event == "stream.closed" && now->subject_seq != publisher->tail().subject_seq) {
          co_await closed_elsewhere(self, id, *now);
          co_return;
        }
      }
      auto outcome = co_await reader->wait_for_more(Clock::now() + std::chrono::seconds(1));
      if (outcome == WaitOutcome::writer_gone) co_return;
    }
  }
}

}  // namespace mh::daemon
