// What the host's [prices] table says a model's tokens cost, and what a usage record costs at
// that price: the budget meter's (budget_meter.hpp) and the daily ledger's yardstick. Pure.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "protocol/events.hpp"

namespace mh::daemon {

// USD per million tokens of each kind; an unset kind has no price.
struct ModelPrice {
  std::optional<double> input_per_mtok;
  std::optional<double> output_per_mtok;
  std::optional<double> cache_read_per_mtok;
  std::optional<double> cache_creation_per_mtok;
};

// Prices by model name. A key ending in `*` prices every model it is a prefix of (the longest
// such key wins); otherwise names match exactly.
class PriceTable {
 public:
  void set(std::string model, ModelPrice price) { prices_[std::move(model)] = price; }
  const ModelPrice* find(std::string_view model) const;
  bool empty() const { return prices_.empty(); }
  const std::map<std::string, ModelPrice, std::less<>>& all() const { return prices_; }

 private:
  std::map<std::string, ModelPrice, std::less<>> prices_;
};

// The cost of one usage record at a price, or nullopt when a kind it used has no price.
std::optional<double> price_usage(const protocol::TokenUsage& usage, const ModelPrice& price);

}  // namespace mh::daemon
