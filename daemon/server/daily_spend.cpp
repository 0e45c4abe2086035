#include "daemon/server/daily_spend.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace mh::daemon {

namespace {
constexpr double kUsdRoundingResidue = 1e-9;
}  // namespace

std::int64_t utc_day(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count() / 86400;
}

DailySpendLedger::DailySpendLedger(std::filesystem::path file, adapters::Budgets daily)
    : file_(std::move(file)), daily_(std::move(daily)) {}

std::optional<std::string> DailySpendLedger::load(std::int64_t day) {
  std::lock_guard lock(mutex_);
  day_ = day;
  by_uid_.clear();
  reported_.clear();
  std::ifstream in(file_, std::ios::binary);
  if (!in) return std::nullopt;  // no file yet: nothing spent today
  std::ostringstream ss;
  ss << in.rdbuf();
  auto v = protocol::parse_json(ss.str());
  if (!v || !v->is_object()) return file_.string() + " is not a JSON object; today's spend starts from zero";
  const auto& o = v->get_object();
  auto stored_day = o.if_contains("day") ? protocol::exact_int64(o.at("day")) : std::nullopt;
  if (!stored_day || *stored_day != day) return std::nullopt;  // another day's figures
  const json::value* owners = o.if_contains("owners");
  if (!owners || !owners->is_object()) return file_.string() + " has no owners object; today's spend starts from zero";
  for (const auto& kv : owners->get_object()) {
    char* end = nullptr;
    std::string key(kv.key());
    unsigned long uid = std::strtoul(key.c_str(), &end, 10);
    if (key.empty() || *end != '\0' || uid > UINT32_MAX || !kv.value().is_object()) continue;
    const auto& s = kv.value().get_object();
    DaySpend d;
    if (auto i = s.if_contains("input_tokens") ? protocol::exact_int64(s.at("input_tokens")) : std::nullopt;
        i && *i >= 0)
      d.input_tokens = static_cast<std::uint64_t>(*i);
    if (auto i = s.if_contains("output_tokens") ? protocol::exact_int64(s.at("output_tokens")) : std::nullopt;
        i && *i >= 0)
      d.output_tokens = static_cast<std::uint64_t>(*i);
    const json::value* usd = s.if_contains("usd");
    if (usd && usd->is_double())
      d.usd = usd->get_double();
    else if (usd && usd->is_null())
      d.usd.reset();
    else if (auto whole = usd ? protocol::exact_int64(*usd) : std::nullopt)
      d.usd = static_cast<double>(*whole);
    by_uid_[static_cast<std::uint32_t>(uid)] = d;
    reported_[static_cast<std::uint32_t>(uid)] = crossing(static_cast<std::uint32_t>(uid), d).has_value();
  }
  return std::nullopt;
}

std::optional<Crossing> DailySpendLedger::add(std::uint32_t uid, std::int64_t day, const Spend& before,
                                              const Spend& after) {
  std::lock_guard lock(mutex_);
  roll_to(day);
  DaySpend& d = by_uid_[uid];
  // What settle held for this owner is counted now: it leaves the reserved side as it arrives.
  if (auto it = settled_pending_.find(uid); it != settled_pending_.end() && after.usd) {
    const double moved = *after.usd - before.usd.value_or(0.0);
    it->second -= std::min(it->second, std::max(0.0, moved));
    // Below a billionth of a dollar what is left is the sums' rounding, not money held.
    if (it->second <= kUsdRoundingResidue) settled_pending_.erase(it);
  }
  if (after.input_tokens >= before.input_tokens) d.input_tokens += after.input_tokens - before.input_tokens;
  if (after.output_tokens >= before.output_tokens) d.output_tokens += after.output_tokens - before.output_tokens;
  if (d.usd) {
    if (!after.usd)
      d.usd.reset();  // an unpriced usage: the day's cost is unknown from here on, never smaller
    else
      *d.usd += *after.usd - before.usd.value_or(0.0);
  }
  auto c = crossing(uid, d);
  if (!c || reported_[uid]) return std::nullopt;
  reported_[uid] = true;
  return c;
}

std::optional<Crossing> DailySpendLedger::crossing(std::uint32_t uid, const DaySpend& d) const {
  std::string who = " today by uid " + std::to_string(uid);
  if (daily_.input_tokens && d.input_tokens >= *daily_.input_tokens)
    return Crossing{"daily input_tokens", std::to_string(*daily_.input_tokens) + " token(s)",
                    std::to_string(d.input_tokens) + " token(s)" + who};
  if (daily_.output_tokens && d.output_tokens >= *daily_.output_tokens)
    return Crossing{"daily output_tokens", std::to_string(*daily_.output_tokens) + " token(s)",
                    std::to_string(d.output_tokens) + " token(s)" + who};
  if (daily_.usd) {
    char limit[48], spent[48];
    std::snprintf(limit, sizeof limit, "$%.4f", *daily_.usd);
    if (!d.usd)
      return Crossing{"daily usd", limit,
                      "the cost" + who + " is no longer known (an unpriced model), and an unknown cost is not zero"};
    std::snprintf(spent, sizeof spent, "$%.4f", *d.usd);
    if (*d.usd >= *daily_.usd) return Crossing{"daily usd", limit, std::string(spent) + who};
  }
  return std::nullopt;
}

