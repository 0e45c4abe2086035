// Adoption: the taking over of a supervised run a previous daemon left (Run::adopt; main's way
// up for it, docs/architecture.md "Recovery"). Its supervisor is attached to again (the run's
// SupervisedBody), the input journal is replayed into the fresh core with the core's effects
// pointed at a ReplayEffects (checked against the record, collected), the replay is reconciled
// with what the supervisor says happened meanwhile, and the run goes on live; or, when it cannot
// be taken over, it is ended through its cgroup and closed, saying why. While it is rebuilt, what
// arrives from outside waits (the run's InputHold, released by main once take_over returns).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <memory>
#include <string>

#include "daemon/run/run.hpp"

namespace mh::daemon {

class ReplayEffects;
class SupervisedBody;

class Adoption {
 public:
  Adoption(Run::Impl& run, SupervisedBody& body);

  // True when the run is live; false when it was closed instead.
  boost::asio::awaitable<bool> take_over();

 private:
  void give_up(const std::string& why);
  // A run that cannot be taken over is ended through its cgroup and closed, saying why.
  boost::asio::awaitable<void> end_unadoptable(std::string why);
  // The core rebuilt from the journal with its effects pointed at the returned replay; or why
  // the run cannot be adopted.
  boost::system::result<std::unique_ptr<ReplayEffects>, std::string> replay_journal();
  void reconcile(ReplayEffects& replay, Instant now);

  Run::Impl& run_;
  SupervisedBody& supervised_;
  Instant hello_at_{};  // when the attach's hello arrived: its ungoverned_ms was true then
};

}  // namespace mh::daemon
