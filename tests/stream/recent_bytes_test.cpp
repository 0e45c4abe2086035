// The recent bytes (RecentBytes): a reader that is caught up takes the lines just committed from
// the log's memory, byte for byte what the file holds, without reading the file; a reader behind
// the copy (replay, a slow reader, a recovered log, a batch longer than the copy) reads the file;
// the copy costs nothing while no reader is open; and a writer and readers on two threads agree
// with the file. Where the bytes came from is observed through the reader's counters
// (file_reads, memory_reads), never through timing.
#include "protocol/completeness.hpp"
#include "stream_test_support.hpp"

namespace mh::daemon::test {
namespace {

using protocol::CloseReason;
using protocol::ProcessTermination;

std::string file_range(const TempDir& dir, std::uint64_t from, std::uint64_t to) {
  return read_file(dir.events()).substr(from, to - from);
}

EventLogOptions with_recent(std::size_t recent_bytes, Durability durability = Durability::write) {
  EventLogOptions options;
  options.durability = durability;
  options.index_interval = 16;
  options.recent_bytes = recent_bytes;
  return options;
}

// Reads what is committed after the reader's cursor (one batch) and checks it is the file's
// bytes at the same offsets; returns the batch's bytes.
std::string read_and_compare(StreamReader& reader, const TempDir& dir) {
  const std::uint64_t from = reader.offset();
  auto batch = reader.read_some();
  if (!batch) throw std::runtime_error(batch.error());
  std::string bytes(batch->bytes);
  EXPECT_EQ(reader.offset(), from + bytes.size());
  EXPECT_EQ(bytes, file_range(dir, from, reader.offset()));
  return bytes;
}

TEST(RecentBytes, ACaughtUpReaderTakesTheLinesJustWrittenFromMemoryNotTheFile) {
  for (Durability durability : {Durability::write, Durability::fsync_each}) {
    TempDir dir;
    auto log = make_log(dir, "run-recent", with_recent(64 * 1024, durability));
    for (int i = 1; i <= 40; ++i)
      ASSERT_TRUE(log.append(text_event(i)));
    asio::io_context context;
    auto reader = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::at_end());
    ASSERT_TRUE(reader) << reader.error();
    const std::uint64_t file_reads_at_open = reader->file_reads();  // finding seq 41 may read the file

    // One event, then a held batch (a decision's events), then stream.closed: each is read
    // whole from memory, and is what the file holds at those offsets.
    ASSERT_TRUE(log.append(text_event(41)));
    EXPECT_EQ(check_lines(read_and_compare(*reader, dir), 41, "run-recent"), 1u);
    log.hold();
    for (int i = 42; i <= 44; ++i)
      ASSERT_TRUE(log.append(text_event(i)));
    ASSERT_TRUE(log.release());
    EXPECT_EQ(check_lines(read_and_compare(*reader, dir), 42, "run-recent"), 3u);
    ASSERT_TRUE(log.close(CloseReason::completed, ProcessTermination{}));
    auto last = reader->read_some();
    ASSERT_TRUE(last) << last.error();
    EXPECT_EQ(last->count, 1u);
    EXPECT_TRUE(last->reached_end);
    EXPECT_EQ(std::string(last->bytes),
              file_range(dir, log.committed_bytes() - last->bytes.size(), log.committed_bytes()));

    EXPECT_EQ(reader->file_reads(), file_reads_at_open) << "a caught-up reader read the file";
    EXPECT_EQ(reader->memory_reads(), 3u);
  }
}

TEST(RecentBytes, NothingUnpublishedIsReadFromMemory) {
  // A held batch is not committed, so nothing of it is visible; once released it is, whole.
  TempDir dir;
  auto log = make_log(dir, "run-held", with_recent(64 * 1024));
  asio::io_context context;
  auto reader = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::from_beginning());
  ASSERT_TRUE(reader) << reader.error();
  log.hold();
  ASSERT_TRUE(log.append(text_event(1)));
  auto nothing = reader->read_some();
  ASSERT_TRUE(nothing);
  EXPECT_EQ(nothing->count, 0u);
  ASSERT_TRUE(log.release());
  EXPECT_EQ(check_lines(read_and_compare(*reader, dir), 1, "run-held"), 1u);
  EXPECT_EQ(reader->memory_reads(), 1u);
  EXPECT_EQ(reader->file_reads(), 0u);
}

