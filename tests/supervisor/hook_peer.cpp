// A hook program for the supervisor tests: connects to a hook channel (an abstract socket,
// "@name", or a path socket, "/path"), sends one line and prints the answer it gets to stdout, up to the end of the
// connection. With "hangup" it sends the line and hangs up its side at once (it stays until the
// other side closes, so that its peer check, which reads its /proc entry, cannot race its exit).
//   mh-test-hook-peer @name|/path '<line>' [hangup]
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>

int main(int argc, char** argv) {
  if (argc < 3 || (argv[1][0] != '@' && argv[1][0] != '/') || std::strlen(argv[1]) >= sizeof(sockaddr_un{}.sun_path)) {
    std::fprintf(stderr, "usage: mh-test-hook-peer @name|/path line [hangup]\n");
    return 2;
  }
  const bool hangup = argc > 3 && std::strcmp(argv[3], "hangup") == 0;
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::string name = argv[1];
  if (name[0] == '@') name[0] = '\0';
  std::memcpy(address.sun_path, name.data(), name.size());
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address),
                static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size())) != 0) {
    std::perror("connect");
    return 1;
  }
  std::string line = std::string(argv[2]) + "\n";
  if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) return 1;
  if (hangup) ::shutdown(fd, SHUT_WR);
  char buffer[4096];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n <= 0) break;
    if (!hangup) std::fwrite(buffer, 1, static_cast<std::size_t>(n), stdout);
  }
  std::fflush(stdout);
  return 0;
}
