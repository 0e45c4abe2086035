// Splits a pipe into lines, poll-bounded; each line carries the time the chunk holding its end
// was read (what a driver's reaction time is measured from).
#pragma once

#include <chrono>
#include <csignal>
#include <optional>
#include <string>

namespace mh::testkit {

class LineReader {
 public:
  using Clock = std::chrono::steady_clock;
  enum class Status { line, eof, timeout, error };

  // stop: a flag a signal handler sets; a set flag ends any wait with Status::error.
  explicit LineReader(int fd, const volatile std::sig_atomic_t* stop = nullptr) : fd_(fd), stop_(stop) {}

  Status next(std::string& line, Clock::time_point& read_at, Clock::time_point deadline);
  // Reads and discards until end of file (bounded); returns when EOF was seen.
  std::optional<Clock::time_point> drain(Clock::time_point deadline);

 private:
  int fd_;
  const volatile std::sig_atomic_t* stop_;
  std::string buffer_;
  std::size_t scanned_ = 0;
  bool eof_ = false;
  Clock::time_point chunk_read_at_{};
  Clock::time_point eof_at_{};
};

}  // namespace mh::testkit
