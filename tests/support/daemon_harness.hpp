// A real `metaharness daemon` under test: its own state dir and socket, and its own
// NOTIFY_SOCKET so the test sees READY / STATUS / STOPPING as systemd would. Plus a blocking
// socket client with bounded waits.
//
// What a daemon makes outside its directory -- its cgroup parent (mh-<hash of the state dir>) and
// its runs' groups in it, its runs' supervisors -- is cleaned when the last DaemonUnderTest of that
// state directory goes (a test that kills a daemon, or leaves runs to their supervisors, leaves
// nothing on the host: issue 24). And it is checked: a daemon the harness stopped cleanly with
// every run closed must have removed its cgroup parent itself; anything the cleaning cannot remove
// fails the test.
#pragma once

#include <sys/types.h>

#include "tests/support/cli_process.hpp"

namespace mh::test {

class DaemonUnderTest {
 public:
  // `config` is the TOML text of the daemon's config file (may be empty).
  DaemonUnderTest(const std::filesystem::path& dir, const std::string& config = "",
                  std::vector<std::string> extra_env = {});
  ~DaemonUnderTest();  // SIGTERM (then SIGKILL) if still running; then the cleaning above

  // Waits for a sd_notify datagram containing `text` (e.g. "READY=1").
  bool wait_notify(const std::string& text, std::chrono::milliseconds timeout = 30s);
  const std::vector<std::string>& notifications() const { return notes_; }

  void signal(int sig);
  int wait_exit(std::chrono::milliseconds timeout = 60s);
  bool running();
  std::string stderr_text() { return process_->stderr_text(); }

  const std::filesystem::path& socket() const { return socket_; }
  const std::filesystem::path& state_dir() const { return state_; }
  std::filesystem::path run_dir(const std::string& id) const { return state_ / "runs" / id; }
  int pid() const { return process_->pid(); }
  // The daemon's cgroup parent (where it makes its runs' groups), whether or not it exists;
  // nullopt when its config says cgroup_root = "none" or the host has no cgroup2.
  const std::optional<std::filesystem::path>& cgroup_parent() const { return cgroup_parent_; }

 private:
  void drain_notify(int timeout_ms);
  void clean_up_after(bool stopped_cleanly);

  std::filesystem::path socket_, state_, notify_;
  int notify_fd_ = -1;
  std::vector<std::string> notes_;
  std::unique_ptr<CliProcess> process_;
  std::optional<int> status_;
  std::optional<std::filesystem::path> cgroup_parent_;
};

// Kills what is in `parent`'s run groups, removes them and `parent`: what could not be removed,
// or "" when nothing is left.
std::string remove_cgroup_parent(const std::filesystem::path& parent);

class SocketClient {
 public:
  explicit SocketClient(const std::filesystem::path& socket);
  ~SocketClient();
  bool connected() const { return fd_ >= 0; }

  void send(const std::string& line);
  void send_raw(const std::string& bytes);
  void close_write();
  std::optional<std::string> next_line(std::chrono::milliseconds timeout = 30s);
  // Lines until one satisfies `match` (returned), EOF or the timeout (nullopt). All are kept.
  std::optional<EventLine> wait_for(const std::function<bool(const EventLine&)>& match,
                                    std::chrono::milliseconds timeout = 60s);
  std::optional<EventLine> wait_reply(std::string_view reply, std::chrono::milliseconds timeout = 60s);
  std::optional<EventLine> wait_event(std::string_view event, std::chrono::milliseconds timeout = 60s);
  bool eof() const { return eof_; }
  const std::vector<EventLine>& lines() const { return lines_; }
  std::vector<EventLine> events_named(std::string_view name) const;

  // Sends one request and returns its first reply line.
  std::optional<EventLine> request(const std::string& line, std::chrono::milliseconds timeout = 60s);

 private:
  int fd_ = -1;
  std::optional<testkit::LineReader> lines_from_;  // while connected
  bool eof_ = false;
  std::vector<EventLine> lines_;
};

// Builders for socket API lines.
std::string socket_request(const std::string& request, const std::string& fields_json = "",
                           const std::string& id = "t");
// A metaharness.scenario/1 (one JSON line) whose model asks for one Bash call (`toolu_probe`,
// running `command`), then answers "Done.": the daemon tests' probe of what a run's call can do.
std::string one_bash_call_scenario(const std::string& command);
std::string tool_decide(const std::string& id, const std::string& call, const std::string& decision_json);

// How many of `events` are `event`; with `code`, how many of those carry that code (a warning's).
std::size_t count_events(const std::vector<EventLine>& events, std::string_view event, std::string_view code = {});

// Follows a run's stream from `from_seq` to its end (tail --follow) on a fresh connection; the
// events read by then (all of them, unless `timeout` passed first).
std::vector<EventLine> follow_to_end(const std::filesystem::path& socket, const std::string& run_id,
                                     std::chrono::milliseconds timeout, std::uint64_t from_seq = 1);

}  // namespace mh::test
