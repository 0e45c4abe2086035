#include "protocol/events.hpp"

#include <cstdint>

#include "protocol/reader.hpp"

namespace mh::protocol {

namespace {

// ---------------------------------------------------------------------------------------------
// Writers, one per event, fields in serialization order
// ---------------------------------------------------------------------------------------------

template <class T, class Fn>
void write_list(JsonWriter& w, std::string_view k, const std::optional<std::vector<T>>& list, Fn&& write_one) {
  w.key(k);
  if (!list) {
    w.null();
    return;
  }
  w.begin_array();
  for (const auto& item : *list)
    write_one(item);
  w.end_array();
}

void write_fields(JsonWriter& w, const ev::SessionStarted& e) {
  w.field("adapter", e.adapter);
  w.field("adapter_class", to_string(e.adapter_class));
  w.field("harness_version", e.harness_version);
  w.field("session_id", e.session_id);
  w.field("model", e.model);
  w.field("permission_mode", e.permission_mode);
  w.field("credential_source", e.credential_source);
  w.field("output_style", e.output_style);
  w.field("cwd", e.cwd);
  w.field_strings("offered_tools", e.offered_tools);
  if (e.available_operations) w.field_strings("available_operations", e.available_operations);
  write_list(w, "withheld", e.withheld, [&](const WithheldTool& t) {
    w.begin_object();
    w.field("tool", t.tool);
    w.field("reason", t.reason);
    w.end_object();
  });
  w.field_strings("slash_commands", e.slash_commands);
  w.field_strings("skills", e.skills);
  w.field_strings("agents", e.agents);
  write_list(w, "plugins", e.plugins, [&](const PluginRef& p) {
    w.begin_object();
    w.field("name", p.name);
    w.field("source", p.source);
    w.field("version", p.version);
    w.end_object();
  });
  write_list(w, "mcp_servers", e.mcp_servers, [&](const McpServerRef& m) {
    w.begin_object();
    w.field("name", m.name);
    w.field("status", m.status);
    w.end_object();
  });
  w.field("inputs_digest", e.inputs_digest);
  w.key("transcript");
  write(w, e.transcript);
  w.key("hermetic");
  write(w, e.hermetic);
}

void write_fields(JsonWriter& w, const ev::SessionEnded& e) {
  w.key("final_answer");
  if (e.final_answer) {
    w.begin_object();
    w.field("text", e.final_answer->text);
    w.field("turn_id", e.final_answer->turn_id);
    w.end_object();
  } else {
    w.null();
  }
  write_list(w, "observed_models", e.observed_models, [&](const ObservedModel& m) {
    w.begin_object();
    w.key("turn");
    w.uinteger(m.turn);
    w.field("turn_id", m.turn_id);
    w.field("model", m.model);
    w.field("scope", m.scope);
    w.end_object();
  });
  w.field_bool("is_error", e.is_error);
  w.field("subtype", e.subtype);
  w.field("stop_reason", e.stop_reason);
  w.field("terminal_reason", e.terminal_reason);
  w.field("api_error_status", e.api_error_status);
  w.field_u64("num_turns", e.num_turns);
  w.field_u64("duration_ms", e.duration_ms);
  w.field_u64("duration_api_ms", e.duration_api_ms);
  w.field_u64("ttft_ms", e.ttft_ms);
  w.field_u64("time_to_request_ms", e.time_to_request_ms);
  w.field_f64("total_cost_usd", e.total_cost_usd);
  write_list(w, "permission_denials", e.permission_denials, [&](const PermissionDenial& d) { write(w, d); });
  w.field_u64("subagents_spawned", e.subagents_spawned);
  w.key("usage");
  if (e.usage)
    write(w, *e.usage);
  else
    w.null();
  w.key("model_usage");
  if (e.model_usage) {
    w.begin_object();
    for (const auto& [model, usage] : *e.model_usage) {
      w.key(model);
      write(w, usage);
    }
    w.end_object();
  } else {
    w.null();
  }
  w.key("census");
  write(w, e.census);
}

void write_fields(JsonWriter& w, const ev::StepEntered& e) {
  w.key("step");
  write(w, e.step);
  w.field("frame_digest", e.frame_digest);
}
void write_fields(JsonWriter& w, const ev::StepLeft& e) {
  w.key("step");
  write(w, e.step);
  w.key("outcome");
  write(w, e.outcome);
}
void write_fields(JsonWriter& w, const ev::TurnStarted& e) {
  w.key("turn");
  w.uinteger(e.turn);
  w.field("frame_digest", e.frame_digest);
}
void write_fields(JsonWriter& w, const ev::TurnEnded& e) {
  w.key("turn");
  w.uinteger(e.turn);
  w.field("stop_reason", e.stop_reason);
}
void write_fields(JsonWriter& w, const ev::Text& e) {
  w.field("text", e.text);
  w.field("request_id", e.request_id);
}
void write_fields(JsonWriter& w, const ev::Thinking& e) {
  w.field("text", e.text);
  w.field("request_id", e.request_id);
}
void write_fields(JsonWriter& w, const ev::ThinkingEstimate& e) {
  w.key("estimate");
  w.uinteger(e.estimate);
  w.field_i64("delta", e.delta);
}
void write_fields(JsonWriter& w, const ev::Injection& e) {
  w.field("text", e.text);
  w.field("origin", e.origin);
}
void write_fields(JsonWriter& w, const ev::ToolRequested& e) {
  w.field("call_id", e.call_id);
  w.field("name", e.name);
  w.field_json("input", e.input);
  if (!e.operations.empty()) {
    w.key("operations");
    w.strings(e.operations);
  }
  if (!e.subjects.empty()) {
    w.key("subjects");
    w.strings(e.subjects);
  }
  w.field_bool("decision_required", e.decision_required);
  w.field_u64("deadline_ms", e.deadline_ms);
  w.field("seam", to_string(e.seam));
  w.field("agent", e.agent);
  w.field_bool("escalation", e.escalation);
}
void write_fields(JsonWriter& w, const ev::ToolDecided& e) {
  w.field("call_id", e.call_id);
  w.key("decision");
  write_decision(w, e.decision);
  w.field("decided_by", to_string(e.decided_by));
  w.field("seam", to_string(e.seam));
  w.field_u64("latency_ms", e.latency_ms);
  w.key("peer");
  if (e.peer)
    write(w, *e.peer);
  else
    w.null();
  w.key("requested");
  if (e.requested)
    write_decision(w, *e.requested);
  else
    w.null();
}
void write_fields(JsonWriter& w, const ev::ToolResult& e) {
  w.field_i64("exit_code", e.exit_code);
  w.field("outcome_source", e.outcome_source);
  w.field("call_id", e.call_id);
  w.field_bool("is_error", e.is_error);
  w.field_json("content", e.content);
  w.field_u64("bytes", e.bytes);
  w.field_json("tool_use_result", e.tool_use_result);
}
void write_fields(JsonWriter& w, const ev::Usage& e) {
  w.field("request_id", e.request_id);
  w.field("model", e.model);
  w.key("usage");
  write(w, e.usage);
  if (e.scope) w.field("scope", *e.scope);  // additive: omitted when null, so older lines stay byte-identical
}
void write_fields(JsonWriter& w, const ev::RateLimit& e) {
  w.key("info");
  write(w, e.info);
}
void write_fields(JsonWriter& w, const ev::CommandResult& e) {
  w.field("id", e.id);
  w.key("outcome");
  write_outcome(w, e.outcome);
}
void write_fields(JsonWriter& w, const ev::Warning& e) {
  w.field("code", e.code);
  w.field("message", e.message);
}
void write_fields(JsonWriter& w, const ev::Opaque& e) {
  w.field("vendor_type", e.vendor_type);
  w.field("vendor_subtype", e.vendor_subtype);
  w.field("digest", e.digest);
  w.field_u64("source_line", e.source_line);
}
void write_fields(JsonWriter& w, const ev::AuthExpired& e) {
  w.field("credential_source", e.credential_source);
  w.field("detail", e.detail);
  w.field_u64("source_line", e.source_line);
}
void write_fields(JsonWriter& w, const ev::StreamClosed& e) {
  w.key("events");
  w.uinteger(e.events);
  w.field("reason", to_string(e.reason));
  w.field("run_id", e.run_id);
  w.key("process");
  write(w, e.process);
}

// ---------------------------------------------------------------------------------------------
// Readers, one per event. Each fills the struct from a FieldReader; the caller turns a
// FieldReader error into a Malformed refusal.
// ---------------------------------------------------------------------------------------------

template <class T, class Fn>
std::optional<std::vector<T>> read_list(FieldReader& f, std::string_view k, Fn&& read_one) {
  const json::array* a = f.opt_array(k);
  if (!a) return std::nullopt;
  std::vector<T> out;
  out.reserve(a->size());
  for (const auto& item : *a) {
    if (!item.is_object()) {
      f.fail("field \"" + std::string(k) + "\" holds " + describe_json(item) + ", expected objects");
      return std::nullopt;
    }
    FieldReader inner(item.get_object(), std::string(k));
    out.push_back(read_one(inner));
    if (!inner.ok()) {
      f.fail(inner.error());
      return std::nullopt;
    }
  }
  return out;
}

template <class E>
E read_enum(FieldReader& f, std::string_view k) {
  std::string text = f.req_string(k);
  if (!f.ok()) return E{};
  auto e = parse_enum<E>(text);
  if (!e) {
    f.fail("field \"" + std::string(k) + "\" is \"" + excerpt(text, 40) + "\", expected " + vocabulary<E>());
    return E{};
  }
  return *e;
}

// An optional integer that must fit a C int (exit codes, signals, pids): a value that does not
// is refused rather than silently truncated into a different number.
int read_int(FieldReader& f, std::string_view k) {
  auto v = f.opt_i64(k);
  if (!v) return 0;
  if (*v < INT32_MIN || *v > INT32_MAX) {
    f.fail("field \"" + std::string(k) + "\" does not fit 32 bits");
    return 0;
  }
  return static_cast<int>(*v);
}

std::optional<std::string> read_digest(FieldReader& f, std::string_view k) {
  auto d = f.opt_string(k);
  if (d && !is_digest(*d)) f.fail("field \"" + std::string(k) + "\" is not a lowercase hex SHA-256");
  return d;
}

StepRef read_step(FieldReader& f, std::string_view k) {
  const json::object* o = f.req_object(k);
  if (!o) return {};
  std::string error;
  auto s = read_step_ref(json::value(*o), error);
  if (!s) {
    f.fail(error);
    return {};
  }
  return *s;
}

TokenUsage read_usage_object(FieldReader& f, const json::object& o, std::string context) {
  FieldReader inner(o, std::move(context));
  TokenUsage u = read_usage(inner);
  if (!inner.ok()) f.fail(inner.error());
  return u;
}

HermeticAttestation read_attestation(FieldReader& f) {
  HermeticAttestation h;
  const json::object* o = f.req_object("hermetic");
  if (!o) return h;
  FieldReader r(*o, "hermetic");
  h.mode = read_enum<HermeticMode>(r, "mode");
  h.decisions = read_enum<DecisionMode>(r, "decisions");
  h.imposed = read_list<ImposedRow>(r, "imposed", [](FieldReader& i) {
                return ImposedRow{read_enum<HermeticRow>(i, "row"), i.req_string("how")};
              }).value_or(std::vector<ImposedRow>{});
  h.unavailable = read_list<UnavailableRow>(r, "unavailable", [](FieldReader& i) {
                    return UnavailableRow{read_enum<HermeticRow>(i, "row"), i.req_string("why")};
                  }).value_or(std::vector<UnavailableRow>{});
  h.ambient_inputs = r.strings_or_empty("ambient_inputs");
  h.installed_plugins = read_list<InstalledPlugin>(r, "installed_plugins", [](FieldReader& i) {
                          InstalledPlugin p;
                          p.name = i.req_string("name");
                          p.source = i.req_string("source");
                          p.installed_at = i.req_string("installed_at");
                          p.digest = i.req_string("digest");
                          p.loaded_by = i.req_string("loaded_by");
                          return p;
                        }).value_or(std::vector<InstalledPlugin>{});
  h.deny_only = r.opt_bool("deny_only").value_or(false);  // additive: absent in older streams
  if (!r.ok()) f.fail(r.error());
  return h;
}

void read_fields(FieldReader& f, ev::SessionStarted& e) {
  e.adapter = f.req_string("adapter");
  e.adapter_class = read_enum<AdapterClass>(f, "adapter_class");
  e.harness_version = f.opt_string("harness_version");
  e.session_id = f.opt_string("session_id");
  e.model = f.opt_string("model");
  e.permission_mode = f.opt_string("permission_mode");
  e.credential_source = f.opt_string("credential_source");
  e.output_style = f.opt_string("output_style");
  e.cwd = f.opt_string("cwd");
  e.offered_tools = f.opt_strings("offered_tools");
  e.available_operations = f.opt_strings("available_operations");
  e.withheld = read_list<WithheldTool>(f, "withheld", [](FieldReader& i) {
    return WithheldTool{i.req_string("tool"), i.req_string("reason")};
  });
  e.slash_commands = f.opt_strings("slash_commands");
  e.skills = f.opt_strings("skills");
  e.agents = f.opt_strings("agents");
  e.plugins = read_list<PluginRef>(f, "plugins", [](FieldReader& i) {
    return PluginRef{i.opt_string("name"), i.opt_string("source"), i.opt_string("version")};
  });
  e.mcp_servers = read_list<McpServerRef>(f, "mcp_servers", [](FieldReader& i) {
    return McpServerRef{i.opt_string("name"), i.opt_string("status")};
  });
  e.inputs_digest = read_digest(f, "inputs_digest");
  if (const json::object* t = f.req_object("transcript")) {
    FieldReader r(*t, "transcript");
    e.transcript.path = r.opt_string("path");
    e.transcript.digest = read_digest(r, "digest");
    e.transcript.bytes = r.opt_u64("bytes");
    if (!r.ok()) f.fail(r.error());
  }
  e.hermetic = read_attestation(f);
}

void read_fields(FieldReader& f, ev::SessionEnded& e) {
  if (const json::object* fa = f.opt_object("final_answer")) {
    FieldReader r(*fa, "final_answer");
    e.final_answer = FinalAnswer{r.req_string("text"), r.opt_string("turn_id")};
    if (!r.ok()) f.fail(r.error());
  }
  e.observed_models = read_list<ObservedModel>(f, "observed_models", [](FieldReader& i) {
    ObservedModel m;
    m.turn = i.req_u64("turn");
    m.turn_id = i.opt_string("turn_id");
    m.model = i.opt_string("model");
    m.scope = i.req_string("scope");
    return m;
  });
  e.is_error = f.opt_bool("is_error");
  e.subtype = f.opt_string("subtype");
  e.stop_reason = f.opt_string("stop_reason");
  e.terminal_reason = f.opt_string("terminal_reason");
  e.api_error_status = f.opt_string("api_error_status");
  e.num_turns = f.opt_u64("num_turns");
  e.duration_ms = f.opt_u64("duration_ms");
  e.duration_api_ms = f.opt_u64("duration_api_ms");
  e.ttft_ms = f.opt_u64("ttft_ms");
  e.time_to_request_ms = f.opt_u64("time_to_request_ms");
  e.total_cost_usd = f.opt_f64("total_cost_usd");
  e.permission_denials = read_list<PermissionDenial>(f, "permission_denials", [](FieldReader& i) {
    return PermissionDenial{i.req_string("tool_name"), i.opt_string("tool_use_id"), i.any("tool_input")};
  });
  e.subagents_spawned = f.opt_u64("subagents_spawned");
  if (const json::object* u = f.opt_object("usage")) e.usage = read_usage_object(f, *u, "usage");
  if (const json::object* mu = f.opt_object("model_usage")) {
    std::map<std::string, TokenUsage> m;
    for (const auto& kv : *mu) {
      if (!kv.value().is_object()) {
        f.fail("model_usage entry \"" + excerpt(kv.key(), 40) + "\" is not an object");
        break;
      }
      m.emplace(std::string(kv.key()), read_usage_object(f, kv.value().get_object(), "model_usage"));
    }
    e.model_usage = std::move(m);
  }
  if (const json::object* c = f.req_object("census")) {
    FieldReader r(*c, "census");
    e.census.allowed = r.req_u32("allowed");
    e.census.denied = r.req_u32("denied");
    e.census.replaced = r.req_u32("replaced");
    e.census.abstained = r.req_u32("abstained");
    for (std::string_view map_key : {"by_seam", "by_decider"}) {
      auto& target = map_key == "by_seam" ? e.census.by_seam : e.census.by_decider;
      if (const json::object* m = r.req_object(map_key)) {
        for (const auto& kv : *m) {
          FieldReader counts(*m, std::string(map_key));
          target[std::string(kv.key())] = counts.req_u32(kv.key());
          if (!counts.ok()) r.fail(counts.error());
        }
      }
    }
    if (!r.ok()) f.fail(r.error());
  }
}

void read_fields(FieldReader& f, ev::StepEntered& e) {
  e.step = read_step(f, "step");
  e.frame_digest = read_digest(f, "frame_digest");
}
void read_fields(FieldReader& f, ev::StepLeft& e) {
  e.step = read_step(f, "step");
  if (const json::object* o = f.req_object("outcome")) {
    std::string error;
    if (auto outcome = read_step_outcome(*o, error))
      e.outcome = std::move(*outcome);
    else
      f.fail(error);
  }
}
void read_fields(FieldReader& f, ev::TurnStarted& e) {
  e.turn = f.req_u32("turn");
  e.frame_digest = read_digest(f, "frame_digest");
}
void read_fields(FieldReader& f, ev::TurnEnded& e) {
  e.turn = f.req_u32("turn");
  e.stop_reason = f.opt_string("stop_reason");
}
void read_fields(FieldReader& f, ev::Text& e) {
  e.text = f.req_string("text");
  e.request_id = f.opt_string("request_id");
}
void read_fields(FieldReader& f, ev::Thinking& e) {
  e.text = f.req_string("text");
  e.request_id = f.opt_string("request_id");
}
void read_fields(FieldReader& f, ev::ThinkingEstimate& e) {
  e.estimate = f.req_u64("estimate");
  e.delta = f.opt_i64("delta");
}
void read_fields(FieldReader& f, ev::Injection& e) {
  e.text = f.req_string("text");
  e.origin = f.opt_string("origin");
}
void read_fields(FieldReader& f, ev::ToolRequested& e) {
  e.call_id = f.req_string("call_id");
  e.name = f.req_string("name");
  if (!f.object().contains("input")) f.fail("missing required field \"input\"");
  e.input = f.any("input");
  e.operations = f.strings_or_empty("operations");
  e.subjects = f.strings_or_empty("subjects");
  e.decision_required = f.req_bool("decision_required");
  e.deadline_ms = f.opt_u64("deadline_ms");
  e.seam = read_enum<Seam>(f, "seam");
  e.agent = f.opt_string("agent");                          // additive
  e.escalation = f.opt_bool("escalation").value_or(false);  // additive
}
void read_fields(FieldReader& f, ev::ToolDecided& e) {
  e.call_id = f.req_string("call_id");
  if (!f.object().contains("decision")) {
    f.fail("missing required field \"decision\"");
  } else {
    std::string error;
    auto d = read_decision(f.object().at("decision"), error);
    if (d)
      e.decision = std::move(*d);
    else
      f.fail(error);
  }
  e.decided_by = read_enum<DecidedBy>(f, "decided_by");
  e.seam = read_enum<Seam>(f, "seam");
  e.latency_ms = f.opt_u64("latency_ms");
  if (const json::object* p = f.opt_object("peer")) {
    FieldReader r(*p, "peer");
    PeerIdentity peer;
    peer.uid = r.req_u32("uid");
    peer.pid = read_int(r, "pid");
    peer.via = r.opt_string("via");
    if (r.ok())
      e.peer = peer;
    else
      f.fail(r.error());
  }
  if (const json::value* requested = f.object().if_contains("requested"); requested && !requested->is_null()) {
    std::string error;
    if (auto d = read_decision(*requested, error))
      e.requested = std::move(*d);
    else
      f.fail("requested: " + error);
  }
}
void read_fields(FieldReader& f, ev::ToolResult& e) {
  e.exit_code = f.opt_i64("exit_code");
  e.outcome_source = f.opt_string("outcome_source");
  e.call_id = f.req_string("call_id");
  e.is_error = f.opt_bool("is_error");
  e.content = f.any("content");
  e.bytes = f.opt_u64("bytes");
  e.tool_use_result = f.any("tool_use_result");
}
void read_fields(FieldReader& f, ev::Usage& e) {
  e.request_id = f.opt_string("request_id");
  e.model = f.opt_string("model");
  if (const json::object* u = f.req_object("usage")) e.usage = read_usage_object(f, *u, "usage");
  e.scope = f.opt_string("scope");
}
void read_fields(FieldReader& f, ev::RateLimit& e) {
  if (const json::object* o = f.req_object("info")) {
    FieldReader r(*o, "info");
    e.info.status = r.opt_string("status");
    e.info.window = r.opt_string("window");
    e.info.resets_at = r.opt_i64("resets_at");
    e.info.utilization = r.opt_f64("utilization");
    e.info.using_overage = r.opt_bool("using_overage");
    if (!r.ok()) f.fail(r.error());
  }
}
void read_fields(FieldReader& f, ev::CommandResult& e) {
  e.id = f.req_string("id");
  if (const json::object* o = f.req_object("outcome")) {
    std::string error;
    auto outcome = read_outcome(*o, error);
    if (outcome)
      e.outcome = std::move(*outcome);
    else
      f.fail(error);
  }
}
void read_fields(FieldReader& f, ev::Warning& e) {
  e.code = f.req_string("code");
  e.message = f.req_string("message");
}
void read_fields(FieldReader& f, ev::Opaque& e) {
  e.vendor_type = f.opt_string("vendor_type");
  e.vendor_subtype = f.opt_string("vendor_subtype");
  e.digest = f.req_string("digest");
  if (f.ok() && !is_digest(e.digest)) f.fail("field \"digest\" is not a lowercase hex SHA-256");
  e.source_line = f.opt_u64("source_line");
}
void read_fields(FieldReader& f, ev::AuthExpired& e) {
  e.credential_source = f.opt_string("credential_source");
  e.detail = f.opt_string("detail");
  e.source_line = f.opt_u64("source_line");
}
void read_fields(FieldReader& f, ev::StreamClosed& e) {
  e.events = f.req_u64("events");
  e.reason = read_enum<CloseReason>(f, "reason");
  e.run_id = f.req_string("run_id");
  // A stream from before `process` existed reads as unknown.
  if (const json::object* p = f.opt_object("process")) {
    FieldReader r(*p, "process");
    e.process.kind = read_enum<ProcessKind>(r, "kind");
    if (r.ok() && e.process.kind == ProcessKind::exited) e.process.code = read_int(r, "code");
    if (r.ok() && e.process.kind == ProcessKind::signaled) e.process.signal = read_int(r, "signal");
    if (!r.ok()) f.fail(r.error());
  }
}

// Name -> index table, built once from the variant's alternatives.
template <std::size_t... I>
constexpr std::array<std::string_view, kEventCount> make_event_names(std::index_sequence<I...>) {
  return {std::variant_alternative_t<I, EventPayload>::kName...};
}
constexpr auto kEventNames = make_event_names(std::make_index_sequence<kEventCount>{});

template <std::size_t I>
EventPayload read_alternative(FieldReader& f) {
  std::variant_alternative_t<I, EventPayload> e;
  read_fields(f, e);
  return EventPayload(std::in_place_index<I>, std::move(e));
}

template <std::size_t... I>
constexpr auto make_readers(std::index_sequence<I...>) {
  return std::array<EventPayload (*)(FieldReader&), kEventCount>{&read_alternative<I>...};
}
constexpr auto kReaders = make_readers(std::make_index_sequence<kEventCount>{});

std::string event_vocabulary() {
  std::string out;
  for (std::size_t i = 0; i < kEventNames.size(); ++i) {
    if (i > 0) out += ", ";
    out += kEventNames[i];
  }
  return out;
}

}  // namespace

std::string_view event_name(const EventPayload& payload) {
  return kEventNames[payload.index()];
}

const std::array<std::string_view, kEventCount>& event_names() {
  return kEventNames;
}

void write_payload(JsonWriter& w, const EventPayload& payload) {
  std::visit([&](const auto& e) { write_fields(w, e); }, payload);
}

void serialize_to(std::string& out, const Event& event) {
  JsonWriter w(out);
  w.begin_object();
  w.field("format", kEventFormat);
  w.key("seq");
  w.uinteger(event.seq);
  w.field("run", event.run);
  if (event.at) w.field("at", *event.at);
  if (event.recorded_at) w.field("recorded_at", *event.recorded_at);
  w.field("event", event_name(event.payload));
  write_payload(w, event.payload);
  if (!event.cut.empty()) {
    w.key("cut");
    w.begin_array();
    for (const auto& c : event.cut) {
      w.begin_object();
      w.field("field", c.field);
      w.field("pointer", c.pointer);
      w.field("form", c.form);
      w.key("bytes");
      w.uinteger(c.bytes);
      w.key("kept");
      w.uinteger(c.kept);
      w.field("digest", c.digest);
      w.end_object();
    }
    w.end_array();
  }
  w.end_object();
}

bool read_cut_fields(const json::object& line, std::vector<CutField>& out, std::string& error) {
  out.clear();
  const json::value* v = line.if_contains("cut");
  if (!v || v->is_null()) return true;
  if (!v->is_array()) {
    error = "field \"cut\" is " + describe_json(*v) + ", expected an array";
    return false;
  }
  for (const auto& item : v->get_array()) {
    if (!item.is_object()) {
      error = "field \"cut\" holds " + describe_json(item) + ", expected objects";
      return false;
    }
    FieldReader f(item.get_object(), "cut");
    CutField c;
    c.field = f.req_string("field");
    c.pointer = f.req_string("pointer");
    c.form = f.req_string("form");
    c.bytes = f.req_u64("bytes");
    c.kept = f.req_u64("kept");
    c.digest = f.req_string("digest");
    if (f.ok() && c.form != "text" && c.form != "json")
      f.fail("field \"form\" is \"" + excerpt(c.form, 20) + "\", expected text or json");
    if (f.ok() && !is_digest(c.digest)) f.fail("field \"digest\" is not a lowercase hex SHA-256");
    if (f.ok() && c.kept > c.bytes)
      f.fail("kept " + std::to_string(c.kept) + " is more than bytes " + std::to_string(c.bytes));
    if (!f.ok()) {
      error = f.error();
      return false;
    }
    out.push_back(std::move(c));
  }
  return true;
}

std::string serialize(const Event& event) {
  std::string out;
  out.reserve(256);
  serialize_to(out, event);
  return out;
}

boost::system::result<EventPayload, LineRefusal> read_event_payload(std::string_view name, const json::object& object) {
  for (std::size_t i = 0; i < kEventNames.size(); ++i) {
    if (kEventNames[i] != name) continue;
    FieldReader f(object, "");
    EventPayload payload = kReaders[i](f);
    if (!f.ok())
      return LineRefusal{LineRefusalKind::Malformed, "malformed " + std::string(name) + ": " + f.error(), std::nullopt};
    return payload;
  }
  return LineRefusal{LineRefusalKind::UnknownName,
                     "unknown event \"" + excerpt(name, 60) + "\"; the vocabulary is " + event_vocabulary(),
                     std::nullopt};
}

}  // namespace mh::protocol
