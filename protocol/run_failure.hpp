// Why a run failed, in a closed vocabulary a harness can filter on without reading prose (issue
// 27: `stream.closed`'s additive `failure`, docs/socket-api.md "Failures"). A run that completed
// has none.
//
// The category is not chosen where the run stops (a dozen places: the core, the shell, the
// recovery, the supervisor alone, a fleet peer closing a lost host's runs) but read from the
// stream itself: a FailureWitness sees every event the record holds, in order, and judges at the
// close from the reason and what it saw — so every writer of a record agrees, and a record
// recovered after a crash is judged from its own lines.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "protocol/events.hpp"

namespace mh::protocol {

// The wire's struct (events.hpp); `detail` holds at most kMaxFailureDetail bytes.
using RunFailure = ev::RunFailure;

inline constexpr std::size_t kMaxFailureDetail = 512;

// The categories, in the order docs/socket-api.md lists them.
inline constexpr std::string_view kFailureCategories[] = {"auth",   "rate_limit", "budget", "stalled", "vendor_exit",
                                                          "launch", "halted",     "daemon", "upstream"};
bool is_failure_category(std::string_view category);

class FailureWitness {
 public:
  // Every event of the run, in stream order (stream.closed itself is not needed).
  void observe(const EventPayload& event);
  // The failure a close with `reason` and `process` is, or nullopt for `completed`.
  std::optional<RunFailure> judge(CloseReason reason, const ProcessTermination& process) const;

 private:
  struct Signal {
    std::string code;  // a warning's code, or the event that said it ("auth.expired", "api_error 429")
    std::string detail;
  };
  std::optional<Signal> auth_, rate_limited_, upstream_, launch_refused_, launch_failed_, run_failed_, vendor_exited_,
      daemon_lost_, stalled_, budget_;
};

}  // namespace mh::protocol
