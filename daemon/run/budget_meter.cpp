#include "daemon/run/budget_meter.hpp"

#include <cmath>
#include <cstdio>

#include "adapters/adapter.hpp"

namespace mh::daemon {

namespace {

std::string usd_text(double usd) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6f", usd);
  std::string s(buf);
  // Trailing zeros say nothing: 0.250000 -> 0.25, 2.000000 -> 2.0.
  while (s.size() > 1 && s.back() == '0' && s[s.size() - 2] != '.')
    s.pop_back();
  return "$" + s;
}

std::optional<Crossing> over(std::string_view budget, const std::optional<std::uint64_t>& limit, std::uint64_t figure,
                             std::string_view unit) {
  if (!limit || figure <= *limit) return std::nullopt;
  return Crossing{std::string(budget), std::to_string(*limit) + std::string(unit),
                  std::to_string(figure) + std::string(unit)};
}

}  // namespace

json::object Spend::to_json() const {
  json::object o;
  o["turns"] = turns;
  o["tool_calls"] = tool_calls;
  o["input_tokens"] = input_tokens;
  o["output_tokens"] = output_tokens;
  o["cache_read_input_tokens"] = cache_read_input_tokens;
  o["cache_creation_input_tokens"] = cache_creation_input_tokens;
  o["usd"] = usd ? json::value(*usd) : json::value(nullptr);
  o["unpriced_model"] = unpriced_model ? json::value(*unpriced_model) : json::value(nullptr);
  o["usage_source"] = gateway_metered ? "gateway" : "vendor";
  return o;
}

std::string Crossing::message() const {
  return "the " + budget + " budget of " + limit + " is exhausted: " + figure;
}

BudgetMeter::BudgetMeter(adapters::Budgets limits, const PriceTable* prices, std::optional<std::string> model)
    : limits_(std::move(limits)), prices_(prices), model_(std::move(model)) {}

std::optional<Crossing> BudgetMeter::before_turn() {
  if (!limits_.turns || spend_.turns < *limits_.turns) return std::nullopt;
  return Crossing{"turns", std::to_string(*limits_.turns) + " turn(s)",
                  std::to_string(spend_.turns) + " turn(s) ran and the run would start another"};
}

std::optional<Crossing> BudgetMeter::tool_call() {
  ++spend_.tool_calls;
  return over("tool_calls", limits_.tool_calls, spend_.tool_calls, " call(s)");
}

void BudgetMeter::turn_started() {
  (void)turn_ended();  // a turn that never said it ended is over now
  ++spend_.turns;
}

std::optional<Crossing> BudgetMeter::turn_ended() {
  bool deferred = !turn_figures_in_ && turn_requests_.unpriced_model;
  std::optional<std::string> model = turn_requests_.unpriced_model;
  turn_requests_ = {};
  turn_figures_in_ = false;
  if (!deferred) return std::nullopt;
  mark_unpriced(*model);
  return crossed();
}

Spend BudgetMeter::reported() const {
  Spend now = spend_;
  // Unknown is not zero: a request with no price, not yet superseded by its turn's figures,
  // leaves the cost unknown until they come.
  if (now.usd && !turn_figures_in_ && turn_requests_.unpriced_model) {
    now.usd.reset();
    now.unpriced_model = turn_requests_.unpriced_model;
  }
  return now;
}

void BudgetMeter::mark_unpriced(const std::string& model) {
  if (!spend_.usd) return;
  spend_.usd.reset();
  spend_.unpriced_model = model;
}

