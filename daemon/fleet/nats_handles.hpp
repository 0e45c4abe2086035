// RAII for the libnats objects the fleet holds (libnats 3.4.1, <nats/nats.h>): each handle owns
// one object and destroys it with the library's own destructor, so no early return leaks a
// connection, a subscription or a message. And the one error value every fleet call returns: the
// libnats status, the JetStream error code when the server gave one, and the library's words.
#pragma once

#include <nats/nats.h>

#include <boost/system/result.hpp>
#include <memory>
#include <string>

namespace mh::fleet {

template <class T, void (*Destroy)(T*)>
struct NatsDeleter {
  void operator()(T* p) const noexcept {
    if (p != nullptr) Destroy(p);
  }
};

using OptionsHandle = std::unique_ptr<natsOptions, NatsDeleter<natsOptions, natsOptions_Destroy>>;
using ConnectionHandle = std::unique_ptr<natsConnection, NatsDeleter<natsConnection, natsConnection_Destroy>>;
using JsHandle = std::unique_ptr<jsCtx, NatsDeleter<jsCtx, jsCtx_Destroy>>;
using KvHandle = std::unique_ptr<kvStore, NatsDeleter<kvStore, kvStore_Destroy>>;
using KvEntryHandle = std::unique_ptr<kvEntry, NatsDeleter<kvEntry, kvEntry_Destroy>>;
using SubscriptionHandle = std::unique_ptr<natsSubscription, NatsDeleter<natsSubscription, natsSubscription_Destroy>>;
using MsgHandle = std::unique_ptr<natsMsg, NatsDeleter<natsMsg, natsMsg_Destroy>>;
using PubAckHandle = std::unique_ptr<jsPubAck, NatsDeleter<jsPubAck, jsPubAck_Destroy>>;
using StreamInfoHandle = std::unique_ptr<jsStreamInfo, NatsDeleter<jsStreamInfo, jsStreamInfo_Destroy>>;
using ConsumerInfoHandle = std::unique_ptr<jsConsumerInfo, NatsDeleter<jsConsumerInfo, jsConsumerInfo_Destroy>>;

// A libnats list: a value struct holding an array, destroyed with what the array holds.
template <class List, void (*Destroy)(List*)>
class NatsList {
 public:
  NatsList() = default;
  ~NatsList() { Destroy(&list_); }
  NatsList(const NatsList&) = delete;
  NatsList& operator=(const NatsList&) = delete;
  List* get() { return &list_; }
  int size() const { return list_.Count; }

 protected:
  List list_{};
};

// A natsMsgList destroyed with its messages.
class MsgList : public NatsList<natsMsgList, natsMsgList_Destroy> {
 public:
  // Takes message i out of the list (the list no longer destroys it).
  MsgHandle take(int i) {
    MsgHandle m(list_.Msgs[i]);
    list_.Msgs[i] = nullptr;
    return m;
  }
};

// A kvKeysList destroyed with its strings.
class KeysList : public NatsList<kvKeysList, kvKeysList_Destroy> {
 public:
  std::string at(int i) const { return list_.Keys[i] != nullptr ? list_.Keys[i] : ""; }
};

struct NatsError {
  natsStatus status = NATS_OK;
  jsErrCode js = static_cast<jsErrCode>(0);
  std::string text;  // what failed, with the library's words
  // The [fleet] key whose value the failure points at ("fleet.credentials"), when one does.
  std::string key;
};

template <class T>
using NatsResult = boost::system::result<T, NatsError>;

// The error of a failed call: `what` and the library's text for `s` (and its last error).
NatsError nats_error(std::string what, natsStatus s, jsErrCode js = static_cast<jsErrCode>(0));

}  // namespace mh::fleet

namespace boost::system {
// result<T, NatsError>::value() on an error throws the error's text (never reached by our code,
// which checks first; required by boost::system::result for a custom error type).
[[noreturn]] void throw_exception_from_error(const mh::fleet::NatsError& e, const boost::source_location& loc);
}  // namespace boost::system
