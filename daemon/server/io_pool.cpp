#include "daemon/server/io_pool.hpp"

#include <thread>

namespace mh::daemon {

namespace asio = boost::asio;

IoPool::IoPool(unsigned threads) {
  for (unsigned i = 0; i < std::max(threads, 1u); ++i)
    contexts_.push_back(std::make_unique<Context>());
  for (std::size_t i = 1; i < contexts_.size(); ++i)
    keep_running_.emplace_back(asio::make_work_guard(*contexts_[i]));
}

IoPool::~IoPool() {
  for (auto& c : contexts_)
    c->shutdown();
}

asio::io_context& IoPool::next_for_run() {
  return *contexts_[next_run_.fetch_add(1, std::memory_order_relaxed) % contexts_.size()];
}

std::optional<std::size_t> IoPool::index_of(const asio::io_context& io) const {
  for (std::size_t i = 0; i < contexts_.size(); ++i)
    if (contexts_[i].get() == &io) return i;
  return std::nullopt;
}

void IoPool::run() {
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < contexts_.size(); ++i)
    threads.emplace_back([&context = *contexts_[i]] { context.run(); });
  main().run();
  stop();  // main() returned (its stop): the others go too
  for (auto& t : threads)
    t.join();
}

void IoPool::stop() {
  for (auto& c : contexts_)
    c->stop();
}

}  // namespace mh::daemon
