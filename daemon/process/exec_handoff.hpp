// The handover of a sandboxed vendor's environment, across the privileged hops: ChildProcess
// writes it into a sealed memfd and names that descriptor in the one variable the hops carry
// besides the run marker; mh-exec, the last hop, already the run's user, reads it and execs the
// vendor with exactly that environment. Header-only: mh-exec links no library.
#pragma once

#include <cstddef>

namespace mh::daemon {

// The variable naming the inherited descriptor (decimal) that holds the vendor's environment.
inline constexpr const char* kHandedEnvFdVar = "METAHARNESS_EXEC_ENV_FD";
// The most the handed environment may hold (NAME=VALUE entries, each ended by a NUL): the kernel
// takes no more than about this in argv and envp together.
inline constexpr std::size_t kMaxHandedEnvBytes = 1u << 20;

}  // namespace mh::daemon
