#include "daemon/fleet/publish_pipe.hpp"

namespace mh::fleet {

NatsResult<std::unique_ptr<PublishPipe>> PublishPipe::open(natsConnection* nc, std::chrono::milliseconds max_wait) {
  std::unique_ptr<PublishPipe> pipe(new PublishPipe());
  pipe->max_wait_ = max_wait;
  jsOptions jo;
  jsOptions_Init(&jo);
  jo.Wait = max_wait.count();
  jo.PublishAsync.AckHandler = &PublishPipe::on_ack;
  jo.PublishAsync.AckHandlerClosure = pipe.get();
  jo.PublishAsync.MaxPending = 0;  // never stall a caller: the runs bound what is in flight
  jsCtx* raw = nullptr;
  if (natsStatus s = natsConnection_JetStream(&raw, nc, &jo); s != NATS_OK)
    return nats_error("JetStream context for publishing", s);
  pipe->js_.reset(raw);
  return pipe;
}

PublishPipe::~PublishPipe() {
  // Acks still due are dropped with the context; their callbacks are not called (the link,
  // and every publisher on it, is going: FleetLink closes the connection first, so no ack is
  // being handled now).
  js_.reset();
}

NatsResult<void> PublishPipe::send(const std::string& subject, const std::string& msg_id, std::string_view data,
                                   jsPubOptions expect, Done done) {
  natsMsg* raw = nullptr;
  natsStatus s = natsMsg_Create(&raw, subject.c_str(), nullptr, data.data(), static_cast<int>(data.size()));
  if (s != NATS_OK) return nats_error("publishing " + msg_id, s);
  MsgHandle msg(raw);
  expect.MsgId = msg_id.c_str();
  expect.MaxWait = max_wait_.count();
  {
    std::lock_guard lock(mu_);
    waiting_[msg_id] = std::move(done);
    most_ = std::max(most_, waiting_.size());
  }
  natsMsg* owned = msg.release();
  s = js_PublishMsgAsync(js_.get(), &owned, &expect);
  if (s != NATS_OK) {
    natsMsg_Destroy(owned);  // still ours unless the library took it (then nullptr)
    std::lock_guard lock(mu_);
    waiting_.erase(msg_id);
    return nats_error("publishing " + msg_id, s);
  }
  return {};
}

void PublishPipe::abandon() {
  std::map<std::string, Done, std::less<>> gone;
  {
    std::lock_guard lock(mu_);
    gone.swap(waiting_);
  }
}  // destroyed here, outside the lock

std::size_t PublishPipe::most_in_flight() const {
  std::lock_guard lock(mu_);
  return most_;
}

void PublishPipe::on_ack(jsCtx*, natsMsg* msg, jsPubAck* pa, jsPubAckErr* pae, void* closure) {
  MsgHandle owned(msg);  // ours to destroy (libnats' AckHandler contract)
  auto* self = static_cast<PublishPipe*>(closure);
  const char* id = nullptr;
  if (natsMsgHeader_Get(msg, "Nats-Msg-Id", &id) != NATS_OK || id == nullptr) return;
  Done done;
  {
    std::lock_guard lock(self->mu_);
    auto it = self->waiting_.find(std::string_view(id));
    if (it == self->waiting_.end()) return;
    done = std::move(it->second);
    self->waiting_.erase(it);
  }
  PublishAck ack;
  if (pa != nullptr) {
    ack.sequence = pa->Sequence;
    ack.duplicate = pa->Duplicate;
  } else if (pae != nullptr) {
    ack.status = pae->Err == NATS_OK ? NATS_ERR : pae->Err;
    ack.js = pae->ErrCode;
    ack.text = pae->ErrText != nullptr ? pae->ErrText : natsStatus_GetText(ack.status);
  } else {
    ack.status = NATS_ERR;
    ack.text = "no ack and no error";
  }
  done(std::move(ack));
}

}  // namespace mh::fleet
