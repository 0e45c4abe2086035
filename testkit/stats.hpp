// The figures' statistics, one definition for every bench: median, nearest-rank quantile,
// median [min..max] spread, fixed-decimal text.
#pragma once

#include <boost/json.hpp>
#include <cstddef>
#include <string>
#include <vector>

namespace mh::testkit {

double median(std::vector<double> v);
// The q-quantile of sorted values (nearest rank below); 0 for none.
double quantile_of_sorted(const std::vector<double>& sorted, double q);

struct Spread {
  double median = 0, min = 0, max = 0;
  std::size_t n = 0;
};
Spread spread_of(const std::vector<double>& v);
boost::json::object to_json(const Spread& s);

std::string fixed(double value, int decimals);
// "median [min..max]"
std::string spread_text(const Spread& s, int decimals);

}  // namespace mh::testkit
