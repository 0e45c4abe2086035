// The daemon's io threads: one io_context per thread (the Asio HTTP server 2 example's pool),
// not one io_context shared by all of them.
//
// Why: a decision is a chain of short hand-offs between a run's strand and the strand of the
// connection that decides it (the vendor's call read, tool.requested written to the controller,
// its answer read, the answer written to the vendor). With one io_context shared by N threads,
// each hand-off lets Asio wake another thread to take the next handler, and the two contend for
// the queue: on the bench that is ~25 more system calls and ~20 more context switches per
// decision than one thread does (bench/RESULTS.md). With a context per thread, whatever lives on
// one context stays on its thread, so the daemon keeps a run and the connections that read or
// decide it on the same context (daemon/server/connection_home.hpp) and spreads the runs over
// the contexts to use every CPU.
//
// Context 0 is main(): the registry, the acceptor, signals, the HTTP listener and the fleet's
// glue live there, and it runs on the thread that calls run(). Each context is built with
// concurrency hint 1 (one thread runs it); posting to it from any other thread stays safe.
#pragma once

#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <memory>
#include <optional>
#include <vector>

namespace mh::daemon {

class IoPool {
 public:
  // `threads` contexts (at least one).
  explicit IoPool(unsigned threads);
  // Shuts every context down before any is destroyed: a handler queued on one context may hold
  // an object (a connection, a run) whose socket or timer belongs to another.
  ~IoPool();  // (neither copied nor moved: it holds an atomic)

  boost::asio::io_context& main() { return *contexts_.front(); }
  std::size_t size() const { return contexts_.size(); }
  boost::asio::io_context& at(std::size_t i) { return *contexts_.at(i); }
  // The context a new run lives on: the next in turn, so runs spread over the threads.
  boost::asio::io_context& next_for_run();
  // Whether `io` is one of this pool's contexts (and which).
  std::optional<std::size_t> index_of(const boost::asio::io_context& io) const;

  // Runs every context, the main one on the calling thread and each other on a thread of its
  // own, until stop(); joins them before it returns.
  void run();
  // Any thread: every context stops (their threads return from run()).
  void stop();

 private:
  // io_context's shutdown() is protected; the pool needs it to shut all down before destroying any.
  struct Context : boost::asio::io_context {
    Context() : boost::asio::io_context(1) {}
    using boost::asio::io_context::shutdown;
  };
  std::vector<std::unique_ptr<Context>> contexts_;
  // The contexts other than main() have nothing of their own to wait on until a run arrives.
  std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> keep_running_;
  std::atomic<std::size_t> next_run_{0};
};

}  // namespace mh::daemon