TEST(RecentBytes, AReaderBehindTheCopyReadsTheFileThenCatchesUpToMemory) {
  TempDir dir;
  constexpr std::size_t kRecent = 4096;
  auto log = make_log(dir, "run-behind", with_recent(kRecent));
  asio::io_context context;
  // Opened at the start, then left behind by ~30 KiB: far more than the copy holds.
  auto reader = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::from_beginning());
  ASSERT_TRUE(reader) << reader.error();
  for (int i = 1; i <= 100; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  auto [held_from, held_to] = log.shared()->recent().held();
  EXPECT_EQ(held_to, log.committed_bytes());
  EXPECT_EQ(held_to - held_from, kRecent);

  std::uint64_t lines = 0;
  while (reader->has_unread())
    lines += check_lines(read_and_compare(*reader, dir), lines + 1, "run-behind");
  EXPECT_EQ(lines, 100u);
  EXPECT_GT(reader->file_reads(), 0u);
  EXPECT_EQ(reader->memory_reads(), 0u) << "the whole backlog was one read, from the file";

  // Caught up now: the next line comes from memory.
  const auto file_reads = reader->file_reads();
  ASSERT_TRUE(log.append(text_event(101)));
  EXPECT_EQ(check_lines(read_and_compare(*reader, dir), 101, "run-behind"), 1u);
  EXPECT_EQ(reader->file_reads(), file_reads);
  EXPECT_EQ(reader->memory_reads(), 1u);

  // A batch longer than the copy: only its tail is held, so a reader at its start reads the file.
  log.hold();
  for (int i = 102; i <= 130; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  ASSERT_TRUE(log.release());
  EXPECT_EQ(check_lines(read_and_compare(*reader, dir), 102, "run-behind"), 29u);
  EXPECT_GT(reader->file_reads(), file_reads);
  EXPECT_EQ(reader->memory_reads(), 1u);
}

// Commits made while nobody read are not in memory: a reader opened afterwards on one of them
// reads it from the file, even when it lies within the copy's reach of the newest byte.
TEST(RecentBytes, LinesCommittedWhileNoReaderWasOpenAreReadFromTheFile) {
  TempDir dir;
  auto log = make_log(dir, "run-gap", with_recent(4096));
  asio::io_context context;
  {
    auto first = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::at_end());
    ASSERT_TRUE(first) << first.error();
    ASSERT_TRUE(log.append(text_event(1)));
    EXPECT_EQ(check_lines(read_and_compare(*first, dir), 1, "run-gap"), 1u);
    EXPECT_EQ(first->memory_reads(), 1u);
  }
  for (int i = 2; i <= 50; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  auto reader = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::at_seq(48));
  ASSERT_TRUE(reader) << reader.error();
  ASSERT_TRUE(log.append(text_event(51)));
  ASSERT_LT(log.committed_bytes() - reader->offset(), 4096u) << "seq 48 lies within the copy's reach";
  EXPECT_EQ(check_lines(read_and_compare(*reader, dir), 48, "run-gap"), 4u);
  EXPECT_EQ(reader->memory_reads(), 0u);
  ASSERT_TRUE(log.append(text_event(52)));
  EXPECT_EQ(check_lines(read_and_compare(*reader, dir), 52, "run-gap"), 1u);
  EXPECT_EQ(reader->memory_reads(), 1u);
}

TEST(RecentBytes, ReplayARecoveredLogAndNoCopyAtAllReadTheFile) {
  TempDir dir;
  {
    auto log = make_log(dir, "run-recovered", with_recent(64 * 1024));
    for (int i = 1; i <= 20; ++i)
      ASSERT_TRUE(log.append(text_event(i)));
  }  // dropped without stream.closed, as by a daemon that was killed
  auto recovered = EventLog::recover(dir.events(), "run-recovered", with_recent(64 * 1024));
  ASSERT_TRUE(recovered) << recovered.error();
  EventLog& log = recovered->log;
  asio::io_context context;
  auto replay = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::at_seq(5));
  ASSERT_TRUE(replay) << replay.error();
  EXPECT_EQ(check_lines(read_and_compare(*replay, dir), 5, "run-recovered"), 16u);
  EXPECT_EQ(replay->memory_reads(), 0u) << "the lines written before the restart are only in the file";
  ASSERT_TRUE(log.append(text_event(21)));
  EXPECT_EQ(check_lines(read_and_compare(*replay, dir), 21, "run-recovered"), 1u);
  EXPECT_EQ(replay->memory_reads(), 1u) << "the line written since is in memory";

  // recent_bytes = 0: every read is the file's.
  TempDir other;
  auto plain = make_log(other, "run-plain", with_recent(0));
  auto reader = StreamReader::open(plain.shared(), context.get_executor(), ReaderStart::from_beginning());
  ASSERT_TRUE(reader) << reader.error();
  ASSERT_TRUE(plain.append(text_event(1)));
  EXPECT_EQ(check_lines(read_and_compare(*reader, other), 1, "run-plain"), 1u);
  EXPECT_EQ(reader->memory_reads(), 0u);
  EXPECT_EQ(reader->file_reads(), 1u);
  EXPECT_EQ(plain.shared()->recent().memory(), 0u);
}

