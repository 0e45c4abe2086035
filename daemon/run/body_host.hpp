// BodyHost: the run's shell as a vendor body sees it (DirectBody, SupervisedBody). A body hands
// what the vendor writes, asks and does to the run through it, each as one input to the run's
// core (journaled first when the run keeps a journal), and asks it for the few facts of the run
// it needs. It never sees the core, the record or the rest of the shell, so a change to those
// (or to the session seam under them) leaves the bodies alone. Run::Impl gives one to its body
// (it implements this interface). Everything here runs on the run's strand.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/json/value.hpp>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "daemon/run/run.hpp"
#include "daemon/run/run_types.hpp"
#include "daemon/supervisor/supervisor_protocol.hpp"

namespace mh::adapters {
struct LaunchPlan;
}

namespace mh::daemon {

class HookLog;
class Redactor;
class RunContainment;
class SupervisorLink;

class BodyHost {
 public:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  virtual ~BodyHost() = default;

  // --- what a body asks of the run ---
  virtual Strand& executor() = 0;
  // Keeps the run alive while a coroutine of the body it spawned is under way.
  virtual std::shared_ptr<Run> keep_alive() = 0;
  virtual const RunOptions& run_options() const = 0;
  virtual const std::string& run_id() const = 0;
  // The run's box: its cgroup, sandbox and user (null when the run is not contained).
  virtual RunContainment* box() = 0;
  // What the vendor was launched with (the run's plan; set before a body is made).
  virtual const adapters::LaunchPlan& plan() const = 0;
  // The run's secrets, as everything it writes outside events.jsonl is redacted with.
  virtual const Redactor& secrets() const = 0;
  // The hook channel's traffic, both directions (vendor-hooks.jsonl).
  virtual HookLog& hook_traffic() = 0;
  // Vendor stdout bytes handed to the run so far (a supervised body reads its transcript on from
  // there; an adoption's replay moves it).
  virtual std::uint64_t stdout_handed() const = 0;
  // The run is parked (its vendor gone until a decision) / closed.
  virtual bool parked() const = 0;
  virtual bool closed() const = 0;
  // The grace after the vendor's stdin is closed: when it runs out, every process of the run is
  // killed (the body's terminate).
  virtual void arm_grace_at(Instant when) = 0;
  virtual void cancel_grace() = 0;

  // --- what the vendor did, as the run's inputs ---
  // A chunk of the vendor's stdout, as read (redacted), at `now`. The run acts on it at once.
  virtual void vendor_out(std::string_view chunk, Instant now) = 0;
  // The vendor's stdout ended: what the run held for a later line is flushed.
  virtual void vendor_end() = 0;
  // A hook request, `parsed` from `line` (a direct body keeps no journal: its `line` is empty),
  // on hook connection `connection`; answered through the body's reply_hook.
  virtual void hook_request(std::uint64_t connection, std::string line, boost::json::value parsed, Instant now) = 0;
  // The hook connection went away before its answer.
  virtual void hook_gone(std::uint64_t connection) = 0;
  // Something the shell says in the run's stream (a warning `code`, `message`).
  virtual void shell_warning(std::string code, std::string message) = 0;
  // A message of the run's gateway or egress proxy, from the supervisor (gateway_ledger.hpp); a
  // reservation is answered on `link`.
  virtual void gateway_message(const supervisor::FromSupervisor& message, SupervisorLink& link) = 0;
};

}  // namespace mh::daemon
