// A directory's identity (directory_identity.hpp) as the kernel says it: statx of `path` relative
// to `dir` (AT_EMPTY_PATH when `path` is "", so an O_PATH descriptor names itself). Only the
// system call, no allocation: the cwd check's forked child calls it too. nullopt with errno set.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <optional>

#include "daemon/process/directory_identity.hpp"

namespace mh::daemon {

inline std::optional<DirectoryIdentity> identity_of(int dir, const char* path) {
  struct statx found {};
  const int flags = path[0] == '\0' ? AT_EMPTY_PATH : 0;
  if (::statx(dir, path, flags, STATX_INO | STATX_BTIME, &found) != 0) return std::nullopt;
  DirectoryIdentity identity;
  identity.device = makedev(found.stx_dev_major, found.stx_dev_minor);  // as st_dev says it
  identity.inode = found.stx_ino;
  if (found.stx_mask & STATX_BTIME)
    identity.birth_ns = static_cast<std::uint64_t>(found.stx_btime.tv_sec) * 1'000'000'000ULL + found.stx_btime.tv_nsec;
  return identity;
}

}  // namespace mh::daemon
