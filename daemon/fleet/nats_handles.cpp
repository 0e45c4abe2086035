#include "daemon/fleet/nats_handles.hpp"

#include <stdexcept>

namespace mh::fleet {

NatsError nats_error(std::string what, natsStatus s, jsErrCode js) {
  NatsError e;
  e.status = s;
  e.js = js;
  e.text = std::move(what);
  e.text += ": ";
  e.text += natsStatus_GetText(s);
  if (js != 0) e.text += " (JetStream error " + std::to_string(static_cast<int>(js)) + ")";
  // The library's own detail for the calling thread's last error, when it has one.
  natsStatus last = NATS_OK;
  if (const char* detail = nats_GetLastError(&last); detail != nullptr && *detail != '\0' && last == s)
    e.text += std::string(" — ") + detail;
  return e;
}

}  // namespace mh::fleet

namespace boost::system {
void throw_exception_from_error(const mh::fleet::NatsError& e, const boost::source_location&) {
  throw std::runtime_error(e.text);
}
}  // namespace boost::system