std::optional<Crossing> BudgetMeter::usage(const protocol::ev::Usage& record) {
  const bool from_gateway = record.source == "gateway";
  // Once a gateway meters the run, the vendor's own figures are what it says it spent, not what
  // the upstream billed: recorded, never counted beside the gateway's (no double count).
  if (spend_.gateway_metered && !from_gateway) return std::nullopt;
  if (from_gateway) {
    // One answered request, read from the upstream's own answer: final as it comes (no turn
    // figures supersede it), and a request of a model with no price makes the cost unknown now.
    const auto& u = record.usage;
    spend_.input_tokens += u.input_tokens.value_or(0);
    spend_.output_tokens += u.output_tokens.value_or(0);
    spend_.cache_read_input_tokens += u.cache_read_input_tokens.value_or(0);
    spend_.cache_creation_input_tokens += u.cache_creation_input_tokens.value_or(0);
    if (spend_.usd) {
      std::optional<std::string> model = record.model ? record.model : model_;
      std::optional<double> cost = u.cost_usd;
      if (!cost && model) cost = request_cost(u, *model, prices_);
      if (cost)
        *spend_.usd += *cost;
      else
        mark_unpriced(model.value_or("(the gateway read no model)"));
    }
    return crossed();
  }
  const bool request = record.scope == "request";
  if (record.scope == "turn" && !turn_figures_in_) {
    // The turn's own figures arrive: its request figures were provisional, and leave the spend.
    spend_.input_tokens -= turn_requests_.input_tokens;
    spend_.output_tokens -= turn_requests_.output_tokens;
    spend_.cache_read_input_tokens -= turn_requests_.cache_read_input_tokens;
    spend_.cache_creation_input_tokens -= turn_requests_.cache_creation_input_tokens;
    if (spend_.usd) *spend_.usd -= turn_requests_.usd;
    turn_requests_ = {};
    turn_figures_in_ = true;
  } else if (request && turn_figures_in_) {
    turn_figures_in_ = false;  // a request after the turn's figures opens the next turn's
  }
  const auto& u = record.usage;
  spend_.input_tokens += u.input_tokens.value_or(0);
  spend_.output_tokens += u.output_tokens.value_or(0);
  spend_.cache_read_input_tokens += u.cache_read_input_tokens.value_or(0);
  spend_.cache_creation_input_tokens += u.cache_creation_input_tokens.value_or(0);
  if (request) {
    turn_requests_.input_tokens += u.input_tokens.value_or(0);
    turn_requests_.output_tokens += u.output_tokens.value_or(0);
    turn_requests_.cache_read_input_tokens += u.cache_read_input_tokens.value_or(0);
    turn_requests_.cache_creation_input_tokens += u.cache_creation_input_tokens.value_or(0);
  }
  if (spend_.usd) {
    std::optional<double> cost = u.cost_usd;  // the vendor's own figure comes first
    std::optional<std::string> model = record.model ? record.model : model_;
    if (!cost && model && prices_)
      if (const ModelPrice* price = prices_->find(*model)) cost = price_usage(u, *price);
    std::string name = model.value_or("(the vendor named no model)");
    if (cost) {
      *spend_.usd += *cost;
      if (request) turn_requests_.usd += *cost;
    } else if (request) {
      // Judged at the turn's end: its figures carry the vendor's own cost.
      if (!turn_requests_.unpriced_model) turn_requests_.unpriced_model = name;
    } else {
      mark_unpriced(name);
    }
  }
  return crossed();
}

std::optional<Crossing> BudgetMeter::crossed() const {
  if (auto c = over("input_tokens", limits_.input_tokens, spend_.input_tokens, " token(s)")) return c;
  if (auto c = over("output_tokens", limits_.output_tokens, spend_.output_tokens, " token(s)")) return c;
  if (limits_.usd) {
    if (!spend_.usd)
      return Crossing{
          "usd", usd_text(*limits_.usd),
          "the cost is no longer known: " + *spend_.unpriced_model + " has no price, and an unknown cost is not zero"};
    if (*spend_.usd > *limits_.usd) return Crossing{"usd", usd_text(*limits_.usd), usd_text(*spend_.usd) + " spent"};
  }
  return std::nullopt;
}

