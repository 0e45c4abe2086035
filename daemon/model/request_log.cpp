#include "daemon/model/request_log.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <boost/json/serialize.hpp>

#include "daemon/file_modes.hpp"
#include "protocol/types.hpp"

// The names, in each enum's order, through the protocol's one enum-name table.
template <>
struct mh::protocol::EnumNames<mh::model::Answer> {
  static constexpr std::array names = {std::string_view("step"),
                                       std::string_view("aux"),
                                       std::string_view("exhausted"),
                                       std::string_view("unauthorized"),
                                       std::string_view("not_found"),
                                       std::string_view("method_not_allowed"),
                                       std::string_view("bad_request"),
                                       std::string_view("unsupported_encoding"),
                                       std::string_view("body_too_large"),
                                       std::string_view("headers_too_large"),
                                       std::string_view("wire_not_served"),
                                       std::string_view("count_tokens")};
};
template <>
struct mh::protocol::EnumNames<mh::model::Credential> {
  static constexpr std::array names = {std::string_view("matched"), std::string_view("mismatched"),
                                       std::string_view("missing"), std::string_view("not_checked")};
};
template <>
struct mh::protocol::EnumNames<mh::model::Ending> {
  static constexpr std::array names = {
      std::string_view("in_progress"),         std::string_view("completed"),
      std::string_view("client_disconnected"), std::string_view("disconnected_by_scenario"),
      std::string_view("write_failed"),        std::string_view("stopped")};
};

namespace mh::model {

namespace json = boost::json;

std::string_view to_string(Answer answer) {
  return protocol::to_string(answer);
}

std::string_view to_string(Credential credential) {
  return protocol::to_string(credential);
}

std::string_view to_string(Ending ending) {
  return protocol::to_string(ending);
}

std::string ServedRequest::header(std::string_view name) const {
  auto it = headers.find(std::string(name));
  return it == headers.end() ? std::string() : it->second;
}

json::object to_json(const ServedRequest& r) {
  json::object headers;
  for (const auto& [name, value] : r.headers)
    headers[name] = value;
  json::object o{{"kind", "request"},
                 {"seq", r.sequence},
                 {"received_ms", r.received_at.count()},
                 {"method", r.method},
                 {"target", r.target},
                 {"wire", r.wire ? json::value(to_string(*r.wire)) : json::value(nullptr)},
                 {"headers", std::move(headers)},
                 {"credential", to_string(r.credential)},
                 {"body_bytes", r.body_bytes},
                 {"body", r.body},
                 {"body_error", r.body_error.empty() ? json::value(nullptr) : json::value(r.body_error)},
                 {"stream", r.stream},
                 {"answer", to_string(r.answer)},
                 {"step", r.step ? json::value(*r.step) : json::value(nullptr)},
                 {"step_name", r.step_name.empty() ? json::value(nullptr) : json::value(r.step_name)},
                 {"status", r.status},
                 {"ending", to_string(r.ending)}};
  if (r.ended_at) o["ended_ms"] = r.ended_at->count();
  return o;
}

bool RequestLog::open_file(const std::filesystem::path& path, std::function<void(std::string&)> redact) {
  std::lock_guard lock(mutex_);
  redact_ = std::move(redact);
  // Exactly 0640 whatever the umask (it holds every model request of the run): made, or narrowed,
  // before the stream opens it.
  int fd = daemon::open_with_mode(path, O_WRONLY | O_APPEND, daemon::kFileMode);
  if (fd < 0) return false;
  ::close(fd);
  file_.open(path, std::ios::binary | std::ios::app);
  return file_.is_open();
}

std::uint64_t RequestLog::next_sequence() {
  std::lock_guard lock(mutex_);
  return ++last_sequence_;
}

void RequestLog::append_line(const json::object& record) {
  if (!file_.is_open()) return;
  // One write per line and a flush, so a crashed or killed run still leaves whole lines.
  std::string line = json::serialize(record);
  if (redact_) redact_(line);
  line.push_back('\n');
  file_.write(line.data(), static_cast<std::streamsize>(line.size()));
  file_.flush();
}

void RequestLog::add(ServedRequest request) {
  std::lock_guard lock(mutex_);
  append_line(to_json(request));
  entries_.push_back(std::move(request));
  changed_.notify_all();
}

void RequestLog::finish(std::uint64_t sequence, Ending ending, std::chrono::milliseconds at) {
  std::lock_guard lock(mutex_);
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (it->sequence != sequence) continue;
    it->ending = ending;
    it->ended_at = at;
    append_line(
        json::object{{"kind", "end"}, {"seq", sequence}, {"ending", to_string(ending)}, {"ended_ms", at.count()}});
    break;
  }
  changed_.notify_all();
}

std::vector<ServedRequest> RequestLog::snapshot() const {
  std::lock_guard lock(mutex_);
  return entries_;
}

bool RequestLog::wait_for(const std::function<bool(const std::vector<ServedRequest>&)>& predicate,
                          std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return predicate(entries_); });
}

}  // namespace mh::model
