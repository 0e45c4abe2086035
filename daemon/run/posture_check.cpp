#include "daemon/run/posture_check.hpp"

namespace mh::daemon {

namespace proto = mh::protocol;

namespace {

std::string shown(const std::optional<std::string>& part) {
  return part ? "\"" + *part + "\"" : std::string("unknown");
}

// A change moves the parts it names and leaves the others.
void apply(adapters::Posture& to, const adapters::Posture& change) {
  if (change.permission_mode) to.permission_mode = change.permission_mode;
  if (change.sandbox) to.sandbox = change.sandbox;
}

proto::ev::PostureParts parts_of(const adapters::Posture& p) {
  return proto::ev::PostureParts{p.permission_mode, p.sandbox};
}

}  // namespace

PostureCheck::PostureCheck(std::optional<adapters::Posture> launch) : asked_(launch.value_or(adapters::Posture{})) {}

void PostureCheck::set_applied(const adapters::Posture& change) {
  apply(asked_, change);
  // Set again: the part is what the run asked, as the vendor acknowledged.
  if (change.permission_mode) mode_drifted_ = false;
  if (change.sandbox) sandbox_drifted_ = false;
}

void PostureCheck::set_sent(const std::string& control_id, const adapters::Posture& change) {
  in_flight_[control_id] = change;
}

void PostureCheck::set_answered(const std::string& control_id, bool ok) {
  auto it = in_flight_.find(control_id);
  if (it == in_flight_.end()) return;  // not a permission.set
  adapters::Posture change = std::move(it->second);
  in_flight_.erase(it);
  if (ok) set_applied(change);
}

bool PostureCheck::matches(const std::optional<std::string>& asked, const std::optional<std::string>& reported,
                           std::optional<std::string> adapters::Posture::*part) const {
  if (!asked || !reported) return true;  // nothing asked of it, or not reported: not compared
  if (*asked == *reported) return true;
  for (const auto& [id, change] : in_flight_)
    if (change.*part == reported) return true;  // the vendor applied a set it has not yet acknowledged
  return false;
}

std::optional<proto::ev::Warning> PostureCheck::reported(const adapters::Posture& report, std::string_view occasion,
                                                         bool deny_only) {
  apply(reported_, report);
  const bool mode_differs =
      !matches(asked_.permission_mode, report.permission_mode, &adapters::Posture::permission_mode);
  const bool sandbox_differs = !matches(asked_.sandbox, report.sandbox, &adapters::Posture::sandbox);
  const bool newly = (mode_differs && !mode_drifted_) || (sandbox_differs && !sandbox_drifted_);
  mode_drifted_ = mode_drifted_ || mode_differs;
  sandbox_drifted_ = sandbox_drifted_ || sandbox_differs;
  if (!newly) return std::nullopt;

  proto::ev::PostureDrift drift;
  drift.occasion = std::string(occasion);
  drift.asked = parts_of(asked_);
  drift.reported = parts_of(report);
  std::string what;
  if (mode_differs) {
    drift.drifted.emplace_back("permission_mode");
    what = "permission mode " + shown(report.permission_mode) + " where the run asks " + shown(asked_.permission_mode);
  }
  if (sandbox_differs) {
    drift.drifted.emplace_back("sandbox");
    what += (what.empty() ? "" : " and ") + std::string("sandbox ") + shown(report.sandbox) + " where the run asks " +
            shown(asked_.sandbox);
  }
  drift.refused = refused_controls(deny_only);
  std::string refused;
  for (const auto& r : drift.refused)
    refused += (refused.empty() ? "" : ", ") + r;
  std::string message = "at its " + drift.occasion + " the vendor reports " + what + "; until permission.set sets " +
                        (mode_differs && sandbox_differs ? "them" : "it") + " again, " + refused +
                        " are refused (they would hand calls to a posture the run did not ask for)";
  return proto::ev::Warning{"POSTURE_DRIFT", std::move(message), std::nullopt, std::move(drift)};
}

std::vector<std::string> PostureCheck::refused_controls(bool deny_only) {
  std::vector<std::string> refused{"tool.decide abstain"};
  if (deny_only) refused.emplace_back("tool.decide allow (delivered as abstain on this deny-only run)");
  return refused;
}

std::optional<std::string> PostureCheck::refusal(const proto::Decision& decision, bool deny_only) const {
  if (!drifted()) return std::nullopt;
  const bool abstain = std::holds_alternative<proto::decision::Abstain>(decision);
  const bool allow_as_abstain = deny_only && std::holds_alternative<proto::decision::Allow>(decision);
  if (!abstain && !allow_as_abstain) return std::nullopt;
  std::string parts = mode_drifted_ && sandbox_drifted_ ? "permission mode and sandbox"
                      : mode_drifted_                   ? "permission mode"
                                                        : "sandbox";
  return std::string("POSTURE_DRIFT: the vendor reported another ") + parts + " than the run asks (" +
         shown(reported_.permission_mode) + (reported_.sandbox ? ", sandbox " + shown(reported_.sandbox) : "") +
         "), so " + (abstain ? "an abstain" : "an allow, delivered as abstain on this deny-only run,") +
         " would let that posture decide; deny, or set the posture again with permission.set first";
}

}  // namespace mh::daemon
