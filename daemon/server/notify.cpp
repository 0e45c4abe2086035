#include "daemon/server/notify.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace mh::daemon {

bool notify_without_waiting(std::string_view state) {
  const char* where = std::getenv("NOTIFY_SOCKET");
  if (!where) return false;
  std::string_view path(where);
  if (path.empty() || (path[0] != '/' && path[0] != '@')) return false;
  sockaddr_un address{};
  if (path.size() >= sizeof address.sun_path) return false;
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  socklen_t length = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size());
  if (path[0] == '@')
    address.sun_path[0] = '\0';  // abstract: the name is exactly the bytes given
  else
    ++length;  // a path includes its terminating NUL
  int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return false;
  ssize_t sent = ::sendto(fd, state.data(), state.size(), MSG_DONTWAIT | MSG_NOSIGNAL,
                          reinterpret_cast<const sockaddr*>(&address), length);
  ::close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

}  // namespace mh::daemon
