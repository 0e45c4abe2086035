// StreamReader: replay from the start, the middle and the end; whole lines only; following live
// from other strands while the run strand appends (every line exactly once, in order); a
// stalled reader beside a fast one; fifty readers; timeouts, writer gone, departures.
#include <atomic>

#include "protocol/completeness.hpp"
#include "stream_test_support.hpp"

namespace mh::daemon::test {
namespace {

using protocol::CloseReason;
using protocol::ProcessTermination;

// A stream being written, and the threads its writer and readers run on: the log of `run` in a
// fresh dir, its shared state, and the writer's strand.
struct LiveStream {
  explicit LiveStream(const std::string& run, EventLogOptions options = {}) : log(make_log(dir, run, options)) {}
  IoThreads io;
  TempDir dir;
  EventLog log;
  std::shared_ptr<SharedStreamState> shared = log.shared();
  IoThreads::Strand strand = io.make_strand();
};

struct Followed {
  std::uint64_t first_seq = 0;
  std::uint64_t lines = 0;
  std::uint64_t batches = 0;
  bool reached_end = false;
  WaitOutcome last_wait = WaitOutcome::more;
};

// Reads from `start` until the stream is over, checking every line (seq in order, no gap, no
// duplicate). `start_at_half` picks the middle of what is committed when the reader opens.
asio::awaitable<Followed> follow(std::shared_ptr<SharedStreamState> log, Strand strand, ReaderStart start,
                                 std::size_t budget = StreamReader::kDefaultBudget, bool start_at_half = false) {
  if (start_at_half) start = ReaderStart::at_seq(log->committed_seq() / 2 + 1);
  auto opened = StreamReader::open(log, strand, start);
  if (!opened) throw std::runtime_error(opened.error());
  StreamReader& reader = *opened;
  Followed f;
  f.first_seq = reader.next_seq();
  for (;;) {
    auto batch = reader.read_some(budget);
    if (!batch) throw std::runtime_error(batch.error());
    if (batch->first_seq != f.first_seq + f.lines) throw std::runtime_error("a gap or a duplicate");
    f.lines += check_lines(batch->bytes, batch->first_seq, log->run_id());
    if (batch->count != 0) ++f.batches;
    if (batch->reached_end) {
      f.reached_end = true;
      co_return f;
    }
    if (batch->count == 0) {
      auto began = std::chrono::steady_clock::now();
      f.last_wait = co_await reader.wait_for_more(began + 20s);
      // Every wait here is for a writer that is busy writing or about to close: one that sat
      // for seconds means a wake-up was lost and only the deadline got it going again.
      if (std::chrono::steady_clock::now() - began > 5s) throw std::runtime_error("a wake-up was lost");
      if (f.last_wait == WaitOutcome::timed_out || f.last_wait == WaitOutcome::writer_gone) co_return f;
    }
  }
}

// Appends events [first, last] on the log's strand, letting other work in every `yield_every`.
asio::awaitable<void> append_range(EventLog& log, Strand strand, std::uint64_t first, std::uint64_t last,
                                   std::uint64_t yield_every) {
  for (std::uint64_t i = first; i <= last; ++i) {
    auto seq = log.append(text_event(i));
    if (!seq) throw std::runtime_error(seq.error());
    if (i % yield_every == 0) co_await asio::post(strand, asio::use_awaitable);
  }
}

// Polls a condition with an upper bound (a helper wait, not synchronisation by sleeping).
template <class Condition>
bool eventually(Condition condition, std::chrono::milliseconds limit = 10s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

TEST(StreamReader, ReplaysFromTheStartTheMiddleAndTheEnd) {
  TempDir dir;
  auto log = make_log(dir, "run-replay", EventLogOptions{Durability::write, 16});
  for (int i = 1; i <= 1000; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  asio::io_context context;
  auto ex = context.get_executor();

  auto drain = [](StreamReader& reader, std::size_t budget) {
    std::uint64_t lines = 0;
    for (;;) {
      auto batch = reader.read_some(budget);
      if (!batch) throw std::runtime_error(batch.error());
      if (batch->count == 0) return lines;
      lines += check_lines(batch->bytes, batch->first_seq, "run-replay");
    }
  };

  auto from_start = StreamReader::open(log.shared(), ex, ReaderStart::from_beginning());
  ASSERT_TRUE(from_start) << from_start.error();
  EXPECT_EQ(drain(*from_start, 4096), 1000u);

  for (std::uint64_t seq : {2u, 16u, 17u, 18u, 517u, 999u, 1000u, 1001u}) {
    auto middle = StreamReader::open(log.shared(), ex, ReaderStart::at_seq(seq));
    ASSERT_TRUE(middle) << middle.error();
    EXPECT_EQ(middle->next_seq(), seq);
    EXPECT_EQ(drain(*middle, 8192), 1001 - seq) << "from " << seq;
  }

  auto at_end = StreamReader::open(log.shared(), ex, ReaderStart::at_end());
  ASSERT_TRUE(at_end);
  EXPECT_EQ(at_end->next_seq(), 1001u);
  EXPECT_EQ(drain(*at_end, 4096), 0u);
  for (int i = 1001; i <= 1010; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  auto batch = at_end->read_some();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->first_seq, 1001u);
  EXPECT_EQ(check_lines(batch->bytes, 1001, "run-replay"), 10u);

  auto past = StreamReader::open(log.shared(), ex, ReaderStart::at_seq(1012));
  ASSERT_FALSE(past);
  EXPECT_NE(past.error().find("past the end"), std::string::npos) << past.error();
}

TEST(StreamReader, ReturnsWholeLinesEvenWithATinyBudget) {
  TempDir dir;
  auto log = make_log(dir, "run-tiny");
  for (int i = 1; i <= 5; ++i)
    ASSERT_TRUE(log.append(text_event(i, 100 + 400 * i)));
  ASSERT_TRUE(log.close(CloseReason::completed, ProcessTermination{}));
  asio::io_context context;
  auto reader = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::from_beginning());
  ASSERT_TRUE(reader);
  for (std::uint64_t seq = 1; seq <= 6; ++seq) {
    auto batch = reader->read_some(1);
    ASSERT_TRUE(batch) << batch.error();
    EXPECT_EQ(batch->count, 1u);
    EXPECT_EQ(batch->first_seq, seq);
    EXPECT_EQ(check_lines(batch->bytes, seq, "run-tiny"), 1u);
    EXPECT_EQ(batch->reached_end, seq == 6);
  }
  EXPECT_TRUE(reader->finished());
}

TEST(StreamReader, FollowsLiveFromOtherStrandsWithoutGapOrDuplicate) {
  LiveStream live("run-live", {Durability::write, 32});
  auto& [io, dir, log, shared, run_strand] = live;

  // Attached before anything is written: replay of nothing, then all of it live.
  auto early_strand = io.make_strand(), middle_strand = io.make_strand(), late_strand = io.make_strand();
  auto early = io.spawn(early_strand, follow(shared, early_strand, ReaderStart::from_beginning()));
  std::future<Followed> middle, late;
  // A named lambda: the coroutine refers to its captures for as long as it runs.
  auto writer_body = [&]() -> asio::awaitable<void> {
    co_await append_range(log, run_strand, 1, 1000, 7);
    // Attached mid-run: one replays from seq 500, one takes only what comes from now on.
    middle = io.spawn(middle_strand, follow(shared, middle_strand, ReaderStart::at_seq(500)));
    late = io.spawn(late_strand, follow(shared, late_strand, ReaderStart::at_end()));
    co_await append_range(log, run_strand, 1001, 5000, 7);
    auto closed = log.close(CloseReason::completed, ProcessTermination{});
    if (!closed) throw std::runtime_error(closed.error());
  };
  auto writer = io.spawn(run_strand, writer_body());
  io.get(writer);

  auto e = io.get(early);
  EXPECT_TRUE(e.reached_end);
  EXPECT_EQ(e.first_seq, 1u);
  EXPECT_EQ(e.lines, 5001u);
  auto m = io.get(middle);
  EXPECT_TRUE(m.reached_end);
  EXPECT_EQ(m.first_seq, 500u);
  EXPECT_EQ(m.lines, 5001u - 499u);
  auto l = io.get(late);
  EXPECT_TRUE(l.reached_end);
  EXPECT_GE(l.first_seq, 1001u);
  EXPECT_EQ(l.first_seq + l.lines - 1, 5001u);
  EXPECT_TRUE(protocol::check_stream(read_file(dir.events())).complete_and_well_formed());
  EXPECT_EQ(shared->listed_waiters(), 0u);
}

TEST(StreamReader, AStalledReaderCostsTheWriterNothingAndSlowsNoOne) {
  LiveStream live("run-stall", {Durability::write, 256});
  auto& [io, dir, log, shared, run_strand] = live;
  auto stalled_strand = io.make_strand();

  // Opened, then never read and never waited on until the end.
  auto stalled = StreamReader::open(shared, stalled_strand, ReaderStart::from_beginning());
  ASSERT_TRUE(stalled) << stalled.error();
  auto fast_strand = io.make_strand();
  auto fast = io.spawn(fast_strand, follow(shared, fast_strand, ReaderStart::from_beginning()));

  constexpr std::uint64_t kEvents = 20'000;
  std::size_t max_listed = 0, max_scratch = 0;
  // A named lambda: the coroutine refers to its captures for as long as it runs.
  auto writer_body = [&]() -> asio::awaitable<void> {
    for (std::uint64_t i = 1; i <= kEvents; ++i) {
      if (!log.append(text_event(i))) throw std::runtime_error("append failed");
      max_listed = std::max(max_listed, shared->listed_waiters());
      max_scratch = std::max(max_scratch, log.scratch_capacity());
      if (i % 100 == 0) co_await asio::post(run_strand, asio::use_awaitable);
    }
    if (!log.close(CloseReason::completed, ProcessTermination{})) throw std::runtime_error("close failed");
  };
  auto writer = io.spawn(run_strand, writer_body());
  io.get(writer);
  auto f = io.get(fast);
  EXPECT_TRUE(f.reached_end);
  EXPECT_EQ(f.lines, kEvents + 1);

  // The writer held at most one listed waker (the fast reader's; the stalled reader never
  // listed one), a scratch buffer of one event, and an index of N / 256 offsets.
  EXPECT_LE(max_listed, 1u);
  EXPECT_LT(max_scratch, 8u * 1024);
  EXPECT_LE(shared->index().capacity(), 2 * (kEvents / 256 + 1) + 64);

  // The stalled reader still has everything: the file was its buffer.
  std::uint64_t lines = 0;
  for (;;) {
    auto batch = stalled->read_some(1 << 20);
    ASSERT_TRUE(batch) << batch.error();
    lines += check_lines(batch->bytes, batch->first_seq, "run-stall");
    if (batch->reached_end) break;
    ASSERT_NE(batch->count, 0u);
  }
  EXPECT_EQ(lines, kEvents + 1);
}

TEST(StreamReader, FiftyReadersFollowAtOnce) {
  LiveStream live("run-fifty", {Durability::write, 64});
  auto& [io, dir, log, shared, run_strand] = live;
  for (int i = 1; i <= 200; ++i)
    ASSERT_TRUE(log.append(text_event(i)));

  std::vector<std::future<Followed>> readers;
  for (int r = 0; r < 50; ++r) {
    ReaderStart start = r % 3 == 0 ? ReaderStart::from_beginning() : ReaderStart::at_end();
    auto strand = io.make_strand();
    readers.push_back(io.spawn(strand, follow(shared, strand, start, 16 * 1024, r % 3 == 2)));
  }
  // A named lambda: the coroutine refers to its captures for as long as it runs.
  auto writer_body = [&]() -> asio::awaitable<void> {
    co_await append_range(log, run_strand, 201, 3000, 10);
    if (!log.close(CloseReason::completed, ProcessTermination{})) throw std::runtime_error("close failed");
  };
  auto writer = io.spawn(run_strand, writer_body());
  io.get(writer);
  for (auto& reader : readers) {
    auto f = io.get(reader);
    EXPECT_TRUE(f.reached_end);
    EXPECT_EQ(f.first_seq + f.lines - 1, 3001u) << "from " << f.first_seq;
  }
  EXPECT_EQ(shared->listed_waiters(), 0u);
}

TEST(StreamReader, WaitTimesOutAndADepartedReaderLeavesNothingListed) {
  LiveStream live("run-timeout");
  auto& [io, dir, log, shared, strand] = live;
  auto outcome = io.run(strand, [&]() -> asio::awaitable<WaitOutcome> {
    auto reader = StreamReader::open(shared, strand, ReaderStart::at_end());
    if (!reader) throw std::runtime_error(reader.error());
    auto before = std::chrono::steady_clock::now();
    auto result = co_await reader->wait_for_more(before + 50ms);
    if (std::chrono::steady_clock::now() - before < 50ms) throw std::runtime_error("returned early");
    co_return result;
  }());
  EXPECT_EQ(outcome, WaitOutcome::timed_out);
  // The reader stayed listed after its timeout; leaving took it off, so the log holds nothing
  // for it and the next commit wakes nobody.
  EXPECT_EQ(shared->listed_waiters(), 0u);
  ASSERT_TRUE(log.append(text_event(1)));
  EXPECT_EQ(shared->listed_waiters(), 0u);
}

TEST(StreamReader, AWaitingReaderLearnsTheWriterIsGone) {
  IoThreads io;
  TempDir dir;
  std::optional<EventLog> log(make_log(dir, "run-gone"));
  ASSERT_TRUE(log->append(text_event(1)));
  auto shared = log->shared();
  auto strand = io.make_strand();
  auto reader = io.spawn(strand, follow(shared, strand, ReaderStart::from_beginning()));
  ASSERT_TRUE(eventually([&] { return shared->listed_waiters() == 1; }));
  log.reset();  // dropped without stream.closed
  auto f = io.get(reader);
  EXPECT_EQ(f.last_wait, WaitOutcome::writer_gone);
  EXPECT_EQ(f.lines, 1u);
  EXPECT_FALSE(f.reached_end);
}

TEST(StreamReader, AWaitingReaderIsWokenByCloseAndADepartingReaderWakesNobodyWrongly) {
  LiveStream live("run-close");
  auto& [io, dir, log, shared, strand] = live;
  auto waiting = io.spawn(strand, follow(shared, strand, ReaderStart::from_beginning()));
  ASSERT_TRUE(eventually([&] { return shared->listed_waiters() == 1; }));

  // A second reader lists itself, times out and leaves: its departure takes the whole list and
  // wakes the first one, which must simply list itself again and keep waiting.
  auto other_strand = io.make_strand();
  auto departed = io.run(other_strand, [&]() -> asio::awaitable<WaitOutcome> {
    auto reader = StreamReader::open(shared, other_strand, ReaderStart::at_end());
    if (!reader) throw std::runtime_error(reader.error());
    co_return co_await reader->wait_for_more(std::chrono::steady_clock::now() + 10ms);
  }());
  EXPECT_EQ(departed, WaitOutcome::timed_out);
  ASSERT_TRUE(eventually([&] { return shared->listed_waiters() == 1; }));
  EXPECT_EQ(waiting.wait_for(0s), std::future_status::timeout);

  auto run_strand = io.make_strand();
  io.run(run_strand, [&]() -> asio::awaitable<void> {
    if (!log.append(text_event(1))) throw std::runtime_error("append failed");
    if (!log.close(CloseReason::completed, ProcessTermination{})) throw std::runtime_error("close failed");
    co_return;
  }());
  auto f = io.get(waiting);
  EXPECT_TRUE(f.reached_end);
  EXPECT_EQ(f.lines, 2u);
}

TEST(StreamReader, WaitingFromAnotherExecutorIsRefused) {
  TempDir dir;
  auto log = make_log(dir, "run-wrong-executor");
  IoThreads io;
  auto reader_strand = io.make_strand();
  auto other_strand = io.make_strand();
  auto refused = io.run(other_strand, [&]() -> asio::awaitable<bool> {
    auto reader = StreamReader::open(log.shared(), reader_strand, ReaderStart::at_end());
    if (!reader) throw std::runtime_error(reader.error());
    try {
      co_await reader->wait_for_more(std::chrono::steady_clock::now() + 5s);
    } catch (const std::logic_error&) {
      co_return true;
    }
    co_return false;
  }());
  EXPECT_TRUE(refused);
}

TEST(StreamReader, AReaderOnAClosedStreamAtTheEndIsFinishedAtOnce) {
  TempDir dir;
  auto log = make_log(dir, "run-done");
  ASSERT_TRUE(log.append(text_event(1)));
  ASSERT_TRUE(log.close(CloseReason::completed, ProcessTermination{}));
  IoThreads io;
  auto strand = io.make_strand();
  auto outcome = io.run(strand, [&]() -> asio::awaitable<WaitOutcome> {
    auto reader = StreamReader::open(log.shared(), strand, ReaderStart::at_end());
    if (!reader) throw std::runtime_error(reader.error());
    co_return co_await reader->wait_for_more();
  }());
  EXPECT_EQ(outcome, WaitOutcome::closed);
}

}  // namespace
}  // namespace mh::daemon::test
