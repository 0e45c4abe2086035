// The handover of a sandboxed vendor's environment, across the privileged hops: ChildProcess
// writes it into a sealed memfd and names that descriptor in the one variable the hops carry
// besides the run marker; mh-exec, the last hop, already the run's user, reads it and execs the
// vendor with exactly that environment. Header-only: mh-exec links no library.
#pragma once

#include <cstddef>
#include <string_view>

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

}  // namespace mh::daemon
