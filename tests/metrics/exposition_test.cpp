// The Prometheus text exposition writer (format 0.0.4): escaping, histogram shape, stable order,
// and the refusals of what Prometheus would reject.
#include "daemon/metrics/exposition.hpp"

#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <limits>

namespace mh::metrics {
namespace {

TEST(Exposition, LabelValuesEscapeBackslashQuoteAndNewlineOnly) {
  EXPECT_EQ(escape_label_value(R"(a\b"c)"
                               "\n"
                               "d\te"),
            R"(a\\b\"c\nd)"
            "\te");
  EXPECT_EQ(escape_label_value("plain ünïcode"), "plain ünïcode");
  EXPECT_EQ(escape_help("line\\one\nline \"two\""), "line\\\\one\\nline \"two\"");
}

TEST(Exposition, ValuesArePrintedAsPrometheusParsesThem) {
  EXPECT_EQ(format_value(3.0), "3");
  EXPECT_EQ(format_value(0.25), "0.25");
  EXPECT_EQ(format_value(0.1), "0.1");
  EXPECT_EQ(format_value(-2.5), "-2.5");
  EXPECT_EQ(format_value(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(format_value(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(format_value(std::nan("")), "NaN");
}

TEST(Exposition, APageIsHelpTypeThenSamplesInTheOrderGiven) {
  Exposition x;
  x.family("mh_things_total", MetricType::counter, "Things, counted.\nTwo lines.");
  x.sample({{"kind", "b"}, {"path", R"(C:\x "q")"}}, std::uint64_t{7});
  x.sample({{"kind", "a"}}, std::uint64_t{0});
  x.family("mh_level", MetricType::gauge, "A level.");
  x.sample({}, 1.5);
  EXPECT_EQ(x.text(),
            "# HELP mh_things_total Things, counted.\\nTwo lines.\n"
            "# TYPE mh_things_total counter\n"
            "mh_things_total{kind=\"b\",path=\"C:\\\\x \\\"q\\\"\"} 7\n"
            "mh_things_total{kind=\"a\"} 0\n"
            "# HELP mh_level A level.\n"
            "# TYPE mh_level gauge\n"
            "mh_level 1.5\n");
}

TEST(Exposition, AHistogramIsCumulativeBucketsEndingInInfThenSumAndCount) {
  Exposition x;
  x.family("mh_wait_seconds", MetricType::histogram, "Waits.");
  const std::array<double, 3> bounds = {0.5, 1, 2.5};
  const std::array<std::uint64_t, 4> counts = {1, 0, 2, 3};  // per bucket; the last is above 2.5
  x.histogram({{"run", "r\"1"}}, bounds, counts, 12.75);
  EXPECT_EQ(x.text(),
            "# HELP mh_wait_seconds Waits.\n"
            "# TYPE mh_wait_seconds histogram\n"
            "mh_wait_seconds_bucket{run=\"r\\\"1\",le=\"0.5\"} 1\n"
            "mh_wait_seconds_bucket{run=\"r\\\"1\",le=\"1\"} 1\n"
            "mh_wait_seconds_bucket{run=\"r\\\"1\",le=\"2.5\"} 3\n"
            "mh_wait_seconds_bucket{run=\"r\\\"1\",le=\"+Inf\"} 6\n"
            "mh_wait_seconds_sum{run=\"r\\\"1\"} 12.75\n"
            "mh_wait_seconds_count{run=\"r\\\"1\"} 6\n");
}

TEST(Exposition, AnEmptyHistogramStillHasEveryBucket) {
  Exposition x;
  x.family("mh_wait_seconds", MetricType::histogram, "Waits.");
  const std::array<double, 1> bounds = {1};
  const std::array<std::uint64_t, 2> counts = {0, 0};
  x.histogram({}, bounds, counts, 0);
  EXPECT_NE(x.text().find("mh_wait_seconds_bucket{le=\"1\"} 0\nmh_wait_seconds_bucket{le=\"+Inf\"} 0\n"
                          "mh_wait_seconds_sum 0\nmh_wait_seconds_count 0\n"),
            std::string::npos)
      << x.text();
}

TEST(Exposition, WhatPrometheusWouldRejectIsRefusedByName) {
  auto refusal = [](auto&& write) -> std::string {
    try {
      Exposition x;
      write(x);
    } catch (const ExpositionError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(refusal([](Exposition& x) { x.family("mh_things", MetricType::counter, "h"); }),
            "counter mh_things must end in _total");
  EXPECT_EQ(refusal([](Exposition& x) { x.family("mh_level_total", MetricType::gauge, "h"); }),
            "gauge mh_level_total must not end in _total (that names a counter)");
  EXPECT_EQ(refusal([](Exposition& x) { x.family("9lives", MetricType::gauge, "h"); }),
            "metric name \"9lives\" is not a Prometheus metric name");
  EXPECT_EQ(refusal([](Exposition& x) { x.family("mh-dash", MetricType::gauge, "h"); }),
            "metric name \"mh-dash\" is not a Prometheus metric name");
  EXPECT_EQ(refusal([](Exposition& x) {
              x.family("mh_level", MetricType::gauge, "h");
              x.sample({{"bad-name", "v"}}, 1.0);
            }),
            "label name \"bad-name\" of mh_level is not a Prometheus label name");
  EXPECT_EQ(refusal([](Exposition& x) {
              x.family("mh_level", MetricType::gauge, "h");
              x.sample({{"__reserved", "v"}}, 1.0);
            }),
            "label name \"__reserved\" of mh_level is not a Prometheus label name");
  EXPECT_EQ(refusal([](Exposition& x) { x.sample({}, 1.0); }), "a sample outside any family");
  EXPECT_EQ(refusal([](Exposition& x) {
              x.family("mh_level", MetricType::gauge, "h");
              x.family("mh_level", MetricType::gauge, "h");
            }),
            "family mh_level is written twice");
  EXPECT_EQ(refusal([](Exposition& x) {
              x.family("mh_w", MetricType::histogram, "h");
              x.sample({}, 1.0);
            }),
            "a sample in the histogram family mh_w");
  EXPECT_EQ(refusal([](Exposition& x) {
              x.family("mh_w", MetricType::histogram, "h");
              const std::array<double, 2> bounds = {1, 2};
              const std::array<std::uint64_t, 2> counts = {0, 0};
              x.histogram({}, bounds, counts, 0);
            }),
            "histogram mh_w: 2 counts for 2 bounds (one more count is the +Inf bucket)");
  EXPECT_EQ(refusal([](Exposition& x) {
              x.family("mh_w", MetricType::histogram, "h");
              const std::array<double, 2> bounds = {2, 1};
              const std::array<std::uint64_t, 3> counts = {0, 0, 0};
              x.histogram({}, bounds, counts, 0);
            }),
            "histogram mh_w: bounds must increase strictly");
  EXPECT_EQ(refusal([](Exposition& x) {
              x.family("mh_w", MetricType::histogram, "h");
              const std::array<double, 1> bounds = {1};
              const std::array<std::uint64_t, 2> counts = {0, 0};
              x.histogram({{"le", "x"}}, bounds, counts, 0);
            }),
            "histogram mh_w: le is the bucket's own label");
}

}  // namespace
}  // namespace mh::metrics
