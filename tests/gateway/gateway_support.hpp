// Test support for the model gateway: a Gateway served on its own thread (a TCP port on loopback,
// optionally a Unix socket too) whose hooks record what they were told, and a bounded wait on it.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon/gateway/gateway.hpp"

namespace boost::asio {
class io_context;
}

namespace mh::gateway::testing {

using namespace std::chrono_literals;

// What the hooks were told, guarded; wait_for() is bounded (a timeout fails, never synchronises).
struct Told {
  std::vector<RequestUsage> usage;
  std::vector<std::pair<std::string, std::string>> refused_routes;
  std::vector<std::string> log;
  std::vector<Reservation> reservations;
};

class RunningGateway {
 public:
  struct Setup {
    GatewayOptions options;
    // Set: hooks.reserve answers with this (and records the reservation).
    std::optional<ReservationAnswer> reserve;
    std::optional<std::filesystem::path> unix_socket;  // also serve here
  };
  explicit RunningGateway(Setup setup);
  ~RunningGateway();

  bool ok() const { return prepare_error_.empty(); }
  const std::string& prepare_error() const { return prepare_error_; }
  std::uint16_t port() const { return port_; }
  Gateway& gateway() { return *gateway_; }

  Told told() const;
  bool wait_for(const std::function<bool(const Told&)>& predicate, std::chrono::milliseconds timeout = 10s) const;

 private:
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  Told told_;
  std::unique_ptr<boost::asio::io_context> io_;
  std::unique_ptr<Gateway> gateway_;
  std::string prepare_error_;
  std::uint16_t port_ = 0;
  std::thread thread_;
  std::future<void> finished_;
};

}  // namespace mh::gateway::testing
