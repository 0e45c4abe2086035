// The daemon layer's one logging path: a line on stderr with a journald priority prefix
// ("<3>metaharness: …", which journald files under that priority; on a terminal it stays
// readable). A message above the configured level is dropped. Each line is one write(2), so lines
// from several io threads never interleave. Never log a secret, a prompt or a tool input.
#pragma once

#include <string_view>

namespace mh::daemon {

// syslog priorities, as `[log] level` names them.
enum class LogPriority : int { error = 3, warning = 4, notice = 5, info = 6, debug = 7 };

// The highest priority number still written (default 6, info). Set once at start.
void set_log_level(int level);
int log_level();

void log(LogPriority priority, std::string_view message);

}  // namespace mh::daemon
