#include "daemon/process/process_env.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

bool process_carries(pid_t pid, const std::string& entry) {
  std::string path = "/proc/" + std::to_string(pid) + "/environ";
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return false;
  std::string env;
  char chunk[16 * 1024];
  for (;;) {
    ssize_t n = ::read(fd.get(), chunk, sizeof chunk);
    if (n <= 0) break;
    env.append(chunk, static_cast<std::size_t>(n));
    if (env.size() > (1u << 20)) break;  // an environment that large is not worth reading on
  }
  std::size_t start = 0;
  while (start < env.size()) {
    std::size_t end = env.find('\0', start);
    if (end == std::string::npos) end = env.size();
    if (env.compare(start, end - start, entry) == 0) return true;
    start = end + 1;
  }
  return false;
}

bool process_in_cgroup(pid_t pid, const std::filesystem::path& dir) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("0::", 0) != 0) continue;
    std::string path = line.substr(3);  // relative to the cgroup2 mount (our namespace's root)
    const std::string group = dir.string();
    return path.size() > 1 && group.size() >= path.size() &&
           group.compare(group.size() - path.size(), path.size(), path) == 0;
  }
  return false;
}

}  // namespace mh::daemon
