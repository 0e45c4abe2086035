// The hook channel's log (vendor-hooks.jsonl): one line per message, both directions, whichever
// body carries the channel (a direct run's socket, or the run's supervisor), so the vendor
// traffic is retained whole.
#include "daemon/run/run_impl.hpp"

namespace mh::daemon {

void Run::Impl::log_hook(std::uint64_t connection, std::string_view direction, const json::value& message) {
  std::string line = protocol::canonical_json(
                         json::object{{"connection", connection}, {"direction", direction}, {"message", message}}) +
                     "\n";
  redactor.redact(line);  // no secret in what the run keeps (issue 25), the hook log included
  hook_log.append(line);
}

}  // namespace mh::daemon
