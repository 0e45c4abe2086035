#include "daemon/fleet/placement.hpp"

namespace mh::fleet {

NatsResult<void> submit_spec(FleetLink& link, const std::string& run_id, const std::string& spec_json) {
  if (auto problem = run_id_problem(run_id); !problem.empty())
    return nats_error("run id " + run_id + ": " + problem, NATS_INVALID_ARG);
  if (spec_json.size() > kMaxSpecBytes) return nats_error("the spec is over 1 MiB", NATS_INVALID_ARG);
  const std::string subject = link.names().submit_subject();
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, subject.c_str(), nullptr, spec_json.data(), static_cast<int>(spec_json.size()));
  MsgHandle msg(raw);
  if (s == NATS_OK) s = natsMsgHeader_Set(msg.get(), kRunIdHeader, run_id.c_str());
  if (s != NATS_OK) return nats_error("submit message", s);
  jsPubOptions po;
  jsPubOptions_Init(&po);
  po.MsgId = run_id.c_str();
  po.MaxWait = link.config().request_timeout.count();
  jsPubAck* ack_raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  s = js_PublishMsg(&ack_raw, link.js(), msg.get(), &po, &code);
  PubAckHandle ack(ack_raw);
  if (s != NATS_OK) return nats_error("submitting " + run_id, s, code);
  return {};
}

SubmitOffer::SubmitOffer(MsgHandle msg) : msg_(std::move(msg)) {
  const char* id = nullptr;
  if (natsMsgHeader_Get(msg_.get(), kRunIdHeader, &id) == NATS_OK && id != nullptr && run_id_problem(id).empty())
    run_id_ = id;
  jsMsgMetaData* meta = nullptr;
  if (natsMsg_GetMetaData(&meta, msg_.get()) == NATS_OK && meta != nullptr) {
    deliveries_ = meta->NumDelivered;
    jsMsgMetaData_Destroy(meta);
  }
}

std::string_view SubmitOffer::spec() const {
  return std::string_view(natsMsg_GetData(msg_.get()), static_cast<std::size_t>(natsMsg_GetDataLength(msg_.get())));
}

NatsResult<void> SubmitOffer::ack() {
  jsErrCode code = static_cast<jsErrCode>(0);
  if (natsStatus s = natsMsg_AckSync(msg_.get(), nullptr, &code); s != NATS_OK)
    return nats_error("acking " + run_id_, s, code);
  return {};
}

NatsResult<void> SubmitOffer::give_back() {
  if (natsStatus s = natsMsg_Nak(msg_.get(), nullptr); s != NATS_OK) return nats_error("giving back " + run_id_, s);
  return {};
}

NatsResult<void> SubmitOffer::refuse() {
  if (natsStatus s = natsMsg_Term(msg_.get(), nullptr); s != NATS_OK) return nats_error("refusing " + run_id_, s);
  return {};
}

NatsResult<PlacementPuller> PlacementPuller::open(FleetLink& link) {
  const std::string stream = link.names().submit_stream(), durable = link.names().placement_consumer();
  const std::string subject = link.names().submit_subject();
  jsSubOptions so;
  jsSubOptions_Init(&so);
  so.Stream = stream.c_str();
  so.Consumer = durable.c_str();  // bind to the one consumer FleetLink made; never make another
  natsSubscription* raw = nullptr;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = js_PullSubscribe(&raw, link.js(), subject.c_str(), durable.c_str(), nullptr, &so, &code);
  if (s != NATS_OK) return nats_error("pulling from " + durable, s, code);
  return PlacementPuller(SubscriptionHandle(raw));
}

NatsResult<std::vector<SubmitOffer>> PlacementPuller::fetch(int batch, std::chrono::milliseconds wait) {
  MsgList list;
  jsErrCode code = static_cast<jsErrCode>(0);
  natsStatus s = natsSubscription_Fetch(list.get(), sub_.get(), batch, wait.count(), &code);
  std::vector<SubmitOffer> out;
  if (s == NATS_TIMEOUT) return out;
  if (s != NATS_OK) return nats_error("fetching specs", s, code);
  for (int i = 0; i < list.size(); ++i)
    out.emplace_back(list.take(i));
  return out;
}

}  // namespace mh::fleet
