#include "testkit/stats.hpp"

#include <algorithm>
#include <cstdio>

namespace mh::testkit {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  return sorted.empty() ? 0.0 : sorted[static_cast<std::size_t>(q * static_cast<double>(sorted.size() - 1))];
}

Spread spread_of(const std::vector<double>& v) {
  Spread s;
  s.n = v.size();
  if (v.empty()) return s;
  s.median = median(v);
  s.min = *std::min_element(v.begin(), v.end());
  s.max = *std::max_element(v.begin(), v.end());
  return s;
}

boost::json::object to_json(const Spread& s) {
  return boost::json::object{{"median", s.median}, {"min", s.min}, {"max", s.max}, {"n", s.n}};
}

std::string fixed(double value, int decimals) {
  char text[64];
  std::snprintf(text, sizeof text, "%.*f", decimals, value);
  return text;
}

std::string spread_text(const Spread& s, int decimals) {
  return fixed(s.median, decimals) + " [" + fixed(s.min, decimals) + ".." + fixed(s.max, decimals) + "]";
}

}  // namespace mh::testkit
