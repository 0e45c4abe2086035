#include "daemon/file_modes.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

namespace mh::daemon {

void make_directories(const std::filesystem::path& dir, std::error_code& ec, mode_t mode) {
  ec.clear();
  std::vector<std::filesystem::path> missing;
  for (std::filesystem::path p = dir.lexically_normal(); !p.empty(); p = p.parent_path()) {
    struct stat info {};
    if (::stat(p.c_str(), &info) == 0) {
      if (!S_ISDIR(info.st_mode)) {
        ec = std::make_error_code(std::errc::not_a_directory);
        return;
      }
      break;
    }
    missing.push_back(p);
    if (p == p.parent_path()) break;
  }
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), mode) == -1) {
      if (errno == EEXIST) continue;  // made meanwhile by someone else: theirs
      ec = std::error_code(errno, std::generic_category());
      return;
    }
    if (::chmod(it->c_str(), mode) == -1) {
      ec = std::error_code(errno, std::generic_category());
      return;
    }
  }
}

int open_with_mode(const std::filesystem::path& path, int flags, mode_t mode) {
  int fd = ::open(path.c_str(), flags | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return -1;
  if (::fchmod(fd, mode) == -1) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace mh::daemon
