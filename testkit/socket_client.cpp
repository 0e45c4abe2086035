#include "testkit/socket_client.hpp"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "testkit/proc.hpp"
#include "tests/standin/standin_identity.hpp"

namespace mh::testkit {

namespace json = boost::json;

sockaddr_un unix_address(const std::filesystem::path& p) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::strncpy(a.sun_path, p.c_str(), sizeof a.sun_path - 1);
  return a;
}

std::string_view string_field(std::string_view line, std::string_view key) {
  std::string pattern = "\"" + std::string(key) + "\":\"";
  auto at = line.find(pattern);
  if (at == std::string_view::npos) return {};
  at += pattern.size();
  auto end = line.find('"', at);
  if (end == std::string_view::npos) return {};
  return line.substr(at, end - at);
}

std::optional<json::object> parse_object(std::string_view text) {
  boost::system::error_code ec;
  json::value v = json::parse(text, ec);
  if (ec || !v.is_object()) return std::nullopt;
  return v.get_object();
}

LineClient::LineClient(const std::filesystem::path& socket) {
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un a = unix_address(socket);
  if (fd_ >= 0 && ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) close();
}

void LineClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool LineClient::send_line(std::string line) {
  line.push_back('\n');
  std::string_view rest(line);
  while (!rest.empty() && fd_ >= 0) {
    ssize_t n = ::send(fd_, rest.data(), rest.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    rest.remove_prefix(static_cast<std::size_t>(n));
  }
  return rest.empty();
}

std::optional<std::string> LineClient::next_line(std::chrono::milliseconds timeout) {
  const std::int64_t deadline = monotonic_ns() + std::chrono::nanoseconds(timeout).count();
  for (;;) {
    auto nl = buffer_.find('\n', scanned_);
    if (nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      scanned_ = 0;
      return line;
    }
    scanned_ = buffer_.size();
    if (fd_ < 0 || eof_) return std::nullopt;
    std::int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    if (left_ms < 0) return std::nullopt;
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left_ms) + 1) <= 0) continue;
    char buf[65536];
    ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) {
      eof_ = true;
      continue;
    }
    buffer_.append(buf, static_cast<std::size_t>(n));
  }
}

std::optional<json::object> LineClient::wait_reply(std::string_view reply, std::chrono::milliseconds timeout) {
  const std::int64_t deadline = monotonic_ns() + std::chrono::nanoseconds(timeout).count();
  for (;;) {
    std::int64_t left_ms = (deadline - monotonic_ns()) / 1'000'000;
    if (left_ms < 0) return std::nullopt;
    auto line = next_line(std::chrono::milliseconds(left_ms));
    if (!line) return std::nullopt;
    if (string_field(*line, "reply") == reply) return parse_object(*line);
  }
}

std::vector<std::string> LineClient::read_available() {
  std::vector<std::string> lines;
  char buf[65536];
  ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) eof_ = true;
  if (n > 0) buffer_.append(buf, static_cast<std::size_t>(n));
  for (auto nl = buffer_.find('\n'); nl != std::string::npos; nl = buffer_.find('\n')) {
    lines.push_back(buffer_.substr(0, nl));
    buffer_.erase(0, nl + 1);
  }
  scanned_ = 0;
  return lines;
}

std::string socket_request(std::string_view request, std::string_view id, json::object fields) {
  json::object o{{"format", "metaharness.socket/1"}, {"request", request}, {"id", id}};
  for (auto& kv : fields)
    o[kv.key()] = kv.value();
  return json::serialize(o);
}

json::object standin_run_spec(const std::filesystem::path& script, std::string_view decisions,
                              std::int64_t decision_deadline_ms, json::object extra_env) {
  json::object env{{"MH_STANDIN_SCRIPT", script.string()}};
  for (auto& kv : extra_env)
    env[kv.key()] = kv.value();
  return json::object{{"adapter", standin::kAdapter},
                      {"prompt", "go"},
                      {"decisions", decisions},
                      {"decision_deadline_ms", decision_deadline_ms},
                      {"model_endpoint", json::object{{"base_url", "http://127.0.0.1:9"}}},
                      {"vendor_env", std::move(env)}};
}

std::vector<std::string> submit_all(const std::filesystem::path& socket, const std::vector<json::object>& specs,
                                    std::string& error) {
  using namespace std::chrono_literals;
  std::vector<std::string> ids(specs.size());
  LineClient client(socket);
  if (!client.connected()) {
    error = "cannot connect to " + socket.string();
    return {};
  }
  // Bounded batches keep both socket buffers from filling while neither side reads.
  constexpr std::size_t kBatch = 50;
  for (std::size_t first = 0; first < specs.size(); first += kBatch) {
    std::size_t last = std::min(specs.size(), first + kBatch);
    for (std::size_t i = first; i < last; ++i)
      client.send_line(socket_request("submit", "s" + std::to_string(i), json::object{{"run", specs[i]}}));
    for (std::size_t i = first; i < last; ++i) {
      auto line = client.next_line(120s);
      if (!line) {
        error = "no reply to submit " + std::to_string(i);
        return {};
      }
      auto id = string_field(*line, "id");
      std::size_t index = id.size() > 1 ? std::stoul(std::string(id.substr(1))) : i;
      if (string_field(*line, "reply") != "submitted" || index >= ids.size()) {
        error = "submit refused: " + *line;
        return {};
      }
      ids[index] = std::string(string_field(*line, "run_id"));
    }
  }
  return ids;
}

}  // namespace mh::testkit
