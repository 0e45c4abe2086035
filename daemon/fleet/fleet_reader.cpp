#include "daemon/fleet/fleet_reader.hpp"

#include <boost/asio/post.hpp>
#include <string_view>
#include <vector>

#include "protocol/json.hpp"

namespace mh::fleet {

namespace {

// A peer's line: its facts read as values; one that does not parse is passed on as it is (the
// owner's bytes), with no seq to skip it by.
FleetLine line_of(std::string_view bytes) {
  FleetLine out;
  out.line.assign(bytes);
  if (auto v = protocol::parse_json(out.line); v && v->is_object()) {
    out.seq = protocol::u64_at(v->as_object(), "seq").value_or(0);
    out.closed = protocol::string_at(v->as_object(), "event").value_or("") == "stream.closed";
  }
  return out;
}

// A message's lines, in order: one line, or several with '\n' between them
// (fleet.publish_batch_lines, event_publisher.hpp).
std::vector<FleetLine> lines_of(natsMsg* msg) {
  std::string_view rest(natsMsg_GetData(msg), static_cast<std::size_t>(natsMsg_GetDataLength(msg)));
  std::vector<FleetLine> out;
  for (;;) {
    std::size_t end = rest.find('\n');
    out.push_back(line_of(rest.substr(0, end)));
    if (end == std::string_view::npos) break;
    rest.remove_prefix(end + 1);
  }
  return out;
}

jsSubOptions ordered_options(const std::string& stream) {
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  so.Ordered = true;
  so.Config.DeliverPolicy = js_DeliverAll;
  // The consumer lives on one node: when that node dies, libnats notices two heartbeats missed
  // and makes the consumer again. Its own default is 5 s (10 s of silence); 1 s keeps a reader's
  // gap after a node's loss near JetStream's own election time.
  so.Config.Heartbeat = 1000 * 1000 * 1000LL;
  return so;
}

}  // namespace

struct FleetStreamFollower::State {
  boost::asio::any_io_executor executor;
  OnLine on_line;
  std::uint64_t from = 1;
  std::atomic<std::uint64_t> received{0};
  std::atomic<std::uint64_t> last_stream_seq{0};
  bool deaf = false;
};

namespace {

void on_follow(natsConnection*, natsSubscription*, natsMsg* raw, void* closure) {
  MsgHandle msg(raw);
  auto* state = static_cast<FleetStreamFollower::State*>(closure);
  if (state->deaf) return;
  std::uint64_t stream_seq = 0;
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, msg.get()) == NATS_OK) {
    stream_seq = meta->Sequence.Stream;
    jsMsgMetaData_Destroy(meta);
  }
  state->received.fetch_add(1, std::memory_order_relaxed);
  if (stream_seq != 0) state->last_stream_seq.store(stream_seq, std::memory_order_relaxed);
  for (FleetLine& line : lines_of(msg.get())) {
    line.stream_seq = stream_seq;
    if (line.seq != 0 && line.seq < state->from) continue;
    boost::asio::post(state->executor,
                      [on_line = state->on_line, line = std::move(line)]() mutable { on_line(std::move(line)); });
  }
}

void on_follow_complete(void* closure) {
  delete static_cast<FleetStreamFollower::State*>(closure);
}

}  // namespace

NatsResult<std::unique_ptr<FleetStreamFollower>> FleetStreamFollower::open(FleetLink& link, const std::string& run_id,
                                                                           std::uint64_t from_seq,
                                                                           boost::asio::any_io_executor executor,
                                                                           OnLine on_line, bool deaf) {
  if (auto problem = run_id_problem(run_id); !problem.empty())
    return nats_error("run id " + run_id + ": " + problem, NATS_INVALID_ARG);
  const std::string stream = link.names().events_stream(), subject = link.names().events_subject(run_id);
  auto state = std::make_unique<State>();
  state->executor = std::move(executor);
  state->on_line = std::move(on_line);
  state->from = from_seq == 0 ? 1 : from_seq;
  state->deaf = deaf;
  jsSubOptions so = ordered_options(stream);
  natsSubscription* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_Subscribe(&raw, link.js(), subject.c_str(), on_follow, state.get(), nullptr, &so, &code);
  if (s != NATS_OK) return nats_error("following " + subject, s, code);
  SubscriptionHandle sub(raw);
  const State* watched = state.get();
  s = natsSubscription_SetOnCompleteCB(sub.get(), on_follow_complete, state.release());
  if (s != NATS_OK) return nats_error("following " + subject, s);
  return std::unique_ptr<FleetStreamFollower>(new FleetStreamFollower(std::move(sub), watched));
}

std::uint64_t FleetStreamFollower::messages_received() const {
  return state_->received.load(std::memory_order_relaxed);
}

std::uint64_t FleetStreamFollower::last_stream_seq() const {
  return state_->last_stream_seq.load(std::memory_order_relaxed);
}

FleetStreamFollower::~FleetStreamFollower() {
  if (sub_) (void)natsSubscription_Unsubscribe(sub_.get());
}

NatsResult<FleetStreamReader> FleetStreamReader::open(FleetLink& link, const std::string& run_id,
                                                      std::uint64_t from_seq) {
  if (auto problem = run_id_problem(run_id); !problem.empty())
    return nats_error("run id " + run_id + ": " + problem, NATS_INVALID_ARG);
  const std::string stream = link.names().events_stream(), subject = link.names().events_subject(run_id);
  jsSubOptions so = ordered_options(stream);
  natsSubscription* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_SubscribeSync(&raw, link.js(), subject.c_str(), nullptr, &so, &code);
  if (s != NATS_OK) return nats_error("reading " + subject, s, code);
  return FleetStreamReader(SubscriptionHandle(raw), from_seq == 0 ? 1 : from_seq);
}

NatsResult<std::optional<FleetLine>> FleetStreamReader::next(std::chrono::milliseconds wait) {
  auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    while (!pending_.empty()) {
      FleetLine out = std::move(pending_.front());
      pending_.pop_front();
      if (out.seq != 0 && out.seq < from_) continue;
      return std::optional<FleetLine>(std::move(out));
    }
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    natsMsg* raw = nullptr;
    natsStatus s = natsSubscription_NextMsg(&raw, sub_.get(), std::max<std::int64_t>(left.count(), 1));
    MsgHandle msg(raw);
    if (s == NATS_TIMEOUT) return std::optional<FleetLine>();
    if (s != NATS_OK) return nats_error("reading the fleet stream", s);
    for (FleetLine& line : lines_of(msg.get()))
      pending_.push_back(std::move(line));
  }
}

}  // namespace mh::fleet
