// What /proc says about another process, for the checks of a hook channel's peer (is this
// connection a process of the run?): the daemon's run loop and a run's supervisor ask here.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace mh::daemon {

// Does /proc/<pid>/environ hold `entry` (NAME=VALUE) as a whole entry? A hook program inherits
// the vendor's environment, so a peer that does not carry the run's marker is not the run's.
// False when the environment cannot be read (the process is gone, or not ours to read).
bool process_carries(pid_t pid, const std::string& entry);

// Is `pid` in the cgroup `dir` itself (its /proc/<pid>/cgroup `0::` line names it)? `dir` is the
// group's directory on the cgroup2 mount; the line is relative to the mount.
bool process_in_cgroup(pid_t pid, const std::filesystem::path& dir);

}  // namespace mh::daemon
