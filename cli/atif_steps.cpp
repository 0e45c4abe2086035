// A draft rendered as ATIF: its steps, each agent step's message, tool calls and observations
// (with who decided each call under extra.metaharness), the per-step metrics and the sub-agent
// references. Separate from the passes: this is the document's shape, not the stream's reading.
#include <algorithm>

#include "cli/atif_builder.hpp"

namespace mh::cli::atif::detail {

std::optional<std::uint64_t> Builder::prompt_tokens(const protocol::TokenUsage& u) const {
  switch (wire_) {
    case TokenWire::anthropic:
      if (u.input_tokens && u.cache_read_input_tokens && u.cache_creation_input_tokens)
        return *u.input_tokens + *u.cache_read_input_tokens + *u.cache_creation_input_tokens;
      return std::nullopt;
    case TokenWire::openai:
      return u.input_tokens;
    case TokenWire::unknown:
      return std::nullopt;
  }
  return std::nullopt;
}

json::value Builder::number_or_null(const std::optional<std::uint64_t>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::value Builder::real_or_null(const std::optional<double>& v) {
  return v ? json::value(*v) : json::value(nullptr);
}

json::object Builder::metrics(const Event& e) const {
  const auto& u = std::get<ev::Usage>(e.payload).usage;
  json::object m;
  m["prompt_tokens"] = number_or_null(prompt_tokens(u));
  m["completion_tokens"] = number_or_null(u.output_tokens);
  m["cached_tokens"] = number_or_null(u.cache_read_input_tokens);
  m["cost_usd"] = real_or_null(u.cost_usd);  // the vendor's price or unknown, never zero
  m["extra"] = json::object{{"metaharness", payload_object(e, false)}};
  return m;
}

json::value Builder::message_of(const StepDraft& s) {
  if (s.texts.empty()) return "";
  if (s.texts.size() == 1) return json::value(s.texts.front());
  json::array parts;  // several text blocks: kept apart, as the vendor wrote them
  for (const auto& t : s.texts)
    parts.push_back(json::object{{"type", "text"}, {"text", t}});
  return parts;
}

std::pair<json::value, std::string> Builder::content_of(const ev::ToolResult& r) {
  if (r.content.is_null()) return {nullptr, "none"};
  if (r.content.is_string()) return {r.content, "text"};
  if (r.content.is_array() && !r.content.as_array().empty()) {
    json::array parts;
    for (const auto& block : r.content.as_array()) {
      auto type = string_member(block, "type");
      auto text = string_member(block, "text");
      if (type != "text" || !text) {
        parts.clear();
        break;
      }
      parts.push_back(json::object{{"type", "text"}, {"text", *text}});
    }
    if (!parts.empty()) return {parts, "text_blocks"};
  }
  // Anything else is the canonical JSON text of what the tool returned: nothing is lost.
  return {json::value(protocol::canonical_json(r.content)), "json"};
}

json::object Builder::decided_object(const Event& e) {
  return without(payload_object(e, false), {"call_id"});
}

json::object Builder::tool_call(const std::string& id) const {
  const CallState& c = calls_.at(id);
  const auto& r = std::get<ev::ToolRequested>(c.requested->payload);
  const ev::ToolDecided* decided =
      c.decisions.empty() ? nullptr : &std::get<ev::ToolDecided>(c.decisions.back()->payload);
  const auto* replace = decided ? std::get_if<protocol::decision::Replace>(&decided->decision) : nullptr;
  // The call as it ran: a replaced call ran the input the decision gave.
  const json::value& ran = replace ? replace->input : r.input;

  json::object mh = without(payload_object(*c.requested, false), {"call_id", "name", "input"});
  if (replace) mh["original_arguments"] = r.input;
  if (!ran.is_object()) mh["input"] = ran;  // ATIF arguments are an object; the value itself is kept
  mh["decided"] = c.decisions.empty() ? json::value(nullptr) : json::value(decided_object(*c.decisions.back()));
  if (c.decisions.size() > 1) {
    json::array earlier;
    for (std::size_t i = 0; i + 1 < c.decisions.size(); ++i)
      earlier.push_back(decided_object(*c.decisions[i]));
    mh["earlier_decisions"] = std::move(earlier);
  }
  if (!c.presentations.empty()) {
    json::array again;
    for (const Event* p : c.presentations)
      again.push_back(without(payload_object(*p, false), {"call_id"}));
    mh["presented_again"] = std::move(again);
  }

  json::object call;
  call["tool_call_id"] = r.call_id;
  call["function_name"] = r.name;
  call["arguments"] = ran.is_object() ? ran : json::object{};
  call["extra"] = json::object{{"metaharness", std::move(mh)}};
  return call;
}

json::object Builder::observation_result(const std::string& id) const {
  const CallState& c = calls_.at(id);
  const Event* last = c.results.empty() ? nullptr : c.results.back();
  const ev::ToolDecided* decided =
      c.decisions.empty() ? nullptr : &std::get<ev::ToolDecided>(c.decisions.back()->payload);
  std::string kind = decided ? std::string(protocol::decision_name(decided->decision)) : "";

  json::object mh;
  json::value content = nullptr;
  auto from_result = [&] {
    if (!last) return;
    const auto& r = std::get<ev::ToolResult>(last->payload);
    auto [value, form] = content_of(r);
    content = std::move(value);
    for (auto& kv : without(payload_object(*last, false), {"call_id", "content"}))
      mh[kv.key()] = kv.value();
    mh["content_form"] = form;
  };
  if (kind == "deny") {
    const auto& deny = std::get<protocol::decision::Deny>(decided->decision);
    mh["outcome"] = "refused";
    mh["ran"] = false;
    content = "Refused by metaharness: decided by " + who_decided(decided->decided_by) + " at the " +
              std::string(protocol::to_string(decided->seam)) + " seam; the call did not run. Reason: " + deny.reason;
    // What the vendor then wrote in the call's place (Claude: the refusal as the model saw it).
    mh["vendor_result"] = last ? json::value(without(payload_object(*last, false), {"call_id"})) : json::value(nullptr);
  } else if (kind == "allow" || kind == "replace") {
    mh["outcome"] = last ? "ran" : "no_result";
    mh["ran"] = last ? json::value(true) : json::value(nullptr);
    from_result();
  } else if (kind == "abstain") {
    // metaharness left the call to the vendor's own rules: whatever the vendor recorded.
    mh["outcome"] = "vendor";
    bool refused = vendor_denied_.count(id) > 0;
    mh["ran"] = refused ? json::value(false) : json::value(nullptr);
    mh["vendor_denied"] = refused;
    from_result();
  } else {
    mh["outcome"] = "undecided";  // no tool.decided in the stream (e.g. a translated transcript)
    mh["ran"] = nullptr;
    from_result();
  }
  if (c.results.size() > 1) {
    json::array earlier;  // the last result is the call's outcome; the ones it superseded stay
    for (std::size_t i = 0; i + 1 < c.results.size(); ++i)
      earlier.push_back(without(payload_object(*c.results[i], false), {"call_id"}));
    mh["earlier_results"] = std::move(earlier);
  }

  json::object o;
  o["source_call_id"] = id;
  o["content"] = std::move(content);
  json::array refs;
  for (const auto& agent : sub_order_) {
    auto sp = spawner_.find(agent);
    if (sp != spawner_.end() && sp->second == id) refs.push_back(subagent_ref(agent));
  }
  if (!refs.empty()) o["subagent_trajectory_ref"] = std::move(refs);
  o["extra"] = json::object{{"metaharness", std::move(mh)}};
  return o;
}

json::object Builder::subagent_ref(const std::string& agent) const {
  json::object ref;
  ref["trajectory_id"] = agent;
  ref["extra"] = json::object{{"metaharness", json::object{{"agent", agent}}}};
  return ref;
}

json::object Builder::step(const StepDraft& s, std::size_t step_id) const {
  json::object o;
  o["step_id"] = step_id;
  if (s.timestamp) o["timestamp"] = *s.timestamp;
  o["source"] = s.source;
  bool agent = s.source == "agent";
  if (agent && s.usage)
    if (auto model = std::get<ev::Usage>(s.usage->payload).model) o["model_name"] = *model;
  o["message"] = message_of(s);
  if (agent && !s.thinking.empty()) {
    std::string joined;
    for (const auto& t : s.thinking)
      joined += (joined.empty() ? "" : "\n\n") + t;
    o["reasoning_content"] = joined;
  }
  json::array results;
  if (!s.call_ids.empty()) {
    json::array calls;
    for (const auto& id : s.call_ids) {
      calls.push_back(tool_call(id));
      results.push_back(observation_result(id));
    }
    o["tool_calls"] = std::move(calls);
  }
  for (const auto& agent_id : s.delegated)
    results.push_back(
        json::object{{"content", nullptr}, {"subagent_trajectory_ref", json::array{subagent_ref(agent_id)}}});
  if (!results.empty()) o["observation"] = json::object{{"results", std::move(results)}};
  if (agent && s.usage) o["metrics"] = metrics(*s.usage);
  json::object mh = s.extra;
  mh["seqs"] = s.seqs;
  mh["turn"] = s.turn ? json::value(*s.turn) : json::value(nullptr);
  if (s.request_id) mh["request_id"] = *s.request_id;
  if (!s.cut.empty()) mh["cut"] = s.cut;
  o["extra"] = json::object{{"metaharness", std::move(mh)}};
  return o;
}

// The draft that holds the call which spawned this sub-agent embeds it (a path-less reference
// resolves within the trajectory that makes it); one nothing spawned sits in the main one.
const Draft* Builder::parent_of(const std::string& agent) const {
  auto sp = spawner_.find(agent);
  if (sp == spawner_.end()) return &main_;
  auto call = calls_.find(sp->second);
  return call == calls_.end() ? &main_ : call->second.owner;
}

json::object Builder::render(const Draft& d) const {
  json::object t;
  t["schema_version"] = kSchemaVersion;
  std::optional<std::string> session;
  if (started_) session = std::get<ev::SessionStarted>(started_->payload).session_id;
  t["session_id"] = session.value_or(run_id_);
  if (d.agent_id.empty()) {
    if (!run_id_.empty()) t["trajectory_id"] = run_id_;
    t["agent"] = agent_object(std::nullopt);
  } else {
    t["trajectory_id"] = d.agent_id;
    t["agent"] = agent_object(d.agent_id);
  }
  json::array steps;
  for (std::size_t i = 0; i < d.steps.size(); ++i)
    steps.push_back(step(d.steps[i], i + 1));
  t["steps"] = std::move(steps);
  json::array children;
  for (const auto& agent : sub_order_)
    if (parent_of(agent) == &d) children.push_back(render(subs_.at(agent)));
  if (!children.empty()) t["subagent_trajectories"] = std::move(children);
  return t;
}

}  // namespace mh::cli::atif::detail
