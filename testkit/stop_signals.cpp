#include "testkit/stop_signals.hpp"

#include <csignal>

namespace mh::testkit {

namespace {
volatile std::sig_atomic_t g_stop_requested = 0;
extern "C" void raise_stop_flag(int) {
  g_stop_requested = 1;
}
}  // namespace

void route_stop_signals(void (*on_stop)(int)) {
  std::signal(SIGPIPE, SIG_IGN);
  struct sigaction stop {};
  stop.sa_handler = on_stop;
  sigemptyset(&stop.sa_mask);
  ::sigaction(SIGINT, &stop, nullptr);
  ::sigaction(SIGTERM, &stop, nullptr);
}

void route_stop_signals() {
  route_stop_signals(raise_stop_flag);
}

bool stop_requested() {
  return g_stop_requested != 0;
}

}  // namespace mh::testkit
