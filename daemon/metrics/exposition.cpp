#include "daemon/metrics/exposition.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "protocol/json.hpp"
#include "protocol/types.hpp"

template <>
struct mh::protocol::EnumNames<mh::metrics::MetricType> {
  static constexpr std::array names = {std::string_view("counter"), std::string_view("gauge"),
                                       std::string_view("histogram")};
};

namespace mh::metrics {

std::string_view to_string(MetricType type) {
  return protocol::to_string(type);
}

namespace {

// The text format's escapes: backslash and newline always, the double quote inside a label value.
std::string escaped(std::string_view text, bool quote) {
  if (quote) return protocol::escape_chars(text, {{'\\', "\\\\"}, {'"', "\\\""}, {'\n', "\\n"}});
  return protocol::escape_chars(text, {{'\\', "\\\\"}, {'\n', "\\n"}});
}

}  // namespace

std::string escape_label_value(std::string_view value) {
  return escaped(value, true);
}

std::string escape_help(std::string_view help) {
  return escaped(help, false);
}

std::string format_value(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value);  // shortest round trip
  return std::string(buf, ec == std::errc{} ? end : buf);
}

namespace {

bool name_start(char c, bool colon) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}
bool name_char(char c, bool colon) {
  return name_start(c, colon) || (c >= '0' && c <= '9');
}
bool valid_name(std::string_view name, bool colon) {
  if (name.empty() || !name_start(name.front(), colon)) return false;
  return std::all_of(name.begin(), name.end(), [colon](char c) { return name_char(c, colon); });
}
bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

bool valid_metric_name(std::string_view name) {
  return valid_name(name, true);
}

bool valid_label_name(std::string_view name) {
  return valid_name(name, false) && name.substr(0, 2) != "__";  // __ is Prometheus's own
}

void Exposition::family(std::string_view name, MetricType type, std::string_view help) {
  const std::string n(name);
  if (!valid_metric_name(name)) throw ExpositionError("metric name \"" + n + "\" is not a Prometheus metric name");
  if (type == MetricType::counter && !ends_with(name, "_total"))
    throw ExpositionError("counter " + n + " must end in _total");
  if (type != MetricType::counter && ends_with(name, "_total"))
    throw ExpositionError(std::string(to_string(type)) + " " + n + " must not end in _total (that names a counter)");
  if (std::find(written_.begin(), written_.end(), n) != written_.end())
    throw ExpositionError("family " + n + " is written twice");
  written_.push_back(n);
  open_ = n;
  open_type_ = type;
  text_ += "# HELP " + n + " " + escape_help(help) + "\n";
  text_ += "# TYPE " + n + " " + std::string(to_string(type)) + "\n";
}

void Exposition::require_open(MetricType type, std::string_view what) const {
  if (open_.empty()) throw ExpositionError(std::string(what) + " outside any family");
  if (type == MetricType::histogram ? open_type_ != MetricType::histogram : open_type_ == MetricType::histogram)
    throw ExpositionError(std::string(what) + " in the " + std::string(to_string(open_type_)) + " family " + open_);
}

void Exposition::write_series(std::string_view name, const Labels& labels,
                              const std::pair<std::string, std::string>* extra, std::string_view value) {
  text_ += name;
  if (!labels.empty() || extra) {
    text_.push_back('{');
    bool first = true;
    auto one = [&](const std::pair<std::string, std::string>& label) {
      if (!valid_label_name(label.first))
        throw ExpositionError("label name \"" + label.first + "\" of " + open_ + " is not a Prometheus label name");
      if (!first) text_.push_back(',');
      first = false;
      text_ += label.first + "=\"" + escape_label_value(label.second) + "\"";
    };
    for (const auto& label : labels)
      one(label);
    if (extra) one(*extra);
    text_.push_back('}');
  }
  text_.push_back(' ');
  text_ += value;
  text_.push_back('\n');
}

void Exposition::sample(const Labels& labels, double value) {
  require_open(MetricType::gauge, "a sample");
  write_series(open_, labels, nullptr, format_value(value));
}

void Exposition::sample(const Labels& labels, std::uint64_t value) {
  require_open(MetricType::gauge, "a sample");
  write_series(open_, labels, nullptr, std::to_string(value));
}

void Exposition::histogram(const Labels& labels, std::span<const double> bounds, std::span<const std::uint64_t> counts,
                           double sum) {
  require_open(MetricType::histogram, "a histogram");
  if (counts.size() != bounds.size() + 1)
    throw ExpositionError("histogram " + open_ + ": " + std::to_string(counts.size()) + " counts for " +
                          std::to_string(bounds.size()) + " bounds (one more count is the +Inf bucket)");
  for (std::size_t i = 1; i < bounds.size(); ++i)
    if (!(bounds[i] > bounds[i - 1])) throw ExpositionError("histogram " + open_ + ": bounds must increase strictly");
  for (const auto& label : labels)
    if (label.first == "le") throw ExpositionError("histogram " + open_ + ": le is the bucket's own label");
  std::uint64_t cumulative = 0;
  const std::string bucket = open_ + "_bucket";
  for (std::size_t i = 0; i < counts.size(); ++i) {
    cumulative += counts[i];
    std::pair<std::string, std::string> le{"le", i < bounds.size() ? format_value(bounds[i]) : "+Inf"};
    write_series(bucket, labels, &le, std::to_string(cumulative));
  }
  write_series(open_ + "_sum", labels, nullptr, format_value(sum));
  write_series(open_ + "_count", labels, nullptr, std::to_string(cumulative));
}

}  // namespace mh::metrics
