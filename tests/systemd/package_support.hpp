// Building the package the way `./run package` does, and running commands with bounded waits,
// for the package and systemd tests.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "tests/support/cli_process.hpp"

namespace mh::test {

struct Output {
  int status = -1;  // -1: it did not end within its timeout
  std::string out;  // stdout, lines joined with \n (no trailing newline)
  std::string err;
};

// Runs argv to its end (bounded), stdin closed.
Output run_command(std::vector<std::string> argv, std::chrono::milliseconds timeout = 60s);

// packaging/build-deb.sh into the test build tree (what `./run package` does after setup).
// Returns the .deb, or an empty path with the build's log in `log`.
std::filesystem::path build_package(const std::filesystem::path& work, std::string& log);

// The test build tree (CMAKE_BINARY_DIR).
std::filesystem::path build_dir();

}  // namespace mh::test
