// The daemon's side of a run's supervisor (docs/supervisor.md): start one for a run, attach to
// it (at the run's start, and again after a daemon restart), hear what the vendor does, tell it
// what to write. Used on the run's strand, like every I/O object of a run.
#pragma once

#include <sys/types.h>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "daemon/supervisor/supervisor_protocol.hpp"
#include "daemon/supervisor/supervisor_spec.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

// Writes `spec` to `spec_file` (0600) and starts `supervisor_binary --spec <spec_file>`, with
// stdin from /dev/null and stdout/stderr appended to <run dir>/supervisor.log, in a session of
// its own (no signal to the daemon's group or terminal reaches it), with an empty environment,
// every signal at default and no descriptor of the daemon's.
//
// It is started through an intermediate child that exits at once (a double fork), so the
// supervisor is never the daemon's child: the nearest subreaper (PID 1, or systemd) reaps it,
// as it reaps the supervisors of an earlier daemon after a restart. The daemon thus never holds
// a zombie and never waits for a supervisor. Blocks until the supervisor has exec'd (or failed
// to: "exec of /x/metaharness-supervisor failed: No such file or directory").
//
// Returning does not mean the supervisor is serving: attach (below) waits for its socket.
boost::system::result<void, std::string> spawn_supervisor(const std::filesystem::path& supervisor_binary,
                                                          const supervisor::SupervisorSpec& spec,
                                                          const std::filesystem::path& spec_file);

// Ends the supervisor a run's directory names (its supervisor.json), when that process is still
// there and still this run's (its command line names the run's spec file): for a run that is
// recovered instead of adopted, whose body was killed through its cgroup. False when there was
// none to end.
bool end_stale_supervisor(const std::filesystem::path& run_dir);

// The supervisor a run's directory names (its supervisor.json, written once the vendor is
// spawned): nullopt when it names none (no file yet, or unreadable). `running`: that process is
// still there and still this run's supervisor (its command line names the run's spec file; a
// zombie or a reused pid is not). A supervisor that is named and not running has ended (released,
// abandoned or killed): its socket will never answer.
struct RecordedSupervisor {
  pid_t pid = 0;
  bool running = false;
};
std::optional<RecordedSupervisor> recorded_supervisor(const std::filesystem::path& run_dir);

class SupervisorLink {
 public:
  // Connects to `socket` (retrying while it does not exist yet or refuses, up to `within`),
  // sends attach and reads hello (within the same bound). Errors as values: "no supervisor at
  // …: …", "supervisor at … refused the attach: …", "supervisor speaks protocol 7, this daemon
  // 1..1", "supervisor at … went away before its hello".
  //
  // `carry_out_bytes`: the most vendor bytes an `out` may carry (bounded by
  // supervisor::kMaxCarriedOutBytes; 0 asks for none, as a daemon before them did). Whether the
  // supervisor carries them is its hello's carry_out_bytes.
  static asio::awaitable<boost::system::result<std::unique_ptr<SupervisorLink>, std::string>> attach(
      asio::any_io_executor ex, std::filesystem::path socket, std::chrono::milliseconds within,
      std::uint64_t carry_out_bytes = supervisor::kMaxCarriedOutBytes);

  // Closes the connection: the supervisor keeps the run, and waits for the next attach (within
  // its adopt bound). Safe while a next() is awaited: that next() completes with an error and
  // touches only state it shares.
  ~SupervisorLink();
  SupervisorLink(const SupervisorLink&) = delete;
  SupervisorLink& operator=(const SupervisorLink&) = delete;

  const supervisor::Hello& hello() const { return hello_; }
  // The version spoken on this connection (hello's).
  std::uint32_t protocol() const { return hello_.protocol; }

  // The next message from the supervisor (out / out_end / err_end / exited / hook / hook_gone /
  // refused), or an error value once the connection ended ("supervisor gone: …"). A line the
  // supervisor should never have sent (malformed, over the bound) is logged as a warning and
  // skipped, as is a carried payload over the bound (its `out` comes without data); messages of an
  // unknown kind are ignored (the versioning rule). A line that cannot be read while bytes are
  // carried ends the connection: what follows it cannot be framed. One next() at a time.
  asio::awaitable<boost::system::result<supervisor::FromSupervisor, std::string>> next();

  // Fire-and-forget, written in order by one writer: In, CloseStdin, HookReply, Release. A
  // write that fails ends the connection; next() then reports it.
  void send(supervisor::ToSupervisor message);

  struct State;

 private:
  explicit SupervisorLink(std::shared_ptr<State> state) : state_(std::move(state)) {}
  std::shared_ptr<State> state_;
  supervisor::Hello hello_;
};

}  // namespace mh::daemon
