#include "testkit/daemon_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "testkit/proc.hpp"
#include "testkit/socket_client.hpp"

extern char** environ;

namespace mh::testkit {

namespace fs = std::filesystem;

DaemonProcess::DaemonProcess(fs::path dir, fs::path metaharness, fs::path state_dir, const std::string& config)
    : dir_(std::move(dir)), metaharness_(std::move(metaharness)), state_(std::move(state_dir)) {
  fs::create_directories(dir_);
  socket_ = dir_ / "mh.sock";
  notify_ = dir_ / "notify.sock";
  config_ = dir_ / "config.toml";
  write_file(config_, config);
  fs::remove(notify_);
  notify_fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un a = unix_address(notify_);
  if (notify_fd_ < 0 || ::bind(notify_fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    throw std::runtime_error("cannot bind the notify socket " + notify_.string() + ": " + std::strerror(errno));
  if (::pipe2(stop_drain_, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe2: ") + std::strerror(errno));
  // The notify socket is read all the time, as systemd reads its own: a Unix datagram socket
  // queues only net.unix.max_dgram_qlen (10 by default) datagrams, and once that many STATUS=
  // lines sit unread the daemon's sd_notify blocks in sendmsg — on its registry strand, which
  // then never sees SIGTERM.
  drain_ = std::thread([this] { drain_notifications(); });
}

DaemonProcess::~DaemonProcess() {
  if (daemon_.running()) kill_and_reap();
  char stop = 1;
  [[maybe_unused]] ssize_t n = ::write(stop_drain_[1], &stop, 1);
  drain_.join();
  for (int fd : {notify_fd_, stop_drain_[0], stop_drain_[1]})
    if (fd >= 0) ::close(fd);
}

std::string DaemonProcess::start() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    // Paths come from the bench, never from a systemd or socket-activation environment.
    if (entry.starts_with("NOTIFY_SOCKET=") || entry.starts_with("LISTEN_")) continue;
    env.emplace_back(entry);
  }
  env.push_back("NOTIFY_SOCKET=" + notify_.string());
  SpawnOptions options{
      .program = metaharness_,
      .args = {"daemon", "--config", config_.string(), "--socket", socket_.string(), "--state-dir", state_.string()},
      .env = std::move(env),
      .stdin_null = true,
      .output_log = dir_ / "daemon.log"};
  start_ns_ = monotonic_ns();
  if (auto error = daemon_.spawn(options); !error.empty()) return error;
  // Our unreaped child: its pid cannot be recycled before the pidfd is held.
  pidfd_ = open_pidfd(daemon_.pid());
  if (pidfd_ < 0) {
    std::string error = std::string("pidfd_open: ") + std::strerror(errno);
    kill_and_reap();
    return error;
  }
  return "";
}

std::string DaemonProcess::start_until_ready(std::int64_t* ready_ns) {
  if (auto e = start(); !e.empty()) return e;
  auto ready = wait_notify("READY=1", std::chrono::seconds(30));
  if (!ready) return "the daemon did not become ready: " + log_tail();
  if (ready_ns) *ready_ns = *ready;
  return "";
}

std::optional<std::int64_t> DaemonProcess::wait_notify(std::string_view text, std::chrono::milliseconds timeout) {
  std::unique_lock lock(notify_mutex_);
  std::optional<std::int64_t> found;
  notify_arrived_.wait_for(lock, timeout, [&] {
    for (const auto& [at, datagram] : notifications_)
      if (datagram.find(text) != std::string::npos) {
        found = at;
        return true;
      }
    return false;
  });
  return found;
}

std::optional<double> DaemonProcess::stop(std::chrono::milliseconds grace) {
  if (!daemon_.running()) return 0.0;
  std::int64_t asked = monotonic_ns();
  ::kill(daemon_.pid(), SIGTERM);
  if (wait_pidfd(pidfd_, asked + std::chrono::nanoseconds(grace).count())) {
    double took_ms = ms_since(asked);
    reap();
    return took_ms;
  }
  kill_and_reap();
  return std::nullopt;
}

bool DaemonProcess::kill_daemon_only() {
  if (!daemon_.running()) return false;
  ::kill(daemon_.pid(), SIGKILL);
  bool gone = wait_pidfd(pidfd_, monotonic_ns() + 30'000'000'000);
  // Reaped without a kill to its group: what the daemon started must outlive it, as in a crash.
  daemon_.wait_exit(Subprocess::Clock::now() + std::chrono::seconds(10));
  close_pidfd();
  return gone;
}

std::string DaemonProcess::log_tail() const {
  std::string log = read_file(dir_ / "daemon.log");
  return log.size() > 3000 ? log.substr(log.size() - 3000) : log;
}

void DaemonProcess::drain_notifications() {
  for (;;) {
    pollfd p[2] = {{notify_fd_, POLLIN, 0}, {stop_drain_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (p[1].revents) return;
    std::int64_t at = monotonic_ns();
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(notify_fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0) break;
      std::lock_guard lock(notify_mutex_);
      notifications_.emplace_back(at, std::string(buf, static_cast<std::size_t>(n)));
    }
    notify_arrived_.notify_all();
  }
}

// Once its pidfd said it exited: reaped at once.
void DaemonProcess::reap() {
  if (!daemon_.wait_exit(Subprocess::Clock::now() + std::chrono::seconds(10))) daemon_.kill_and_reap();
  close_pidfd();
}

void DaemonProcess::kill_and_reap() {
  daemon_.kill_and_reap();  // its whole process group
  close_pidfd();
}

void DaemonProcess::close_pidfd() {
  if (pidfd_ >= 0) ::close(pidfd_);
  pidfd_ = -1;
}

}  // namespace mh::testkit
