// DirectBody: the vendor as the daemon's own child (a run without a supervisor). It owns the
// child, the read ends of its stdout and stderr (drained into the io thread's buffer, redacted as
// read), the one writer of its stdin, the raw transcripts (the vendor's stdout, stdin and stderr,
// byte for byte), and the hook channel's socket with the connections that wait for an answer.
// What the vendor writes and asks becomes the run's inputs (body_host.hpp).
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/system/result.hpp>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "daemon/process/child_process.hpp"
#include "daemon/run/append_file.hpp"
#include "daemon/run/body_host.hpp"
#include "daemon/run/run.hpp"
#include "daemon/run/vendor_body.hpp"
#include "daemon/stream/stream_redactor.hpp"

namespace mh::daemon {

class RunDir;

class DirectBody final : public VendorBody {
 public:
  explicit DirectBody(BodyHost& run);
  ~DirectBody() override;

  // Before the spawn, in this order: the raw transcripts, then (when the plan has one) the hook
  // channel, accepting at once. False with `error` when one cannot be opened.
  bool open_transcripts(const adapters::LaunchPlan& plan, const RunDir& dir, std::string& error);
  bool open_hook_channel(const adapters::HookChannel& channel, std::string& error);
  // Spawns the vendor and takes its pipes over.
  boost::system::result<void, std::string> spawn(const adapters::LaunchPlan& to_spawn, const SpawnOptions& options);

  void write_line(std::string line) override;
  void close_stdin(std::chrono::milliseconds grace) override;
  boost::asio::awaitable<void> terminate() override;
  void reply_hook(std::uint64_t connection, std::string line) override;
  boost::asio::awaitable<protocol::ProcessTermination> run_until_gone() override;
  void release() override;
  pid_t pid() const override { return child_ && !reaped_ ? child_->pid() : 0; }  // none while parked
  boost::asio::awaitable<std::optional<std::string>> respawn(std::vector<std::string> extra_args) override;

 private:
  using local_socket = boost::asio::local::stream_protocol::socket;

  void pump_stdin();
  boost::asio::awaitable<void> write_stdin(std::shared_ptr<Run> keep);
  template <class Consume>
  boost::asio::awaitable<bool> drain(boost::asio::posix::stream_descriptor& from, Consume&& consume);
  template <class Consume>
  boost::asio::awaitable<void> read_until_end(boost::asio::posix::stream_descriptor& from, Consume& consume);
  boost::asio::awaitable<void> read_stdout();
  boost::asio::awaitable<void> read_stderr();
  boost::asio::awaitable<protocol::ProcessTermination> wait_exit();
  boost::asio::awaitable<void> accept_hooks(std::shared_ptr<Run> keep);
  boost::asio::awaitable<void> serve_hook(std::shared_ptr<Run> keep, std::shared_ptr<local_socket> socket);

  BodyHost& run_;
  std::unique_ptr<ChildProcess> child_;
  std::optional<boost::asio::posix::stream_descriptor> stdout_, stderr_;
  // Redacted as read, before the adapter or the file sees them.
  StreamRedactor stdout_redactor_, stderr_redactor_;
  AppendFile transcript_, stdin_log_, stderr_log_;
  // The vendor's stdin: the queue and the one writer coroutine's plumbing.
  std::deque<std::optional<std::string>> to_vendor_;  // nullopt: close stdin after what precedes
  bool writing_ = false;
  bool stdin_closed_ = false;
  bool reaped_ = false;  // the child was waited for: nothing is left to kill by pid
  // The hook channel: pending hook connections wait for their answer here.
  std::optional<boost::asio::local::stream_protocol::acceptor> hook_acceptor_;
  std::map<std::uint64_t, std::shared_ptr<local_socket>> hook_waiting_;
  std::uint64_t hook_connections_ = 0;
};

}  // namespace mh::daemon
