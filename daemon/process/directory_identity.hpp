// Which directory a path named when it was checked: its device and inode. A path is a name the
// run's submitter may rename things under; the pair is the directory itself. A root daemon keeps
// the pair its check as the submitter saw (directory_as_uid.hpp) and binds the cwd only if the
// descriptor it opens at the spawn has the same one (exec_handoff.hpp), so a rename between the
// two never puts another directory in its place. Header-only: mh-exec's handoff header names it.
#pragma once

#include <cstdint>

namespace mh::daemon {

struct DirectoryIdentity {
  std::uint64_t device = 0;
  std::uint64_t inode = 0;
  // When it was made (statx's btime, in ns since the epoch; 0 where the file system keeps none):
  // an inode number freed by a deletion can be given to a directory made after it, which a
  // submitter could then rename into place; its birth tells the two apart.
  std::uint64_t birth_ns = 0;
  bool operator==(const DirectoryIdentity&) const = default;
  // Whether `found` (at the spawn) is this directory (checked at submit): device and inode, and
  // the birth where the check knew one.
  bool admits(const DirectoryIdentity& found) const {
    return device == found.device && inode == found.inode && (birth_ns == 0 || birth_ns == found.birth_ns);
  }
};

}  // namespace mh::daemon
