// The request ids of submits (issue 27, docs/socket-api.md "Idempotent submit"). A submit that
// carries a `request_id` makes at most one run for its (uid, request_id): a retry of a submit whose
// reply was lost gets the first run's id back, never a second paid run; the same id with another
// spec is a conflict. Kept on disk (<state_dir>/submits.jsonl, one line per run made, fdatasynced
// before the run starts), so the promise holds across a daemon's kill -9, for
// `runs.request_id_retention_s`.
//
// Thread-safe (one mutex: submits are rare next to events, and this is the only state they share).
// The order that makes a crash harmless: the run's directory and spec exist before its line is
// written, and the run starts after. A crash before the line leaves a run that never started (it
// is recovered as cut off) and a request id that is free again; a crash after it, a run the retry
// is pointed at.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "daemon/process/unique_fd.hpp"

namespace mh::daemon {

// 1–128 characters of [A-Za-z0-9._:-]; empty when `id` is one, else why not.
std::string request_id_problem(std::string_view id);

class SubmitLedger {
 public:
  using SystemClock = std::chrono::system_clock;

  enum class Claim {
    fresh,      // this submit makes the run: commit() once it exists, or release() if it is refused
    duplicate,  // a run was made for this id and spec: `run_id`
    conflict,   // a run was made for this id with another spec: `run_id`
    in_flight,  // another submit with this id is being made: wait (when_settled), then claim again
  };
  struct Claimed {
    Claim claim = Claim::fresh;
    std::string run_id;
  };

  // No file: a ledger in memory only (tests of the server without a state directory).
  SubmitLedger() = default;
  // Reads `file` (created 0640 if absent), keeps the lines younger than `retention`, and rewrites
  // it when some were dropped (expired, torn by a crash mid-write, unreadable). A problem is
  // returned to be logged; the ledger still holds what it read, and while its file cannot be
  // written a submit with a request_id is refused by name (commit fails) rather than promised.
  static std::optional<std::string> open(SubmitLedger& ledger, std::filesystem::path file,
                                         std::chrono::seconds retention, SystemClock::time_point now);

  Claimed claim(std::uint32_t uid, const std::string& request_id, const std::string& spec_digest,
                SystemClock::time_point now);
  // The run `run_id` exists (directory and spec) and is about to start: the line is written and
  // synced. An error (the line could not be kept) leaves the id claimed by nobody: the caller
  // refuses the submit and removes the run.
  std::optional<std::string> commit(std::uint32_t uid, const std::string& request_id, const std::string& run_id,
                                    SystemClock::time_point now);
  // The submit was refused: the id is free again (a refusal made no run).
  void release(std::uint32_t uid, const std::string& request_id);
  // `then` runs once, on any thread, when the submit holding the id settles (commit or release);
  // at once when none holds it.
  void when_settled(std::uint32_t uid, const std::string& request_id, std::function<void()> then);

  std::size_t size() const;

 private:
  using Key = std::pair<std::uint32_t, std::string>;
  struct Entry {
    std::string spec_digest;
    std::string run_id;  // empty while in flight
    SystemClock::time_point at{};
    std::vector<std::function<void()>> waiters;
  };

  void expire(SystemClock::time_point now);  // under the lock
  std::optional<std::string> rewrite();      // under the lock: the live lines only
  std::optional<std::string> append(const std::string& line);
  std::optional<std::string> open_for_append();  // under the lock

  mutable std::mutex mutex_;
  std::map<Key, Entry> entries_;
  std::deque<std::pair<SystemClock::time_point, Key>> by_age_;  // committed entries, oldest first
  std::filesystem::path file_;
  UniqueFd fd_;
  std::chrono::seconds retention_{std::chrono::hours(24 * 7)};
  std::size_t lines_in_file_ = 0;
};

}  // namespace mh::daemon
