// mh-exec [--relay PORT=SOCKET]... -- PROGRAM [ARG...]: the last hop of a sandboxed run (bwrap → setpriv → mh-exec →
// the vendor). Everything before it (bwrap as root in the host's mount namespace, setpriv with CAP_SETUID) runs with a
// fixed environment of the daemon's making, so nothing the run's submitter declared (an LD_PRELOAD, say) is ever read
// by a privileged program. mh-exec runs after the drop, as the run's user: it reads the vendor's environment from the
// sealed memfd named by METAHARNESS_EXEC_ENV_FD, closes it, and execs PROGRAM (an absolute path) with exactly that
// environment (under a root daemon setpriv has dropped to the run's uid before it; a daemon that is
// not root has nothing to drop). On any failure it says why on stderr and exits 127, as a failed exec does.
//
// A run with a network namespace of its own (network = "gateway", docs/containment.md) has
// loopback only; its way out is the gateway's and the egress proxy's Unix sockets, bound
// read-only into the view. Each `--relay PORT=SOCKET` listens on 127.0.0.1:PORT of the run's
// namespace (before the vendor starts, so its first connect is queued, never refused) and one
// relay process forwards every connection accepted there to SOCKET, byte for byte, both ways. The
// relay is a grandchild (the vendor never sees it as a child of its own: a shell's `wait` would
// wait for it), holds no descriptor the vendor has (its stdio is /dev/null, every other inherited
// descriptor closed) and the vendor none of its (all close-on-exec), carries this process's
// environment (the run marker) and ends when the vendor does.
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "daemon/process/exec_handoff.hpp"

