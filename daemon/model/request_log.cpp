#include "daemon/model/request_log.hpp"

#include <boost/json/serialize.hpp>

namespace mh::model {

namespace json = boost::json;

std::string_view to_string(Answer answer) {
  switch (answer) {
    case Answer::step:
      return "step";
    case Answer::aux:
      return "aux";
    case Answer::exhausted:
      return "exhausted";
    case Answer::unauthorized:
      return "unauthorized";
    case Answer::not_found:
      return "not_found";
    case Answer::method_not_allowed:
      return "method_not_allowed";
    case Answer::bad_request:
      return "bad_request";
    case Answer::unsupported_encoding:
      return "unsupported_encoding";
    case Answer::body_too_large:
      return "body_too_large";
    case Answer::headers_too_large:
      return "headers_too_large";
    case Answer::wire_not_served:
      return "wire_not_served";
  }
  return "?";
}

std::string_view to_string(Credential credential) {
  switch (credential) {
    case Credential::matched:
      return "matched";
    case Credential::mismatched:
      return "mismatched";
    case Credential::missing:
      return "missing";
    case Credential::not_checked:
      return "not_checked";
  }
  return "?";
}

std::string_view to_string(Ending ending) {
  switch (ending) {
    case Ending::in_progress:
      return "in_progress";
    case Ending::completed:
      return "completed";
    case Ending::client_disconnected:
      return "client_disconnected";
    case Ending::disconnected_by_scenario:
      return "disconnected_by_scenario";
    case Ending::write_failed:
      return "write_failed";
    case Ending::stopped:
      return "stopped";
  }
  return "?";
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

bool RequestLog::open_file(const std::filesystem::path& path) {
  std::lock_guard lock(mutex_);
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
