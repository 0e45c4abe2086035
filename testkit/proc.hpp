// What a harness asks of the clock and /proc: CPU time, the load average, elapsed milliseconds.
#pragma once

#include <sys/resource.h>

#include <chrono>

namespace mh::testkit {

double ms_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to);
double cpu_ms_of(const rusage& u);
// This process's CPU time so far (its driver and any in-process endpoint thread).
double own_cpu_ms();
// The machine's 1-minute load average: runs share the cores with whatever else is running.
double load_average();

}  // namespace mh::testkit
