// RunTimers: the run's five kinds of timer on its strand — one deadline per pending decision, the
// wall budget, the idle timeout, the stall timer, and the grace after which whatever of the run is
// left is killed.
// The shell says when; a timer that runs out hands its timeout to `on_timeout` (the deadline,
// wall-budget, idle and stall timeouts are inputs of the core) or, for the grace, calls `on_grace`.
// Neither is called once the run is gone (the owner token has expired) nor for a timer cancelled
// or rearmed before it ran out. Separate from the shell because it owns no I/O, only time.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/run/input_journal.hpp"
#include "daemon/run/run_types.hpp"

namespace mh::daemon {

class RunTimers {
 public:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  RunTimers(Strand strand, std::function<void(journal::Input)> on_timeout, std::function<void()> on_grace);

  // The object whose life bounds the callbacks (the Run): a timer that runs out after it is gone
  // does nothing. Set once the owner exists.
  void bind(std::weak_ptr<void> owner) { owner_ = std::move(owner); }

  void arm_deadline(const std::string& call_id, Instant when);
  void cancel_deadline(const std::string& call_id);
  // The park timer (issue 27 §5): one per run, for the call RunCore times; nullopt disarms it.
  void arm_park(const std::string& call_id, std::optional<Instant> when);
  void arm_wall_budget(Instant when);
  // The stall timer (issue 27 §2): runs out at `when` into a StallTimeout; nullopt disarms it.
  // Each call replaces the one before; none takes effect once the run closed (cancel_all).
  void arm_stall(std::optional<Instant> when);
  // (Re)armed after every input while the run is idle; cancelled otherwise.
  void arm_idle(std::chrono::milliseconds after);
  void cancel_idle();
  // The grace is armed once in a run's life: a later arm (a halt after a close) keeps the first.
  void arm_grace_at(Instant when);
  // The vendor was reaped: nothing is left to kill by the grace (it stays armed-once).
  void cancel_grace();
  // The run closed: no timer fires again.
  void cancel_all();

 private:
  void expire_into(boost::asio::steady_timer& timer, journal::Input timeout);

  Strand strand_;
  std::function<void(journal::Input)> on_timeout_;
  std::function<void()> on_grace_;
  std::weak_ptr<void> owner_;
  std::map<std::string, std::unique_ptr<boost::asio::steady_timer>> deadlines_;
  std::unique_ptr<boost::asio::steady_timer> park_;
  boost::asio::steady_timer idle_;
  boost::asio::steady_timer wall_;
  boost::asio::steady_timer grace_;
  bool grace_armed_ = false;
  boost::asio::steady_timer stall_;
  bool closed_ = false;  // cancel_all ran: the stall timer is not armed again
};

}  // namespace mh::daemon
