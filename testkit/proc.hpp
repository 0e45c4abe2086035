// What a harness asks of the clock and /proc: CPU time, the load average, elapsed milliseconds,
// whole files, processes found by their environment and waited for through a pidfd.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mh::testkit {

double ms_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to);
double cpu_ms_of(const rusage& u);
// This process's CPU time so far (its driver and any in-process endpoint thread).
double own_cpu_ms();
// The machine's 1-minute load average: runs share the cores with whatever else is running.
double load_average();

// CLOCK_MONOTONIC in ns: the clock the stand-in's timing stamps use too (same machine).
std::int64_t monotonic_ns();
double ms_since(std::int64_t start_ns);

// The whole file ("" when it cannot be read), and the file replaced by `text`.
std::string read_file(const std::filesystem::path& p);
bool write_file(const std::filesystem::path& p, std::string_view text);

// glibc 2.36 (Debian 12) declares these in <sys/pidfd.h> without C linkage, so they call the
// kernel directly. open_pidfd returns -1 when the process is gone.
int open_pidfd(pid_t pid);
void kill_by_pidfd(int pidfd);
// Waits until the process behind `pidfd` has terminated (a pidfd polls readable then), up to
// `deadline_ns` (monotonic). True if it has.
bool wait_pidfd(int pidfd, std::int64_t deadline_ns);

// Live processes (other than this one) whose environment holds an entry starting with `prefix`,
// e.g. the stand-in script path under a bench's work dir, which only its own stand-ins carry. A
// zombie has no environment left to read, so it is not found.
std::vector<pid_t> processes_with_environment(const std::string& prefix);

}  // namespace mh::testkit
