// LedgerHost: the run as its gateway ledger sees it (gateway_ledger.hpp). The ledger answers the
// gateway's reservations and hands its reports to the run as the core's inputs; it asks the run
// only whether it still takes them, whether a worst case would cross a budget, and its options.
// It never sees the core, the record or the rest of the shell. Run::Impl implements it. Everything
// here runs on the run's strand.
#pragma once

#include <optional>
#include <vector>

#include "daemon/run/budget_meter.hpp"
#include "daemon/run/input_journal.hpp"
#include "daemon/run/run.hpp"

namespace mh::daemon {

class LedgerHost {
 public:
  virtual ~LedgerHost() = default;

  virtual const RunOptions& run_options() const = 0;
  // The run is closed, or its record is: what the gateway says now is not the record's.
  virtual bool record_closed() const = 0;
  // The run is closed or being ended by force: no further model request is forwarded.
  virtual bool forwards_no_model_request() const = 0;
  // Whether a request whose worst case is `worst`, with `held` reserved and not yet settled,
  // would cross one of the run's budgets (the crossing), before anything is spent.
  virtual std::optional<Crossing> reserve_check(const Spend& worst, const Spend& held) const = 0;
  // The gateway's reports, in order, each one input to the core (journaled first when the run
  // keeps a journal); the run acts on what the core decided once the last is in.
  virtual void gateway_inputs(std::vector<journal::Input> inputs) = 0;
};

}  // namespace mh::daemon