TEST(RecentBytes, TheCopyIsHeldOnlyWhileAReaderIsOpen) {
  TempDir dir;
  auto log = make_log(dir, "run-memory", with_recent(64 * 1024));
  const auto& recent = log.shared()->recent();
  for (int i = 1; i <= 50; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  EXPECT_EQ(recent.memory(), 0u) << "a run nobody reads holds no copy";
  asio::io_context context;
  {
    auto reader = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::at_end());
    ASSERT_TRUE(reader) << reader.error();
    ASSERT_TRUE(log.append(text_event(51)));
    EXPECT_EQ(recent.memory(), 64u * 1024);
    for (int i = 52; i <= 1000; ++i)
      ASSERT_TRUE(log.append(text_event(i)));
    EXPECT_EQ(recent.memory(), 64u * 1024) << "bounded, however much is written";
    auto moved = std::move(*reader);  // a moved-from reader closes nothing
    EXPECT_EQ(recent.memory(), 64u * 1024);
  }
  EXPECT_EQ(recent.memory(), 0u) << "the last reader's departure frees it";
  ASSERT_TRUE(log.append(text_event(1001)));
  EXPECT_EQ(recent.memory(), 0u);
}

// A writer on the run's strand and readers on strands of their own, on two io threads: every
// reader gets every line once, in order, and exactly the file's bytes, whether it took them
// from memory or from the file. The copy is small, so readers cross between the two.
TEST(RecentBytes, AWriterAndReadersOnTwoThreadsAgreeWithTheFile) {
  IoThreads io;
  TempDir dir;
  auto log = make_log(dir, "run-threads", with_recent(16 * 1024));
  auto shared = log.shared();
  auto run_strand = io.make_strand();

  struct Got {
    std::uint64_t first_offset = 0;
    std::string bytes;
    std::uint64_t memory_reads = 0;
  };
  auto follow_all = [shared](IoThreads::Strand strand, ReaderStart start, std::size_t budget) -> asio::awaitable<Got> {
    auto opened = StreamReader::open(shared, strand, start);
    if (!opened) throw std::runtime_error(opened.error());
    Got got;
    got.first_offset = opened->offset();
    for (;;) {
      auto batch = opened->read_some(budget);
      if (!batch) throw std::runtime_error(batch.error());
      got.bytes += batch->bytes;
      if (batch->reached_end) break;
      if (batch->count == 0) {
        auto outcome = co_await opened->wait_for_more(std::chrono::steady_clock::now() + 20s);
        if (outcome == WaitOutcome::timed_out || outcome == WaitOutcome::writer_gone)
          throw std::runtime_error("the stream did not reach its end");
      }
    }
    got.memory_reads = opened->memory_reads();
    co_return got;
  };

  std::vector<std::future<Got>> readers;
  for (int r = 0; r < 6; ++r) {
    auto strand = io.make_strand();
    ReaderStart start = r % 2 == 0 ? ReaderStart::from_beginning() : ReaderStart::at_end();
    readers.push_back(io.spawn(strand, follow_all(strand, start, r < 3 ? StreamReader::kDefaultBudget : 2048)));
  }
  auto writer_body = [&]() -> asio::awaitable<void> {
    for (std::uint64_t i = 1; i <= 4000; ++i) {
      if (i % 5 == 0) log.hold();  // a mix of single commits and batches
      if (!log.append(text_event(i, 100 + (i % 7) * 150))) throw std::runtime_error("append failed");
      if (log.holding() && i % 5 == 3) {
        if (!log.release()) throw std::runtime_error("release failed");
      }
      if (i % 6 == 0) co_await asio::post(run_strand, asio::use_awaitable);
    }
    if (log.holding() && !log.release()) throw std::runtime_error("release failed");
    if (!log.close(CloseReason::completed, ProcessTermination{})) throw std::runtime_error("close failed");
  };
  auto writer = io.spawn(run_strand, writer_body());
  io.get(writer);

  const std::string file = read_file(dir.events());
  ASSERT_TRUE(protocol::check_stream(file).complete_and_well_formed());
  std::uint64_t memory_reads = 0;
  for (auto& reader : readers) {
    Got got = io.get(reader);
    EXPECT_EQ(got.bytes, file.substr(got.first_offset)) << "from offset " << got.first_offset;
    memory_reads += got.memory_reads;
  }
  // Hundreds of wake-ups each; a reader woken right after a commit is within 16 KiB of it.
  EXPECT_GT(memory_reads, 0u);
  EXPECT_EQ(shared->recent().memory(), 0u);
}

}  // namespace
}  // namespace mh::daemon::test
