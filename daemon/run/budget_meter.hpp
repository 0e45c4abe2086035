// What a run has spent, against what it may spend. Pure: it reads no clock (elapsed time comes in
// as input) and does no I/O. The run core feeds it turns, tool calls and the vendor's usage
// records; each input says whether it crossed one of the run's budgets.
//
// USD is never guessed. A usage record's cost is the vendor's own figure where it gives one, else
// its tokens at the configured price of its model; a usage record whose model has no price makes
// the run's USD spend unknown from then on (null, never a smaller number), and a USD budget can
// then no longer be kept, which is itself a crossing.
//
// A turn's tokens count once. Claude reports each request's usage as of its start (scope
// "request": provisional, output_tokens ~1) and the turn's own totals at its end (scope "turn"):
// the first turn-scoped record of a turn takes that turn's request figures out of the spend and
// its own figures go in instead. Request figures still cross budgets as they come (a floor: a
// runaway turn is stopped mid-turn). A request of a model with no price makes the cost unknown at
// once in what is reported (reported(): usd null, unpriced_model named), since nobody knows it
// yet; the turn's figures may still settle it (they carry the vendor's own cost), so it becomes
// final, and crosses a usd budget, only if the turn ends without them. A usage record of no scope
// (Codex) counts as final when it arrives.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "adapters/run_spec.hpp"
#include "daemon/run/price_table.hpp"

namespace mh::adapters {
class Adapter;  // adapters/adapter.hpp: named by the run-start refusals only
}

namespace mh::daemon {

namespace json = boost::json;

struct Spend {
  std::uint64_t turns = 0;
  std::uint64_t tool_calls = 0;
  std::uint64_t input_tokens = 0;
  std::uint64_t output_tokens = 0;
  std::uint64_t cache_read_input_tokens = 0;
  std::uint64_t cache_creation_input_tokens = 0;
  std::optional<double> usd = 0.0;            // nullopt: some usage could not be priced
  std::optional<std::string> unpriced_model;  // the first model that made usd unknown
  // Whose figures the tokens and usd are (issue 25): the run's model gateway's, read from each
  // upstream answer, once the run has a gateway; the vendor's own reports otherwise. Said as
  // "usage_source": "gateway" | "vendor" wherever a spend is shown.
  bool gateway_metered = false;

  json::object to_json() const;
};

// A budget that was crossed: which, its limit and the figure that crossed it, as text.
struct Crossing {
  std::string budget;  // turns, tool_calls, input_tokens, output_tokens, wall_ms, usd
  std::string limit;
  std::string figure;
  std::string message() const;
};

class BudgetMeter {
 public:
  // `model` is the run's declared model, used for usage records that name none.
  BudgetMeter(adapters::Budgets limits, const PriceTable* prices, std::optional<std::string> model);

  // A turn is about to start: crossing if the run has already had `turns` turns.
  std::optional<Crossing> before_turn();
  void turn_started();
  // The vendor ended the turn: a request-scoped usage it left unpriced, with no turn figures to
  // supersede it, makes the cost unknown now (a crossing of a usd budget). Also called when the
  // run winds up mid-turn.
  std::optional<Crossing> turn_ended();
  // A tool call was presented: counted, crossing when it is one more than `tool_calls`.
  std::optional<Crossing> tool_call();
  // A usage record: tokens (and cost) added (a turn-scoped one first removes its turn's request
  // figures), crossing when a budget is now exceeded.
  std::optional<Crossing> usage(const protocol::ev::Usage& usage);
  std::optional<Crossing> wall(std::uint64_t elapsed_ms) const;

  // The run has a model gateway (issue 25): from now on its usage records (source "gateway",
  // final as they come: one per answered request) are what the spend counts, and the vendor's
  // own usage records are informational (recorded, never counted twice). Before any usage.
  void meter_by_gateway() { spend_.gateway_metered = true; }
  bool gateway_metered() const { return spend_.gateway_metered; }
  // Whether a model request whose worst case is `worst` may start, with `held` (the worst cases
  // of the run's requests already reserved and not yet settled) on top of what is spent: the
  // budget it would cross, if any. usd: spent + held + worst must stay within the budget, and a
  // worst case of unknown cost (a model with no price) cannot be kept within it. Tokens: refused
  // once the run's input or output tokens have reached their budget (a request's own tokens are
  // only bounded loosely before it runs, so they are not reserved).
  std::optional<Crossing> reserve(const Spend& worst, const Spend& held) const;

  // What is settled: what the budgets judge, and what the daily ledger adds up (a cost still
  // open mid-turn is left out of both until the turn settles it).
  const Spend& spend() const { return spend_; }
  // What a reader is told now (get, list, the viewer, the run's close): the settled spend, but
  // with usd unknown while the current turn holds a request of a model with no price.
  Spend reported() const;
  const adapters::Budgets& limits() const { return limits_; }

 private:
  std::optional<Crossing> crossed() const;
  void mark_unpriced(const std::string& model);

  adapters::Budgets limits_;
  const PriceTable* prices_;
  std::optional<std::string> model_;
  Spend spend_;
  // The current turn's request-scoped figures, in the spend until its turn figures replace them.
  struct Provisional {
    std::uint64_t input_tokens = 0;
    std::uint64_t output_tokens = 0;
    std::uint64_t cache_read_input_tokens = 0;
    std::uint64_t cache_creation_input_tokens = 0;
    double usd = 0;                             // the priced part
    std::optional<std::string> unpriced_model;  // the first request of the turn with no price
  };
  Provisional turn_requests_;
  bool turn_figures_in_ = false;  // this turn's turn-scoped figures have superseded its requests
};

// The worst a model request can spend before it is forwarded (issue 25, docs/policies.md):
// output: `max_tokens` (0: the request set no bound; output then counts 0 and the reservation
// holds only its input, the weaker guarantee docs/policies.md names); input: `input_bytes`, the
// request body's size, as tokens (no tokenizer makes a token of less than one byte of the text
// it encodes, and the body's JSON framing only adds bytes), each at the dearest of the model's
// input prices (plain, cache write, cache read). usd nullopt when the model has no price for a
// kind the bound uses: unknown is not zero.
Spend worst_case(std::string_view model, std::uint64_t max_tokens, std::uint64_t input_bytes, const PriceTable* prices);
// What one answered request cost at its model's price: nullopt when the model, or a kind of token
// it used, has no price.
std::optional<double> request_cost(const protocol::TokenUsage& usage, std::string_view model, const PriceTable* prices);

// The run-start refusal of a USD budget nobody can meter: the run's model (declared, or the
// adapter's default) has no price. Nullopt when the run may start.
std::optional<std::string> refuse_unpriced_budget(const adapters::RunSpec& spec, const adapters::Adapter& adapter,
                                                  const PriceTable& prices);
// The same judgement for whatever else meters the run in USD (`needed_by` names it, e.g. the
// daemon's daily budget): nullopt when the run's model has a price.
std::optional<std::string> refuse_unpriced_model(const adapters::RunSpec& spec, const adapters::Adapter& adapter,
                                                 const PriceTable& prices, std::string_view needed_by);

}  // namespace mh::daemon
