// Spawning real processes from tests (our own binary, the vendor CLIs) with Boost.Process v2:
// a constructed environment, a working directory, output captured to files, and every wait
// bounded.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace mh::model::testing {

// A fresh directory under the system temp dir. Removed on destruction unless the running test
// failed, in which case it is kept (and its path printed) for the post-mortem.
class TempDir {
 public:
  explicit TempDir(std::string_view label);
  ~TempDir();
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(std::string_view name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

struct ProcessResult {
  bool finished = false;  // exited before the timeout (else it was killed)
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
  std::chrono::milliseconds elapsed{0};
};

struct ProcessSpec {
  std::filesystem::path executable;
  std::vector<std::string> args;
  std::vector<std::string> environment;  // "NAME=value"; exactly this, nothing inherited
  std::filesystem::path working_dir;
  std::filesystem::path output_dir;  // where stdout.txt / stderr.txt go
  bool pipe_stdin = false;           // LiveProcess only: stdin is a pipe (write_line), else /dev/null
};

// Runs to completion (stdin is /dev/null) or kills it at `timeout`.
ProcessResult run_process(const ProcessSpec& spec, std::chrono::milliseconds timeout);

// A process that keeps running while the test talks to it: stdout is a pipe read line by line.
class LiveProcess {
 public:
  explicit LiveProcess(const ProcessSpec& spec);
  ~LiveProcess();  // kills it if still running
  // The next stdout line (without the newline), or nullopt at EOF / timeout.
  std::optional<std::string> read_line(std::chrono::milliseconds timeout);
  // Writes `line` and a newline to its stdin (spec.pipe_stdin); false when it cannot.
  bool write_line(std::string_view line);
  // Closes its stdin (EOF for the process).
  void close_stdin();
  void signal(int signal_number);
  // The exit code, or nullopt if it did not exit in time (it is then killed).
  std::optional<int> wait(std::chrono::milliseconds timeout);
  std::string stderr_text() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string read_file(const std::filesystem::path& path);

}  // namespace mh::model::testing
