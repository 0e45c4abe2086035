// Where a run's stream.closed is made durable (fdatasync) before readers may see it, off the
// run's io thread (issue 26 §5, close at N). An fdatasync waits for the filesystem's journal
// commit (3 ms median, up to 12 ms, on the shared build host at N = 50); done inside EventLog::close on
// the run's strand, it held the io thread it ran on, and with it every other run, connection and
// reader queued there, so that N runs ending together were answered one fdatasync after the
// other and their clients saw every `end` at about the last one's moment. Here the syncs run on
// threads of their own, several at once (a journal commit then serves them together), and each
// job publishes its line to the readers once its sync has returned: a reader still sees
// stream.closed only once it is durable (event_log.hpp).
//
// Threading: submit() from any thread. The jobs run on the syncer's threads, in no set order
// between them.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace mh::daemon {

class CloseSyncer {
 public:
  // `threads` jobs at once. 0: none runs until run_queued() (a test's hand on the order).
  explicit CloseSyncer(std::size_t threads);
  // Runs what is queued (each job makes a stream durable and visible), then joins the threads.
  ~CloseSyncer();
  CloseSyncer(const CloseSyncer&) = delete;
  CloseSyncer& operator=(const CloseSyncer&) = delete;

  // The daemon's one instance (kThreads threads), made on first use and kept for the process.
  static const std::shared_ptr<CloseSyncer>& shared();
  static constexpr std::size_t kThreads = 16;

  void submit(std::function<void()> job);
  // Blocks until no job is queued or running (a daemon that stops, before its connections flush).
  void wait_idle();
  // Runs every queued job on the calling thread; the number run.
  std::size_t run_queued();

 private:
  void work();

  std::mutex mu_;
  std::condition_variable wake_, idle_;
  std::deque<std::function<void()>> jobs_;  // mu_
  std::size_t running_ = 0;                 // mu_
  bool stopping_ = false;                   // mu_
  std::vector<std::thread> threads_;
};

}  // namespace mh::daemon
