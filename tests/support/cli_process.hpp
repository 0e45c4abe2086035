// Drives a metaharness command-line process as a black box: arguments in, stdout read line by
// line with deadlines, stdin written and closed, exit status collected. Every wait is bounded;
// nothing here sleeps to synchronise.
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "protocol/json.hpp"
#include "testkit/line_reader.hpp"

namespace mh::test {

namespace json = boost::json;
using namespace std::chrono_literals;

// An event line as read, with its parsed object.
struct EventLine {
  std::string raw;
  json::object object;

  std::string_view event() const;
  std::string str(std::string_view key) const;  // "" when absent / not a string
};

// A line as read, parsed when it is a JSON object.
EventLine to_event_line(std::string raw);

// Reads lines with `next_line` until one satisfies `match` (returned) or the timeout passes or
// the lines end (nullopt); every line read is kept in `kept`. What CliProcess and SocketClient
// wait with.
std::optional<EventLine> read_until(
    const std::function<std::optional<std::string>(std::chrono::milliseconds)>& next_line, std::vector<EventLine>& kept,
    const std::function<bool(const EventLine&)>& match, std::chrono::milliseconds timeout);

class CliProcess {
 public:
  // argv[0] is the program path. env: the whole environment (nullopt: inherit ours).
  CliProcess(std::vector<std::string> argv, std::optional<std::vector<std::string>> env = std::nullopt,
             std::filesystem::path cwd = {});
  ~CliProcess();  // kills (SIGKILL) and reaps if still running
  CliProcess(const CliProcess&) = delete;
  CliProcess& operator=(const CliProcess&) = delete;

  int pid() const { return pid_; }

  void send(const std::string& line);  // a line to stdin (newline appended)
  void close_stdin();

  // The next stdout line, or nullopt at EOF / after the timeout.
  std::optional<std::string> next_line(std::chrono::milliseconds timeout);
  // Every stdout line from here to EOF, each with its newline (each wait bounded by `timeout`).
  std::string read_out(std::chrono::milliseconds timeout);
  // Reads events until one satisfies `match` (returned) or the timeout passes (nullopt). Every
  // event read is kept in events().
  std::optional<EventLine> wait_for(const std::function<bool(const EventLine&)>& match,
                                    std::chrono::milliseconds timeout = 60s);
  std::optional<EventLine> wait_for_event(std::string_view name, std::chrono::milliseconds timeout = 60s);
  // Reads to EOF (bounded), then waits for the exit status. -1 on timeout.
  int finish(std::chrono::milliseconds timeout = 60s);

  const std::vector<EventLine>& events() const { return events_; }
  std::vector<EventLine> events_named(std::string_view name) const;
  const std::string& stderr_text();  // everything on stderr so far (non-blocking drain)

 private:
  void drain_stderr();

  int pid_ = -1;
  int in_ = -1, out_ = -1, err_ = -1;
  std::optional<testkit::LineReader> out_lines_;
  std::string err_text_;
  std::optional<int> status_;
  std::vector<EventLine> events_;
};

// What a command-line process printed and how it exited.
struct CliOutput {
  int status = -1;  // -1: it did not end within the timeout
  std::string out;
  std::string err;
};
// Runs argv (argv[0] the program) to its end with stdin closed: stdout read to EOF, then the exit
// status, then stderr; every wait bounded by `timeout`.
CliOutput run_to_end(std::vector<std::string> argv, std::optional<std::vector<std::string>> env = std::nullopt,
                     std::chrono::milliseconds timeout = 30s);

// The metaharness binary under test and the source dir (set from CMake).
std::filesystem::path metaharness_binary();
std::filesystem::path source_dir();

// A fresh directory under the build tree, removed by the destructor unless the test failed.
class TempDir {
 public:
  explicit TempDir(const std::string& name);
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

std::string read_file(const std::filesystem::path& p);
std::vector<std::string> read_lines(const std::filesystem::path& p);
// Live pids whose environment holds NAME=VALUE exactly (zombies excluded).
std::vector<int> processes_with_env(const std::string& entry);
// Polls `condition` until it holds or the timeout passes (for facts with no event, e.g. a file
// or a process appearing); returns whether it held.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout = 30s);

}  // namespace mh::test
