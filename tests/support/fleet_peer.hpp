// A link to a 3-node test cluster as a host no daemon of the test runs: a forged peer (anyone
// holding the fleet's URL where the cluster asks for no credentials) or a submitter that failed,
// on the test's own subjects and buckets (its prefix).
#pragma once

#include <string>

#include "daemon/fleet/fleet_link.hpp"

namespace mh::test {

inline auto connect_peer(std::string url, std::string host_id, std::string prefix) {
  fleet::FleetConfig c;
  c.nats_urls = {std::move(url)};
  c.host_id = std::move(host_id);
  c.replicas = 3;
  c.prefix = std::move(prefix);
  return fleet::FleetLink::connect(c);
}

}  // namespace mh::test
