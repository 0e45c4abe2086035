// SupervisedBody: the vendor as the child of a supervisor process of the run's own
// (daemon/supervisor, docs/supervisor.md), which holds its pipes and its hook channel and writes
// its output to the transcript, so the vendor never notices this daemon going away. It owns the
// link to that supervisor, the reader of the transcript, and what the supervisor last said of the
// vendor (its pid, its exit, whether its stdout and stderr ended). It turns the supervisor's
// messages into the run's inputs, and the run's effects into messages to the supervisor.
//
// Made by a launch (launch: the supervisor is spawned and attached to) or by an adoption (attach:
// a supervisor a previous daemon left is attached to again; the run's replay then reconciles).
#pragma once

#include <sys/types.h>

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <optional>
#include <string>

#include "daemon/process/child_process.hpp"
#include "daemon/run/body_host.hpp"
#include "daemon/run/run.hpp"
#include "daemon/run/vendor_body.hpp"
#include "daemon/supervisor/supervisor_link.hpp"
#include "daemon/supervisor/transcript_follower.hpp"

namespace mh::daemon {

class SupervisedBody final : public VendorBody {
 public:
  explicit SupervisedBody(BodyHost& run);
  ~SupervisedBody() override;

  // Spawns the run's supervisor with the plan as contained, attaches to it and opens the
  // transcript. nullopt, or why the launch failed (what was spawned is ended, the supervisor
  // released).
  boost::asio::awaitable<std::optional<std::string>> launch(const adapters::LaunchPlan& to_spawn,
                                                            const SpawnOptions& spawn_options);
  // Attaches to the supervisor a previous daemon left. nullopt, or why not.
  boost::asio::awaitable<std::optional<std::string>> attach();
  bool attached() const { return link_ != nullptr; }
  const supervisor::Hello& hello() const { return link_->hello(); }
  void send(supervisor::ToSupervisor message) { link_->send(std::move(message)); }
  TranscriptFollower& transcript() { return transcript_; }
  // The transcript up to `end`, fed to the run in chunks, each journaled before it is handed in.
  boost::asio::awaitable<void> read_transcript_to(std::uint64_t end, const supervisor::Out* out = nullptr);
  // Kills every process of the run (through its cgroup, else the marker sweep), `root` first.
  boost::asio::awaitable<void> end_body(std::optional<pid_t> root);
  // The same, from the vendor's pid when it is known.
  boost::asio::awaitable<void> end_vendor();
  // A grace that began before an adoption ends when it would have (at once, if it is over).
  void arm_grace_at(Instant when);
  // What the hello of an adoption says happened while no daemon was there: the exit, stderr's end.
  void take_hello_ends();
  // The hello said the vendor's stdout ended, and the run was told.
  bool stdout_ended() const { return stdout_ended_; }
  void set_stdout_ended() { stdout_ended_ = true; }
  bool exited() const { return vendor_exit_.has_value(); }
  std::optional<protocol::ProcessTermination> termination() const { return vendor_exit_; }

  void write_line(std::string line) override;
  void close_stdin(std::chrono::milliseconds grace) override;
  boost::asio::awaitable<void> terminate() override;
  void reply_hook(std::uint64_t connection, std::string line) override;
  boost::asio::awaitable<protocol::ProcessTermination> run_until_gone() override;
  boost::asio::awaitable<std::optional<std::string>> respawn(std::vector<std::string> extra_args) override;
  void release() override;
  pid_t pid() const override { return reaped_ ? 0 : vendor_pid_; }  // none once it exited (parked, say)

 private:
  boost::asio::awaitable<void> handle(supervisor::FromSupervisor& message);
  boost::asio::awaitable<void> after_vendor_exit();

  BodyHost& run_;
  std::unique_ptr<SupervisorLink> link_;
  TranscriptFollower transcript_;                            // the transcript the supervisor writes, as it grows
  pid_t vendor_pid_ = 0;                                     // the supervisor's child (not ours: it is not reaped here)
  std::optional<protocol::ProcessTermination> vendor_exit_;  // as the supervisor reported it
  bool stdout_ended_ = false, stderr_ended_ = false;
  bool reaped_ = false;  // the vendor exited: nothing is left to kill by the grace
};

}  // namespace mh::daemon
