#include "daemon/stream/close_syncer.hpp"

namespace mh::daemon {

CloseSyncer::CloseSyncer(std::size_t threads) {
  for (std::size_t i = 0; i < threads; ++i)
    threads_.emplace_back([this] { work(); });
}

CloseSyncer::~CloseSyncer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : threads_)
    t.join();
  run_queued();  // without threads (or queued after they left): nothing is dropped
}

const std::shared_ptr<CloseSyncer>& CloseSyncer::shared() {
  static const std::shared_ptr<CloseSyncer> instance = std::make_shared<CloseSyncer>(kThreads);
  return instance;
}

void CloseSyncer::submit(std::function<void()> job) {
  {
    std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
}

void CloseSyncer::wait_idle() {
  std::unique_lock lock(mu_);
  if (threads_.empty()) {
    lock.unlock();
    run_queued();
    return;
  }
  idle_.wait(lock, [this] { return jobs_.empty() && running_ == 0; });
}

std::size_t CloseSyncer::run_queued() {
  std::size_t ran = 0;
  for (;;) {
    std::function<void()> job;
    {
      std::lock_guard lock(mu_);
      if (jobs_.empty()) return ran;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job();
    ++ran;
  }
}

void CloseSyncer::work() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stopping, and nothing left
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lock.unlock();
    job();
    lock.lock();
    --running_;
    if (jobs_.empty() && running_ == 0) idle_.notify_all();
  }
}

}  // namespace mh::daemon
