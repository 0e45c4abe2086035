#include "tests/gateway/gateway_support.hpp"

#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>

namespace mh::gateway::testing {

namespace asio = boost::asio;

RunningGateway::RunningGateway(Setup setup) : io_(std::make_unique<asio::io_context>()) {
  GatewayHooks hooks;
  auto record = [this](auto&& change) {
    {
      std::lock_guard lock(mutex_);
      change(told_);
    }
    changed_.notify_all();
  };
  hooks.usage = [record](const RequestUsage& u) { record([&](Told& t) { t.usage.push_back(u); }); };
  hooks.refused_route = [record](const std::string& method, const std::string& path) {
    record([&](Told& t) { t.refused_routes.emplace_back(method, path); });
  };
  hooks.log = [record](const std::string& line) { record([&](Told& t) { t.log.push_back(line); }); };
  if (setup.reserve) {
    hooks.reserve = [record, answer = *setup.reserve](const Reservation& r) -> asio::awaitable<ReservationAnswer> {
      record([&](Told& t) { t.reservations.push_back(r); });
      co_return answer;
    };
  }
  gateway_ = std::make_unique<Gateway>(*io_, std::move(setup.options), std::move(hooks));
  if (auto refused = gateway_->prepare()) {
    prepare_error_ = *refused;
    return;
  }
  asio::ip::tcp::acceptor acceptor(*io_, asio::ip::tcp::endpoint(asio::ip::make_address_v4("127.0.0.1"), 0));
  port_ = acceptor.local_endpoint().port();
  gateway_->serve(std::move(acceptor));
  if (setup.unix_socket) {
    std::filesystem::remove(*setup.unix_socket);
    gateway_->serve(asio::local::stream_protocol::acceptor(
        *io_, asio::local::stream_protocol::endpoint(setup.unix_socket->string())));
  }
  std::packaged_task<void()> task([this] { io_->run(); });
  finished_ = task.get_future();
  thread_ = std::thread(std::move(task));
}

RunningGateway::~RunningGateway() {
  if (thread_.joinable()) {
    gateway_->stop();
    const bool in_time = finished_.wait_for(10s) == std::future_status::ready;
    EXPECT_TRUE(in_time) << "the gateway's io_context did not finish after stop()";
    if (!in_time) io_->stop();
    thread_.join();
  }
  gateway_.reset();  // before the io_context it uses
}

Told RunningGateway::told() const {
  std::lock_guard lock(mutex_);
  return told_;
}

bool RunningGateway::wait_for(const std::function<bool(const Told&)>& predicate,
                              std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return predicate(told_); });
}

}  // namespace mh::gateway::testing
