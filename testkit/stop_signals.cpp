#include "testkit/stop_signals.hpp"

#include <csignal>

namespace mh::testkit {

void route_stop_signals(void (*on_stop)(int)) {
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction stop {};
  stop.sa_handler = on_stop;
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGINT, &stop, nullptr);
  ::sigaction(SIGTERM, &stop, nullptr);
}

}  // namespace mh::testkit
