// The daemon's STATUS= line to systemd, sent without waiting. sd_notify blocks in sendmsg while
// the listener's datagram queue is full; on the registry's strand that would stop admission,
// `status` and shutdown until somebody reads. STATUS is a hint that the next one replaces, so a
// full queue drops it instead. READY=1 and STOPPING=1 still go through sd_notify: they matter.
#pragma once

#include <string_view>

namespace mh::daemon {

// Sends `state` to $NOTIFY_SOCKET (a path, or '@' for an abstract name) without blocking. False
// when there is no listener, it is not a Unix socket address, or its queue is full.
bool notify_without_waiting(std::string_view state);

}  // namespace mh::daemon
