// The Prometheus text exposition format, version 0.0.4 (what `/metrics` answers with): families
// with their `# HELP` and `# TYPE` lines, samples with escaped label values, histograms as
// cumulative `_bucket{le=...}` series ending in `+Inf`, then `_sum` and `_count`.
//
// Pure: no I/O, no clock. The writer keeps what it is given in the order it is given (the caller
// iterates fixed tables and sorted maps, so a page is stable from one scrape to the next), and
// refuses by name what Prometheus would reject: a malformed metric or label name, a counter whose
// name does not end in `_total`, a sample outside its family, a family written twice.
#pragma once

#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mh::metrics {

using Labels = std::vector<std::pair<std::string, std::string>>;

enum class MetricType { counter, gauge, histogram };
std::string_view to_string(MetricType type);

// A misuse of the writer (a programming error, never a property of the data): says what and where.
class ExpositionError : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

// `\` -> `\\`, `"` -> `\"`, newline -> `\n` (label values).
std::string escape_label_value(std::string_view value);
// `\` -> `\\`, newline -> `\n` (HELP text).
std::string escape_help(std::string_view help);
// A sample value as Prometheus parses it: integers without exponent or fraction, other numbers
// in their shortest round-trip form, `+Inf`, `-Inf`, `NaN`.
std::string format_value(double value);

bool valid_metric_name(std::string_view name);  // [a-zA-Z_:][a-zA-Z0-9_:]*
bool valid_label_name(std::string_view name);   // [a-zA-Z_][a-zA-Z0-9_]*, not starting with __

class Exposition {
 public:
  // Opens a family: its HELP and TYPE lines. Samples that follow belong to it.
  void family(std::string_view name, MetricType type, std::string_view help);
  // One sample of the open counter or gauge family.
  void sample(const Labels& labels, double value);
  void sample(const Labels& labels, std::uint64_t value);
  // One histogram series of the open histogram family. `bounds` are the finite upper bounds,
  // strictly increasing; `counts` has one more entry than `bounds` (the last is above every bound)
  // and holds per-bucket counts, not cumulative ones: the writer accumulates them, so `+Inf`
  // and `_count` always agree.
  void histogram(const Labels& labels, std::span<const double> bounds, std::span<const std::uint64_t> counts,
                 double sum);

  const std::string& text() const { return text_; }
  // The Content-Type of this format.
  static constexpr std::string_view kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  void require_open(MetricType type, std::string_view what) const;
  void write_series(std::string_view name, const Labels& labels, const std::pair<std::string, std::string>* extra,
                    std::string_view value);

  std::string text_;
  std::string open_;  // the open family's name
  MetricType open_type_ = MetricType::gauge;
  std::vector<std::string> written_;  // families so far
};

}  // namespace mh::metrics
