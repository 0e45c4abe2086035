// How the gateway and the egress proxy take an acceptor: on their io_context, closed at once when
// the server will not serve (stopped, or `refused` says why), otherwise made closable by stop()
// (a weak closer: an acceptor its loop has dropped is not kept alive) and served by `accept_loop`.
// One piece for both servers (issue 25): the state needs `io`, `stopped` and `acceptor_closers`.
#pragma once

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <memory>
#include <optional>
#include <string>

namespace mh::gateway {

// `refused(state)`: nullopt to serve, else a line for the server's log (then the acceptor closes).
template <class State, class Acceptor, class AcceptLoop, class Refused>
void serve_acceptor(const std::shared_ptr<State>& state, Acceptor acceptor, AcceptLoop accept_loop, Refused refused) {
  auto shared = std::make_shared<Acceptor>(std::move(acceptor));
  boost::asio::post(state->io, [state, shared, accept_loop, refused] {
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
    boost::asio::co_spawn(state->io, accept_loop(state, shared), boost::asio::detached);
  });
}

}  // namespace mh::gateway
