// What a run's owner host answers a host that relays to it (fleet_requests.cpp): a routed
// `command` or `halt`, a line sent on an attach across hosts, or an attach's question for the
// calls still pending. A peer's bytes (docs/fleet.md, Trust), so nothing of them reaches a client
// as it came: the answer is read field by field, each field checked (its type, its bound), and the
// line the client gets is written again by this host, under the client's own request id. An answer
// that does not fit is refused by name, never passed on nor half used.
#pragma once

#include <boost/system/result.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mh::daemon {

// Bounds on the strings an owner's answer may hold (the whole answer is bounded by the relay,
// command_relay.hpp: 1 MiB).
inline constexpr std::size_t kMaxOwnerCallIdBytes = 1024;
inline constexpr std::size_t kMaxOwnerReasonBytes = 64 * 1024;

// One call the owner says is waiting for a decision (the `pending` line of an attach).
struct OwnerPendingCall {
  std::string call_id;
  std::uint64_t requested_seq = 0;
  std::uint64_t remaining_ms = 0;
};

struct OwnerAnswer {
  enum class Kind { result, refused, pending };
  Kind kind = Kind::refused;
  // result and refused: the socket line for the client, written here under the client's id.
  std::string line;
  // result: whether the owner recorded its command.result in the run's stream (then the client
  // reads it there, from the fleet).
  bool recorded = false;
  // pending: the calls waiting, in the owner's order.
  std::vector<OwnerPendingCall> pending;
};

// Reads `answer` from host `owner`: a `result` line, a `refused` line, or (only when
// `pending_asked`) {"pending": [{call_id, requested_seq, remaining_ms}…]}. A refusal is written
// under `refusal_id`, a result under `result_id` (the client's ids). Unknown keys are ignored (a newer owner may add
// some); a known key of the wrong type or over its bound is not. The error names what did not fit.
boost::system::result<OwnerAnswer, std::string> read_owner_answer(std::string_view answer, std::string_view owner,
                                                                  const std::optional<std::string>& refusal_id,
                                                                  const std::optional<std::string>& result_id,
                                                                  bool pending_asked);

}  // namespace mh::daemon