namespace {

[[noreturn]] void fail(const std::string& why) {
  std::fprintf(stderr, "mh-exec: %s\n", why.c_str());
  std::exit(127);
}

std::string errno_text() {
  return std::strerror(errno);
}

// The descriptor named by the variable: decimal, above the standard streams.
int handed_fd() {
  const char* text = std::getenv(mh::daemon::kHandedEnvFdVar);
  if (!text || !*text)
    fail(std::string(mh::daemon::kHandedEnvFdVar) + " is not set: nothing hands the environment over");
  long fd = 0;
  for (const char* c = text; *c; ++c) {
    if (*c < '0' || *c > '9' || fd > 1'000'000) fail(std::string(mh::daemon::kHandedEnvFdVar) + " is not a descriptor");
    fd = fd * 10 + (*c - '0');
  }
  if (fd <= 2) fail(std::string(mh::daemon::kHandedEnvFdVar) + " names a standard stream");
  return static_cast<int>(fd);
}

// The sealed contents: nobody could have changed them after the daemon wrote them.
std::string read_sealed(int fd) {
  int seals = ::fcntl(fd, F_GET_SEALS);
  if (seals == -1) fail("the handed descriptor is not a sealed memfd: " + errno_text());
  constexpr int kNeeded = F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK;
  if ((seals & kNeeded) != kNeeded) fail("the handed memfd is not sealed against writes");
  struct stat info {};
  if (::fstat(fd, &info) == -1) fail("cannot stat the handed memfd: " + errno_text());
  if (info.st_size < 0 || static_cast<std::size_t>(info.st_size) > mh::daemon::kMaxHandedEnvBytes)
    fail("the handed environment is larger than the bound");
  std::string bytes(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
    if (n == -1 && errno == EINTR) continue;
    if (n <= 0) fail("cannot read the handed environment: " + (n == 0 ? std::string("short") : errno_text()));
    done += static_cast<std::size_t>(n);
  }
  return bytes;
}

// ---- the relays --------------------------------------------------------------------------------

constexpr std::size_t kMaxRelays = 8;
constexpr std::size_t kMaxConnections = 256;  // at once, all relays together; more wait in the backlog
constexpr std::size_t kBufferBytes = 64 * 1024;

struct Relay {
  std::uint16_t port = 0;
  std::string socket;  // a path, as seen inside the view
  int listener = -1;
};

// "PORT=SOCKET": a port 1..65535 and an absolute path that fits a Unix socket address.
Relay parse_relay(const char* text) {
  const char* equals = std::strchr(text, '=');
  if (!equals || equals == text) fail(std::string("the relay \"") + text + "\" is not PORT=SOCKET");
  long port = 0;
  for (const char* c = text; c < equals; ++c) {
    if (*c < '0' || *c > '9' || port > 65535) fail(std::string("the relay \"") + text + "\" names no port (1..65535)");
    port = port * 10 + (*c - '0');
  }
  if (port < 1 || port > 65535) fail(std::string("the relay \"") + text + "\" names no port (1..65535)");
  Relay relay;
  relay.port = static_cast<std::uint16_t>(port);
  relay.socket = equals + 1;
  if (relay.socket.empty() || relay.socket.front() != '/')
    fail(std::string("the relay \"") + text + "\" names no absolute socket path");
  if (relay.socket.size() >= sizeof(sockaddr_un{}.sun_path))
    fail(std::string("the relay \"") + text + "\" names a socket path too long for an address");
  return relay;
}

void listen_on(Relay& relay) {
  relay.listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (relay.listener < 0) fail("cannot make a socket for the relay: " + errno_text());
  int one = 1;
  ::setsockopt(relay.listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(relay.port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(relay.listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0)
    fail("cannot listen on 127.0.0.1:" + std::to_string(relay.port) + " for the relay: " + errno_text());
  if (::listen(relay.listener, 128) != 0)
    fail("cannot listen on 127.0.0.1:" + std::to_string(relay.port) + " for the relay: " + errno_text());
}

// One direction of a connection: what was read from `from` and is not yet written to `to`.
struct Flow {
  std::unique_ptr<char[]> buffer{new char[kBufferBytes]};
  std::size_t begin = 0, end = 0;
  bool read_ended = false;  // `from` said end of file
  bool write_shut = false;  // ... and `to` was told so (shutdown SHUT_WR), once drained
  bool empty() const { return begin == end; }
};

struct Connection {
  int tcp = -1, unix_socket = -1;
  Flow up, down;  // up: tcp -> unix (the vendor's requests), down: unix -> tcp
  bool broken = false;
  // A side that reported a hang-up: polled again only while something is asked of it (poll
  // reports a hang-up whatever is asked, and would wake the loop for nothing until the other side
  // moves).
  bool tcp_hup = false, unix_hup = false;
  ~Connection() {
    if (tcp >= 0) ::close(tcp);
    if (unix_socket >= 0) ::close(unix_socket);
  }
  bool done() const { return broken || (up.write_shut && down.write_shut); }
};

// Connects to the socket in the view. Blocking, bounded: a backlog that stays full for 5 s is a
// gateway that is not serving, and the connection is dropped rather than the relay held.
int connect_unix(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  timeval bound{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  int rc;
  do
    rc = ::connect(fd, reinterpret_cast<sockaddr*>(&address),
                   static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size()));
  while (rc != 0 && errno == EINTR);
  if (rc != 0 || ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Moves what can be moved now along one flow: reads when the buffer is empty, writes what it
// holds, passes an end of file on once everything before it is written.
void pump(Flow& flow, int from, int to, bool& broken) {
  for (;;) {
    if (flow.empty() && !flow.read_ended) {
      ssize_t n = ::read(from, flow.buffer.get(), kBufferBytes);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n < 0) {
        broken = true;
        return;
      }
      if (n == 0) {
        flow.read_ended = true;
      } else {
        flow.begin = 0;
        flow.end = static_cast<std::size_t>(n);
      }
    }
    if (!flow.empty()) {
      ssize_t n = ::send(to, flow.buffer.get() + flow.begin, flow.end - flow.begin, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) {
        broken = true;
        return;
      }
      flow.begin += static_cast<std::size_t>(n);
      continue;
    }
    if (flow.read_ended && !flow.write_shut) {
      ::shutdown(to, SHUT_WR);
      flow.write_shut = true;
    }
    return;
  }
}

// Every descriptor but the ones the relay uses: the vendor's pipes, the handed memfd, whatever
// the hops before passed on.
void close_all_but(const std::vector<int>& keep) {
  std::vector<int> open;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (dirent* entry = ::readdir(dir)) {
      char* end = nullptr;
      long fd = std::strtol(entry->d_name, &end, 10);
      if (end != entry->d_name && *end == '\0') open.push_back(static_cast<int>(fd));
    }
    ::closedir(dir);
  }
  for (int fd : open)
    if (fd > 2 && std::find(keep.begin(), keep.end(), fd) == keep.end()) ::close(fd);  // the listing's own: EBADF
}

[[noreturn]] void serve_relays(std::vector<Relay> relays, pid_t vendor) {
  // Its stdio is nobody's: holding the vendor's pipes would keep the run's output open after the
  // vendor ended.
  int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, STDIN_FILENO);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDERR_FILENO);
    ::close(null);
  }
  std::vector<int> keep;
  for (const Relay& relay : relays)
    keep.push_back(relay.listener);
  close_all_but(keep);
  ::signal(SIGPIPE, SIG_IGN);
  // The vendor's end is the relay's: a pidfd of it (not our parent: the relay is a grandchild).
  int vendor_fd = static_cast<int>(::syscall(SYS_pidfd_open, vendor, 0));
  if (vendor_fd < 0 || ::kill(vendor, 0) != 0) ::_exit(0);  // already gone
  std::vector<std::unique_ptr<Connection>> connections;
  std::vector<pollfd> polled;
  for (;;) {
    polled.clear();
    polled.push_back({vendor_fd, POLLIN, 0});
    const bool room = connections.size() < kMaxConnections;
    for (const Relay& relay : relays)
      polled.push_back({relay.listener, static_cast<short>(room ? POLLIN : 0), 0});
    for (const auto& c : connections) {
      short tcp_events = 0, unix_events = 0;
      if (c->up.empty() && !c->up.read_ended) tcp_events |= POLLIN;
      if (!c->up.empty()) unix_events |= POLLOUT;
      if (c->down.empty() && !c->down.read_ended) unix_events |= POLLIN;
      if (!c->down.empty()) tcp_events |= POLLOUT;
      polled.push_back({c->tcp_hup && !tcp_events ? -1 : c->tcp, tcp_events, 0});
      polled.push_back({c->unix_hup && !unix_events ? -1 : c->unix_socket, unix_events, 0});
    }
    const std::size_t polled_connections = connections.size();
    if (::poll(polled.data(), polled.size(), -1) < 0) {
      if (errno == EINTR) continue;
      ::_exit(0);
    }
    if (polled[0].revents) ::_exit(0);  // the vendor ended
    for (std::size_t k = 0; k < polled_connections; ++k) {
      const pollfd& tcp = polled[1 + relays.size() + 2 * k];
      const pollfd& unix_side = polled[2 + relays.size() + 2 * k];
      Connection& c = *connections[k];
      if ((tcp.revents | unix_side.revents) & (POLLERR | POLLNVAL)) c.broken = true;
      if (tcp.revents & POLLHUP) c.tcp_hup = true;
      if (unix_side.revents & POLLHUP) c.unix_hup = true;
    }
    for (std::size_t i = 0; i < relays.size(); ++i) {
      if (!(polled[1 + i].revents & POLLIN)) continue;
      int tcp = ::accept4(relays[i].listener, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (tcp < 0) continue;
      int unix_socket = connect_unix(relays[i].socket);
      if (unix_socket < 0) {
        ::close(tcp);  // the vendor sees its connection closed, as if refused
        continue;
      }
      auto c = std::make_unique<Connection>();
      c->tcp = tcp;
      c->unix_socket = unix_socket;
      connections.push_back(std::move(c));
    }
    // Every connection that had an event (or was just accepted) moves what it can; the new ones
    // find nothing to read yet and are polled next turn.
    for (auto& c : connections) {
      if (c->broken) continue;
      pump(c->up, c->tcp, c->unix_socket, c->broken);
      if (!c->broken) pump(c->down, c->unix_socket, c->tcp, c->broken);
    }
    connections.erase(std::remove_if(connections.begin(), connections.end(), [](const auto& c) { return c->done(); }),
                      connections.end());
  }
}

// Listens on every relay's port, then leaves a grandchild serving them and returns once the child
// between is reaped (so the vendor inherits no child of ours).
void start_relays(std::vector<Relay>& relays) {
  if (relays.empty()) return;
  for (Relay& relay : relays)
    listen_on(relay);
  const pid_t vendor = ::getpid();
  pid_t middle = ::fork();
  if (middle < 0) fail("cannot fork the relay: " + errno_text());
  if (middle == 0) {
    pid_t relay = ::fork();
    if (relay == 0) serve_relays(std::move(relays), vendor);
    ::_exit(relay < 0 ? 1 : 0);
  }
  int status = 0;
  while (::waitpid(middle, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) fail("cannot fork the relay");
}

}  // namespace

int main(int argc, char** argv) {
  constexpr const char* kUsage = "usage: mh-exec [--relay PORT=SOCKET]... -- PROGRAM [ARG...]";
  std::vector<Relay> relays;
  int at = 1;
  while (at < argc && std::strcmp(argv[at], "--") != 0) {
    if (std::strcmp(argv[at], "--relay") != 0 || at + 1 >= argc || std::strcmp(argv[at + 1], "--") == 0) fail(kUsage);
    if (relays.size() == kMaxRelays) fail("more than " + std::to_string(kMaxRelays) + " relays");
    relays.push_back(parse_relay(argv[at + 1]));
    at += 2;
  }
  if (at + 1 >= argc) fail(kUsage);
  char** program = argv + at + 1;
  if (program[0][0] != '/') fail(std::string("the program \"") + program[0] + "\" is not an absolute path");
  const int fd = handed_fd();
  std::string bytes = read_sealed(fd);
  ::close(fd);
  start_relays(relays);
  if (!bytes.empty() && bytes.back() != '\0') fail("the handed environment does not end its last entry");
  std::vector<char*> env;
  for (std::size_t at = 0; at < bytes.size();) {
    char* entry = bytes.data() + at;
    std::size_t length = std::strlen(entry);
    const char* equals = std::strchr(entry, '=');
    if (length == 0 || !equals || equals == entry) fail("the handed environment holds a malformed entry");
    env.push_back(entry);
    at += length + 1;
  }
  env.push_back(nullptr);
  ::execve(program[0], program, env.data());
  fail(std::string("cannot execute ") + program[0] + ": " + errno_text());
}
