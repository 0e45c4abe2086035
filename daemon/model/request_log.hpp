// What the scripted endpoint was sent and how it answered: one ServedRequest per request, kept
// in memory (thread-safe; tests read it to assert what the model saw) and optionally appended to
// a JSONL file (the run directory's record). No Asio here.
#pragma once

#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "daemon/model/scenario.hpp"

namespace mh::model {

// Who answered a request.
enum class Answer {
  step,                  // the current scenario step (`step` holds its index)
  aux,                   // not a main-loop request: the scenario's aux answer
  exhausted,             // a main-loop request after the steps ran out
  unauthorized,          // 401: missing or wrong token
  not_found,             // 404: a path that is none of Messages, Responses, Gemini models
  method_not_allowed,    // 405: not a POST
  bad_request,           // 400: unreadable HTTP or a body that is not a JSON object
  unsupported_encoding,  // 415: a compressed request body
  body_too_large,        // 413
  headers_too_large,     // 431
  wire_not_served,       // 404: the scenario does not declare this wire
  count_tokens,          // Gemini :countTokens, answered with an estimate (no step consumed)
};
std::string_view to_string(Answer answer);

// What the request's credential was, compared with the endpoint's token. The value itself is
// never recorded.
enum class Credential { matched, mismatched, missing, not_checked };
std::string_view to_string(Credential credential);

// How the answer ended.
enum class Ending {
  in_progress,               // still being written (or held)
  completed,                 // the whole answer was written
  client_disconnected,       // the client went away first
  disconnected_by_scenario,  // the step's finish was "disconnect"
  write_failed,              // a write failed or timed out for another reason
  stopped,                   // the endpoint was stopped while answering
};
std::string_view to_string(Ending ending);

struct ServedRequest {
  std::uint64_t sequence = 0;                // 1-based, in arrival order
  std::chrono::milliseconds received_at{0};  // since the endpoint started
  std::optional<std::chrono::milliseconds> ended_at;
  std::string method;
  std::string target;                          // as sent, query included (a `key=` value blanked)
  std::optional<Wire> wire;                    // from the path; empty for unknown paths
  std::map<std::string, std::string> headers;  // lower-case names; credential headers left out
  Credential credential = Credential::not_checked;
  std::size_t body_bytes = 0;
  boost::json::value body;  // the parsed JSON body; null when absent or bad
  std::string body_error;   // why `body` is null although bytes came
  bool stream = false;      // the body asked for SSE
  Answer answer = Answer::bad_request;
  std::optional<std::size_t> step;  // index into Scenario::steps when answer == step
  std::string step_name;
  unsigned status = 0;
  Ending ending = Ending::in_progress;

  // A recorded header's value, or "" when absent. `name` is lower-case.
  std::string header(std::string_view name) const;
};

// The JSONL record of a request ("kind":"request") and of how it ended ("kind":"end").
boost::json::object to_json(const ServedRequest& request);

class RequestLog {
 public:
  RequestLog() = default;
  // Appends to `path` from now on. Returns false (and errno is meaningful) when it cannot.
  // `redact`, when set, rewrites each line before it is written (a run's secrets: the record
  // holds none, docs/gateway.md); the entries kept in memory are as received.
  bool open_file(const std::filesystem::path& path, std::function<void(std::string&)> redact = {});

  std::uint64_t next_sequence();
  void add(ServedRequest request);
  void finish(std::uint64_t sequence, Ending ending, std::chrono::milliseconds at);

  std::vector<ServedRequest> snapshot() const;
  // Waits until `predicate(entries)` holds or `timeout` passes; returns the last verdict. The
  // predicate runs under the log's lock: it must not call back into the log or the endpoint.
  bool wait_for(const std::function<bool(const std::vector<ServedRequest>&)>& predicate,
                std::chrono::milliseconds timeout) const;

 private:
  void append_line(const boost::json::object& record);

  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::vector<ServedRequest> entries_;
  std::uint64_t last_sequence_ = 0;
  std::ofstream file_;
  std::function<void(std::string&)> redact_;
};

}  // namespace mh::model
