// Whether a daemon's state directory can take a new run (issue 29, "what a full disk must do").
//
// A run that starts on a full disk cannot keep its record: its events.jsonl, its input journal,
// its request_id's ledger line would fail part way. A submit is therefore refused by name
// (DISK_FULL, docs/socket-api.md) while the state directory's filesystem has less than a small
// floor free, before anything is created; and a submit whose creation fails for want of space
// (ENOSPC between the check and the write) is refused DISK_FULL too, with nothing left behind.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

namespace mh::daemon {

// What a new run needs free to start with room for its first events: its spec, plan, meta, the
// first lines of its stream and journal are a few KiB; the floor leaves headroom for the runs
// already going, whose records share the filesystem.
inline constexpr std::uint64_t kNewRunFloorBytes = 1024 * 1024;
// What a running run needs free to admit a command: its command.result and what the command makes
// the run write (a tool.decided, a frame) are a few KiB; below this the command is refused by
// name before the run acts on it, since its result could not be recorded.
inline constexpr std::uint64_t kCommandFloorBytes = 64 * 1024;

// nullopt when `dir`'s filesystem has at least `floor` bytes free (to an unprivileged writer:
// f_bavail); else why not, naming the directory, what is free, the floor and `needs` (what the
// floor is for). A statvfs that fails says nothing about space: nullopt (the write that follows
// fails by name if the directory is truly unusable). Thread-safe: it reads only the filesystem.
std::optional<std::string> disk_full_problem(const std::filesystem::path& dir, std::uint64_t floor,
                                             const std::string& needs);

// Whether `reason` (a failed write's message, errno's text in it) is the filesystem's ENOSPC or
// EDQUOT: the space ran out, not the directory went wrong.
bool names_no_space(const std::string& reason);

}  // namespace mh::daemon
