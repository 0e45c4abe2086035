// A supervised run's read side of the transcript (docs/supervisor.md): the vendor's stdout as the
// supervisor's `out` messages report it, chunk by chunk. A chunk comes from the `out` itself when
// it carried the bytes from where the run is (the hot path: one receive, no read of the file), and
// is read back from the transcript otherwise: an `out` of an older supervisor, one whose bytes did
// not fit its bound, one whose bytes do not begin where the run is, and what an adopting daemon
// missed. The file stays the record either way; the carried bytes are what the supervisor wrote
// to it. Used on the run's strand.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string_view>

#include "daemon/process/unique_fd.hpp"
#include "daemon/supervisor/supervisor_protocol.hpp"

namespace mh::daemon {

class TranscriptFollower {
 public:
  // Opens the transcript for reading; false with errno saying why.
  bool open(const std::filesystem::path& transcript);
  explicit operator bool() const { return bool(file_); }
  int fd() const { return file_.get(); }

  // The next chunk of the transcript's bytes [fed, end), fed < end: what `out` carried from `fed`
  // on when `out` is the message that reported `end` and its bytes reach back to `fed`; otherwise
  // up to `capacity` bytes read from the file into `buffer`. nullopt: the file ends before `end`
  // (or cannot be read).
  std::optional<std::string_view> next(std::uint64_t fed, std::uint64_t end, const supervisor::Out* out, char* buffer,
                                       std::size_t capacity);

  // How many chunks were read back from the file (the path not taken when bytes are carried).
  std::uint64_t read_backs() const { return read_backs_; }

 private:
  UniqueFd file_;
  std::uint64_t read_backs_ = 0;
};

}  // namespace mh::daemon
