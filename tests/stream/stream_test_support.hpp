// Shared helpers for the stream tests: the io threads and scratch directory of
// tests/support/io_threads.hpp, event payloads and line checks.
#pragma once

#include <gtest/gtest.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon/stream/event_log.hpp"
#include "daemon/stream/stream_reader.hpp"
#include "protocol/reader.hpp"
#include "tests/support/io_threads.hpp"

namespace mh::daemon::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using Strand = asio::strand<asio::io_context::executor_type>;

using mh::test::IoThreads;

struct TempDir : mh::test::ScratchDir {
  TempDir() : ScratchDir("mh-stream-test") {}
  std::filesystem::path events() const { return path() / "events.jsonl"; }
};

// A text event of roughly `bytes` bytes once serialised (the envelope adds ~80).
inline protocol::EventPayload text_event(std::uint64_t i, std::size_t bytes = 300) {
  protocol::ev::Text text;
  std::string body = "event " + std::to_string(i) + " ";
  body.resize(bytes > 90 ? bytes - 90 : 1, 'x');
  text.text = std::move(body);
  return text;
}

inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Checks that `bytes` holds exactly the lines `first_seq`, `first_seq + 1`, ... of run `run`
// and returns how many; throws on the first line that is not the expected event.
inline std::uint64_t check_lines(std::string_view bytes, std::uint64_t first_seq, const std::string& run) {
  std::uint64_t expected = first_seq;
  while (!bytes.empty()) {
    auto nl = bytes.find('\n');
    if (nl == std::string_view::npos) throw std::runtime_error("a batch ends without a newline");
    auto event = protocol::read_event_line(bytes.substr(0, nl));
    if (!event) throw std::runtime_error("unreadable line: " + event.error().message);
    if (event->seq != expected)
      throw std::runtime_error("seq " + std::to_string(event->seq) + " where " + std::to_string(expected) + " was due");
    if (event->run != run) throw std::runtime_error("wrong run " + event->run);
    ++expected;
    bytes.remove_prefix(nl + 1);
  }
  return expected - first_seq;
}

inline EventLog make_log(const TempDir& dir, const std::string& run, EventLogOptions options = {}) {
  auto log = EventLog::create(dir.events(), run, options);
  if (!log) throw std::runtime_error(log.error());
  return std::move(*log);
}

}  // namespace mh::daemon::test
