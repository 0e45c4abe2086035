// A quick throughput measurement of EventLog::append and StreamReader bulk reads for ~300-byte
// events (not a test and not a benchmark harness: `mh_stream_throughput [events]` prints rates).
#include <cstdio>

#include "stream_test_support.hpp"

using namespace mh::daemon;
using namespace mh::daemon::test;
using Clock = std::chrono::steady_clock;

namespace {

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

std::uint64_t drain(StreamReader& reader) {
  std::uint64_t lines = 0;
  for (;;) {
    auto batch = reader.read_some();
    if (!batch) throw std::runtime_error(batch.error());
    lines += batch->count;
    if (batch->count == 0 || batch->reached_end) return lines;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::uint64_t events = argc > 1 ? std::stoull(argv[1]) : 500'000;
  // Pre-build payloads so the measurement is the log, not the test's string building.
  std::vector<mh::protocol::EventPayload> payloads;
  payloads.reserve(1024);
  for (int i = 0; i < 1024; ++i)
    payloads.push_back(text_event(i, 300));

  {
    TempDir dir;
    auto log = make_log(dir, "run-throughput-0001");
    auto start = Clock::now();
    for (std::uint64_t i = 0; i < events; ++i)
      if (!log.append(payloads[i % payloads.size()])) return 1;
    double append_s = seconds_since(start);
    std::printf("append:        %8.0f events/s  (%llu events, %.1f MB, %.0f bytes/event)\n", events / append_s,
                static_cast<unsigned long long>(events), log.committed_bytes() / 1e6,
                double(log.committed_bytes()) / events);

    asio::io_context context;
    auto reader = StreamReader::open(log.shared(), context.get_executor(), ReaderStart::from_beginning());
    start = Clock::now();
    auto lines = drain(*reader);
    double read_s = seconds_since(start);
    std::printf("bulk read:     %8.0f events/s  (%llu lines, %.0f MB/s)\n", lines / read_s,
                static_cast<unsigned long long>(lines), log.committed_bytes() / 1e6 / read_s);
  }

  {
    // Writer on one strand, a follower on another, two io threads: end to end.
    TempDir dir;
    auto log = make_log(dir, "run-throughput-0002");
    IoThreads io;
    auto run_strand = io.make_strand();
    auto reader_strand = io.make_strand();
    auto shared = log.shared();
    auto start = Clock::now();
    // A named lambda: the coroutine refers to its captures for as long as it runs.
    auto follower_body = [&]() -> asio::awaitable<std::uint64_t> {
      auto reader = StreamReader::open(shared, reader_strand, ReaderStart::from_beginning());
      if (!reader) throw std::runtime_error(reader.error());
      std::uint64_t lines = 0;
      for (;;) {
        auto batch = reader->read_some();
        if (!batch) throw std::runtime_error(batch.error());
        lines += batch->count;
        if (batch->reached_end) co_return lines;
        if (batch->count == 0) co_await reader->wait_for_more(Clock::now() + 30s);
      }
    };
    auto follower = io.spawn(reader_strand, follower_body());
    // A named lambda: the coroutine refers to its captures for as long as it runs.
    auto writer_body = [&]() -> asio::awaitable<void> {
      for (std::uint64_t i = 0; i < events; ++i) {
        if (!log.append(payloads[i % payloads.size()])) throw std::runtime_error("append");
        if (i % 256 == 0) co_await asio::post(run_strand, asio::use_awaitable);
      }
      if (!log.close(mh::protocol::CloseReason::completed, {})) throw std::runtime_error("close");
    };
    auto writer = io.spawn(run_strand, writer_body());
    io.get(writer, 300s);
    double write_s = seconds_since(start);
    auto lines = io.get(follower, 300s);
    double total_s = seconds_since(start);
    std::printf("live follow:   %8.0f events/s  (writer done in %.2f s, follower saw %llu lines in %.2f s)\n",
                lines / total_s, write_s, static_cast<unsigned long long>(lines), total_s);
  }
  return 0;
}
