// The handover of a sandboxed vendor's environment, across the privileged hops: ChildProcess
// writes it into a sealed memfd and names that descriptor in the one variable the hops carry
// besides the run marker; mh-exec, the last hop, already the run's user, reads it and execs the
// vendor with exactly that environment. Header-only: mh-exec links no library.
#pragma once

#include <charconv>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/process/directory_identity.hpp"

namespace mh::daemon {

// The variable naming the inherited descriptor (decimal) that holds the vendor's environment.
inline constexpr const char* kHandedEnvFdVar = "METAHARNESS_EXEC_ENV_FD";
// The most the handed environment may hold (NAME=VALUE entries, each ended by a NUL): the kernel
// takes no more than about this in argv and envp together.
inline constexpr std::size_t kMaxHandedEnvBytes = 1u << 20;

// A privileged hop's argument (before its first "--") that names a path to be opened by the
// spawner, not by the hop: ChildProcess::spawn opens the path after the prefix without following
// any symbolic link (openat2 RESOLVE_NO_SYMLINKS), keeps the descriptor open across exec and puts
// its number in the argument's place. So bwrap binds (`--bind-fd`) exactly the directory that was
// checked, whatever the run's submitter renamed or linked since. It starts with a character no
// absolute path starts with, and only arguments before the first "--" are read (never the
// vendor's own).
inline constexpr std::string_view kOpenedPathArgPrefix = "@mh-opened-path:";

// What such an argument names: the path (absolute), and where the directory was checked as the
// run's submitter, the identity it had then, which the descriptor opened must have too (a rename
// in a directory the submitter may write could otherwise put another directory at the path). The
// identity is written between the prefix and the path as DEVICE:INODE (decimal), so the path's
// leading '/' ends it; DEVICE:INODE:BIRTH_NS where the check knew the directory's birth.
struct OpenedPath {
  std::string path;
  std::optional<DirectoryIdentity> identity;
};

inline std::string opened_path_arg(const std::string& path, const std::optional<DirectoryIdentity>& identity) {
  std::string arg(kOpenedPathArgPrefix);
  if (identity) {
    arg += std::to_string(identity->device) + ":" + std::to_string(identity->inode);
    if (identity->birth_ns != 0) arg += ":" + std::to_string(identity->birth_ns);
  }
  return arg + path;
}

// nullopt: not such an argument, or one whose identity does not parse (refused by the spawner).
inline std::optional<OpenedPath> parse_opened_path_arg(std::string_view arg) {
  if (!arg.starts_with(kOpenedPathArgPrefix)) return std::nullopt;
  arg.remove_prefix(kOpenedPathArgPrefix.size());
  OpenedPath opened;
  const std::size_t slash = arg.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  if (slash > 0) {
    // Two or three decimal numbers, each ended by ':' or the path's '/'.
    std::uint64_t numbers[3] = {0, 0, 0};
    std::size_t count = 0;
    const char* at = arg.data();
    const char* const end = arg.data() + slash;
    while (at < end && count < 3) {
      auto [next, ec] = std::from_chars(at, end, numbers[count]);
      if (ec != std::errc() || next == at) return std::nullopt;
      ++count;
      at = next;
      if (at < end) {
        if (*at != ':') return std::nullopt;
        ++at;
        if (at == end) return std::nullopt;  // a ':' must be followed by a number
      }
    }
    if (at != end || count < 2) return std::nullopt;
    opened.identity = DirectoryIdentity{numbers[0], numbers[1], numbers[2]};
  }
  opened.path = std::string(arg.substr(slash));
  return opened;
}

}  // namespace mh::daemon
