// The trajectory's top: the agent block, the stream's status, final_metrics (sums over every
// request that are unknown, never zero, when one is unknown) and the main document with its
// extra.metaharness. Separate from the steps: these are the run-wide figures.
#include <algorithm>

#include "cli/atif_builder.hpp"

namespace mh::cli::atif::detail {

json::object Builder::agent_object(const std::optional<std::string>& agent_id) const {
  json::object a;
  a["name"] = agent_name(adapter_);
  std::optional<std::string> version, model;
  if (started_) {
    const auto& s = std::get<ev::SessionStarted>(started_->payload);
    version = s.harness_version;
    model = s.model;
  }
  if (!model) model = string_member(ctx_.spec, "model");
  if (!model)
    for (const Event* e : usage_events_)
      if (auto m = std::get<ev::Usage>(e->payload).model) {
        model = m;
        break;
      }
  // ATIF requires a version string: "unknown" says the record did not give one, and extra
  // keeps the record's own null.
  a["version"] = version.value_or("unknown");
  if (model) a["model_name"] = *model;
  json::object mh{{"adapter", adapter_}, {"harness_version", version ? json::value(*version) : json::value(nullptr)}};
  if (agent_id) {
    mh["agent"] = *agent_id;
    auto sp = spawner_.find(*agent_id);
    mh["spawned_by_call"] = sp != spawner_.end() ? json::value(sp->second) : json::value(nullptr);
  }
  a["extra"] = json::object{{"metaharness", std::move(mh)}};
  return a;
}

std::string Builder::stream_status() const {
  if (closed_count_ == 0) return "truncated";
  if (closed_count_ > 1 || closed_ != &events_.back()) return "inconsistent";
  for (std::size_t i = 0; i < events_.size(); ++i)
    if (events_[i].seq != i + 1) return "inconsistent";
  return std::get<ev::StreamClosed>(closed_->payload).events + 1 == events_.size() ? "complete" : "inconsistent";
}

std::optional<double> Builder::as_double(const std::optional<std::uint64_t>& v) {
  return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
}

json::object Builder::final_metrics() const {
  Sum prompt, completion, cached, cost;
  std::set<std::optional<std::uint32_t>> turns_with_totals;
  // A run behind a model gateway (docs/gateway.md) has the gateway's own reading of every answer
  // (`source: "gateway"`): those are the totals, and the vendor's figures are left out (they
  // would count the same requests twice). Otherwise the vendor's, as before.
  const bool gateway_metered = std::any_of(usage_events_.begin(), usage_events_.end(), [](const auto* e) {
    return std::get<ev::Usage>(e->payload).source == std::optional<std::string>("gateway");
  });
  for (std::size_t i = 0; i < usage_events_.size(); ++i)
    if (std::get<ev::Usage>(usage_events_[i]->payload).scope == "turn") turns_with_totals.insert(usage_turns_[i]);
  for (std::size_t i = 0; i < usage_events_.size(); ++i) {
    const auto& p = std::get<ev::Usage>(usage_events_[i]->payload);
    if (gateway_metered) {
      if (p.source != std::optional<std::string>("gateway")) continue;
    } else if (p.scope != "turn" && turns_with_totals.count(usage_turns_[i])) {
      continue;  // counted by its turn's totals
    }
    const auto& u = p.usage;
    prompt.add(as_double(prompt_tokens(u)));
    completion.add(as_double(u.output_tokens));
    cached.add(as_double(u.cache_read_input_tokens));
    cost.add(u.cost_usd);
  }
  bool any = !usage_events_.empty();
  const ev::SessionEnded* ended = ended_ ? &std::get<ev::SessionEnded>(ended_->payload) : nullptr;
  json::value cost_source = nullptr;
  json::value total_cost = nullptr;
  if (gateway_metered && any && cost.known) {
    // The gateway's figures, priced at the configured prices: where they exist they are the cost.
    total_cost = cost.value;
    cost_source = "gateway usage.cost_usd";
  } else if (ended && ended->total_cost_usd) {
    total_cost = *ended->total_cost_usd;  // the vendor's own figure for the session
    cost_source = "session.ended.total_cost_usd";
  } else if (any && cost.known) {
    total_cost = cost.value;
    cost_source = "usage.cost_usd";
  }
  json::object mh{{"usage_events", usage_events_.size()},
                  {"usage_in_steps", usage_in_steps_},
                  {"cost_source", cost_source},
                  {"usage_source", gateway_metered ? "gateway" : "vendor"}};
  if (ended) {
    json::object e = payload_object(*ended_, false);
    mh["census"] = e["census"];
  } else {
    mh["census"] = nullptr;
  }
  json::object m;
  m["total_prompt_tokens"] = prompt.json(true, any);
  m["total_completion_tokens"] = completion.json(true, any);
  m["total_cached_tokens"] = cached.json(true, any);
  m["total_cost_usd"] = std::move(total_cost);
  m["total_steps"] = main_.steps.size();
  m["extra"] = json::object{{"metaharness", std::move(mh)}};
  return m;
}

json::object Builder::render_main() const {
  json::object t = render(main_);
  json::object out;
  // Root keys in the RFC's order; render() gave the ones that every trajectory has.
  for (auto key : {"schema_version", "session_id", "trajectory_id", "agent", "steps"})
    if (auto* v = t.if_contains(key)) out[key] = *v;
  out["notes"] = "Exported by metaharness from run " + run_id_ + " (" + (adapter_.empty() ? "unknown" : adapter_) +
                 "). ATIF has no field for what metaharness decided about each call, nor for the records nobody "
                 "could read: those are kept under extra.metaharness on the object they belong to (docs/atif.md).";
  out["final_metrics"] = final_metrics();
  json::object mh;
  mh["run_id"] = run_id_;
  mh["adapter"] = adapter_;
  mh["source"] = ctx_.source;
  json::object stream;
  stream["status"] = stream_status();
  stream["events"] = events_.size();
  stream["stream_closed"] = closed_ ? json::value(payload_object(*closed_, false)) : json::value(nullptr);
  mh["stream"] = std::move(stream);
  mh["session_started"] = started_ ? json::value(payload_object(*started_, false)) : json::value(nullptr);
  mh["session_ended"] = ended_ ? json::value(payload_object(*ended_, false)) : json::value(nullptr);
  if (ctx_.spec.is_object()) {
    // Not the prompt (it is the first step), nor where the model was reached (a credential's
    // neighbourhood).
    mh["spec"] = without(ctx_.spec.as_object(), {"prompt", "model_endpoint"});
  } else {
    mh["spec"] = nullptr;
  }
  mh["events"] = control_;
  out["extra"] = json::object{{"metaharness", std::move(mh)}};
  if (auto* v = t.if_contains("subagent_trajectories")) out["subagent_trajectories"] = *v;
  return out;
}

}  // namespace mh::cli::atif::detail
