// The run's permission posture held against what the vendor reports (issue 27 section 6,
// docs/hermetic.md "The posture the vendor reports"). The run asks for a posture: the one its
// session launches the vendor with (AdapterSession::asked_posture), then every permission.set the
// vendor applied. Whenever the vendor reports the posture it runs under (at its start, on a
// resume), each part the report carries is compared with the part asked; a part that differs has
// drifted: one warning POSTURE_DRIFT says which, and until a permission.set the vendor applies sets
// that part again, the controls whose meaning rests on the vendor's own posture are refused by name.
//
// Which controls those are: a decision that hands the call to the vendor's own rules. An
// `abstain` (any run), and an `allow` on a deny-only run (delivered as abstain). A deny means the
// same under any posture, and an allow on a run that is not deny-only grants whatever the posture
// (it overrides it: docs/policies.md), so neither is refused; permission.set is the way back.
//
// A part the run asks nothing of (an adapter that states no launch posture), or that the report
// does not carry, is not compared: no check is claimed that did not happen. Pure: no I/O, no
// clock, so an adoption's replay of the journal rebuilds it exactly.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "adapters/posture.hpp"
#include "protocol/events.hpp"

namespace mh::daemon {

class PostureCheck {
 public:
  // `launch`: what the session asks at launch; nullopt when the adapter states nothing.
  explicit PostureCheck(std::optional<adapters::Posture> launch);

  // A permission.set the vendor has applied (its ack), or sent and not yet answered (`control_id`):
  // a report that arrives meanwhile may show either the old or the new posture.
  void set_applied(const adapters::Posture& change);
  void set_sent(const std::string& control_id, const adapters::Posture& change);
  // The vendor answered a sent permission.set: ok puts it in force; either way it is no longer in flight.
  void set_answered(const std::string& control_id, bool ok);

  // The vendor reported its posture. The warning to emit when a part drifted (once per report
  // that finds a drift not already warned of); nullopt otherwise.
  std::optional<protocol::ev::Warning> reported(const adapters::Posture& report, std::string_view occasion,
                                                bool deny_only);

  // Why this decision is refused while a part has drifted; nullopt when it may be delivered.
  std::optional<std::string> refusal(const protocol::Decision& decision, bool deny_only) const;

  bool drifted() const { return mode_drifted_ || sandbox_drifted_; }
  // What the run asks now (the launch posture with every applied permission.set over it).
  const adapters::Posture& asked() const { return asked_; }
  // The vendor's last report (nullopt parts: never reported).
  const adapters::Posture& last_reported() const { return reported_; }
  // The controls refused while a drift lasts, as the warning names them.
  static std::vector<std::string> refused_controls(bool deny_only);

 private:
  // Whether `reported` matches what is asked of one part (or of a set of it still in flight).
  bool matches(const std::optional<std::string>& asked, const std::optional<std::string>& reported,
               std::optional<std::string> adapters::Posture::*part) const;

  adapters::Posture asked_;
  adapters::Posture reported_;
  std::map<std::string, adapters::Posture> in_flight_;  // control id -> the change it asks
  bool mode_drifted_ = false;
  bool sandbox_drifted_ = false;
};

}  // namespace mh::daemon
