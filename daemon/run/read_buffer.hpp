// The buffer a vendor body drains a pipe or reads its transcript into: one per io thread, not one
// per run, so an idle run holds no read buffer at all (1,000 idle runs cost no 80 MiB of
// buffers); the framer keeps only a partial line.
#pragma once

#include <cstddef>

namespace mh::daemon {

inline constexpr std::size_t kReadChunk = 64 * 1024;
// A chatty vendor's body yields to other runs after this much in one turn.
inline constexpr std::size_t kDrainPerTurn = 256 * 1024;

// This io thread's buffer of kReadChunk bytes.
char* io_thread_read_buffer();

}  // namespace mh::daemon
