// At start, the runs a previous daemon left to their supervisors (runs.supervise) are taken over:
// each is adopted (Run::adopt: the same stream goes on, the core is rebuilt from the run's input
// journal), recorded active and started; one that cannot be adopted is recovered as cut off,
// saying why. Called before the io runs, like the registry's recovery.
#pragma once

#include <string>
#include <vector>

namespace mh::daemon {

class Server;

// Returns how many runs were adopted.
std::size_t adopt_runs(Server& server, const std::vector<std::string>& ids);

}  // namespace mh::daemon
