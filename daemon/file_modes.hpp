// Explicit modes for what the daemon creates, whatever the umask it was started with (issue 11):
// a umask of 000 must not widen them (a run's record readable by every user) and one of 077 must
// not narrow them. Directories are made 0750, files 0640, unless a caller says tighter; each is
// chmod'ed after it is made, since mkdir(2) and open(2) apply the umask to the mode they get.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <system_error>

namespace mh::daemon {

inline constexpr mode_t kDirMode = 0750;
inline constexpr mode_t kFileMode = 0640;

// Like std::filesystem::create_directories: every missing directory of `dir` is made, each with
// exactly `mode`; directories that exist already are left as they are (an operator's choice).
void make_directories(const std::filesystem::path& dir, std::error_code& ec, mode_t mode = kDirMode);

// open(2) with O_CREAT | O_CLOEXEC, then fchmod to exactly `mode` (the daemon's own files: one
// left by an older daemon with a wider mode is narrowed too). -1 with errno set on failure.
int open_with_mode(const std::filesystem::path& path, int flags, mode_t mode = kFileMode);

}  // namespace mh::daemon
