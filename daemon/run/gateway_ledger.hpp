// GatewayLedger: the run's side of its gateway (docs/gateway.md). What the gateway and the egress
// proxy in the run's supervisor report — a reservation asked before a model request is forwarded,
// the usage read from each answer, a route refused, an egress attempt — turned into the run's
// inputs, and the reservations it granted and has not settled yet, which it owns.
//
// A reservation is answered at once, here, and is not an input: whether it is granted depends on
// the owner's daily ledger, shared with other runs, which no replay could ask again. What a
// refusal does to the run (BUDGET_EXHAUSTED, the close `budget`) is an input (BudgetExhausted),
// journaled like the daemon's own daily crossing, so an adoption's replay states it again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "daemon/run/ledger_host.hpp"
#include "daemon/run/run.hpp"
#include "daemon/supervisor/supervisor_link.hpp"

namespace mh::daemon {

class GatewayLedger {
 public:
  explicit GatewayLedger(LedgerHost& run) : run_(run) {}

  // A message of the run's gateway or egress proxy (Reserve, GatewayUsage, GatewayRefused,
  // Egress), from the supervised body's loop; a reservation is answered on `link`.
  void on_message(const supervisor::FromSupervisor& message, SupervisorLink& link);
  // The run ended: whatever it still holds of its owner's day is released (release_daily).
  void release();

 private:
  void on_reserve(const supervisor::Reserve& reserve, SupervisorLink& link);

  LedgerHost& run_;
  // A reservation granted and not yet settled, by the gateway's request number. Not journaled:
  // a reservation is a promise to the live ledger, which a restart empties (docs/policies.md).
  struct Reservation {
    Spend worst;
    std::optional<std::uint64_t> daily;  // the ledger's id, when the owner's day was reserved too
  };
  std::map<std::uint64_t, Reservation> reservations_;
  // The reasons an upstream could not be reached that the stream was told (once each).
  static constexpr std::size_t kMaxUpstreamFailuresTold = 16;
  std::set<std::string> upstream_failures_told_;
};

}  // namespace mh::daemon
