#include "daemon/log.hpp"

#include <unistd.h>

#include <atomic>
#include <string>

namespace mh::daemon {

namespace {
std::atomic<int> g_level{static_cast<int>(LogPriority::info)};
}

void set_log_level(int level) {
  g_level.store(level, std::memory_order_relaxed);
}

int log_level() {
  return g_level.load(std::memory_order_relaxed);
}

void log(LogPriority priority, std::string_view message) {
  int p = static_cast<int>(priority);
  if (p > log_level()) return;
  std::string line = "<" + std::to_string(p) + ">metaharness: ";
  line.append(message);
  line.push_back('\n');
  (void)!::write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace mh::daemon
