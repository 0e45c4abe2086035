// The CLI's one blocking line client on the daemon's socket (docs/socket-api.md): the daemon
// verbs (status, ls, get, submit, tail, attach, halt, shutdown) and `export` use it.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/json/object.hpp>
#include <filesystem>
#include <optional>
#include <string>

namespace mh::cli {

class SocketClient {
 public:
  // Nullopt when connected, else why not (a path too long for a Unix socket, nobody listening).
  std::optional<std::string> connect(const std::filesystem::path& path);
  // Sends one line (the newline is added); false once the daemon has closed.
  bool send(const std::string& line);
  void shutdown_send();
  // The next line; a last line the daemon closed without a newline is returned as it is;
  // nullopt when the connection has ended.
  std::optional<std::string> next();

 private:
  boost::asio::io_context io_;
  boost::asio::local::stream_protocol::socket socket_{io_};
  std::string buffer_;
};

// A line's object when it is a socket reply (`format` is metaharness.socket/1), else nullopt.
std::optional<boost::json::object> socket_reply(const std::string& line);

}  // namespace mh::cli
