// The event stream -> ATIF mapping (docs/atif.md has it as a table). Two passes: the first finds
// the run's records and which call spawned each sub-agent; the second walks the stream in order,
// building one draft trajectory for the main agent and one per sub-agent, and the render turns
// the drafts into the document.
// This file holds the passes; the render is atif_steps.cpp and atif_final.cpp (atif_builder.hpp).
#include "cli/atif_trajectory.hpp"

#include <algorithm>

#include "adapters/vendor_descriptor.hpp"
#include "cli/atif_builder.hpp"

namespace mh::cli::atif::detail {

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

namespace {

bool digits(std::string_view s, std::size_t from, std::size_t n) {
  if (from + n > s.size()) return false;
  for (std::size_t i = from; i < from + n; ++i)
    if (s[i] < '0' || s[i] > '9') return false;
  return true;
}

}  // namespace

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
  if (const auto* vendor = adapters::find_vendor(adapter)) return std::string(vendor->atif_agent_name);
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

json::object Builder::build() {
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

void Builder::scan() {
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
  wire_ = TokenWire::unknown;
  if (const auto* vendor = adapters::find_vendor(adapter_))
    wire_ = vendor->usage_shape == adapters::UsageShape::anthropic ? TokenWire::anthropic
            : vendor->usage_shape == adapters::UsageShape::openai  ? TokenWire::openai
                                                                   : TokenWire::unknown;
  prompt_ = string_member(ctx_.spec, "prompt");
  // A prompt the vendor echoed as its own user record is that record's step, not a second one.
  prompt_step_ = prompt_ && !prompt_->empty() && !user_injections_.count(*prompt_);
  if (ended_)
    for (const auto& d : std::get<ev::SessionEnded>(ended_->payload)
                             .permission_denials.value_or(std::vector<protocol::PermissionDenial>{}))
      if (d.tool_use_id) vendor_denied_.insert(*d.tool_use_id);

  // Which call spawned each sub-agent: a vendor whose sub-agent is a tool call names that call
  // (agent == call_id); one whose sub-agent is a thread names the thread, which the spawn's result
  // lists in receiverThreadIds.
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
  // The task a spawning call gave (its `prompt` or its `message`, by vendor): the sub-agent's user
  // record carries exactly that text, which is how it is told from the main agent's.
  for (const auto& [agent, call] : spawner_) {
    const ev::ToolRequested* r = first_request.at(call);
    for (auto key : {"prompt", "message"})
      if (auto task = string_member(r->input, key)) tasks_[*task].push_back(agent);
  }
}

void Builder::walk(const Event& e) {
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

void Builder::control(const Event& e) {
  json::object o = payload_object(e, true);
  json::object item;
  item["after_step_id"] = main_.steps.size();
  if (e.at) item["at"] = *e.at;
  if (e.recorded_at) item["recorded_at"] = *e.recorded_at;
  for (auto& kv : o)
    item[kv.key()] = kv.value();
  control_.push_back(std::move(item));
}

Draft& Builder::draft_of(const std::optional<std::string>& agent) {
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

void Builder::close(Draft& d) {
  if (d.open) d.steps[*d.open].closed = true;
  d.open.reset();
}

void Builder::close_all() {
  close(main_);
  for (auto& kv : subs_)
    close(kv.second);
}

StepDraft& Builder::new_step(Draft& d, std::string source, const Event& e) {
  StepDraft s;
  s.source = std::move(source);
  s.timestamp = time_of(e);
  s.turn = turn_;
  d.steps.push_back(std::move(s));
  return d.steps.back();
}

void Builder::touched(Draft& d, std::size_t index) {
  d.open = index;
  last_draft_ = &d;
  last_step_ = index;
}

void Builder::content(const Event& e, const std::string& text, const std::optional<std::string>& rid, bool thinking) {
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

void Builder::injection(const Event& e, const ev::Injection& p) {
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

void Builder::requested(const Event& e, const ev::ToolRequested& p) {
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

void Builder::attach(const Event& e, const std::string& call_id, std::vector<const Event*> CallState::*list) {
  auto it = calls_.find(call_id);
  if (it == calls_.end()) return control(e);  // a call this stream never presented
  (it->second.*list).push_back(&e);
}

void Builder::result(const Event& e, const ev::ToolResult& p) {
  auto it = calls_.find(p.call_id);
  if (it == calls_.end()) return control(e);
  it->second.results.push_back(&e);
  // The model's next words come after it has seen this: a new inference, a new step.
  Draft& d = *it->second.owner;
  d.steps[it->second.step].closed = true;
  if (d.open == it->second.step) d.open.reset();
}

void Builder::usage(const Event& e, const ev::Usage& p) {
  usage_events_.push_back(&e);
  usage_turns_.push_back(turn_);
  // A turn's own totals (reported at its end) belong to no one step: they stay with the
  // stream's events and replace that turn's request figures in the totals.
  if (p.scope == "turn") return control(e);
  // A vendor reports usage right after the content of the inference it paid for (on the OpenAI
  // wire, once the response is done, after its calls ran): the step that content went to.
  if (last_draft_) {
    StepDraft& s = last_draft_->steps[last_step_];
    bool fits = !s.usage && (!p.request_id || !s.request_id || *p.request_id == *s.request_id);
    if (fits) {
      s.usage = &e;
      if (p.request_id && !s.request_id) s.request_id = p.request_id;
      ++usage_in_steps_;
      // On the OpenAI wire a response's usage comes once it is complete: what follows is another
      // one. (On the Anthropic wire it comes with the message's first block; the rest follows.)
      if (wire_ == TokenWire::openai) {
        s.closed = true;
        if (last_draft_->open == last_step_) last_draft_->open.reset();
      }
      return;
    }
  }
  control(e);
}

}  // namespace mh::cli::atif::detail

namespace mh::cli::atif {

boost::json::object trajectory(const std::vector<protocol::Event>& events, const Context& ctx) {
  return detail::Builder(events, ctx).build();
}

}  // namespace mh::cli::atif
