// mh-codex-hook: the PreToolUse command hook metaharness installs in a Codex run.
//
// Codex runs it as a separate process for every tool call, with the hook input JSON on stdin. It
// hands that JSON to the run over the run's hook channel (an abstract Unix socket named by
// $METAHARNESS_HOOK_SOCKET, which the hook inherits from app-server) and prints the answer: a
// hook output JSON, or nothing for "no opinion".
//
// Codex fails OPEN when a hook crashes, times out or prints garbage: the call then runs. So this
// program never does any of those: on every failure (no channel, no connection, no answer within
// its own deadline, an unusable answer) it prints an explicit deny with the reason, and it always
// exits 0. Its deadline ($METAHARNESS_HOOK_DEADLINE_S) is set below Codex's hook timeout.
//
// Plain POSIX and no library: it starts for every call, so it must start fast.
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "daemon/process/unique_fd.hpp"  // header-only: write_all

namespace {

using mh::daemon::write_all;

constexpr std::size_t kMaxBytes = 1u << 20;

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", c);
          out += u;
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
  }
  return out + "\"";
}

[[noreturn]] void deny(const std::string& why) {
  write_all(STDOUT_FILENO,
            "{\"hookSpecificOutput\":{\"hookEventName\":\"PreToolUse\",\"permissionDecision\":\"deny\","
            "\"permissionDecisionReason\":" +
                json_string("metaharness could not decide this call, so it is denied: " + why) + "}}\n");
  std::_Exit(0);
}

// Milliseconds left before our own deadline.
int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// One read(2) appended to `into` (EINTR retried); false at end of file. A read error, or more
// than 1 MiB, is a deny naming `what`.
bool read_more(int fd, std::string& into, const std::string& what) {
  char buffer[16 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) deny("reading " + what + " failed");
    if (n == 0) return false;
    into.append(buffer, static_cast<std::size_t>(n));
    if (into.size() > kMaxBytes) deny(what + " is over 1 MiB");
    return true;
  }
}

}  // namespace

int main() {
  ::signal(SIGPIPE, SIG_IGN);
  long deadline_s = 50;
  if (const char* d = std::getenv("METAHARNESS_HOOK_DEADLINE_S"))
    deadline_s = std::max(1L, std::strtol(d, nullptr, 10));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(deadline_s);

  // The hook input: compact JSON from Codex. Raw newline bytes can only be whitespace between
  // JSON tokens (a string holds them escaped), so folding them keeps the request one line.
  std::string input;
  while (read_more(STDIN_FILENO, input, "the hook input")) {
  }
  for (char& c : input)
    if (c == '\n' || c == '\r') c = ' ';

  const char* address = std::getenv("METAHARNESS_HOOK_SOCKET");
  if (!address || !*address) deny("METAHARNESS_HOOK_SOCKET is not set (the hook runs outside a governed run)");
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::size_t length = std::strlen(address);
  if (length >= sizeof sa.sun_path) deny("the hook channel address is too long");
  std::memcpy(sa.sun_path, address, length);
  if (sa.sun_path[0] == '@') sa.sun_path[0] = '\0';  // abstract socket
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) deny("socket() failed");
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa),
                static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length)) != 0)
    deny(std::string("the run's hook channel is unreachable: ") + std::strerror(errno));
  write_all(fd, input + "\n");

  std::string reply;
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) deny("no answer within " + std::to_string(deadline_s) + " s");
    if (!read_more(fd, reply, "the answer") || reply.find('\n') != std::string::npos) break;
  }
  auto nl = reply.find('\n');
  if (nl == std::string::npos) deny("the run closed the channel without answering");
  reply.resize(nl);
  if (reply.empty()) return 0;            // no opinion: Codex's own pipeline (and its approvals) decide
  if (reply.front() != '{') deny(reply);  // the run refused this connection, saying why
  write_all(STDOUT_FILENO, reply + "\n");
  return 0;
}
