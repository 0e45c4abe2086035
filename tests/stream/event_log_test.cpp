// EventLog: seq assignment, stream.closed last, refusals as values, durability modes, recovery
// after a kill (torn line cut, nothing complete lost), bounded memory.
#include <sys/stat.h>

#include <atomic>
#include <boost/asio/io_context.hpp>

#include "daemon/stream/close_syncer.hpp"
#include "daemon/stream/stream_reader.hpp"
#include "protocol/completeness.hpp"
#include "stream_test_support.hpp"

namespace mh::daemon::test {
namespace {

using protocol::CloseReason;
using protocol::Completeness;
using protocol::ProcessKind;
using protocol::ProcessTermination;

ProcessTermination exited(int code) {
  ProcessTermination t;
  t.kind = ProcessKind::exited;
  t.code = code;
  return t;
}

TEST(EventLog, AppendAssignsSeqAndCloseWritesStreamClosedLast) {
  TempDir dir;
  auto log = make_log(dir, "run-1");
  for (std::uint64_t i = 1; i <= 5; ++i) {
    auto seq = log.append(text_event(i), i == 2 ? std::optional<std::string>("2025-01-01T00:00:00Z") : std::nullopt);
    ASSERT_TRUE(seq) << seq.error();
    EXPECT_EQ(*seq, i);
  }
  EXPECT_EQ(log.last_seq(), 5u);
  auto closed = log.close(CloseReason::completed, exited(0));
  ASSERT_TRUE(closed) << closed.error();
  EXPECT_EQ(*closed, 6u);
  EXPECT_TRUE(log.closed());

  auto text = read_file(dir.events());
  EXPECT_EQ(text.size(), log.committed_bytes());
  auto verdict = protocol::check_stream(text);
  EXPECT_EQ(verdict.kind, Completeness::Complete) << verdict.summary();
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.first_bad_reason;
  EXPECT_EQ(verdict.events_before_marker, 5u);
  EXPECT_EQ(verdict.run_id, std::optional<std::string>("run-1"));
  EXPECT_EQ(verdict.close_reason, CloseReason::completed);

  // The last line is stream.closed with events = 5 and the process termination.
  auto last_line = text.substr(text.rfind('\n', text.size() - 2) + 1);
  auto last = protocol::read_event_line(std::string_view(last_line).substr(0, last_line.size() - 1));
  ASSERT_TRUE(last);
  auto* marker = std::get_if<protocol::ev::StreamClosed>(&last->payload);
  ASSERT_NE(marker, nullptr);
  EXPECT_EQ(marker->events, 5u);
  EXPECT_EQ(marker->run_id, "run-1");
  EXPECT_EQ(marker->process.kind, ProcessKind::exited);
  // `at` passes through on the line that had one.
  EXPECT_NE(text.find("\"at\":\"2025-01-01T00:00:00Z\""), std::string::npos);
}

TEST(EventLog, CloseTellsItsCallerBeforeAnyReaderCanSeeStreamClosed) {
  TempDir dir;
  auto log = make_log(dir, "run-1");
  ASSERT_TRUE(log.append(text_event(1), std::nullopt));
  auto shared = log.shared();
  std::optional<std::uint64_t> told;
  std::uint64_t visible_when_told = 0;
  bool final_when_told = true;
  auto closed = log.close(CloseReason::completed, exited(0), [&](std::uint64_t seq) {
    told = seq;
    visible_when_told = shared->committed_seq();
    final_when_told = shared->final_seq().has_value();
  });
  ASSERT_TRUE(closed) << closed.error();
  EXPECT_EQ(told, std::optional<std::uint64_t>(2));
  EXPECT_EQ(visible_when_told, 1u) << "stream.closed was not yet readable";
  EXPECT_FALSE(final_when_told);
  EXPECT_EQ(shared->committed_seq(), 2u);
  EXPECT_EQ(shared->final_seq(), std::optional<std::uint64_t>(2));
}

// With a close syncer (issue 26 §5: N runs closing together no longer wait for each other's
// fdatasync on their io thread), close() returns once stream.closed is written and its caller
// told; readers see it only once the syncer has made it durable, and the log may be gone by then.
TEST(EventLog, WithACloseSyncerReadersSeeStreamClosedOnlyOnceTheSyncerSyncedIt) {
  TempDir dir;
  auto syncer = std::make_shared<CloseSyncer>(0);  // runs nothing until run_queued()
  EventLogOptions options;
  options.close_syncer = syncer;
  std::shared_ptr<SharedStreamState> shared;
  std::optional<std::uint64_t> told;
  boost::asio::io_context context;
  std::optional<StreamReader> reader;
  {
    auto log = make_log(dir, "run-1", options);
    ASSERT_TRUE(log.append(text_event(1), std::nullopt));
    shared = log.shared();
    auto opened = StreamReader::open(shared, context.get_executor(), ReaderStart::from_beginning());
    ASSERT_TRUE(opened) << opened.error();
    reader.emplace(std::move(*opened));
    auto first = reader->read_some();
    ASSERT_TRUE(first) << first.error();
    EXPECT_EQ(first->count, 1u);
    EXPECT_FALSE(reader->final_pending()) << "an open stream is not closing";
    auto closed = log.close(CloseReason::completed, exited(0), [&](std::uint64_t seq) { told = seq; });
    ASSERT_TRUE(closed) << closed.error();
    EXPECT_EQ(*closed, 2u);
    EXPECT_TRUE(log.closed());
    EXPECT_EQ(told, std::optional<std::uint64_t>(2)) << "the caller is told at once";
    EXPECT_EQ(read_file(dir.events()).size(), log.committed_bytes()) << "the line is written";
    EXPECT_EQ(shared->committed_seq(), 1u) << "but not readable before the sync";
    EXPECT_FALSE(shared->final_seq().has_value());
    auto none = reader->read_some();
    ASSERT_TRUE(none) << none.error();
    EXPECT_EQ(none->count, 0u);
    EXPECT_FALSE(none->reached_end);
    EXPECT_TRUE(reader->final_pending()) << "a tail without --follow waits here rather than ending";
  }  // the log goes before the sync: its readers are not told the writer is gone
  EXPECT_FALSE(shared->writer_gone());
  EXPECT_EQ(syncer->run_queued(), 1u);
  EXPECT_EQ(shared->committed_seq(), 2u);
  EXPECT_EQ(shared->final_seq(), std::optional<std::uint64_t>(2));
  auto last = reader->read_some();
  ASSERT_TRUE(last) << last.error();
  EXPECT_EQ(last->count, 1u);
  EXPECT_TRUE(last->reached_end);
  EXPECT_FALSE(reader->final_pending());
  auto verdict = protocol::check_stream(read_file(dir.events()));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << verdict.first_bad_reason;
}

TEST(CloseSyncer, WaitIdleReturnsOnceEveryJobHasRun) {
  CloseSyncer syncer(2);
  std::atomic<int> ran{0};
  for (int i = 0; i < 50; ++i)
    syncer.submit([&ran] { ++ran; });
  syncer.wait_idle();
  EXPECT_EQ(ran.load(), 50);
}

TEST(EventLog, RefusalsAreValues) {
  TempDir dir;
  auto log = make_log(dir, "run-r");
  protocol::ev::StreamClosed sneaky;
  sneaky.run_id = "run-r";
  auto direct = log.append(sneaky);
  ASSERT_FALSE(direct);
  EXPECT_NE(direct.error().find("close()"), std::string::npos);
  EXPECT_EQ(log.last_seq(), 0u);

  ASSERT_TRUE(log.append(text_event(1)));
  ASSERT_TRUE(log.close(CloseReason::killed, ProcessTermination{}));
  auto after = log.append(text_event(2));
  ASSERT_FALSE(after);
  EXPECT_NE(after.error().find("closed"), std::string::npos);
  auto again = log.close(CloseReason::completed, ProcessTermination{});
  ASSERT_FALSE(again);
  EXPECT_EQ(protocol::check_stream(read_file(dir.events())).kind, Completeness::Complete);

  // create() never overwrites an existing stream.
  auto second = EventLog::create(dir.events(), "run-r");
  ASSERT_FALSE(second);
  EXPECT_NE(second.error().find("File exists"), std::string::npos) << second.error();
}

TEST(EventLog, FileIsCreatedWithMode0640WhateverTheUmask) {
  TempDir dir;
  auto previous = ::umask(077);
  auto log = make_log(dir, "run-m");
  ::umask(previous);
  struct stat info {};
  ASSERT_EQ(::stat(dir.events().c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0640u);
}

TEST(EventLog, FsyncEachWritesTheSameCompleteStream) {
  TempDir dir;
  auto log = make_log(dir, "run-f", EventLogOptions{Durability::fsync_each, 4});
  for (int i = 1; i <= 20; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  ASSERT_TRUE(log.close(CloseReason::completed, exited(0)));
  auto verdict = protocol::check_stream(read_file(dir.events()));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary();
  EXPECT_EQ(verdict.events_before_marker, 20u);
}

TEST(EventLog, RecoveryCutsATornLineAndTheCallerClosesWithAWarning) {
  TempDir dir;
  std::uint64_t bytes_before_tear = 0;
  {
    auto log = make_log(dir, "run-k", EventLogOptions{Durability::write, 2});
    for (int i = 1; i <= 3; ++i)
      ASSERT_TRUE(log.append(text_event(i)));
    bytes_before_tear = log.committed_bytes();
    // The daemon is SIGKILLed here: the log object never closes. Simulate the half-written
    // line a crash mid-write(2) would leave.
  }
  const std::string torn = "{\"format\":\"metaharness.event/1\",\"seq\":4,\"run\":\"run-k\",\"ev";
  { std::ofstream(dir.events(), std::ios::app | std::ios::binary) << torn; }

  auto recovered = EventLog::recover(dir.events(), "run-k", EventLogOptions{Durability::write, 2});
  ASSERT_TRUE(recovered) << recovered.error();
  auto& [log, report] = *recovered;
  EXPECT_EQ(report.lines, 3u);
  EXPECT_EQ(report.torn_bytes_cut, torn.size());
  EXPECT_FALSE(report.already_closed);
  EXPECT_FALSE(report.first_bad_line.has_value()) << report.first_bad_reason;
  EXPECT_EQ(log.last_seq(), 3u);
  EXPECT_EQ(log.committed_bytes(), bytes_before_tear);
  EXPECT_EQ(std::filesystem::file_size(dir.events()), bytes_before_tear);

  protocol::ev::Warning warning;
  warning.code = "stream_recovered";
  warning.message = report.describe();
  auto seq = log.append(warning);
  ASSERT_TRUE(seq) << seq.error();
  EXPECT_EQ(*seq, 4u);
  ASSERT_TRUE(log.close(CloseReason::error, ProcessTermination{}));

  auto text = read_file(dir.events());
  auto verdict = protocol::check_stream(text);
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " " << verdict.first_bad_reason;
  EXPECT_EQ(verdict.events_before_marker, 4u);
  EXPECT_EQ(verdict.close_reason, CloseReason::error);
  EXPECT_NE(text.find("torn last line of " + std::to_string(torn.size())), std::string::npos);

  // Readers attached after recovery find every seq through the rebuilt index.
  asio::io_context context;  // the reader never waits here, so nothing needs to run
  auto reader = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::at_seq(3));
  ASSERT_TRUE(reader) << reader.error();
  auto batch = reader->read_some();
  ASSERT_TRUE(batch);
  EXPECT_EQ(batch->first_seq, 3u);
  EXPECT_EQ(batch->count, 3u);
  EXPECT_TRUE(batch->reached_end);
  EXPECT_EQ(check_lines(batch->bytes, 3, "run-k"), 3u);
}

TEST(EventLog, RecoveryOfAClosedStreamIsClosed) {
  TempDir dir;
  {
    auto log = make_log(dir, "run-c");
    ASSERT_TRUE(log.append(text_event(1)));
    ASSERT_TRUE(log.close(CloseReason::completed, exited(0)));
  }
  auto size = std::filesystem::file_size(dir.events());
  auto recovered = EventLog::recover(dir.events(), "run-c");
  ASSERT_TRUE(recovered) << recovered.error();
  EXPECT_TRUE(recovered->report.already_closed);
  EXPECT_EQ(recovered->report.torn_bytes_cut, 0u);
  EXPECT_TRUE(recovered->log.closed());
  EXPECT_EQ(recovered->log.last_seq(), 2u);
  EXPECT_FALSE(recovered->log.append(text_event(2)));
  EXPECT_EQ(std::filesystem::file_size(dir.events()), size);
}

TEST(EventLog, RecoveryKeepsEveryCompleteLineEvenABadOne) {
  TempDir dir;
  {
    auto log = make_log(dir, "run-b");
    ASSERT_TRUE(log.append(text_event(1)));
  }
  {
    std::ofstream(dir.events(), std::ios::app | std::ios::binary) << "not json\n"
                                                                  << "{\"tor";
  }
  auto recovered = EventLog::recover(dir.events(), "run-b");
  ASSERT_TRUE(recovered) << recovered.error();
  EXPECT_EQ(recovered->report.lines, 2u);
  EXPECT_EQ(recovered->report.first_bad_line, std::optional<std::uint64_t>(2));
  EXPECT_EQ(recovered->report.torn_bytes_cut, 5u);
  EXPECT_NE(recovered->report.describe().find("line 2"), std::string::npos);
  EXPECT_EQ(recovered->log.last_seq(), 2u);
  auto seq = recovered->log.append(text_event(3));
  ASSERT_TRUE(seq);
  EXPECT_EQ(*seq, 3u);  // seq stays equal to the line number
  auto text = read_file(dir.events());
  EXPECT_NE(text.find("not json\n"), std::string::npos);
}

TEST(EventLog, RecoveryOfAnEmptyOrAllTornFile) {
  TempDir dir;
  { std::ofstream(dir.events(), std::ios::binary) << "{\"format\":\"metaharness.event/1\",\"se"; }
  auto recovered = EventLog::recover(dir.events(), "run-e");
  ASSERT_TRUE(recovered) << recovered.error();
  EXPECT_EQ(recovered->report.lines, 0u);
  EXPECT_GT(recovered->report.torn_bytes_cut, 0u);
  EXPECT_EQ(std::filesystem::file_size(dir.events()), 0u);
  ASSERT_TRUE(recovered->log.append(text_event(1)));
  ASSERT_TRUE(recovered->log.close(CloseReason::error, ProcessTermination{}));
  EXPECT_TRUE(protocol::check_stream(read_file(dir.events())).complete_and_well_formed());

  auto missing = EventLog::recover(dir.path() / "nothing.jsonl", "run-e");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().find("nothing.jsonl"), std::string::npos);
}

TEST(EventLog, MemoryIsTheSparseIndexAndOneScratchBuffer) {
  TempDir dir;
  auto log = make_log(dir, "run-mem", EventLogOptions{Durability::write, 16});
  for (int i = 1; i <= 10'000; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  const auto& index = log.shared()->index();
  EXPECT_EQ(index.size(), 625u);  // ceil(10000 / 16)
  EXPECT_LE(index.capacity(), 2 * index.size() + 64);
  EXPECT_EQ(index.at(0), 0u);
  // One huge event does not pin a huge buffer for the rest of the run.
  ASSERT_TRUE(log.append(text_event(10'001, 512 * 1024)));
  EXPECT_LT(log.scratch_capacity(), 64u * 1024);
  ASSERT_TRUE(log.close(CloseReason::completed, exited(0)));
  EXPECT_TRUE(protocol::check_stream(read_file(dir.events())).complete_and_well_formed());
}

}  // namespace
}  // namespace mh::daemon::test

namespace mh::daemon::test {
namespace {

// A hold batches a chunk's events into one write: each takes its seq at once, nobody sees any of
// them (nothing on disk, nothing published) until release(), and then all of them at once.
TEST(EventLog, AHoldWritesItsEventsAtReleaseAndPublishesNothingBefore) {
  TempDir dir;
  auto log = make_log(dir, "run-1");
  ASSERT_TRUE(log.append(text_event(1)));
  auto shared = log.shared();
  const auto bytes_before = log.committed_bytes();

  log.hold();
  for (std::uint64_t i = 2; i <= 4; ++i) {
    auto seq = log.append(text_event(i));
    ASSERT_TRUE(seq) << seq.error();
    EXPECT_EQ(*seq, i);
  }
  EXPECT_EQ(log.last_seq(), 4u);
  EXPECT_EQ(shared->committed_seq(), 1u) << "held events are not published";
  EXPECT_EQ(read_file(dir.events()).size(), bytes_before) << "nor written";

  ASSERT_TRUE(log.release());
  EXPECT_FALSE(log.holding());
  EXPECT_EQ(shared->committed_seq(), 4u);
  EXPECT_EQ(read_file(dir.events()).size(), log.committed_bytes());

  // close() during a hold writes what the hold kept first, then the marker.
  log.hold();
  ASSERT_TRUE(log.append(text_event(5)));
  auto closed = log.close(CloseReason::completed, exited(0));
  ASSERT_TRUE(closed) << closed.error();
  EXPECT_EQ(*closed, 6u);
  auto verdict = protocol::check_stream(read_file(dir.events()));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << verdict.first_bad_reason;
  EXPECT_EQ(verdict.events_before_marker, 5u);
}

// The sparse index still points at the right lines when its entries come from a hold.
TEST(EventLog, ReadersStartAtAnySeqOfAHeldBatch) {
  TempDir dir;
  EventLogOptions options;
  options.index_interval = 2;
  auto created = EventLog::create(dir.events(), "run-1", options);
  ASSERT_TRUE(created) << created.error();
  EventLog log = std::move(*created);
  log.hold();
  for (std::uint64_t i = 1; i <= 9; ++i)
    ASSERT_TRUE(log.append(text_event(i)));
  ASSERT_TRUE(log.release());
  auto text = read_file(dir.events());
  const auto& index = log.shared()->index();
  ASSERT_EQ(index.size(), 5u);  // seqs 1, 3, 5, 7, 9
  for (std::size_t e = 0; e < index.size(); ++e) {
    auto line_end = text.find('\n', index.at(e));
    auto line = protocol::read_event_line(std::string_view(text).substr(index.at(e), line_end - index.at(e)));
    ASSERT_TRUE(line);
    EXPECT_EQ(line->seq, e * 2 + 1);
  }
}

// One line bound (issue 9): content over runs.max_event_line_bytes is cut by the writer, and
// every reader of the daemon (recovery, stream readers, check-stream) takes what it wrote.
protocol::EventPayload command_output(std::size_t bytes) {
  protocol::ev::ToolResult r;
  r.call_id = "call_out";
  r.exit_code = 0;
  std::string out;
  out.reserve(bytes + 4);
  for (std::size_t i = 0; out.size() < bytes; ++i)
    out += i % 9 == 0 ? "\xC3\xA9" : "o";  // é every few bytes: a cut must not split one
  r.bytes = out.size();
  r.content = boost::json::string(out);
  r.tool_use_result = nullptr;
  return r;
}

TEST(EventLog, ALineOverTheBoundIsCutByTheWriterAndRecoveryReadsIt) {
  TempDir dir;
  const std::size_t whole = (1u << 20) + 512;  // the observed Codex case: ~1 MiB of output
  {
    auto log = make_log(dir, "run-big");
    ASSERT_TRUE(log.append(text_event(1)));
    ASSERT_TRUE(log.append(command_output(whole)));
    ASSERT_TRUE(log.append(text_event(3)));
    // Killed here: the next start recovers the stream.
  }
  auto lines = read_file(dir.events());
  std::size_t second = lines.find('\n') + 1;
  std::string line = lines.substr(second, lines.find('\n', second) - second);
  EXPECT_LE(line.size(), protocol::kDefaultMaxEventLineBytes) << "the default bound, 1 MiB";
  auto event = protocol::read_event_line(line);
  ASSERT_TRUE(event) << event.error().message;
  ASSERT_EQ(event->cut.size(), 1u);
  EXPECT_EQ(event->cut[0].field, "content");
  EXPECT_EQ(event->cut[0].bytes, whole);
  EXPECT_EQ(std::get<protocol::ev::ToolResult>(event->payload).bytes, whole) << "bytes: the whole output";

  auto recovered = EventLog::recover(dir.events(), "run-big");
  ASSERT_TRUE(recovered) << recovered.error();
  EXPECT_EQ(recovered->report.lines, 3u);
  EXPECT_FALSE(recovered->report.first_bad_line) << recovered->report.first_bad_reason;
  ASSERT_TRUE(recovered->log.close(CloseReason::error, ProcessTermination{}));
  auto verdict = protocol::check_stream(read_file(dir.events()));
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
}

TEST(EventLog, AtTheLargestBoundEveryReaderStillTakesEveryLine) {
  TempDir dir;
  EventLogOptions options;
  options.max_line_bytes = protocol::kMaxEventLineBytes;
  {
    auto log = make_log(dir, "run-max", options);
    ASSERT_TRUE(log.append(command_output(protocol::kMaxEventLineBytes + 100)));
    ASSERT_TRUE(log.append(command_output(3u << 20)));  // under this bound: not cut at all
  }
  auto recovered = EventLog::recover(dir.events(), "run-max", options);
  ASSERT_TRUE(recovered) << recovered.error();
  EXPECT_EQ(recovered->report.lines, 2u);
  EXPECT_FALSE(recovered->report.first_bad_line) << recovered->report.first_bad_reason;
  ASSERT_TRUE(recovered->log.close(CloseReason::completed, exited(0)));

  auto text = read_file(dir.events());
  auto first = text.substr(0, text.find('\n'));
  EXPECT_LE(first.size(), protocol::kMaxEventLineBytes);
  EXPECT_GT(first.size(), 8u << 20);
  EXPECT_NE(first.find("\"cut\":"), std::string::npos);
  auto verdict = protocol::check_stream(text);
  EXPECT_TRUE(verdict.complete_and_well_formed()) << verdict.summary() << " / " << verdict.first_bad_reason;
  EXPECT_EQ(text.find("\"cut\":", first.size()), std::string::npos) << "a line under the bound is whole";

  asio::io_context context;
  auto reader = StreamReader::open(recovered->log.shared(), context.get_executor(), ReaderStart::from_beginning());
  ASSERT_TRUE(reader) << reader.error();
  std::uint64_t read = 0;
  while (!reader->finished()) {
    auto batch = reader->read_some();
    ASSERT_TRUE(batch) << batch.error();
    ASSERT_GT(batch->count, 0u);
    read += check_lines(batch->bytes, batch->first_seq, "run-max");
  }
  EXPECT_EQ(read, 3u);
}

TEST(EventLog, ABoundOutsideTheRangeEveryReaderTakesIsRefused) {
  TempDir dir;
  for (std::size_t bound : {protocol::kMinEventLineBytes - 1, protocol::kMaxEventLineBytes + 1}) {
    EventLogOptions options;
    options.max_line_bytes = bound;
    auto log = EventLog::create(dir.events(), "run-x", options);
    ASSERT_FALSE(log);
    EXPECT_NE(log.error().find("max_line_bytes"), std::string::npos) << log.error();
  }
}

}  // namespace
}  // namespace mh::daemon::test
