// The daemon's daily budgets: what each owner (uid) has spent today (UTC) across all their runs,
// against `[budgets.daily]` in the config. Runs report their spend as it moves; the ledger adds
// the difference to the owner's day and says when that crossed a daily budget, so the daemon can
// stop the owner's runs and refuse their next submit by name. The figures are kept in one small
// file under the state directory, rewritten atomically, so a restart does not reset the day.
//
// Used on the registry's strand only.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "daemon/run/budget_meter.hpp"

namespace mh::daemon {

// Days since the Unix epoch, UTC.
std::int64_t utc_day(std::chrono::system_clock::time_point t);

struct DaySpend {
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  std::optional<double> usd = 0.0;  // nullopt: some usage could not be priced
};

class DailySpendLedger {
 public:
  DailySpendLedger(std::filesystem::path file, adapters::Budgets daily);

  bool metered() const { return daily_.input_tokens || daily_.output_tokens || daily_.usd; }
  // Reads the file; figures of another day than `day` are dropped. A missing file is an empty day;
  // an unreadable one is an error (the daemon says so and starts the day over, never silently).
  std::optional<std::string> load(std::int64_t day);
  // A run of `uid` moved from `before` to `after`: the difference counts for `day`. Returns the
  // daily budget this pushed the owner over, if any (once: a later add for the same owner and day
  // that stays over returns nothing new).
  std::optional<Crossing> add(std::uint32_t uid, std::int64_t day, const Spend& before, const Spend& after);
  // Why a new run of `uid` is refused today, if it is.
  std::optional<std::string> refusal(std::uint32_t uid, std::int64_t day) const;
  DaySpend today(std::uint32_t uid, std::int64_t day) const;
  // Writes the figures (to a temporary file, then renamed over the old one).
  std::optional<std::string> save() const;

 private:
  std::optional<Crossing> crossing(std::uint32_t uid, const DaySpend& s) const;

  std::filesystem::path file_;
  adapters::Budgets daily_;
  std::int64_t day_ = 0;
  std::map<std::uint32_t, DaySpend> by_uid_;
  std::map<std::uint32_t, bool> reported_;  // the crossing of this day was reported
};

}  // namespace mh::daemon
