// [budgets] (the defaults of a run that names none), [budgets.daily] (per owner uid and UTC day)
// and [prices."<model>"] (USD per million tokens, for usd budgets).
#include <set>
#include <string>

#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"

namespace mh::daemon::config_tables {

namespace {

// One budget table: the keys of adapters::Budgets, integers (usd a number), by the same rules as
// `--budget KEY=VALUE`. `allow_daily`: the table may nest [budgets.daily], read apart.
std::string read_budget_keys(const toml::table& t, const std::string& prefix, adapters::Budgets& out,
                             bool allow_daily) {
  for (const auto& [key, node] : t) {
    std::string k(key.str());
    if (allow_daily && k == "daily") continue;
    std::string text;
    if (auto i = node.value_exact<std::int64_t>())
      text = std::to_string(*i);
    else if (auto d = node.value_exact<double>(); d && k == "usd")
      text = std::to_string(*d);
    else
      return prefix + k + ": must be " + (k == "usd" ? "a number" : "an integer") + ", not " + describe_node(node);
    std::string problem;
    if (!adapters::set_budget(out, k, text, problem)) return prefix + k + ": " + problem;
  }
  return "";
}

// One [prices."<model>"]: each kind optional (a kind with no price makes a usage of it unpriced,
// never free).
std::string read_model_price(const std::string& m, const toml::node& node, PriceTable& out) {
  static const std::set<std::string> kKinds = {"input_per_mtok", "output_per_mtok", "cache_read_per_mtok",
                                               "cache_creation_per_mtok"};
  const toml::table* t = node.as_table();
  if (!t) return "prices." + m + ": must be a table ([prices.\"" + m + "\"])";
  ModelPrice price;
  for (const auto& [key, value] : *t) {
    std::string k(key.str());
    if (!kKinds.count(k))
      return "unknown key prices." + m + "." + k +
             " (known: input_per_mtok, output_per_mtok, cache_read_per_mtok, cache_creation_per_mtok)";
    auto number = value.value<double>();
    if (!number || *number < 0)
      return "prices." + m + "." + k + ": must be a non-negative number, not " + describe_node(value);
    (k == "input_per_mtok"        ? price.input_per_mtok
     : k == "output_per_mtok"     ? price.output_per_mtok
     : k == "cache_read_per_mtok" ? price.cache_read_per_mtok
                                  : price.cache_creation_per_mtok) = *number;
  }
  out.set(m, price);
  return "";
}

}  // namespace

std::string read_budgets_table(const toml::table& budgets, DaemonConfig& c) {
  if (auto problem = read_budget_keys(budgets, "budgets.", c.default_budget, true); !problem.empty()) return problem;
  const toml::node* d = budgets.get("daily");
  if (!d) return "";
  const toml::table* t = d->as_table();
  if (!t) return "budgets.daily: must be a table ([budgets.daily])";
  adapters::Budgets& daily = c.daily_budget;
  if (auto problem = read_budget_keys(*t, "budgets.daily.", daily, false); !problem.empty()) return problem;
  if (daily.turns || daily.tool_calls || daily.wall_ms)
    return "budgets.daily: only input_tokens, output_tokens and usd are metered per day";
  return "";
}

std::string read_prices_table(const toml::table& prices, DaemonConfig& c) {
  for (const auto& [model, node] : prices)
    if (auto problem = read_model_price(std::string(model.str()), node, c.prices); !problem.empty()) return problem;
  return "";
}

}  // namespace mh::daemon::config_tables
