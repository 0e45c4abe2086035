// The only state a run's event log shares across strands: what has been committed to
// events.jsonl (byte length, last seq, the seq of stream.closed once written), a sparse offset
// index, the most recent committed bytes (RecentBytes, for readers that are caught up), and the
// list of readers waiting for more. Held by shared_ptr by the log and by each reader, so either
// may outlive the other. Everything here but RecentBytes is lock-free; the log is its single
// writer, any number of readers read it from their own strands.
//
// Publication order (writer, after write(2) returned for a whole line):
//   recent bytes -> index entry (if the line starts a new interval) -> final_seq (stream.closed
//   only) -> committed_bytes -> committed_seq -> wake waiters.
// A reader that loads committed_seq therefore sees every byte, index entry and final_seq up to
// that seq; a reader that loads committed_bytes reads only whole lines below it, from the recent
// bytes when they hold them and from the file otherwise (the same bytes either way).
//
// Wake-ups: a reader that finds nothing new lists its waker here (at most once: a listed waker
// is not listed again), then checks committed_bytes again, then waits on its timer. After each
// commit the writer takes the whole list with one atomic exchange (nothing to do, one load,
// when no reader waits) and posts one cancel to each listed reader's own executor. Appends
// that land while a reader is already woken or busy reading cost nothing for that reader: the
// wake-ups coalesce. The list holds only readers that are waiting: a stalled reader that never
// asks for more costs the writer nothing at all.
#pragma once

#include <array>
#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace mh::daemon {

namespace asio = boost::asio;

// Append-only array of byte offsets written by one thread and read by many without locks:
// entry i is the offset of the line with seq i*interval + 1. Storage grows in buckets of
// doubling size that never move, so a reader may hold a reference while the writer appends.
class SparseOffsetIndex {
 public:
  std::uint64_t size() const { return size_.load(std::memory_order_acquire); }
  // Precondition: i < size() as loaded by the caller.
  std::uint64_t at(std::uint64_t i) const {
    auto [bucket, slot] = locate(i);
    return buckets_[bucket][slot];
  }
  // Writer only.
  void push_back(std::uint64_t offset);
  // Memory held (for the O(N/interval) check).
  std::uint64_t capacity() const;

 private:
  static constexpr unsigned kFirstBucketBits = 6;  // 64 entries, then 128, 256, ...
  static constexpr unsigned kBuckets = 48;
  static std::pair<unsigned, std::uint64_t> locate(std::uint64_t i);

  std::array<std::unique_ptr<std::uint64_t[]>, kBuckets> buckets_;
  std::atomic<std::uint64_t> size_{0};
};

// One reader's wake-up: a timer on the reader's executor that its waits sleep on, cancelled by
// a handler the writer posts to that executor. Internal to the stream layer.
class ReaderWaker : public std::enable_shared_from_this<ReaderWaker> {
 public:
  explicit ReaderWaker(asio::any_io_executor executor) : executor_(executor), timer_(executor) {}

  asio::steady_timer& timer() { return *timer_; }
  const asio::any_io_executor& executor() const { return executor_; }
  // Called by the reader's destructor, on the reader's executor: later wake handlers do nothing.
  void detach() {
    detached_.store(true, std::memory_order_release);
    timer_.reset();
  }

 private:
  friend class SharedStreamState;
  asio::any_io_executor executor_;
  std::optional<asio::steady_timer> timer_;
  std::atomic<bool> listed_{false};
  std::atomic<bool> detached_{false};
  // Valid while listed: the next waker in the list, and a reference that keeps this one alive
  // until the writer (or a departing reader) has taken it off.
  ReaderWaker* next_ = nullptr;
  std::shared_ptr<ReaderWaker> self_while_listed_;
};

// A copy of the last `capacity` bytes the log committed, and the file offset they start at, so
// that a reader that is caught up takes the lines just written from memory instead of reading
// them back with pread(2). The file stays the buffer and the record: these bytes are the file's
// own bytes at the same offsets (copied after write(2) succeeded), a reader copies out of them
// only below the committed length it loaded, exactly as it would read the file, and any range
// not wholly held here (an early line, a reader further behind than the capacity, a log
// recovered after a restart) is read from the file as before.
//
// Memory: nothing while no reader is open (the idle run's footprint is unchanged); up to
// `capacity` bytes, allocated at the first commit with a reader open and freed when the last
// reader closes. Held as a ring indexed by file offset modulo the capacity.
//
// Threading: one writer (the log, on its run's strand) and any number of readers on their own
// strands; a mutex per run, held for a memcpy on each side. Everything the writer keeps is the
// file's bytes, so a reader never depends on how recent the copy is for correctness, only for
// whether it needs the file.
class RecentBytes {
 public:
  explicit RecentBytes(std::size_t capacity) : capacity_(capacity) {}

