// How a bench stops: SIGINT and SIGTERM go to the bench's own handler (which asks its loops to
// stop and passes the signal on to a running child), and SIGPIPE is ignored, so that a child
// that died cannot take the bench with it.
#pragma once

namespace mh::testkit {

void route_stop_signals(void (*on_stop)(int));

// The same with a handler that only raises a flag, for a bench whose loops poll stop_requested().
void route_stop_signals();
bool stop_requested();

}  // namespace mh::testkit