std::optional<Crossing> BudgetMeter::reserve(const Spend& worst, const Spend& held) const {
  if (limits_.input_tokens && spend_.input_tokens >= *limits_.input_tokens)
    return Crossing{"input_tokens", std::to_string(*limits_.input_tokens) + " token(s)",
                    std::to_string(spend_.input_tokens) + " token(s) spent before this model request"};
  if (limits_.output_tokens && spend_.output_tokens >= *limits_.output_tokens)
    return Crossing{"output_tokens", std::to_string(*limits_.output_tokens) + " token(s)",
                    std::to_string(spend_.output_tokens) + " token(s) spent before this model request"};
  if (limits_.usd) {
    if (!spend_.usd)
      return Crossing{"usd", usd_text(*limits_.usd),
                      "the cost is no longer known (" + spend_.unpriced_model.value_or("a model") +
                          " has no price), and an unknown cost is not zero"};
    if (!worst.usd)
      return Crossing{"usd", usd_text(*limits_.usd),
                      "this model request's worst case cannot be priced (" +
                          worst.unpriced_model.value_or("its model") +
                          " has no price in the config's [prices]), and an unknown cost is not zero"};
    const double total = *spend_.usd + held.usd.value_or(0.0) + *worst.usd;
    if (total > *limits_.usd)
      return Crossing{"usd", usd_text(*limits_.usd),
                      usd_text(*spend_.usd) + " spent, " + usd_text(held.usd.value_or(0.0)) +
                          " reserved by requests in flight, and this model request could spend up to " +
                          usd_text(*worst.usd) + " (" + std::to_string(worst.input_tokens) + " input and " +
                          std::to_string(worst.output_tokens) + " output token(s) at most)"};
  }
  return std::nullopt;
}

Spend worst_case(std::string_view model, std::uint64_t max_tokens, std::uint64_t input_bytes,
                 const PriceTable* prices) {
  Spend worst;
  worst.input_tokens = input_bytes;
  worst.output_tokens = max_tokens;
  const ModelPrice* price = prices ? prices->find(model) : nullptr;
  std::optional<double> input_price;
  if (price)
    for (const auto& p : {price->input_per_mtok, price->cache_creation_per_mtok, price->cache_read_per_mtok})
      if (p && (!input_price || *p > *input_price)) input_price = p;
  const bool input_known = input_bytes == 0 || input_price;
  const bool output_known = max_tokens == 0 || (price && price->output_per_mtok);
  if (!price || !input_known || !output_known) {
    worst.usd.reset();
    worst.unpriced_model = std::string(model.empty() ? "(a request naming no model)" : model);
    return worst;
  }
  double usd = 0;
  if (input_bytes) usd += static_cast<double>(input_bytes) * *input_price / 1e6;
  if (max_tokens) usd += static_cast<double>(max_tokens) * *price->output_per_mtok / 1e6;
  worst.usd = usd;
  return worst;
}

std::optional<double> request_cost(const protocol::TokenUsage& usage, std::string_view model,
                                   const PriceTable* prices) {
  const ModelPrice* price = prices ? prices->find(model) : nullptr;
  if (price) return price_usage(usage, *price);
  // No tokens at all (a refused or failed request) cost nothing, priced or not.
  auto none = [](const std::optional<std::uint64_t>& n) { return n.value_or(0) == 0; };
  if (none(usage.input_tokens) && none(usage.output_tokens) && none(usage.cache_read_input_tokens) &&
      none(usage.cache_creation_input_tokens))
    return 0.0;
  return std::nullopt;
}

std::optional<Crossing> BudgetMeter::wall(std::uint64_t elapsed_ms) const {
  if (!limits_.wall_ms || elapsed_ms < *limits_.wall_ms) return std::nullopt;
  return Crossing{"wall_ms", std::to_string(*limits_.wall_ms) + " ms", std::to_string(elapsed_ms) + " ms elapsed"};
}

std::optional<std::string> refuse_unpriced_budget(const adapters::RunSpec& spec, const adapters::Adapter& adapter,
                                                  const PriceTable& prices) {
  if (!spec.budget.usd) return std::nullopt;
  return refuse_unpriced_model(spec, adapter, prices, "a usd budget");
}

std::optional<std::string> refuse_unpriced_model(const adapters::RunSpec& spec, const adapters::Adapter& adapter,
                                                 const PriceTable& prices, std::string_view needed_by) {
  std::optional<std::string> model = spec.model ? spec.model : adapter.default_model();
  const std::string needs = std::string(needed_by) + " needs the run's model priced";
  if (!model)
    return needs + ", and this run names no model (the " + std::string(adapter.id()) +
           " adapter's default is only known once the vendor starts): name one with --model / \"model\"";
  if (!prices.find(*model))
    return needs + ", and the config's price table has no price for " + *model +
           " ([prices] in the config): an unknown cost is not zero";
  return std::nullopt;
}

}  // namespace mh::daemon
