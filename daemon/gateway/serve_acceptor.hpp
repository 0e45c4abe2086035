// How the gateway and the egress proxy take an acceptor: on their io_context, closed at once when
// the server will not serve (stopped, or `refused` says why), otherwise made closable by stop()
// (a weak closer: an acceptor its loop has dropped is not kept alive) and accepted from until it
// closes, each connection handed to `on_connection(state, socket)`. One piece for both servers
// (issue 25): the state needs `io`, `stopped` and `acceptor_closers`.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace mh::gateway {

template <class State, class Acceptor, class OnConnection>
boost::asio::awaitable<void> accept_until_closed(std::shared_ptr<State> state, std::shared_ptr<Acceptor> acceptor,
                                                 OnConnection on_connection) {
  for (;;) {
    boost::system::error_code ec;
    auto socket = co_await acceptor->async_accept(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
    if (state->stopped || !acceptor->is_open()) co_return;
    if (ec) {
      // A failed accept concerns that peer only, or is a passing shortage (EMFILE): pause so a
      // persistent one cannot spin the supervisor's one thread.
      boost::asio::steady_timer pause(acceptor->get_executor(), std::chrono::milliseconds(50));
      co_await pause.async_wait(boost::asio::redirect_error(boost::asio::use_awaitable, ec));
      continue;
    }
    on_connection(state, std::move(socket));
  }
}

// `refused(state)`: nullopt to serve, else a line for the server's log (then the acceptor closes).
template <class State, class Acceptor, class OnConnection, class Refused>
void serve_acceptor(const std::shared_ptr<State>& state, Acceptor acceptor, OnConnection on_connection,
                    Refused refused) {
  auto shared = std::make_shared<Acceptor>(std::move(acceptor));
  boost::asio::post(state->io, [state, shared, on_connection, refused] {
    std::optional<std::string> why = refused(*state);
    if (!why && state->stopped) why = "stopped";
    if (why) {
      boost::system::error_code ignored;
      shared->close(ignored);
      return;
    }
    state->acceptor_closers.push_back([weak = std::weak_ptr<Acceptor>(shared)] {
      if (auto a = weak.lock()) {
        boost::system::error_code ignored;
        a->close(ignored);
      }
    });
    boost::asio::co_spawn(state->io, accept_until_closed(state, shared, on_connection), boost::asio::detached);
  });
}

}  // namespace mh::gateway
