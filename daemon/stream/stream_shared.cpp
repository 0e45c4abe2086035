#include "daemon/stream/stream_shared.hpp"

#include <algorithm>
#include <bit>
#include <boost/asio/post.hpp>
#include <cstring>

namespace mh::daemon {

// ---------------------------------------------------------------------------------------------
// SparseOffsetIndex
// ---------------------------------------------------------------------------------------------

std::pair<unsigned, std::uint64_t> SparseOffsetIndex::locate(std::uint64_t i) {
  // Bucket b holds 64 << b entries and starts at entry 64 * (2^b - 1).
  std::uint64_t v = i + (std::uint64_t{1} << kFirstBucketBits);
  unsigned bucket = static_cast<unsigned>(std::bit_width(v)) - 1 - kFirstBucketBits;
  return {bucket, v - (std::uint64_t{1} << (bucket + kFirstBucketBits))};
}

void SparseOffsetIndex::push_back(std::uint64_t offset) {
  std::uint64_t i = size_.load(std::memory_order_relaxed);
  auto [bucket, slot] = locate(i);
  if (slot == 0)  // a new bucket: readers cannot touch it before size_ covers it
    buckets_[bucket] = std::make_unique<std::uint64_t[]>(std::uint64_t{1} << (bucket + kFirstBucketBits));
  buckets_[bucket][slot] = offset;
  size_.store(i + 1, std::memory_order_release);
}

std::uint64_t SparseOffsetIndex::capacity() const {
  std::uint64_t total = 0;
  for (unsigned b = 0; b < kBuckets; ++b)
    if (buckets_[b]) total += std::uint64_t{1} << (b + kFirstBucketBits);
  return total;
}

// ---------------------------------------------------------------------------------------------
// RecentBytes: a ring where the byte at file offset x sits at x % capacity.
// ---------------------------------------------------------------------------------------------

void RecentBytes::keep(std::uint64_t offset, std::string_view bytes) {
  // No reader open: nothing to keep, and no lock taken. A reader opening meanwhile finds the
  // copy behind its offset and reads the file.
  if (capacity_ == 0 || bytes.empty() || readers_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(mutex_);
  if (readers_.load(std::memory_order_relaxed) == 0) return;  // the last one closed meanwhile
  if (!ring_) ring_ = std::make_unique<char[]>(capacity_);
  if (offset != end_) begin_ = offset;  // a gap (or the first bytes): start afresh here
  // Only the last capacity_ bytes of a batch longer than the ring can stay.
  if (bytes.size() > capacity_) {
    offset += bytes.size() - capacity_;
    bytes.remove_prefix(bytes.size() - capacity_);
    begin_ = offset;
  }
  const std::size_t at = static_cast<std::size_t>(offset % capacity_);
  const std::size_t first = std::min(bytes.size(), capacity_ - at);
  std::memcpy(ring_.get() + at, bytes.data(), first);
  std::memcpy(ring_.get(), bytes.data() + first, bytes.size() - first);
  end_ = offset + bytes.size();
  begin_ = std::max(begin_, end_ - std::min<std::uint64_t>(end_, capacity_));
}

bool RecentBytes::copy(std::uint64_t offset, char* out, std::size_t length) const {
  if (capacity_ == 0) return false;
  std::lock_guard lock(mutex_);
  if (!ring_ || offset < begin_ || offset + length > end_) return false;
  const std::size_t at = static_cast<std::size_t>(offset % capacity_);
  const std::size_t first = std::min(length, capacity_ - at);
  std::memcpy(out, ring_.get() + at, first);
  std::memcpy(out + first, ring_.get(), length - first);
  return true;
}

void RecentBytes::reader_opened() {
  std::lock_guard lock(mutex_);
  readers_.fetch_add(1, std::memory_order_relaxed);
}

void RecentBytes::reader_closed() {
  std::lock_guard lock(mutex_);
  if (readers_.fetch_sub(1, std::memory_order_relaxed) != 1) return;
  ring_.reset();
  begin_ = end_ = 0;
}

std::size_t RecentBytes::memory() const {
  std::lock_guard lock(mutex_);
  return ring_ ? capacity_ : 0;
}

std::pair<std::uint64_t, std::uint64_t> RecentBytes::held() const {
  std::lock_guard lock(mutex_);
  return {begin_, end_};
}

// ---------------------------------------------------------------------------------------------
// Waiter list: a Treiber stack that is only ever pushed one node at a time and emptied whole,
// so there is no ABA problem (nobody pops a single node while others push).
// ---------------------------------------------------------------------------------------------

SharedStreamState::~SharedStreamState() {
  // Nobody else can hold this state any more: drop the references the listed wakers hold on
  // themselves. (No wake is posted: the readers that listed them are gone too.)
  ReaderWaker* node = waiters_.exchange(nullptr, std::memory_order_acquire);
  while (node) {
    ReaderWaker* next = node->next_;
    auto keep = std::move(node->self_while_listed_);
    node->listed_.store(false, std::memory_order_release);
    node = next;
  }
}

void SharedStreamState::list_waiter(ReaderWaker& waker) {
  bool expected = false;
  if (!waker.listed_.compare_exchange_strong(expected, true, std::memory_order_acq_rel)) return;
  waker.self_while_listed_ = waker.shared_from_this();
  listed_count_.fetch_add(1, std::memory_order_relaxed);
  ReaderWaker* head = waiters_.load(std::memory_order_relaxed);
  do {
    waker.next_ = head;
  } while (!waiters_.compare_exchange_weak(head, &waker, std::memory_order_seq_cst, std::memory_order_relaxed));
}

void SharedStreamState::take_and_wake(const ReaderWaker* skip) {
  ReaderWaker* node = waiters_.exchange(nullptr, std::memory_order_seq_cst);
  while (node) {
    // Read everything needed before clearing `listed_`: from then on the reader may list the
    // same waker again and overwrite next_ / self_while_listed_.
    ReaderWaker* next = node->next_;
    std::shared_ptr<ReaderWaker> keep = std::move(node->self_while_listed_);
    listed_count_.fetch_sub(1, std::memory_order_relaxed);
    node->listed_.store(false, std::memory_order_release);
    if (node != skip && !keep->detached_.load(std::memory_order_acquire)) {
      asio::any_io_executor executor = keep->executor_;  // before `keep` moves into the handler
      asio::post(executor, [waker = std::move(keep)] {
        // On the reader's executor, so serialised with its waits and its detach().
        if (!waker->detached_.load(std::memory_order_acquire) && waker->timer_) waker->timer_->cancel();
      });
    }
    node = next;
  }
}

void SharedStreamState::wake_waiters() {
  // The seq_cst load pairs with the reader's seq_cst push + committed_bytes re-check: either we
  // see its waker here, or it sees the commit we just published.
  if (waiters_.load(std::memory_order_seq_cst) == nullptr) return;
  take_and_wake(nullptr);
}

void SharedStreamState::unlist_all_but_wake(ReaderWaker& leaving) {
  if (!leaving.listed_.load(std::memory_order_acquire)) return;
  take_and_wake(&leaving);
}

}  // namespace mh::daemon
