#include "tests/support/peer_as_uid.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mh::test {

PeerReport as_peer_of_uid(uid_t uid, const std::filesystem::path& socket, std::chrono::seconds read_bound,
                          const std::function<std::string(int fd)>& act) {
  int report[2];
  if (::pipe(report) != 0) return {false, "pipe failed"};
  pid_t child = ::fork();
  if (child == 0) {
    ::close(report[0]);
    // The first byte says whether `act` ran ('+') or why not ('!').
    std::string seen = "!";
    if (::setresgid(uid, uid, uid) != 0 || ::setresuid(uid, uid, uid) != 0) {
      seen += "setresuid failed";
    } else {
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
      timeval bound{static_cast<time_t>(read_bound.count()), 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
        seen += std::string("connect: ") + std::strerror(errno);
      else
        seen = "+" + act(fd);
    }
    (void)!::write(report[1], seen.data(), seen.size());
    ::_exit(0);
  }
  ::close(report[1]);
  std::string seen;
  char chunk[512];
  ssize_t n;
  while ((n = ::read(report[0], chunk, sizeof chunk)) > 0)
    seen.append(chunk, static_cast<std::size_t>(n));
  ::close(report[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  if (seen.empty()) return {false, "the peer process ended with status " + std::to_string(status)};
  return {seen.front() == '+', seen.substr(1)};
}

std::string first_line_as(uid_t uid, const std::filesystem::path& socket, const std::string& request,
                          std::string& why) {
  auto report = as_peer_of_uid(uid, socket, std::chrono::seconds(60), [&](int fd) {
    std::string line = request + "\n";
    (void)!::send(fd, line.data(), line.size(), MSG_NOSIGNAL);
    std::string got;
    char ch;
    while (::read(fd, &ch, 1) == 1 && ch != '\n')
      got += ch;
    return got;
  });
  if (!report.ran || report.seen.empty()) {
    why = report.ran ? "no line" : report.seen;
    return "";
  }
  return report.seen;
}

}  // namespace mh::test
