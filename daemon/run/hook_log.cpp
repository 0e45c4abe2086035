// HookLog (hook_log.hpp).
#include "daemon/run/hook_log.hpp"

#include "protocol/json.hpp"

namespace mh::daemon {

void HookLog::append(std::uint64_t connection, std::string_view direction, const boost::json::value& message) {
  std::string line = protocol::canonical_json(boost::json::object{
                         {"connection", connection}, {"direction", direction}, {"message", message}}) +
                     "\n";
  redactor_.redact(line);  // no secret in what the run keeps (issue 25), the hook log included
  file_.append(line);
}

}  // namespace mh::daemon
