// ReplyToken: where the answer to one vendor decision request goes (part of the session seam's
// vocabulary, session.hpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "protocol/events.hpp"

namespace mh::adapters {

namespace proto = mh::protocol;

// The reply channel for one vendor decision request: the vendor's own request id (the control
// request_id of an in-band hook_callback, the JSON-RPC id of an approval request), or the hook
// channel's connection that is waiting (a command hook, a seam plugin). Typed, so an adapter
// never parses its own token back out of a string. No id and no connection: no reply channel.
struct ReplyToken {
  std::string id;
  std::optional<std::uint64_t> hook_connection;
  proto::Seam seam = proto::Seam::hook;

  bool empty() const { return id.empty() && !hook_connection; }
  // The same channel (the seam says where the request came from, not which one it is).
  bool same_channel(const ReplyToken& other) const {
    return id == other.id && hook_connection == other.hook_connection;
  }
};

}  // namespace mh::adapters
