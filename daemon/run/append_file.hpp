// AppendFile: the raw transcripts' writer (a direct child's stdout, stdin and stderr copies, the
// hook log). Header-only: two short members.
#pragma once

#include <fcntl.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>

#include "daemon/file_modes.hpp"
#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

// Appends bytes to a file with write(2), for the raw transcripts. A failure is reported once
// and then ignored: losing the copy must not stop the run (the event stream is the record).
class AppendFile {
 public:
  bool open(const std::filesystem::path& path, std::string& error) {
    fd_.reset(open_with_mode(path, O_WRONLY | O_APPEND, kFileMode));  // 0640 whatever the umask
    if (!fd_) error = "cannot open " + path.string() + ": " + std::strerror(errno);
    return bool(fd_);
  }
  void append(std::string_view bytes) {
    if (fd_ && !write_all(fd_.get(), bytes)) fd_.reset();
  }

 private:
  UniqueFd fd_;
};

}  // namespace mh::daemon
