// A bench's side of the daemon's socket API: a blocking line client with bounded waits (or read
// by the caller's own poll loop), the request lines, a stand-in run's spec and a pipelined submit.
#pragma once

#include <sys/un.h>

#include <boost/json.hpp>
#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mh::testkit {

sockaddr_un unix_address(const std::filesystem::path& p);

// The value of `"key":"` ... `"` in a JSON line, without parsing it (ids here never need escapes).
std::string_view string_field(std::string_view line, std::string_view key);
std::optional<boost::json::object> parse_object(std::string_view text);

class LineClient {
 public:
  explicit LineClient(const std::filesystem::path& socket);
  LineClient(const LineClient&) = delete;
  LineClient& operator=(const LineClient&) = delete;
  ~LineClient() { close(); }

  bool connected() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  bool eof() const { return eof_; }
  void close();

  bool send_line(std::string line);
  // The next whole line, or nullopt at end of stream or after `timeout`.
  std::optional<std::string> next_line(std::chrono::milliseconds timeout);
  // The first line carrying `"reply":"<reply>"` (others are skipped), or nullopt.
  std::optional<boost::json::object> wait_reply(std::string_view reply, std::chrono::milliseconds timeout);
  // For a caller that polls many clients itself: reads what is there (the fd polled readable)
  // and returns the complete lines.
  std::vector<std::string> read_available();

 private:
  int fd_ = -1;
  std::string buffer_;
  std::size_t scanned_ = 0;
  bool eof_ = false;
};

// {"format":"metaharness.socket/1","request":...,"id":...} plus `fields`.
std::string socket_request(std::string_view request, std::string_view id, boost::json::object fields = {});

// A claude run hosted on the stand-in (its script in MH_STANDIN_SCRIPT): no model is called, but
// the adapter wants an endpoint.
boost::json::object standin_run_spec(const std::filesystem::path& script, std::string_view decisions,
                                     std::int64_t decision_deadline_ms = 600000, boost::json::object extra_env = {});

// Submits `specs` on one connection, pipelined in bounded batches (the daemon reads a
// connection's requests in order), and returns the run ids in the same order; empty, with
// `error` set, when a submit was refused or unanswered.
std::vector<std::string> submit_all(const std::filesystem::path& socket, const std::vector<boost::json::object>& specs,
                                    std::string& error);

}  // namespace mh::testkit