void DailySpendLedger::roll_to(std::int64_t day) {
  if (day == day_) return;
  day_ = day;  // midnight UTC: a new day
  by_uid_.clear();
  reported_.clear();
  settled_pending_.clear();
}

double DailySpendLedger::held_usd(std::uint32_t uid) const {
  double usd = 0;
  for (const auto& [id, h] : held_)
    if (h.uid == uid) usd += h.usd;
  if (auto it = settled_pending_.find(uid); it != settled_pending_.end()) usd += it->second;
  return usd;
}

boost::system::result<std::uint64_t, std::string> DailySpendLedger::reserve(std::uint32_t uid,
                                                                            const std::string& holder, std::int64_t day,
                                                                            const Spend& worst) {
  using Result = boost::system::result<std::uint64_t, std::string>;
  std::lock_guard lock(mutex_);
  roll_to(day);
  const DaySpend d = by_uid_.count(uid) ? by_uid_.at(uid) : DaySpend{};
  if (auto c = crossing(uid, d)) return Result(boost::system::in_place_error, c->message());
  double worst_usd = 0;
  if (daily_.usd) {
    char limit[48];
    std::snprintf(limit, sizeof limit, "$%.4f", *daily_.usd);
    if (!worst.usd)
      return Result(boost::system::in_place_error,
                    "the daily usd budget of " + std::string(limit) + " cannot be kept for a model request of " +
                        worst.unpriced_model.value_or("a model") +
                        ", which has no price in the config's [prices] (an unknown cost is not zero)");
    worst_usd = *worst.usd;
    const double spent = d.usd.value_or(0.0), held = held_usd(uid);
    if (spent + held + worst_usd > *daily_.usd) {
      char figures[160];
      std::snprintf(figures, sizeof figures,
                    "$%.4f spent and $%.4f reserved today by uid %u, and this request could spend up to $%.4f", spent,
                    held, uid, worst_usd);
      return Result(boost::system::in_place_error,
                    "the daily usd budget of " + std::string(limit) + " cannot take this model request: " + figures);
    }
  }
  const std::uint64_t id = next_reservation_++;
  held_[id] = Held{uid, holder, worst_usd};
  return id;
}

void DailySpendLedger::settle(std::uint64_t reservation, const Spend& actual) {
  std::lock_guard lock(mutex_);
  auto it = held_.find(reservation);
  if (it == held_.end()) return;
  // Unknown cost: nothing is held for it; the run's report makes the day's usd unknown instead.
  if (actual.usd && *actual.usd > 0) settled_pending_[it->second.uid] += *actual.usd;
  held_.erase(it);
}

void DailySpendLedger::release(const std::string& holder) {
  std::lock_guard lock(mutex_);
  std::erase_if(held_, [&](const auto& entry) { return entry.second.holder == holder; });
}

std::vector<OwnerDay> DailySpendLedger::owners(std::int64_t day) const {
  std::lock_guard lock(mutex_);
  std::map<std::uint32_t, OwnerDay> by;
  if (day == day_)
    for (const auto& [uid, d] : by_uid_)
      by[uid] = OwnerDay{uid, d, 0, 0};
  for (const auto& [id, h] : held_) {
    auto& o = by[h.uid];
    o.uid = h.uid;
    o.reserved_usd += h.usd;
    ++o.reservations;
  }
  for (const auto& [uid, usd] : settled_pending_) {
    by[uid].uid = uid;
    by[uid].reserved_usd += usd;
  }
  std::vector<OwnerDay> out;
  for (auto& [uid, o] : by)
    out.push_back(std::move(o));
  return out;
}

std::optional<std::string> DailySpendLedger::refusal(std::uint32_t uid, std::int64_t day) const {
  std::lock_guard lock(mutex_);
  if (day != day_) return std::nullopt;
  auto it = by_uid_.find(uid);
  if (it == by_uid_.end()) return std::nullopt;
  if (auto c = crossing(uid, it->second)) return c->message() + "; new runs are refused until the UTC day ends";
  return std::nullopt;
}

DaySpend DailySpendLedger::today(std::uint32_t uid, std::int64_t day) const {
  std::lock_guard lock(mutex_);
  if (day != day_) return {};
  auto it = by_uid_.find(uid);
  return it == by_uid_.end() ? DaySpend{} : it->second;
}

std::optional<std::string> DailySpendLedger::save() const {
  std::lock_guard lock(mutex_);
  json::object owners;
  for (const auto& [uid, d] : by_uid_)
    owners[std::to_string(uid)] = json::object{{"input_tokens", d.input_tokens},
                                               {"output_tokens", d.output_tokens},
                                               {"usd", d.usd ? json::value(*d.usd) : json::value(nullptr)}};
  std::string text = protocol::canonical_json(json::object{{"day", day_}, {"owners", std::move(owners)}}) + "\n";
  auto tmp = file_;
  tmp += ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (fd < 0) return "cannot write " + tmp.string();
  ::fchmod(fd, 0640);
  bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && ::fdatasync(fd) == 0;
  ::close(fd);
  if (!ok || std::rename(tmp.c_str(), file_.c_str()) != 0) return "cannot write " + file_.string();
  return std::nullopt;
}

}  // namespace mh::daemon