  // Writer: `bytes` were just written to the file at `offset` (before they are published).
  // Kept only while a reader is open; a gap since the last bytes kept (commits made while no
  // reader was open) starts the copy afresh at `offset`.
  void keep(std::uint64_t offset, std::string_view bytes);
  // Reader: copies the file's bytes [offset, offset + length) to `out` if all of them are held.
  bool copy(std::uint64_t offset, char* out, std::size_t length) const;

  void reader_opened();
  void reader_closed();

  std::size_t capacity() const { return capacity_; }
  // Bytes allocated right now (0 or the capacity).
  std::size_t memory() const;
  // The file offsets held, [first, second): for tests.
  std::pair<std::uint64_t, std::uint64_t> held() const;

 private:
  const std::size_t capacity_;
  mutable std::mutex mutex_;
  std::atomic<std::size_t> readers_{0};  // changed under mutex_; read without it by keep()'s fast path
  std::unique_ptr<char[]> ring_;         // capacity_ bytes while a reader is open
  std::uint64_t begin_ = 0;              // file offset of the oldest byte held
  std::uint64_t end_ = 0;                // file offset just past the newest
};

class SharedStreamState {
 public:
  // What a caught-up reader can be behind and still take from memory: several decisions' or
  // a chatty chunk's worth of events, well under a reader's read budget.
  static constexpr std::size_t kDefaultRecentBytes = 64 * 1024;

  SharedStreamState(std::filesystem::path path, std::string run_id, std::uint32_t index_interval,
                    std::size_t recent_bytes = kDefaultRecentBytes)
      : path_(std::move(path)), run_id_(std::move(run_id)), index_interval_(index_interval), recent_(recent_bytes) {}
  ~SharedStreamState();
  SharedStreamState(const SharedStreamState&) = delete;
  SharedStreamState& operator=(const SharedStreamState&) = delete;

  const std::filesystem::path& path() const { return path_; }
  const std::string& run_id() const { return run_id_; }
  std::uint32_t index_interval() const { return index_interval_; }
  const SparseOffsetIndex& index() const { return index_; }
  RecentBytes& recent() { return recent_; }
  const RecentBytes& recent() const { return recent_; }

  std::uint64_t committed_bytes() const { return committed_bytes_.load(std::memory_order_seq_cst); }
  std::uint64_t committed_seq() const { return committed_seq_.load(std::memory_order_seq_cst); }
  // The seq of stream.closed once it is committed.
  std::optional<std::uint64_t> final_seq() const {
    auto f = final_seq_.load(std::memory_order_acquire);
    return f ? std::optional<std::uint64_t>(f) : std::nullopt;
  }
  // The log went away without writing stream.closed (its owner dropped it, e.g. a daemon
  // shutting down mid-run): nothing more will ever be committed.
  bool writer_gone() const { return writer_gone_.load(std::memory_order_seq_cst); }
  // stream.closed is written and being made durable off the writer's thread (close_syncer.hpp):
  // final_seq() comes with the next publication.
  bool close_pending() const { return close_pending_.load(std::memory_order_seq_cst); }

  // Diagnostics: how many readers are listed for a wake-up right now (each at most once).
  std::size_t listed_waiters() const { return listed_count_.load(std::memory_order_relaxed); }

  // Reader side: list this waker for the next commit. No-op if it is listed already.
  void list_waiter(ReaderWaker& waker);
  // Reader side, from a departing reader: take the whole list, drop `leaving`, and wake the
  // others (they look, find nothing or something, and list themselves again).
  void unlist_all_but_wake(ReaderWaker& leaving);

  // Writer side.
  void push_index_entry(std::uint64_t offset) { index_.push_back(offset); }
  void publish(std::uint64_t bytes, std::uint64_t seq) {
    committed_bytes_.store(bytes, std::memory_order_seq_cst);
    committed_seq_.store(seq, std::memory_order_seq_cst);
  }
  void set_final_seq(std::uint64_t seq) { final_seq_.store(seq, std::memory_order_release); }
  void mark_writer_gone() { writer_gone_.store(true, std::memory_order_seq_cst); }
  void mark_close_pending() { close_pending_.store(true, std::memory_order_seq_cst); }
  // Wakes every listed reader. Cheap when none is listed (one load).
  void wake_waiters();

 private:
  // Takes the whole list; wakes each taken waker except `skip`.
  void take_and_wake(const ReaderWaker* skip);

  const std::filesystem::path path_;
  const std::string run_id_;
  const std::uint32_t index_interval_;
  SparseOffsetIndex index_;
  RecentBytes recent_;
  std::atomic<std::uint64_t> committed_bytes_{0};
  std::atomic<std::uint64_t> committed_seq_{0};
  std::atomic<std::uint64_t> final_seq_{0};
  std::atomic<bool> writer_gone_{false};
  std::atomic<bool> close_pending_{false};
  std::atomic<ReaderWaker*> waiters_{nullptr};
  std::atomic<std::size_t> listed_count_{0};
};

}  // namespace mh::daemon
