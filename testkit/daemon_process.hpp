// The real `metaharness daemon` under a bench's measurement: its own dir, socket, config and
// NOTIFY_SOCKET (which a thread here drains as systemd would), stdin from /dev/null and its output
// appended to <dir>/daemon.log, watched through a pidfd. Every wait is bounded.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "testkit/subprocess.hpp"

namespace mh::testkit {

class DaemonProcess {
 public:
  // Writes <dir>/config.toml and binds <dir>/notify.sock; throws when the socket cannot be bound.
  DaemonProcess(std::filesystem::path dir, std::filesystem::path metaharness, std::filesystem::path state_dir,
                const std::string& config);
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  ~DaemonProcess();  // kills (its group) and reaps a daemon still running

  // Spawns the daemon; start_ns() is stamped right before the spawn (posix_spawn, which execs at
  // once). Returns an error text, or "".
  std::string start();
  // start(), then READY=1 within 30 s: "" (and, in *ready_ns, when READY=1 came), or why not.
  std::string start_until_ready(std::int64_t* ready_ns = nullptr);

  // When (monotonic ns) the first datagram containing `text` arrived, or nullopt after `timeout`.
  std::optional<std::int64_t> wait_notify(std::string_view text, std::chrono::milliseconds timeout);

  // SIGTERM, then a bounded wait; SIGKILL to its group if it does not go. Returns the ms it took
  // to exit on its own, or nullopt if it had to be killed.
  std::optional<double> stop(std::chrono::milliseconds grace);
  // SIGKILL to the daemon alone (not its process group: a crash takes only the daemon), reaped.
  // False if it did not die within 30 s.
  bool kill_daemon_only();

  pid_t pid() const { return daemon_.pid(); }
  std::int64_t start_ns() const { return start_ns_; }
  const std::filesystem::path& socket() const { return socket_; }
  const std::filesystem::path& state_dir() const { return state_; }
  // The last 3,000 bytes of daemon.log, for a failure's message.
  std::string log_tail() const;

 private:
  void drain_notifications();
  void reap();
  void kill_and_reap();
  void close_pidfd();

  std::filesystem::path dir_, metaharness_, state_, socket_, notify_, config_;
  int notify_fd_ = -1;
  int stop_drain_[2] = {-1, -1};
  std::mutex notify_mutex_;
  std::condition_variable notify_arrived_;
  std::vector<std::pair<std::int64_t, std::string>> notifications_;  // (arrival, datagram)
  std::thread drain_;
  Subprocess daemon_;
  int pidfd_ = -1;
  std::int64_t start_ns_ = 0;
};

}  // namespace mh::testkit
