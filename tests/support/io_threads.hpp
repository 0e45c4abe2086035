// What the asio-level tests (tests/process, tests/stream) share: an io_context on two threads,
// coroutines spawned on a strand and waited for with an upper bound, and a scratch directory
// that goes away with the test.
#pragma once

#include <stdlib.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/use_future.hpp>
#include <chrono>
#include <filesystem>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace mh::test {

// Two io threads by default, like the daemon on this machine, so strands really hop threads.
class IoThreads {
 public:
  using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;

  explicit IoThreads(int threads = 2) : guard_(boost::asio::make_work_guard(context_)) {
    for (int i = 0; i < threads; ++i)
      threads_.emplace_back([this] { context_.run(); });
  }
  ~IoThreads() { stop(); }
  IoThreads(const IoThreads&) = delete;
  IoThreads& operator=(const IoThreads&) = delete;

  boost::asio::io_context& context() { return context_; }
  Strand make_strand() { return boost::asio::make_strand(context_); }

  void stop() {
    guard_.reset();
    context_.stop();
    for (auto& t : threads_)
      if (t.joinable()) t.join();
  }

  template <class T, class Executor>
  std::future<T> spawn(Executor executor, boost::asio::awaitable<T> work) {
    return boost::asio::co_spawn(executor, std::move(work), boost::asio::use_future);
  }

  // Waits for the future with an upper bound; on overrun stops the io threads (so nothing runs
  // on against the test's locals) and fails by exception.
  template <class T>
  T get(std::future<T>& future, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    if (future.wait_for(limit) != std::future_status::ready) {
      stop();
      throw std::runtime_error("coroutine did not finish within " + std::to_string(limit.count()) + " ms");
    }
    return future.get();
  }

  // Runs the coroutine on `executor` and returns its value, within `limit`.
  template <class T, class Executor>
  T run(Executor executor, boost::asio::awaitable<T> work, std::chrono::milliseconds limit = std::chrono::seconds(30)) {
    auto future = spawn(executor, std::move(work));
    return get(future, limit);
  }

 private:
  boost::asio::io_context context_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::vector<std::thread> threads_;
};

// A fresh directory under /tmp named <prefix>-XXXXXX, removed with everything in it.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& prefix) {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    char* made = ::mkdtemp(pattern.data());
    if (!made) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mh::test
