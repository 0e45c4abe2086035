// The daemon's daily budgets: what each owner (uid) has spent today (UTC) across all their runs,
// against `[budgets.daily]` in the config. Runs report their spend as it moves; the ledger adds
// the difference to the owner's day and says when that crossed a daily budget, so the daemon can
// stop the owner's runs and refuse their next submit by name. The figures are kept in one small
// file under the state directory, rewritten atomically, so a restart does not reset the day.
//
// Reservations (issue 25): before a run's gateway forwards a model request, the run reserves the
// request's worst case against its owner's day (reserve), and settles it when the answer ended
// (settle: the worst case is let go and the actual cost held in its place until the run's spend
// report, add, counts it). A reservation is granted only while spent + reserved + settled-but-
// not-yet-reported + this worst case stays within the daily usd budget, so ten runs of one uid
// asking together can never hold more than the budget. Reservations live in memory only: a
// restarted daemon starts with none (the requests in flight then settle into nothing and their
// actual spend is still counted through the runs' spend reports).
//
// Thread-safe: every member takes the ledger's mutex. The registry calls it on its strand; runs
// reserve, settle and release from their own strands (RunOptions::reserve_daily and kin).
#pragma once

#include <boost/system/result.hpp>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/run/budget_meter.hpp"

namespace mh::daemon {

// Days since the Unix epoch, UTC.
std::int64_t utc_day(std::chrono::system_clock::time_point t);

struct DaySpend {
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  std::optional<double> usd = 0.0;  // nullopt: some usage could not be priced
};

// One owner's day as `metaharness budget` shows it.
struct OwnerDay {
  std::uint32_t uid = 0;
  DaySpend spent;                // counted from the runs' spend reports
  double reserved_usd = 0;       // worst cases of requests in flight, plus settled costs not yet reported
  std::size_t reservations = 0;  // requests in flight holding a reservation
};

class DailySpendLedger {
 public:
  DailySpendLedger(std::filesystem::path file, adapters::Budgets daily);

  bool metered() const { return daily_.input_tokens || daily_.output_tokens || daily_.usd; }
  const adapters::Budgets& budget() const { return daily_; }

  // A model request of a run (`holder`: its id) of `uid` may spend at most `worst`: the
  // reservation's id, or why the owner's day cannot take it (a daily token budget already
  // reached; spent + reserved + worst past the daily usd budget; a worst case of unknown cost
  // against a usd budget, since unknown is not zero).
  boost::system::result<std::uint64_t, std::string> reserve(std::uint32_t uid, const std::string& holder,
                                                            std::int64_t day, const Spend& worst);
  // The request's answer ended and cost `actual` (usd nullopt: unknown): the reservation is let
  // go and the actual usd held until the run's next spend report adds it. An unknown id (released
  // already, or from before a restart) is ignored.
  void settle(std::uint64_t reservation, const Spend& actual);
  // The run ended: every reservation it still holds is let go.
  void release(const std::string& holder);
  // Each owner with spend or reservations today, by uid.
  std::vector<OwnerDay> owners(std::int64_t day) const;
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
  void roll_to(std::int64_t day);  // a new UTC day: the figures start over (reservations stay)
  double held_usd(std::uint32_t uid) const;

  mutable std::mutex mutex_;
  struct Held {
    std::uint32_t uid = 0;
    std::string holder;
    double usd = 0;
  };
  std::map<std::uint64_t, Held> held_;               // by reservation id
  std::map<std::uint32_t, double> settled_pending_;  // settled usd the runs' reports have not added yet
  std::uint64_t next_reservation_ = 1;

  std::filesystem::path file_;
  adapters::Budgets daily_;
  std::int64_t day_ = 0;
  std::map<std::uint32_t, DaySpend> by_uid_;
  std::map<std::uint32_t, bool> reported_;  // the crossing of this day was reported
};

}  // namespace mh::daemon
