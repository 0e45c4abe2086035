// TranscriptFollower: a chunk from the `out` that carried it, else from the file.
#include "daemon/supervisor/transcript_follower.hpp"

#include <fcntl.h>

#include <algorithm>

namespace mh::daemon {

bool TranscriptFollower::open(const std::filesystem::path& transcript) {
  file_.reset(::open(transcript.c_str(), O_RDONLY | O_CLOEXEC));
  return bool(file_);
}

std::optional<std::string_view> TranscriptFollower::next(std::uint64_t fed, std::uint64_t end,
                                                         const supervisor::Out* out, char* buffer,
                                                         std::size_t capacity) {
  if (out && out->bytes == end)
    if (auto carried = supervisor::carried_from(*out, fed); carried && !carried->empty()) return carried;
  const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(capacity, end - fed));
  for (;;) {
    ssize_t n = ::pread(file_.get(), buffer, want, static_cast<off_t>(fed));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    ++read_backs_;
    return std::string_view(buffer, static_cast<std::size_t>(n));
  }
}

}  // namespace mh::daemon
