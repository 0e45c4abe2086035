#include "daemon/stream/stream_reader.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>

namespace mh::daemon {

namespace {
std::string errno_text(int error) {
  return std::system_category().message(error);
}
constexpr std::size_t kSeekChunk = 64 * 1024;

// LineBatch is an aggregate that a std::string would initialise too (C++20 parenthesised
// aggregate init), so errors are built explicitly.
using BatchResult = boost::system::result<LineBatch, std::string>;
BatchResult batch_error(std::string message) {
  return BatchResult(boost::system::in_place_error, std::move(message));
}
}  // namespace

StreamReader::StreamReader(std::shared_ptr<SharedStreamState> log, std::shared_ptr<ReaderWaker> waker, UniqueFd fd)
    : log_(std::move(log)), waker_(std::move(waker)), fd_(std::move(fd)) {
  log_->recent().reader_opened();
}

StreamReader::~StreamReader() {
  if (!waker_) return;  // moved from
  waker_->detach();
  log_->unlist_all_but_wake(*waker_);
  log_->recent().reader_closed();
}

boost::system::result<StreamReader, std::string> StreamReader::open(std::shared_ptr<SharedStreamState> log,
                                                                    asio::any_io_executor executor, ReaderStart start) {
  if (!log) return std::string("no log to read");
  UniqueFd fd(::open(log->path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return "cannot open " + log->path().string() + " for reading: " + errno_text(errno);
  StreamReader reader(log, std::make_shared<ReaderWaker>(executor), std::move(fd));
  // Loading committed_seq first makes every byte and index entry up to it visible.
  const std::uint64_t last = log->committed_seq();
  const std::uint64_t seq = start.seq == 0 ? last + 1 : start.seq;
  if (seq > last + 1)
    return "seq " + std::to_string(seq) + " is past the end of run " + log->run_id() +
           "'s stream (last committed seq " + std::to_string(last) + ")";
  auto positioned = reader.seek_to_seq(seq);
  if (!positioned) return positioned.error();
  return reader;
}

boost::system::result<std::size_t, std::string> StreamReader::read_at(std::uint64_t offset, char* out,
                                                                      std::size_t length) {
  if (log_->recent().copy(offset, out, length)) {
    ++memory_reads_;
    return length;
  }
  std::size_t done = 0;
  while (done < length) {
    ++file_reads_;
    ssize_t n = ::pread(fd_.get(), out + done, length - done, static_cast<off_t>(offset + done));
    if (n == -1) {
      if (errno == EINTR) continue;
      return "cannot read " + log_->path().string() + ": " + errno_text(errno);
    }
    if (n == 0) return log_->path().string() + " is shorter than its committed length: it was truncated or replaced";
    done += static_cast<std::size_t>(n);
  }
  return done;
}

boost::system::result<void, std::string> StreamReader::seek_to_seq(std::uint64_t seq) {
  const std::uint64_t interval = log_->index_interval();
  const std::uint64_t entries = log_->index().size();
  std::uint64_t offset = 0;
  std::uint64_t at = 1;
  if (entries > 0) {
    // The entry at or before `seq`; the one for `seq` itself may not exist yet when seq is the
    // next one to be committed.
    std::uint64_t entry = std::min((seq - 1) / interval, entries - 1);
    offset = log_->index().at(entry);
    at = entry * interval + 1;
  }
  const std::uint64_t limit = log_->committed_bytes();
  std::string chunk;
  while (at < seq) {
    std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(kSeekChunk, limit - offset));
    if (length == 0) return std::string("the committed stream ends before seq ") + std::to_string(seq);
    chunk.resize(length);
    auto n = read_at(offset, chunk.data(), length);
    if (!n) return n.error();
    std::size_t pos = 0;
    while (at < seq) {
      const void* nl = std::memchr(chunk.data() + pos, '\n', length - pos);
      if (!nl) break;
      pos = static_cast<std::size_t>(static_cast<const char*>(nl) - chunk.data()) + 1;
      ++at;
    }
    offset += pos == 0 || at < seq ? length : pos;
    if (at == seq) break;
  }
  offset_ = offset;
  next_seq_ = seq;
  return {};
}

boost::system::result<LineBatch, std::string> StreamReader::read_some(std::size_t budget) {
  if (budget == 0) budget = 1;
  // A buffer stretched by one very long line is given back now that its view has expired.
  if (buffer_.capacity() > 4 * std::max(budget, kDefaultBudget)) {
    buffer_.clear();
    buffer_.shrink_to_fit();
  }
  LineBatch batch;
  batch.first_seq = next_seq_;
  const std::uint64_t committed = log_->committed_bytes();
  if (offset_ >= committed) {
    batch.reached_end = finished();
    return batch;
  }
  std::size_t length = static_cast<std::size_t>(std::min<std::uint64_t>(budget, committed - offset_));
  if (buffer_.size() < length) buffer_.resize(length);
  auto n = read_at(offset_, buffer_.data(), length);
  if (!n) return batch_error(n.error());
  // Whole lines only. The committed length always ends a line, so if the budget cut the first
  // line short, read on until its end.
  const void* last_nl = ::memrchr(buffer_.data(), '\n', length);
  while (!last_nl) {
    std::size_t more = static_cast<std::size_t>(
        std::min<std::uint64_t>(std::max<std::size_t>(length, 4096), committed - offset_ - length));
    if (more == 0)
      return batch_error("committed bytes do not end with a newline at offset " + std::to_string(committed));
    buffer_.resize(length + more);
    auto m = read_at(offset_ + length, buffer_.data() + length, more);
    if (!m) return batch_error(m.error());
    last_nl = std::memchr(buffer_.data() + length, '\n', more);
    length += more;
  }
  const std::size_t used = static_cast<std::size_t>(static_cast<const char*>(last_nl) - buffer_.data()) + 1;
  batch.bytes = std::string_view(buffer_.data(), used);
  batch.count = static_cast<std::uint64_t>(std::count(batch.bytes.begin(), batch.bytes.end(), '\n'));
  offset_ += used;
  next_seq_ += batch.count;
  batch.reached_end = finished();
  return batch;
}

bool StreamReader::finished() const {
  auto final_seq = log_->final_seq();
  return final_seq && next_seq_ > *final_seq;
}

asio::awaitable<WaitOutcome> StreamReader::wait_for_more(
    std::optional<std::chrono::steady_clock::time_point> deadline) {
  // The wake-up is a handler posted to the reader's executor; it is only guaranteed not to slip
  // in between listing and waiting if this coroutine runs on that same (serialising) executor.
  if (co_await asio::this_coro::executor != waker_->executor())
    throw std::logic_error("StreamReader::wait_for_more must run on the reader's own executor");
  for (;;) {
    if (has_unread()) co_return WaitOutcome::more;
    if (finished()) co_return WaitOutcome::closed;
    // The writer marks itself gone after its last publish: look once more for lines after it.
    if (log_->writer_gone()) co_return has_unread() ? WaitOutcome::more : WaitOutcome::writer_gone;
    if (deadline && std::chrono::steady_clock::now() >= *deadline) co_return WaitOutcome::timed_out;

    auto& timer = waker_->timer();
    timer.expires_at(deadline.value_or(std::chrono::steady_clock::time_point::max()));
    log_->list_waiter(*waker_);
    // A commit that landed before the listing was visible to the writer is visible here.
    if (has_unread() || log_->writer_gone()) continue;
    // Cancelled by the writer's wake-up, or expired at the deadline: either way, look again.
    co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
  }
}

}  // namespace mh::daemon
