#include "daemon/server/connection_home.hpp"

#include <sys/socket.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/use_awaitable.hpp>

#include "daemon/log.hpp"
#include "daemon/server/server.hpp"
#include "daemon/server/socket_api.hpp"

namespace mh::daemon {

namespace asio = boost::asio;

namespace {

// A first request is small (an attach is about a hundred bytes); a longer first line is served
// where it was accepted.
constexpr std::size_t kPeekBytes = 4096;

// The connection's first line, if it has arrived whole: peeked, so the connection reads it again.
std::optional<std::string> peek_first_line(int fd) {
  std::string buffer(kPeekBytes, '\0');
  ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_PEEK | MSG_DONTWAIT);
  if (n <= 0) return std::nullopt;
  buffer.resize(static_cast<std::size_t>(n));
  auto end = buffer.find('\n');
  if (end == std::string::npos) return std::nullopt;
  buffer.resize(end);
  return buffer;
}

}  // namespace

std::optional<std::string> run_id_of_request_line(std::string_view line) {
  auto request = read_request(line);
  if (!request) return std::nullopt;
  const auto* id = request->body.if_contains("run_id");
  if (!id || !id->is_string() || id->get_string().empty()) return std::nullopt;
  return std::string(id->get_string());
}

HomingSocket::HomingSocket(local_socket socket) : strand_(socket.get_executor()), socket_(std::move(socket)) {}

void HomingSocket::cancel() {
  asio::post(strand_, [self = shared_from_this()] {
    self->cancelled_ = true;
    boost::system::error_code ignored;
    if (self->socket_.is_open()) self->socket_.cancel(ignored);
  });
}

namespace {

asio::awaitable<asio::io_context*> run_context_in_registry(std::shared_ptr<Server> server, std::string id) {
  auto context_of_run = [server, id = std::move(id)]() -> asio::io_context* {
    auto entry = server->registry.lookup(id);
    return entry && entry->run ? &entry->run->context() : nullptr;
  };
  co_return co_await server->on_registry(std::move(context_of_run));
}

}  // namespace

RunContextLookup registry_run_context(std::shared_ptr<Server> server) {
  // Not a lambda coroutine (GCC 12 miscompiles capturing ones: server.hpp): it calls one.
  return [server](std::string id) { return run_context_in_registry(server, std::move(id)); };
}

asio::awaitable<local_socket> home_connection(std::shared_ptr<HomingSocket> homing, RunContextLookup lookup) {
  local_socket& socket = homing->socket();
  if (homing->cancelled()) co_return std::move(socket);
  auto [waited] = co_await socket.async_wait(asio::socket_base::wait_read, asio::as_tuple(asio::use_awaitable));
  if (waited) co_return std::move(socket);  // cancelled at the stop: served here, to be finished
  auto line = peek_first_line(socket.native_handle());
  auto run_id = line ? run_id_of_request_line(*line) : std::nullopt;
  if (!run_id) co_return std::move(socket);
  asio::io_context* home = co_await lookup(std::move(*run_id));
  if (!home || &asio::query(socket.get_executor(), asio::execution::context) == home) co_return std::move(socket);
  // An Asio socket belongs to one context for life: the descriptor moves to a new socket there.
  boost::system::error_code ec;
  int fd = socket.release(ec);
  if (ec) co_return std::move(socket);  // still open here (release only fails before the fd is let go)
  local_socket moved(asio::make_strand(*home));
  moved.assign(asio::local::stream_protocol(), fd, ec);
  if (!ec) co_return moved;
  // Served where it was accepted, then (the descriptor is still ours).
  log(LogPriority::warning, "a connection could not move to its run's io thread: " + ec.message());
  local_socket back(socket.get_executor());
  back.assign(asio::local::stream_protocol(), fd, ec);
  if (ec) ::close(fd);
  co_return back;
}

}  // namespace mh::daemon
