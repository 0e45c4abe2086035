#include "daemon/run/run_timers.hpp"

namespace mh::daemon {

RunTimers::RunTimers(Strand strand, std::function<void(journal::Input)> on_timeout, std::function<void()> on_grace)
    : strand_(strand),
      on_timeout_(std::move(on_timeout)),
      on_grace_(std::move(on_grace)),
      idle_(strand),
      wall_(strand),
      grace_(strand),
      stall_(strand) {}

// The handler holds no more than the owner's token: `this` is only touched once the owner (which
// holds this object) is known to live.
void RunTimers::expire_into(boost::asio::steady_timer& timer, journal::Input timeout) {
  timer.async_wait([this, owner = owner_, timeout = std::move(timeout)](boost::system::error_code ec) {
    if (ec) return;  // disarmed
    auto alive = owner.lock();
    if (!alive) return;
    if (const auto* deadline = std::get_if<journal::Deadline>(&timeout)) deadlines_.erase(deadline->call_id);
    on_timeout_(timeout);
  });
}

void RunTimers::arm_deadline(const std::string& call_id, Instant when) {
  auto timer = std::make_unique<boost::asio::steady_timer>(strand_, when);
  expire_into(*timer, journal::Deadline{call_id});  // which, once fired, is dropped from `deadlines_`
  deadlines_[call_id] = std::move(timer);
}

void RunTimers::cancel_deadline(const std::string& call_id) {
  deadlines_.erase(call_id);
}

void RunTimers::arm_park(const std::string& call_id, std::optional<Instant> when) {
  park_.reset();  // a timer destroyed is a timer disarmed (its handler sees operation_aborted)
  if (!when || closed_) return;
  park_ = std::make_unique<boost::asio::steady_timer>(strand_, *when);
  expire_into(*park_, journal::ParkTimeout{call_id});
}

void RunTimers::arm_wall_budget(Instant when) {
  wall_.expires_at(when);
  expire_into(wall_, journal::WallBudget{});
}

void RunTimers::arm_stall(std::optional<Instant> when) {
  if (!when || closed_) {
    stall_.cancel();
    return;
  }
  stall_.expires_at(*when);
  expire_into(stall_, journal::StallTimeout{});
}

void RunTimers::arm_idle(std::chrono::milliseconds after) {
  idle_.expires_after(after);
  expire_into(idle_, journal::IdleTimeout{});
}

void RunTimers::cancel_idle() {
  idle_.cancel();
}

void RunTimers::arm_grace_at(Instant when) {
  if (grace_armed_) return;
  grace_armed_ = true;
  grace_.expires_at(when);
  grace_.async_wait([this, owner = owner_](boost::system::error_code ec) {
    if (ec) return;
    if (auto alive = owner.lock()) on_grace_();
  });
}

void RunTimers::cancel_grace() {
  grace_.cancel();
}

void RunTimers::cancel_all() {
  deadlines_.clear();
  park_.reset();
  idle_.cancel();
  grace_.cancel();
  wall_.cancel();
  stall_.cancel();
  closed_ = true;
}

}  // namespace mh::daemon
