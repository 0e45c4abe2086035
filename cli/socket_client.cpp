#include "cli/socket_client.hpp"

#include <sys/un.h>

#include <boost/asio/write.hpp>

#include "daemon/server/socket_api.hpp"
#include "protocol/json.hpp"

namespace mh::cli {

namespace asio = boost::asio;

std::optional<std::string> SocketClient::connect(const std::filesystem::path& path) {
  const std::string p = path.string();
  if (p.size() >= sizeof(sockaddr_un::sun_path))
    return "the socket path " + p + " is longer than a Unix socket path may be (" +
           std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes)";
  boost::system::error_code ec;
  socket_.connect(asio::local::stream_protocol::endpoint(p), ec);
  if (ec) return "cannot reach the daemon at " + p + ": " + ec.message();
  return std::nullopt;
}

bool SocketClient::send(const std::string& line) {
  boost::system::error_code ec;
  asio::write(socket_, asio::buffer(line + "\n"), ec);
  return !ec;
}

void SocketClient::shutdown_send() {
  boost::system::error_code ec;
  socket_.shutdown(asio::socket_base::shutdown_send, ec);
}

std::optional<std::string> SocketClient::next() {
  for (;;) {
    auto nl = buffer_.find('\n');
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    char chunk[65536];
    boost::system::error_code ec;
    std::size_t n = socket_.read_some(asio::buffer(chunk), ec);
    if (n == 0 || ec) {
      if (buffer_.empty()) return std::nullopt;
      std::string rest = std::move(buffer_);
      buffer_.clear();
      return rest;
    }
    buffer_.append(chunk, n);
  }
}

std::optional<boost::json::object> socket_reply(const std::string& line) {
  auto v = protocol::parse_json(line);
  if (!v || !v->is_object()) return std::nullopt;
  const auto* format = v->as_object().if_contains("format");
  if (!format || !format->is_string() || format->as_string() != daemon::kSocketFormat) return std::nullopt;
  return std::move(v->as_object());
}

}  // namespace mh::cli
