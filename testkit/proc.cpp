#include "testkit/proc.hpp"

#include <fstream>

namespace mh::testkit {

double ms_between(std::chrono::steady_clock::time_point from, std::chrono::steady_clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

double cpu_ms_of(const rusage& u) {
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

double own_cpu_ms() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return cpu_ms_of(u);
}

double load_average() {
  std::ifstream in("/proc/loadavg");
  double one = 0;
  in >> one;
  return one;
}

}  // namespace mh::testkit
