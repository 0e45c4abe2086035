// A subscriber's cursor on a run's events.jsonl: replay from any seq, then follow live, with no
// gap and no duplicate between the two (it is one cursor over one file).
//
// A reader has its own O_RDONLY descriptor and reads whole lines in bulk, only below the log's
// published committed length, so it never sees a torn line and never blocks the writer. When the
// bytes it wants are among those the log committed last (SharedStreamState's RecentBytes, a
// bounded copy kept while readers are open) it copies them from memory; otherwise (replay from an
// early line, a reader far behind) it reads the file with pread(2). The bytes are the same
// either way. It is used from its OWN executor (a
// strand of the subscriber, or any single-threaded executor): read_some, wait_for_more and the
// destructor must all run there. Nothing a reader does touches the run's strand.
//
// Finding where a seq starts, from the reader's side (no help from the run strand): the log
// publishes a sparse index lock-free (the byte offset of seq k*interval + 1 for each k); open()
// takes the entry at or before the wanted seq and scans forward over at most interval - 1 lines.
//
// Following: wait_for_more() lists the reader's waker with the log (once), re-checks, and sleeps
// on a timer that the log's next commit cancels through a handler posted to this reader's
// executor (see stream_shared.hpp). Only waiting readers are woken, and wake-ups coalesce.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/system/result.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "daemon/process/unique_fd.hpp"
#include "daemon/stream/stream_shared.hpp"

namespace mh::daemon {

// Where a reader starts.
struct ReaderStart {
  // 1 = from the beginning; any seq up to last committed + 1.
  static ReaderStart at_seq(std::uint64_t seq) { return ReaderStart{seq}; }
  static ReaderStart from_beginning() { return ReaderStart{1}; }
  // The next seq to be committed: only what is appended from now on.
  static ReaderStart at_end() { return ReaderStart{0}; }

  std::uint64_t seq = 1;  // 0 means "at the end"
};

// A run of whole lines read in one call.
struct LineBatch {
  std::string_view bytes;  // complete lines, each ending in '\n'; valid until the next read
  std::uint64_t first_seq = 0;
  std::uint64_t count = 0;   // lines in `bytes`
  bool reached_end = false;  // these lines include stream.closed: the stream is over
};

enum class WaitOutcome {
  more,         // there are committed lines not read yet
  closed,       // everything up to and including stream.closed has been read
  writer_gone,  // everything committed has been read and the log went away without closing
  timed_out,
};

class StreamReader {
 public:
  static constexpr std::size_t kDefaultBudget = 256 * 1024;

  // Opens its own descriptor on the log's file and positions the cursor at `start`. Refuses a
  // seq past the end (last committed + 1) or a file shorter than the log says.
  static boost::system::result<StreamReader, std::string> open(std::shared_ptr<SharedStreamState> log,
                                                               asio::any_io_executor executor, ReaderStart start);

  StreamReader(StreamReader&&) noexcept = default;
  StreamReader& operator=(StreamReader&&) noexcept = delete;
  ~StreamReader();

  // Reads the committed lines after the cursor, whole lines only, about `budget` bytes at most
  // (more only when a single line is longer than the budget). An empty batch means nothing new
  // is committed yet. Never blocks on the writer; it reads the file.
  boost::system::result<LineBatch, std::string> read_some(std::size_t budget = kDefaultBudget);

  // Suspends until there is something to read, the stream is over, or the deadline passes.
  // Returns at once when there is something already. Spurious wake-ups are absorbed here.
  // Must be awaited from a coroutine running on the executor given to open() (throws
  // std::logic_error otherwise: a wake-up could otherwise be lost until the deadline).
  asio::awaitable<WaitOutcome> wait_for_more(
      std::optional<std::chrono::steady_clock::time_point> deadline = std::nullopt);

  std::uint64_t next_seq() const { return next_seq_; }
  std::uint64_t offset() const { return offset_; }
  bool has_unread() const { return offset_ < log_->committed_bytes(); }
  // Everything through stream.closed has been read.
  bool finished() const;
  // Caught up with a stream whose stream.closed is written but not yet readable (it is being
  // made durable, close_syncer.hpp): a reader that would stop at the end waits for it instead.
  bool final_pending() const { return !finished() && log_->close_pending() && !log_->final_seq(); }
  // This reader's memory: its read buffer (bounded by the budget, or the longest line).
  std::size_t buffer_capacity() const { return buffer_.capacity(); }
  // Where its bytes came from, counted: pread(2) calls on the file, and copies from the log's
  // recent bytes. For tests and diagnostics.
  std::uint64_t file_reads() const { return file_reads_; }
  std::uint64_t memory_reads() const { return memory_reads_; }

 private:
  StreamReader(std::shared_ptr<SharedStreamState> log, std::shared_ptr<ReaderWaker> waker, UniqueFd fd);
  boost::system::result<void, std::string> seek_to_seq(std::uint64_t seq);
  // The file's bytes [offset, offset + length), all below the committed length: from the log's
  // recent bytes when it holds all of them, else from the file.
  boost::system::result<std::size_t, std::string> read_at(std::uint64_t offset, char* out, std::size_t length);

  std::shared_ptr<SharedStreamState> log_;
  std::shared_ptr<ReaderWaker> waker_;
  UniqueFd fd_;
  std::uint64_t offset_ = 0;    // byte offset of the next line to read
  std::uint64_t next_seq_ = 1;  // its seq
  std::string buffer_;
  std::uint64_t file_reads_ = 0;
  std::uint64_t memory_reads_ = 0;
};

}  // namespace mh::daemon
