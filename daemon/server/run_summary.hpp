// A run as the daemon's readers see it: the run summary of `list` / `get` (docs/socket-api.md)
// and the live status it is made from. One writer for both the socket API and the viewer page.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "daemon/run/run.hpp"
#include "daemon/server/registry.hpp"
#include "protocol/json.hpp"

namespace mh::daemon {

// `t` as RFC 3339 UTC to the second.
std::string rfc3339(std::chrono::system_clock::time_point t);
// A running run's status, from its strand; nullopt for no run (closed before this process).
boost::asio::awaitable<std::optional<RunStatus>> status_of(const std::shared_ptr<Run>& run);
// The run summary, with the live status of a running run.
boost::asio::awaitable<boost::json::object> summary(const RunEntry& e);

}  // namespace mh::daemon
