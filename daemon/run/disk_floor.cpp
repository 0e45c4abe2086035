#include "daemon/run/disk_floor.hpp"

#include <sys/statvfs.h>

#include <cerrno>
#include <system_error>

namespace mh::daemon {

std::optional<std::string> disk_full_problem(const std::filesystem::path& dir, std::uint64_t floor,
                                             const std::string& needs) {
  struct statvfs info {};
  if (::statvfs(dir.c_str(), &info) != 0) return std::nullopt;
  const std::uint64_t free_bytes = static_cast<std::uint64_t>(info.f_bavail) * info.f_frsize;
  if (free_bytes >= floor) return std::nullopt;
  return dir.string() + " has " + std::to_string(free_bytes) + " bytes free, under the " + std::to_string(floor) +
         " bytes " + needs;
}

bool names_no_space(const std::string& reason) {
  // The messages the writers put in their reasons come from std::system_category (strerror).
  for (int error : {ENOSPC, EDQUOT})
    if (reason.find(std::system_category().message(error)) != std::string::npos) return true;
  return false;
}

}  // namespace mh::daemon
