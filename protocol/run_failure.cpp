#include "protocol/run_failure.hpp"

#include <algorithm>

namespace mh::protocol {

namespace {

std::string bounded(std::string text) {
  if (text.size() <= kMaxFailureDetail) return text;
  std::size_t cut = kMaxFailureDetail - 3;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80)
    --cut;  // not inside a UTF-8 sequence
  text.resize(cut);
  return text + "...";
}

RunFailure failure(std::string category, bool retryable, std::string detail) {
  return RunFailure{std::move(category), retryable, bounded(std::move(detail))};
}

std::string termination_text(const ProcessTermination& process) {
  switch (process.kind) {
    case ProcessKind::exited:
      return "the vendor exited " + std::to_string(process.code);
    case ProcessKind::signaled:
      return "the vendor was killed by signal " + std::to_string(process.signal);
    default:
      return "the vendor's end is unknown";
  }
}

}  // namespace

bool is_failure_category(std::string_view category) {
  return std::find(std::begin(kFailureCategories), std::end(kFailureCategories), category) !=
         std::end(kFailureCategories);
}

void FailureWitness::observe(const EventPayload& event) {
  if (const auto* warning = std::get_if<ev::Warning>(&event)) {
    Signal signal{warning->code, warning->code + ": " + warning->message};
    const std::string& c = warning->code;
    if (c == "LAUNCH_REFUSED")
      launch_refused_ = signal;
    else if (c == "LAUNCH_FAILED")
      launch_failed_ = signal;
    else if (c == "RUN_FAILED")
      run_failed_ = signal;
    else if (c == "VENDOR_EXITED")
      vendor_exited_ = signal;
    else if (c == "BUDGET_EXHAUSTED")
      budget_ = signal;
    else if (c == "RUN_STALLED" && (!warning->stall || warning->stall->on_stall == OnStall::halt))
      // Only the stall that halted the run: a warn-only one that a person's halt follows later is
      // that person's halt. (A RUN_STALLED without figures predates them: it always halted.)
      stalled_ = signal;
    else if (c == "GATEWAY_UPSTREAM_UNREACHABLE")
      upstream_ = signal;
    else if (c == "RECOVERED_AFTER_RESTART" || c == "SUPERVISOR_LOST" || c == "RUN_UNGOVERNED" || c == "HOST_LOST")
      daemon_lost_ = signal;
    return;
  }
  if (const auto* expired = std::get_if<ev::AuthExpired>(&event)) {
    auth_ = Signal{"auth.expired", "auth.expired: " + expired->detail.value_or("the run's credential stopped working")};
    return;
  }
  if (const auto* limit = std::get_if<ev::RateLimit>(&event)) {
    if (limit->info.status && *limit->info.status == "rejected")
      rate_limited_ = Signal{"rate_limit", "the upstream's rate limit rejected the run's requests" +
                                               (limit->info.window ? " (" + *limit->info.window + ")" : std::string())};
    return;
  }
  if (const auto* ended = std::get_if<ev::SessionEnded>(&event)) {
    // The vendor's own account of the model's last error (Claude's result.api_error_status).
    if (!ended->api_error_status) return;
    const std::string& status = *ended->api_error_status;
    Signal signal{"api_error " + status, "the model service answered " + status +
                                             (ended->terminal_reason ? " (" + *ended->terminal_reason + ")" : "")};
    if (status == "429")
      rate_limited_ = signal;
    else if (status == "401" || status == "403")
      auth_ = signal;
    else if (!status.empty() && status[0] == '5')
      upstream_ = signal;
  }
}

std::optional<RunFailure> FailureWitness::judge(CloseReason reason, const ProcessTermination& process) const {
  switch (reason) {
    case CloseReason::completed:
      return std::nullopt;
    case CloseReason::budget:
      return failure("budget", false, budget_ ? budget_->detail : "a budget of the run was exhausted");
    case CloseReason::steer_halt:
      // The daemon halts a stalled run itself (on_stall = "halt"); any other halt is a person's
      // or a client's.
      if (stalled_) return failure("stalled", true, stalled_->detail);
      return failure("halted", false, "the run was halted by a command");
    case CloseReason::killed:
      if (daemon_lost_) return failure("daemon", true, daemon_lost_->detail);
      return failure("daemon", true, "the daemon stopped and ended the run (a shutdown, or on_stop = \"halt\")");
    case CloseReason::error:
      break;
  }
  // An error: what it was, the most specific signal first.
  if (launch_refused_) return failure("launch", false, launch_refused_->detail);
  if (launch_failed_) return failure("launch", true, launch_failed_->detail);
  if (auth_) return failure("auth", false, auth_->detail);
  if (rate_limited_) return failure("rate_limit", true, rate_limited_->detail);
  if (upstream_) return failure("upstream", true, upstream_->detail);
  if (daemon_lost_) return failure("daemon", true, daemon_lost_->detail);
  if (run_failed_) return failure("launch", false, run_failed_->detail);
  if (vendor_exited_) return failure("vendor_exit", true, vendor_exited_->detail);
  return failure("vendor_exit", true, "the run ended in error: " + termination_text(process));
}

}  // namespace mh::protocol
