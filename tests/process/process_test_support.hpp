// Shared helpers for the process tests: the io threads and scratch directory of
// tests/support/io_threads.hpp, launch plans, /proc probes.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/readable_pipe.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <future>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "adapters/adapter.hpp"
#include "daemon/process/child_process.hpp"
#include "tests/support/io_threads.hpp"

namespace mh::daemon::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

using mh::test::IoThreads;

struct TempDir : mh::test::ScratchDir {
  TempDir() : ScratchDir("mh-process-test") {}
};

inline adapters::LaunchPlan make_plan(std::filesystem::path program, std::vector<std::string> args,
                                      std::vector<std::pair<std::string, std::string>> env, std::filesystem::path cwd) {
  adapters::LaunchPlan plan;
  plan.adapter = "test";
  plan.program = std::move(program);
  plan.args = std::move(args);
  plan.env = std::move(env);
  plan.cwd = std::move(cwd);
  return plan;
}

// A spawned child, or what refused the spawn thrown (inside the coroutines the tests run on the
// io threads, where a throw is how a test's setup fails).
inline std::unique_ptr<ChildProcess> spawn_or_throw(ChildProcess::executor_type executor, adapters::LaunchPlan plan) {
  auto spawned = ChildProcess::spawn(std::move(executor), std::move(plan));
  if (!spawned) throw std::runtime_error("spawn failed: " + spawned.error());
  return std::move(*spawned);
}

// A marker value no other process on this host carries: tests must never touch processes that
// are not theirs (other engineers build and test on the same machine).
inline std::string unique_marker_value(const char* what) {
  static std::atomic<int> counter{0};
  return std::string("mh-test-") + what + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" +
         std::to_string(std::chrono::steady_clock::now().time_since_epoch().count());
}

inline asio::awaitable<std::string> read_to_eof(asio::readable_pipe& pipe) {
  std::string out;
  char buffer[4096];
  for (;;) {
    auto [ec, n] = co_await pipe.async_read_some(asio::buffer(buffer), asio::as_tuple(asio::use_awaitable));
    out.append(buffer, n);
    if (ec) break;
  }
  co_return out;
}

// Reads the child's stdout line by line until every line in `expect` was seen (in any order:
// background processes write them); returns every line read.
inline asio::awaitable<std::vector<std::string>> read_lines_until(ChildProcess& child, std::set<std::string> expect) {
  std::vector<std::string> lines;
  asio::streambuf buffer;
  while (!expect.empty()) {
    co_await asio::async_read_until(child.stdout_pipe(), buffer, '\n', asio::use_awaitable);
    std::istream in(&buffer);
    std::string line;
    std::getline(in, line);
    expect.erase(line);
    lines.push_back(line);
  }
  co_return lines;
}

// The state letter of /proc/<pid>/stat, or nullopt when the process is gone.
inline std::optional<char> proc_state(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  auto close = line.rfind(')');
  if (close == std::string::npos || close + 2 >= line.size()) return std::nullopt;
  return line[close + 2];
}

inline std::optional<pid_t> proc_field_pid(pid_t pid, int field) {  // field >= 4, per proc(5)
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return std::nullopt;
  auto close = line.rfind(')');
  std::istringstream rest(line.substr(close + 2));
  std::string value;
  for (int f = 3; f <= field; ++f)
    rest >> value;
  return static_cast<pid_t>(std::stol(value));
}

// Gone or a zombie: either way it runs no more code.
inline bool is_dead(pid_t pid) {
  auto state = proc_state(pid);
  return !state || *state == 'Z' || *state == 'X';
}

inline std::size_t open_descriptor_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

}  // namespace mh::daemon::test
