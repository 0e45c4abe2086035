#include "daemon/fleet/event_publisher.hpp"

#include "protocol/json.hpp"

namespace mh::fleet {

namespace {

// The seq and event name of a line from the fleet. Lines come from peers: read as values only,
// never trusted to be well formed.
void read_line_facts(std::string_view message, FleetStreamTail& tail) {
  // A message of several lines (a batch) ends with the last of them.
  std::string_view line = message.substr(message.rfind('\n') + 1);
  tail.last_line = std::string(line);
  auto value = protocol::parse_json(line);
  if (!value || !value->is_object()) return;
  const auto& object = value->as_object();
  tail.last_seq = protocol::u64_at(object, "seq").value_or(0);
  tail.last_event = protocol::string_at(object, "event").value_or("");
}

}  // namespace

NatsResult<FleetStreamTail> fleet_stream_tail(FleetLink& link, std::string_view run_id, Wait wait) {
  if (auto problem = run_id_problem(run_id); !problem.empty())
    return nats_error("run id " + std::string(run_id) + ": " + problem, NATS_INVALID_ARG);
  const std::string stream = link.names().events_stream(), subject = link.names().events_subject(run_id);
  natsMsg* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  jsCtx* js = wait == Wait::sweep ? link.sweep_js() : link.js();
  natsStatus s = js_GetLastMsg(&raw, js, stream.c_str(), subject.c_str(), nullptr, &code);
  MsgHandle msg(raw);
  FleetStreamTail tail;
  if (s == NATS_NOT_FOUND) return tail;
  if (s != NATS_OK) return nats_error("last line of " + subject, s, code);
  tail.subject_seq = natsMsg_GetSequence(msg.get());
  read_line_facts(
      std::string_view(natsMsg_GetData(msg.get()), static_cast<std::size_t>(natsMsg_GetDataLength(msg.get()))), tail);
  return tail;
}

NatsResult<RunPublisher> RunPublisher::resume(FleetLink& link, std::string run_id, Wait wait) {
  auto tail = fleet_stream_tail(link, run_id, wait);
  if (!tail) return tail.error();
  return RunPublisher(link, std::move(run_id), *tail, wait);
}

jsPubOptions RunPublisher::expectations() const {
  jsPubOptions po;
  jsPubOptions_Init(&po);
  // The subject's last message must be the one we know of: nobody else's line in between.
  if (tail_.subject_seq == 0)
    po.ExpectNoMessage = true;
  else
    po.ExpectLastSubjectSeq = tail_.subject_seq;
  return po;
}

NatsResult<RunPublisher::Outcome> RunPublisher::publish(std::uint64_t seq, std::string_view line) {
  // Already in the fleet (a restart resumed past it): nothing to send.
  if (seq <= tail_.last_seq) return Outcome::duplicate;
  const std::string msg_id = run_id_ + ":" + std::to_string(seq);
  jsPubOptions po = expectations();
  po.MsgId = msg_id.c_str();
  po.MaxWait = (wait_ == Wait::sweep ? link_->sweep_timeout() : link_->config().request_timeout).count();
  jsPubAck* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_Publish(&raw, wait_ == Wait::sweep ? link_->sweep_js() : link_->js(), subject_.c_str(), line.data(),
                            static_cast<int>(line.size()), &po, &code);
  PubAckHandle ack(raw);
  PublishAck got;
  got.status = s;
  got.js = code;
  if (s == NATS_OK) {
    got.sequence = ack->Sequence;
    got.duplicate = ack->Duplicate;
  }
  return settle(seq, seq, line, got);
}

namespace {

std::string message_id(const std::string& run_id, std::uint64_t first, std::uint64_t last) {
  std::string id = run_id + ":" + std::to_string(first);
  if (last != first) id += "-" + std::to_string(last);
  return id;
}

}  // namespace

NatsResult<std::optional<RunPublisher::Outcome>> RunPublisher::send(std::uint64_t first, std::uint64_t last,
                                                                    std::string_view lines, PublishPipe::Done done) {
  if (last <= tail_.last_seq) return std::optional<Outcome>(Outcome::duplicate);
  auto sent = link_->pipe().send(subject_, message_id(run_id_, first, last), lines, expectations(), std::move(done));
  if (!sent) return sent.error();
  return std::optional<Outcome>();
}

NatsResult<RunPublisher::Outcome> RunPublisher::settle(std::uint64_t first, std::uint64_t last, std::string_view lines,
                                                       const PublishAck& ack) {
  const std::string msg_id = message_id(run_id_, first, last);
  const std::uint64_t seq = last;
  const std::string_view line = lines.substr(lines.rfind('\n') + 1);
  if (ack.status == NATS_OK) {
    if (ack.duplicate) {
      // Stored before (an earlier attempt whose ack was lost): the fleet holds this line, and
      // the next line's expectation is its sequence, read back from the tail.
      if (tail_.last_seq < seq) {
        auto now = fleet_stream_tail(*link_, run_id_, wait_);
        if (!now) return now.error();
        tail_ = *now;
      }
      return Outcome::duplicate;
    }
    tail_.subject_seq = ack.sequence;
    tail_.last_seq = seq;
    return Outcome::published;
  }
  if (ack.js != JSStreamWrongLastSequenceErr) {
    NatsError e = nats_error("publishing " + msg_id, ack.status, ack.js);
    if (!ack.text.empty()) e.text += " (" + ack.text + ")";
    return e;
  }
  // The subject moved: read what it ends with now. Our own line (an earlier attempt whose ack
  // was lost) is a duplicate; anything else means the run was taken from us.
  auto now = fleet_stream_tail(*link_, run_id_, wait_);
  if (!now) return now.error();
  bool ours = now->last_seq == seq && now->last_line == line;
  tail_ = *now;
  if (ours) return Outcome::duplicate;
  return Outcome::superseded;
}

}  // namespace mh::fleet
