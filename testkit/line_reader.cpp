#include "testkit/line_reader.hpp"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>

namespace mh::testkit {

LineReader::Status LineReader::next(std::string& line, Clock::time_point& read_at, Clock::time_point deadline) {
  for (;;) {
    if (auto nl = buffer_.find('\n', scanned_); nl != std::string::npos) {
      line.assign(buffer_, 0, nl);
      buffer_.erase(0, nl + 1);
      scanned_ = 0;
      read_at = chunk_read_at_;
      return Status::line;
    }
    scanned_ = buffer_.size();
    if (eof_) return Status::eof;
    if (stop_ && *stop_) return Status::error;
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return Status::timeout;
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count() + 1, 1000)));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return Status::error;
    if (ready == 0) continue;
    char chunk[64 * 1024];
    ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::error;
    chunk_read_at_ = Clock::now();
    if (n == 0) {
      eof_ = true;
      eof_at_ = chunk_read_at_;
      continue;
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::optional<LineReader::Clock::time_point> LineReader::drain(Clock::time_point deadline) {
  std::string line;
  Clock::time_point at;
  for (;;) {
    Status s = next(line, at, deadline);
    if (s == Status::eof) return eof_at_;
    if (s != Status::line) return std::nullopt;
  }
}

}  // namespace mh::testkit
