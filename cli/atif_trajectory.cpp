// The event stream -> ATIF mapping (docs/atif.md has it as a table). Two passes: the first finds
// the run's records and which call spawned each sub-agent; the second walks the stream in order,
// building one draft trajectory for the main agent and one per sub-agent, and the render turns
// the drafts into the document.
#include "cli/atif_trajectory.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace mh::cli::atif {

namespace {

namespace json = boost::json;
namespace ev = protocol::ev;
using protocol::Event;

// How a vendor counts prompt tokens. ATIF's prompt_tokens includes cached tokens: Anthropic's
// input_tokens leaves out cache reads and cache writes, OpenAI's (Codex) includes cache reads.
enum class TokenWire { anthropic, openai, unknown };

json::array cut_array(const std::vector<protocol::CutField>& cut) {
  json::array out;
  for (const auto& c : cut)
    out.push_back(json::object{{"field", c.field},
                               {"pointer", c.pointer},
                               {"form", c.form},
                               {"bytes", c.bytes},
                               {"kept", c.kept},
                               {"digest", c.digest}});
  return out;
}

// The event's payload exactly as the wire writes it (field order kept), with its seq first:
// what lands in an extra is the record itself, not our paraphrase of it.
json::object payload_object(const Event& e, bool with_name) {
  std::string text;
  protocol::JsonWriter w(text);
  w.begin_object();
  w.key("seq");
  w.uinteger(e.seq);
  if (with_name) w.field("event", protocol::event_name(e.payload));
  protocol::write_payload(w, e.payload);
  w.end_object();
  auto parsed = protocol::parse_json(text);
  json::object o = parsed && parsed->is_object() ? std::move(parsed->as_object()) : json::object{};
  if (!e.cut.empty()) o["cut"] = cut_array(e.cut);
  return o;
}

// A copy without these keys, in the same order (boost::json's erase moves the last member into
// the gap, and the wire's field order is part of what the extras show).
json::object without(const json::object& o, std::initializer_list<std::string_view> keys) {
  json::object out;
  for (const auto& kv : o)
    if (std::find(keys.begin(), keys.end(), kv.key()) == keys.end()) out[kv.key()] = kv.value();
  return out;
}

bool digits(std::string_view s, std::size_t from, std::size_t n) {
  if (from + n > s.size()) return false;
  for (std::size_t i = from; i < from + n; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

// RFC 3339 date-time (what ATIF's ISO 8601 timestamps are in practice): a vendor's `at` that is
// anything else is not copied into `timestamp`, where a reader would reject the whole document.
bool rfc3339(std::string_view s) {
  if (!digits(s, 0, 4) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2) || s[7] != '-' || !digits(s, 8, 2) ||
      s[10] != 'T' || !digits(s, 11, 2) || s[13] != ':' || !digits(s, 14, 2) || s[16] != ':' || !digits(s, 17, 2))
    return false;
  std::size_t i = 19;
  if (i < s.size() && s[i] == '.') {
    std::size_t start = ++i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9')
      ++i;
    if (i == start) return false;
  }
  if (i < s.size() && s[i] == 'Z') return i + 1 == s.size();
  return i + 6 == s.size() && (s[i] == '+' || s[i] == '-') && digits(s, i + 1, 2) && s[i + 3] == ':' &&
         digits(s, i + 4, 2);
}

// When it happened: metaharness's own clock on every live line (one clock for the whole run),
// else the vendor's.
std::optional<std::string> time_of(const Event& e) {
  if (e.recorded_at && rfc3339(*e.recorded_at)) return e.recorded_at;
  if (e.at && rfc3339(*e.at)) return e.at;
  return std::nullopt;
}

std::string agent_name(std::string_view adapter) {
  if (adapter == "claude") return "claude-code";  // Harbor's own names for these agents
  if (adapter == "codex") return "codex";
  return adapter.empty() ? "unknown" : std::string(adapter);
}

const json::value* member(const json::value& v, std::string_view key) {
  return v.is_object() ? v.as_object().if_contains(key) : nullptr;
}

std::optional<std::string> string_member(const json::value& v, std::string_view key) {
  const json::value* m = member(v, key);
  if (m && m->is_string()) return std::string(m->as_string());
  return std::nullopt;
}

std::string who_decided(protocol::DecidedBy by) {
  switch (by) {
    case protocol::DecidedBy::embedder:
      return "the embedder";
    case protocol::DecidedBy::frame:
      return "the frame in force";
    case protocol::DecidedBy::deadline:
      return "the decision deadline";
    case protocol::DecidedBy::adapter:
      return "the adapter";
    case protocol::DecidedBy::observe:
      return "observe mode";
  }
  return "metaharness";
}

struct StepDraft {
  std::string source;  // user / system / agent
  std::vector<std::string> texts;
  std::vector<std::string> thinking;
  std::vector<std::string> call_ids;
  std::optional<std::string> request_id;
  const Event* usage = nullptr;
  std::optional<std::string> timestamp;
  json::array seqs;
  std::optional<std::uint32_t> turn;
  json::object extra;
  json::array cut;
  bool closed = false;                 // takes no more content: a result came, or a boundary
  std::vector<std::string> delegated;  // a system step announcing sub-agents no known call spawned
};

struct Draft {
  std::string agent_id;  // empty: the main agent
  std::vector<StepDraft> steps;
  std::optional<std::size_t> open;  // the agent step that may still take content
};

struct CallState {
  Draft* owner = nullptr;
  std::size_t step = 0;
  const Event* requested = nullptr;
  std::vector<const Event*> presentations;  // the same call_id presented again
  std::vector<const Event*> decisions;
  std::vector<const Event*> results;
};

class Builder {
 public:
  Builder(const std::vector<Event>& events, const Context& ctx) : events_(events), ctx_(ctx) {}

  json::object build() {
    scan();
    if (prompt_step_) {
      StepDraft s;
      s.source = "user";
      s.texts.push_back(*prompt_);
      s.closed = true;
      s.extra["from"] = "spec.prompt";
      main_.steps.push_back(std::move(s));
    }
    for (const auto& e : events_)
      walk(e);
    if (main_.steps.empty()) {
      // ATIF needs one step; a run refused at start, or cut off before the vendor said anything,
      // has none of its own. Said so, not invented.
      StepDraft s;
      s.source = "system";
      s.texts.push_back(
          "The stream records no conversation: nothing was prompted, said or called "
          "(extra.metaharness holds what it does record).");
      s.closed = true;
      main_.steps.push_back(std::move(s));
    }
    return render_main();
  }

 private:
  // ---- pass 1 -------------------------------------------------------------------------------

  void scan() {
    std::map<std::string, const ev::ToolRequested*> first_request;
    std::vector<const Event*> results;
    for (const auto& e : events_) {
      if (auto* s = std::get_if<ev::SessionStarted>(&e.payload); s && !started_) {
        started_ = &e;
        adapter_ = s->adapter;
      } else if (std::holds_alternative<ev::SessionEnded>(e.payload) && !ended_) {
        ended_ = &e;
      } else if (std::holds_alternative<ev::StreamClosed>(e.payload)) {
        ++closed_count_;
        if (!closed_) closed_ = &e;
      } else if (auto* r = std::get_if<ev::ToolRequested>(&e.payload)) {
        first_request.emplace(r->call_id, r);
        if (r->agent && !std::count(agent_order_.begin(), agent_order_.end(), *r->agent))
          agent_order_.push_back(*r->agent);
      } else if (std::holds_alternative<ev::ToolResult>(e.payload)) {
        results.push_back(&e);
      } else if (auto* i = std::get_if<ev::Injection>(&e.payload); i && i->origin == "user") {
        user_injections_.insert(i->text);
      }
    }
    if (run_id_.empty() && !events_.empty()) run_id_ = events_.front().run;
    if (run_id_.empty()) run_id_ = string_member(ctx_.spec, "run_id").value_or("");
    if (adapter_.empty()) adapter_ = string_member(ctx_.spec, "adapter").value_or("");
    wire_ = adapter_ == "claude" ? TokenWire::anthropic : adapter_ == "codex" ? TokenWire::openai : TokenWire::unknown;
    prompt_ = string_member(ctx_.spec, "prompt");
    // A prompt the vendor echoed as its own user record is that record's step, not a second one.
    prompt_step_ = prompt_ && !prompt_->empty() && !user_injections_.count(*prompt_);
    if (ended_)
      for (const auto& d : std::get<ev::SessionEnded>(ended_->payload)
                               .permission_denials.value_or(std::vector<protocol::PermissionDenial>{}))
        if (d.tool_use_id) vendor_denied_.insert(*d.tool_use_id);

    // Which call spawned each sub-agent: Claude names the Agent call itself (agent == call_id);
    // Codex names the sub-agent's thread, which the spawn's result lists in receiverThreadIds.
    for (const auto& agent : agent_order_) {
      if (first_request.count(agent)) {
        spawner_[agent] = agent;
        continue;
      }
      for (const Event* e : results) {
        const auto& r = std::get<ev::ToolResult>(e->payload);
        const json::value* ids = member(r.content, "receiverThreadIds");
        if (!ids || !ids->is_array() || !first_request.count(r.call_id)) continue;
        for (const auto& id : ids->as_array())
          if (id.is_string() && id.as_string() == agent) spawner_[agent] = r.call_id;
        if (spawner_.count(agent)) break;
      }
    }
    // The task a spawning call gave (Claude's `prompt`, Codex's `message`): the sub-agent's user
    // record carries exactly that text, which is how it is told from the main agent's.
    for (const auto& [agent, call] : spawner_) {
      const ev::ToolRequested* r = first_request.at(call);
      for (auto key : {"prompt", "message"})
        if (auto task = string_member(r->input, key)) tasks_[*task].push_back(agent);
    }
  }

  // ---- pass 2 -------------------------------------------------------------------------------

  void walk(const Event& e) {
    std::visit(
        [&](const auto& p) {
          using T = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<T, ev::SessionStarted>) {
            if (&e != started_) control(e);
          } else if constexpr (std::is_same_v<T, ev::SessionEnded>) {
            if (&e != ended_) control(e);
          } else if constexpr (std::is_same_v<T, ev::StreamClosed>) {
            if (&e != closed_) control(e);
          } else if constexpr (std::is_same_v<T, ev::Text>) {
            content(e, p.text, p.request_id, false);
          } else if constexpr (std::is_same_v<T, ev::Thinking>) {
            content(e, p.text, p.request_id, true);
          } else if constexpr (std::is_same_v<T, ev::Injection>) {
            injection(e, p);
          } else if constexpr (std::is_same_v<T, ev::ToolRequested>) {
            requested(e, p);
          } else if constexpr (std::is_same_v<T, ev::ToolDecided>) {
            attach(e, p.call_id, &CallState::decisions);
          } else if constexpr (std::is_same_v<T, ev::ToolResult>) {
            result(e, p);
          } else if constexpr (std::is_same_v<T, ev::Usage>) {
            usage(e, p);
          } else if constexpr (std::is_same_v<T, ev::TurnStarted>) {
            turn_ = p.turn;
            close_all();
            control(e);
          } else if constexpr (std::is_same_v<T, ev::TurnEnded>) {
            close_all();
            control(e);
          } else {
            // step.*, thinking.estimate, rate_limit, command.result, warning, opaque, auth.expired
            control(e);
          }
        },
        e.payload);
  }

  void control(const Event& e) {
    json::object o = payload_object(e, true);
    json::object item;
    item["after_step_id"] = main_.steps.size();
    if (e.at) item["at"] = *e.at;
    if (e.recorded_at) item["recorded_at"] = *e.recorded_at;
    for (auto& kv : o)
      item[kv.key()] = kv.value();
    control_.push_back(std::move(item));
  }

  Draft& draft_of(const std::optional<std::string>& agent) {
    if (!agent) return main_;
    auto [it, created] = subs_.try_emplace(*agent);
    if (created) {
      it->second.agent_id = *agent;
      sub_order_.push_back(*agent);
      // Nothing in the stream spawned it: the main trajectory says where it began.
      if (!spawner_.count(*agent)) {
        close(main_);
        StepDraft s;
        s.source = "system";
        s.texts.push_back("A sub-agent (" + *agent + ") started; no call in this stream is known to have spawned it.");
        s.delegated.push_back(*agent);
        s.closed = true;
        s.turn = turn_;
        main_.steps.push_back(std::move(s));
      }
    }
    return it->second;
  }

  static void close(Draft& d) {
    if (d.open) d.steps[*d.open].closed = true;
    d.open.reset();
  }
  void close_all() {
    close(main_);
    for (auto& kv : subs_)
      close(kv.second);
  }

  StepDraft& new_step(Draft& d, std::string source, const Event& e) {
    StepDraft s;
    s.source = std::move(source);
    s.timestamp = time_of(e);
    s.turn = turn_;
    d.steps.push_back(std::move(s));
    return d.steps.back();
  }

  void touched(Draft& d, std::size_t index) {
    d.open = index;
    last_draft_ = &d;
    last_step_ = index;
  }

  void content(const Event& e, const std::string& text, const std::optional<std::string>& rid, bool thinking) {
    // The stream attributes only tool calls to a sub-agent: text and thinking are the main
    // agent's as far as it says (docs/atif.md).
    Draft& d = main_;
    StepDraft* s = d.open ? &d.steps[*d.open] : nullptr;
    bool same_request = s && rid && s->request_id && *rid == *s->request_id;
    bool fits = s && !s->closed && s->source == "agent" && (!rid || !s->request_id || same_request) &&
                (s->call_ids.empty() || same_request);
    if (!fits) s = &new_step(d, "agent", e);
    (thinking ? s->thinking : s->texts).push_back(text);
    if (rid && !s->request_id) s->request_id = rid;
    s->seqs.push_back(e.seq);
    for (auto& c : cut_array(e.cut))
      s->cut.push_back(c);
    touched(d, static_cast<std::size_t>(s - d.steps.data()));
  }

  void injection(const Event& e, const ev::Injection& p) {
    Draft* d = &main_;
    if (p.origin == "subagent") {
      auto it = tasks_.find(p.text);
      if (it != tasks_.end() && it->second.size() == 1) d = &draft_of(it->second.front());
    }
    close(*d);
    // What the embedder or the user said is the user's turn; what the harness put there (a frame,
    // a synthetic record, a sub-agent's task seen from its parent) is the system's. In a
    // sub-agent's own trajectory its task is its user turn.
    bool user = p.origin == "user" || p.origin == "message.inject" || p.origin == "steer" ||
                (p.origin == "subagent" && d != &main_);
    StepDraft& s = new_step(*d, user ? "user" : "system", e);
    s.texts.push_back(p.text);
    s.extra["origin"] = p.origin ? json::value(*p.origin) : json::value(nullptr);
    s.seqs.push_back(e.seq);
    s.cut = cut_array(e.cut);
    s.closed = true;
  }

  void requested(const Event& e, const ev::ToolRequested& p) {
    auto known = calls_.find(p.call_id);
    if (known != calls_.end()) {
      known->second.presentations.push_back(&e);
      return;
    }
    Draft& d = draft_of(p.agent);
    StepDraft* s = d.open ? &d.steps[*d.open] : nullptr;
    if (!s || s->closed || s->source != "agent") s = &new_step(d, "agent", e);
    s->call_ids.push_back(p.call_id);
    std::size_t index = static_cast<std::size_t>(s - d.steps.data());
    calls_[p.call_id] = CallState{&d, index, &e, {}, {}, {}};
    touched(d, index);
  }

  void attach(const Event& e, const std::string& call_id, std::vector<const Event*> CallState::*list) {
    auto it = calls_.find(call_id);
    if (it == calls_.end()) return control(e);  // a call this stream never presented
    (it->second.*list).push_back(&e);
  }

  void result(const Event& e, const ev::ToolResult& p) {
    auto it = calls_.find(p.call_id);
    if (it == calls_.end()) return control(e);
    it->second.results.push_back(&e);
    // The model's next words come after it has seen this: a new inference, a new step.
    Draft& d = *it->second.owner;
    d.steps[it->second.step].closed = true;
    if (d.open == it->second.step) d.open.reset();
  }

  void usage(const Event& e, const ev::Usage& p) {
    usage_events_.push_back(&e);
    usage_turns_.push_back(turn_);
    // A turn's own totals (Claude's, at its end) belong to no one step: they stay with the
    // stream's events and replace that turn's request figures in the totals.
    if (p.scope == "turn") return control(e);
    // A vendor reports usage right after (Codex: once the response is done, after its calls ran)
    // the content of the inference it paid for: the step that content went to.
    if (last_draft_) {
      StepDraft& s = last_draft_->steps[last_step_];
      bool fits = !s.usage && (!p.request_id || !s.request_id || *p.request_id == *s.request_id);
      if (fits) {
        s.usage = &e;
        if (p.request_id && !s.request_id) s.request_id = p.request_id;
        ++usage_in_steps_;
        // Codex reports a response's usage once it is complete: what follows is another one.
        // (Claude reports it with the message's first block; the rest of the message follows.)
        if (wire_ == TokenWire::openai) {
          s.closed = true;
          if (last_draft_->open == last_step_) last_draft_->open.reset();
        }
        return;
      }
    }
    control(e);
  }

  // ---- render -------------------------------------------------------------------------------

  std::optional<std::uint64_t> prompt_tokens(const protocol::TokenUsage& u) const {
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

  static json::value number_or_null(const std::optional<std::uint64_t>& v) {
    return v ? json::value(*v) : json::value(nullptr);
  }
  static json::value real_or_null(const std::optional<double>& v) { return v ? json::value(*v) : json::value(nullptr); }

  json::object metrics(const Event& e) const {
    const auto& u = std::get<ev::Usage>(e.payload).usage;
    json::object m;
    m["prompt_tokens"] = number_or_null(prompt_tokens(u));
    m["completion_tokens"] = number_or_null(u.output_tokens);
    m["cached_tokens"] = number_or_null(u.cache_read_input_tokens);
    m["cost_usd"] = real_or_null(u.cost_usd);  // the vendor's price or unknown, never zero
    m["extra"] = json::object{{"metaharness", payload_object(e, false)}};
    return m;
  }

  json::object agent_object(const std::optional<std::string>& agent_id) const {
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

  static json::value message_of(const StepDraft& s) {
    if (s.texts.empty()) return "";
    if (s.texts.size() == 1) return json::value(s.texts.front());
    json::array parts;  // several text blocks: kept apart, as the vendor wrote them
    for (const auto& t : s.texts)
      parts.push_back(json::object{{"type", "text"}, {"text", t}});
    return parts;
  }

  static std::pair<json::value, std::string> content_of(const ev::ToolResult& r) {
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

  static json::object decided_object(const Event& e) { return without(payload_object(e, false), {"call_id"}); }

  json::object tool_call(const std::string& id) const {
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

  json::object observation_result(const std::string& id) const {
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
      mh["vendor_result"] =
          last ? json::value(without(payload_object(*last, false), {"call_id"})) : json::value(nullptr);
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

  json::object subagent_ref(const std::string& agent) const {
    json::object ref;
    ref["trajectory_id"] = agent;
    ref["extra"] = json::object{{"metaharness", json::object{{"agent", agent}}}};
    return ref;
  }

  json::object step(const StepDraft& s, std::size_t step_id) const {
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
  const Draft* parent_of(const std::string& agent) const {
    auto sp = spawner_.find(agent);
    if (sp == spawner_.end()) return &main_;
    auto call = calls_.find(sp->second);
    return call == calls_.end() ? &main_ : call->second.owner;
  }

  json::object render(const Draft& d) const {
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

  std::string stream_status() const {
    if (closed_count_ == 0) return "truncated";
    if (closed_count_ > 1 || closed_ != &events_.back()) return "inconsistent";
    for (std::size_t i = 0; i < events_.size(); ++i)
      if (events_[i].seq != i + 1) return "inconsistent";
    return std::get<ev::StreamClosed>(closed_->payload).events + 1 == events_.size() ? "complete" : "inconsistent";
  }

  // A sum over every request: one request of unknown size makes it unknown, and no request at
  // all is unknown too, never zero.
  struct Sum {
    double value = 0;
    bool known = true;
    void add(const std::optional<double>& v) {
      if (v)
        value += *v;
      else
        known = false;
    }
    json::value json(bool integral, bool any) const {
      if (!known || !any) return nullptr;
      return integral ? json::value(static_cast<std::uint64_t>(value)) : json::value(value);
    }
  };
  static std::optional<double> as_double(const std::optional<std::uint64_t>& v) {
    return v ? std::optional<double>(static_cast<double>(*v)) : std::nullopt;
  }

  json::object final_metrics() const {
    Sum prompt, completion, cached, cost;
    std::set<std::optional<std::uint32_t>> turns_with_totals;
    for (std::size_t i = 0; i < usage_events_.size(); ++i)
      if (std::get<ev::Usage>(usage_events_[i]->payload).scope == "turn") turns_with_totals.insert(usage_turns_[i]);
    for (std::size_t i = 0; i < usage_events_.size(); ++i) {
      const auto& p = std::get<ev::Usage>(usage_events_[i]->payload);
      if (p.scope != "turn" && turns_with_totals.count(usage_turns_[i])) continue;  // counted by its turn's totals
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
    if (ended && ended->total_cost_usd) {
      total_cost = *ended->total_cost_usd;  // the vendor's own figure for the session
      cost_source = "session.ended.total_cost_usd";
    } else if (any && cost.known) {
      total_cost = cost.value;
      cost_source = "usage.cost_usd";
    }
    json::object mh{
        {"usage_events", usage_events_.size()}, {"usage_in_steps", usage_in_steps_}, {"cost_source", cost_source}};
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

  json::object render_main() const {
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

  const std::vector<Event>& events_;
  const Context& ctx_;

  const Event* started_ = nullptr;
  const Event* ended_ = nullptr;
  const Event* closed_ = nullptr;
  std::size_t closed_count_ = 0;
  std::string run_id_;
  std::string adapter_;
  TokenWire wire_ = TokenWire::unknown;
  std::optional<std::string> prompt_;
  bool prompt_step_ = false;
  std::set<std::string> user_injections_;
  std::set<std::string> vendor_denied_;
  std::vector<std::string> agent_order_;
  std::map<std::string, std::string> spawner_;             // sub-agent -> the call that spawned it
  std::map<std::string, std::vector<std::string>> tasks_;  // task text -> sub-agents given it

  Draft main_;
  std::map<std::string, Draft> subs_;  // node-stable: CallState points at drafts
  std::vector<std::string> sub_order_;
  std::map<std::string, CallState> calls_;
  std::optional<std::uint32_t> turn_;
  Draft* last_draft_ = nullptr;
  std::size_t last_step_ = 0;
  std::vector<const Event*> usage_events_;
  std::vector<std::optional<std::uint32_t>> usage_turns_;  // the turn each usage came in
  std::size_t usage_in_steps_ = 0;
  json::array control_;
};

}  // namespace

json::object trajectory(const std::vector<protocol::Event>& events, const Context& ctx) {
  return Builder(events, ctx).build();
}

}  // namespace mh::cli::atif
