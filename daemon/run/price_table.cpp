#include "daemon/run/price_table.hpp"

#include <cstdint>

namespace mh::daemon {

const ModelPrice* PriceTable::find(std::string_view model) const {
  if (auto it = prices_.find(model); it != prices_.end()) return &it->second;
  const ModelPrice* best = nullptr;
  std::size_t best_length = 0;
  for (const auto& [key, price] : prices_) {
    if (key.empty() || key.back() != '*') continue;
    std::string_view prefix(key.data(), key.size() - 1);
    if (model.substr(0, prefix.size()) == prefix && (best == nullptr || prefix.size() > best_length)) {
      best = &price;
      best_length = prefix.size();
    }
  }
  return best;
}

std::optional<double> price_usage(const protocol::TokenUsage& u, const ModelPrice& p) {
  double usd = 0;
  auto add = [&](const std::optional<std::uint64_t>& tokens, const std::optional<double>& per_mtok) {
    if (!tokens || *tokens == 0) return true;
    if (!per_mtok) return false;  // tokens of a kind with no price: the cost is unknown
    usd += static_cast<double>(*tokens) * *per_mtok / 1e6;
    return true;
  };
  if (!add(u.input_tokens, p.input_per_mtok) || !add(u.output_tokens, p.output_per_mtok) ||
      !add(u.cache_read_input_tokens, p.cache_read_per_mtok) ||
      !add(u.cache_creation_input_tokens, p.cache_creation_per_mtok))
    return std::nullopt;
  return usd;
}

}  // namespace mh::daemon
