// The run's side of its gateway (docs/gateway.md): what the gateway and the egress proxy in the
// run's supervisor report — a reservation asked before a model request is forwarded, the usage
// read from each answer, a route refused, an egress attempt — turned into the core's inputs.
#include "daemon/run/run_impl.hpp"

namespace mh::daemon {

void Run::Impl::on_gateway_message(const supervisor::FromSupervisor& message) {
  // To be built (issue 25): until then a reservation is answered allowed so no request waits.
  if (const auto* reserve = std::get_if<supervisor::Reserve>(&message))
    if (link) link->send(supervisor::Reserved{reserve->request, true, {}});
}

}  // namespace mh::daemon
