#include "daemon/model/scenario.hpp"

#include <algorithm>
#include <array>
#include <boost/throw_exception.hpp>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>

#include "protocol/json.hpp"

namespace mh::model {

namespace json = boost::json;

std::string_view to_string(Wire wire) {
  switch (wire) {
    case Wire::anthropic:
      return "anthropic";
    case Wire::responses:
      return "responses";
    case Wire::gemini:
      return "gemini";
  }
  return "unknown";
}

std::optional<Wire> wire_of_model_api(std::string_view name) {
  if (name == "openai-responses") return Wire::responses;
  for (Wire wire : kWires)
    if (wire != Wire::responses && to_string(wire) == name) return wire;
  return std::nullopt;
}

void throw_exception_from_error(const ScenarioError& e, const boost::source_location& loc) {
  boost::throw_exception(std::runtime_error(e.message()), loc);
}

namespace {

// Validation is recursive; the first problem unwinds to parse_scenario, which turns it into a
// ScenarioError value. Nothing outside this file sees the exception.
struct Refusal {
  std::string where;
  std::string problem;
};

[[noreturn]] void refuse(std::string where, std::string problem) {
  throw Refusal{std::move(where), std::move(problem)};
}

constexpr std::uint64_t kMaxMilliseconds = 3'600'000;  // an hour: larger is a unit mistake

bool is_wire_key(std::string_view key) {
  return key == "anthropic" || key == "responses" || key == "gemini";
}

std::string in_quotes(std::string_view s) {
  return "\"" + std::string(s) + "\"";
}

// A field as one wire sees it: the value and the path to report problems against (the
// override's path when the value came from an override).
struct Field {
  const json::value* value = nullptr;
  std::string path;
};

// An object as seen by one wire: its own keys, replaced key by key by the keys of its
// "anthropic" / "responses" / "gemini" sub-object.
class WireView {
 public:
  const Field* get(std::string_view key) const {
    auto it = fields_.find(key);
    return it == fields_.end() ? nullptr : &it->second;
  }
  std::map<std::string, Field, std::less<>> fields_;
};

template <std::size_t N>
bool contains(const std::array<std::string_view, N>& set, std::string_view key) {
  return std::find(set.begin(), set.end(), key) != set.end();
}

template <std::size_t N>
std::string list(const std::array<std::string_view, N>& set) {
  std::string out;
  for (auto s : set) {
    if (!out.empty()) out += ", ";
    out += s;
  }
  return out;
}

const json::object& as_object(const json::value& v, const std::string& path) {
  if (!v.is_object()) refuse(path, "expected an object, found " + protocol::describe_json(v));
  return v.get_object();
}

// Builds the view of `object` (at `path`) for `wire`. `own_keys` are the keys the object may
// carry; `override_keys` those a per-wire override may replace. Both override objects are
// checked whatever the wire, so a typo in an unused override is still refused.
template <std::size_t N, std::size_t M>
WireView make_view(const json::object& object, const std::string& path, Wire wire,
                   const std::array<std::string_view, N>& own_keys,
                   const std::array<std::string_view, M>& override_keys) {
  WireView view;
  for (const auto& kv : object) {
    std::string_view key = kv.key();
    if (is_wire_key(key)) {
      const std::string sub_path = path + "." + std::string(key);
      const json::object& sub = as_object(kv.value(), sub_path);
      for (const auto& skv : sub) {
        if (!contains(override_keys, skv.key()))
          refuse(sub_path + "." + std::string(skv.key()),
                 "unknown or non-overridable key (a per-wire override may set: " + list(override_keys) + ")");
      }
      continue;
    }
    if (!contains(own_keys, key))
      refuse(path + "." + std::string(key),
             "unknown key (expected one of: " + list(own_keys) + ", anthropic, responses, gemini)");
    view.fields_[std::string(key)] = Field{&kv.value(), path + "." + std::string(key)};
  }
  if (const json::value* sub = object.if_contains(to_string(wire))) {
    const std::string sub_path = path + "." + std::string(to_string(wire));
    for (const auto& skv : sub->get_object())
      view.fields_[std::string(skv.key())] = Field{&skv.value(), sub_path + "." + std::string(skv.key())};
  }
  return view;
}

// Plain checks on one object with no overrides.
template <std::size_t N>
void check_keys(const json::object& object, const std::string& path, const std::array<std::string_view, N>& allowed) {
  for (const auto& kv : object)
    if (!contains(allowed, kv.key()))
      refuse(path + "." + std::string(kv.key()), "unknown key (expected one of: " + list(allowed) + ")");
}

std::string read_string(const Field& f) {
  if (!f.value->is_string()) refuse(f.path, "expected a string, found " + protocol::describe_json(*f.value));
  return std::string(f.value->get_string());
}

std::string read_string(const json::value& v, const std::string& path) {
  return read_string(Field{&v, path});
}

bool read_bool(const Field& f) {
  if (!f.value->is_bool()) refuse(f.path, "expected true or false, found " + protocol::describe_json(*f.value));
  return f.value->get_bool();
}

std::uint64_t read_count(const Field& f, std::uint64_t min, std::uint64_t max) {
  const json::value& v = *f.value;
  std::uint64_t n = 0;
  if (v.is_uint64()) {
    n = v.get_uint64();
  } else if (v.is_int64() && v.get_int64() >= 0) {
    n = static_cast<std::uint64_t>(v.get_int64());
  } else {
    refuse(f.path, "expected a whole number >= " + std::to_string(min) + ", found " + protocol::describe_json(v));
  }
  if (n < min || n > max)
    refuse(f.path, "expected a whole number from " + std::to_string(min) + " to " + std::to_string(max) + ", found " +
                       std::to_string(n));
  return n;
}

std::chrono::milliseconds read_ms(const Field& f) {
  return std::chrono::milliseconds(read_count(f, 0, kMaxMilliseconds));
}

// HTTP header names are tokens; values must not be able to end the header block.
void check_header(const std::string& path, std::string_view name, std::string_view value) {
  static constexpr std::string_view token_chars =
      "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  if (name.empty() || name.find_first_not_of(token_chars) != std::string_view::npos)
    refuse(path, "not a valid HTTP header name");
  if (value.find_first_of("\r\n") != std::string_view::npos || value.find('\0') != std::string_view::npos)
    refuse(path, "a header value must not contain CR, LF or NUL");
}

// ---------------------------------------------------------------------------------------------
// Content blocks
// ---------------------------------------------------------------------------------------------

constexpr std::array<std::string_view, 7> kBlockKeys = {"type", "text", "signature", "id", "name", "input", "note"};
constexpr std::array<std::string_view, 7> kBlockOverrideKeys = {"type", "text",  "signature", "id",
                                                                "name", "input", "namespace"};
// Keys only one wire has: allowed in that wire's override alone, never on the block itself.
constexpr std::string_view kResponsesOnlyKey = "namespace";

void check_wire_only_keys(const json::object& object, const std::string& path) {
  if (object.contains(kResponsesOnlyKey))
    refuse(path + "." + std::string(kResponsesOnlyKey),
           "\"namespace\" exists on the Responses wire only: give it in the block's \"responses\" override");
  if (const json::value* a = object.if_contains("anthropic");
      a && a->is_object() && a->get_object().contains(kResponsesOnlyKey))
    refuse(path + ".anthropic." + std::string(kResponsesOnlyKey),
           "the Anthropic wire has no tool namespaces; \"namespace\" belongs in the \"responses\" override");
  if (const json::value* g = object.if_contains("gemini");
      g && g->is_object() && g->get_object().contains(kResponsesOnlyKey))
    refuse(path + ".gemini." + std::string(kResponsesOnlyKey),
           "the Gemini wire has no tool namespaces; \"namespace\" belongs in the \"responses\" override");
}

Block parse_block(const json::value& v, const std::string& path, Wire wire) {
  const json::object& object = as_object(v, path);
  check_wire_only_keys(object, path);
  WireView view = make_view(object, path, wire, kBlockKeys, kBlockOverrideKeys);
  const Field* type = view.get("type");
  if (!type) refuse(path, "missing key \"type\" (text, thinking, tool_call or custom_tool_call)");
  const std::string type_name = read_string(*type);

  Block block;
  // Keys that make sense for the block's type; anything else is most likely a mistake.
  std::array<std::string_view, 4> meaningful{};
  if (type_name == "text") {
    block.kind = Block::Kind::text;
    meaningful = {"text", "", "", ""};
  } else if (type_name == "thinking") {
    block.kind = Block::Kind::thinking;
    meaningful = {"text", "signature", "", ""};
  } else if (type_name == "tool_call") {
    block.kind = Block::Kind::tool_call;
    meaningful = {"id", "name", "input", "namespace"};
  } else if (type_name == "custom_tool_call") {
    block.kind = Block::Kind::custom_tool_call;
    meaningful = {"id", "name", "input", ""};
    if (wire == Wire::anthropic)
      refuse(type->path,
             "a custom_tool_call (raw string input) has no Anthropic form; give the block an "
             "\"anthropic\" override (e.g. a tool_call) or declare \"wires\": [\"responses\"]");
    if (wire == Wire::gemini)
      refuse(type->path,
             "a custom_tool_call (raw string input) has no Gemini form; give the block a "
             "\"gemini\" override (e.g. a tool_call) or declare \"wires\" without \"gemini\"");
  } else {
    refuse(type->path,
           "unknown block type " + in_quotes(type_name) + " (expected text, thinking, tool_call or custom_tool_call)");
  }
  for (const auto& [key, field] : view.fields_) {
    if (key == "type" || key == "note") continue;
    if (std::find(meaningful.begin(), meaningful.end(), key) == meaningful.end())
      refuse(field.path, "key " + in_quotes(key) + " does not apply to a " + type_name + " block");
  }

  switch (block.kind) {
    case Block::Kind::text:
    case Block::Kind::thinking: {
      const Field* text = view.get("text");
      if (!text) refuse(path, "a " + type_name + " block needs \"text\"");
      block.text = read_string(*text);
      if (const Field* sig = view.get("signature")) block.signature = read_string(*sig);
      break;
    }
    case Block::Kind::tool_call:
    case Block::Kind::custom_tool_call: {
      const Field* name = view.get("name");
      if (!name) refuse(path, "a " + type_name + " block needs \"name\"");
      block.name = read_string(*name);
      if (block.name.empty()) refuse(name->path, "the tool name must not be empty");
      if (const Field* id = view.get("id")) {
        block.id = read_string(*id);
        if (block.id.empty()) refuse(id->path, "an explicit id must not be empty");
      }
      if (const Field* ns = view.get("namespace")) {
        block.tool_namespace = read_string(*ns);
        if (block.tool_namespace.empty()) refuse(ns->path, "a namespace must not be empty (omit the key for none)");
      }
      const Field* input = view.get("input");
      if (block.kind == Block::Kind::tool_call) {
        if (!input) {
          block.input = json::object{};
        } else if (!input->value->is_object()) {
          refuse(input->path, "a tool_call input must be a JSON object, found " +
                                  protocol::describe_json(*input->value) +
                                  " (a raw string input is a custom_tool_call)");
        } else {
          block.input = *input->value;
        }
      } else {
        if (!input) refuse(path, "a custom_tool_call needs \"input\" (a string)");
        block.input = json::string(read_string(*input));
      }
      break;
    }
  }
  return block;
}

// ---------------------------------------------------------------------------------------------
// Step forms
// ---------------------------------------------------------------------------------------------

constexpr std::array<std::string_view, 7> kStopReasons = {
    "end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal", "model_context_window_exceeded"};

HttpError parse_error(const Field& f) {
  const json::object& object = as_object(*f.value, f.path);
  static constexpr std::array<std::string_view, 7> keys = {"status",      "message",        "type",   "code",
                                                           "retry_after", "retry_after_ms", "headers"};
  check_keys(object, f.path, keys);
  HttpError error;
  const json::value* status = object.if_contains("status");
  if (!status) refuse(f.path, "an error needs \"status\" (an HTTP status from 400 to 599)");
  error.status = static_cast<unsigned>(read_count(Field{status, f.path + ".status"}, 400, 599));
  if (auto* v = object.if_contains("message")) error.message = read_string(*v, f.path + ".message");
  if (auto* v = object.if_contains("type")) error.type = read_string(*v, f.path + ".type");
  if (auto* v = object.if_contains("code")) error.code = read_string(*v, f.path + ".code");
  for (auto [key, slot] :
       {std::pair{"retry_after", &error.retry_after_s}, std::pair{"retry_after_ms", &error.retry_after_ms}}) {
    if (auto* v = object.if_contains(key)) *slot = read_count(Field{v, f.path + "." + key}, 0, kMaxMilliseconds);
  }
  if (auto* v = object.if_contains("headers")) {
    const std::string hpath = f.path + ".headers";
    for (const auto& kv : as_object(*v, hpath)) {
      const std::string path = hpath + "." + std::string(kv.key());
      std::string value = read_string(kv.value(), path);
      check_header(path, kv.key(), value);
      error.headers.emplace_back(std::string(kv.key()), std::move(value));
    }
  }
  return error;
}

Usage parse_usage(const Field& f) {
  const json::object& object = as_object(*f.value, f.path);
  static constexpr std::array<std::string_view, 5> keys = {"input_tokens", "output_tokens", "cached_input_tokens",
                                                           "cache_creation_input_tokens", "reasoning_tokens"};
  check_keys(object, f.path, keys);
  Usage usage;
  std::pair<std::string_view, std::uint64_t*> slots[] = {
      {"input_tokens", &usage.input_tokens},
      {"output_tokens", &usage.output_tokens},
      {"cached_input_tokens", &usage.cached_input_tokens},
      {"cache_creation_input_tokens", &usage.cache_creation_input_tokens},
      {"reasoning_tokens", &usage.reasoning_tokens}};
  for (auto [key, slot] : slots)
    if (auto* v = object.if_contains(key))
      *slot = read_count(Field{v, f.path + "." + std::string(key)}, 0, std::uint64_t{1} << 53);
  return usage;
}

Timing parse_timing(const Field& f) {
  const json::object& object = as_object(*f.value, f.path);
  static constexpr std::array<std::string_view, 4> keys = {"headers_delay_ms", "event_delay_ms", "hold_ms",
                                                           "hold_until_disconnect"};
  check_keys(object, f.path, keys);
  Timing timing;
  auto field = [&](std::string_view key) -> std::optional<Field> {
    if (auto* v = object.if_contains(key)) return Field{v, f.path + "." + std::string(key)};
    return std::nullopt;
  };
  if (auto v = field("headers_delay_ms")) timing.headers_delay = read_ms(*v);
  if (auto v = field("event_delay_ms")) timing.event_delay = read_ms(*v);
  if (auto v = field("hold_ms")) timing.hold = read_ms(*v);
  if (auto v = field("hold_until_disconnect")) timing.hold_until_disconnect = read_bool(*v);
  if (timing.hold_until_disconnect && timing.hold.count() > 0)
    refuse(f.path, "hold_ms and hold_until_disconnect exclude each other");
  return timing;
}

constexpr std::array<std::string_view, 12> kStepKeys = {"name",  "note",    "repeat",      "sticky",
                                                        "when",  "content", "stop_reason", "usage",
                                                        "error", "timing",  "finish",      "delta_bytes"};

When parse_when(const Field& f) {
  const json::object& object = as_object(*f.value, f.path);
  static constexpr std::array<std::string_view, 2> keys = {"header", "no_header"};
  check_keys(object, f.path, keys);
  if (object.size() != 1)
    refuse(f.path, "give exactly one of \"header\" (the request carries it) and \"no_header\" (it does not)");
  When when;
  when.has_header = object.contains("header");
  const std::string key = when.has_header ? "header" : "no_header";
  when.header = read_string(object.at(key), f.path + "." + key);
  static constexpr std::string_view token_chars =
      "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  if (when.header.empty() || when.header.find_first_not_of(token_chars) != std::string::npos)
    refuse(f.path + "." + key, "not a valid HTTP header name");
  for (char& c : when.header)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return when;
}
constexpr std::array<std::string_view, 7> kStepOverrideKeys = {"content", "stop_reason", "usage",      "error",
                                                               "timing",  "finish",      "delta_bytes"};

StepForm parse_form(const WireView& view, const std::string& path, Wire wire) {
  StepForm form;
  const Field* content = view.get("content");
  const Field* error = view.get("error");
  if (content && error)
    refuse(path, "a step answers with either \"content\" or \"error\", not both (on the " +
                     std::string(to_string(wire)) + " wire)");
  if (!content && !error)
    refuse(path, "a step needs \"content\" (a list of blocks) or \"error\" (on the " + std::string(to_string(wire)) +
                     " wire)");
  if (content) {
    if (!content->value->is_array())
      refuse(content->path, "expected a list of blocks, found " + protocol::describe_json(*content->value));
    const json::array& blocks = content->value->get_array();
    for (std::size_t i = 0; i < blocks.size(); ++i)
      form.content.push_back(parse_block(blocks[i], content->path + "[" + std::to_string(i) + "]", wire));
  }
  if (error) form.error = parse_error(*error);
  if (const Field* f = view.get("stop_reason")) {
    std::string reason = read_string(*f);
    if (!contains(kStopReasons, reason))
      refuse(f->path, "unknown stop reason " + in_quotes(reason) + " (expected one of: " + list(kStopReasons) + ")");
    if (error) refuse(f->path, "an error step has no stop reason");
    form.stop_reason = std::move(reason);
  }
  if (const Field* f = view.get("usage")) {
    if (error) refuse(f->path, "an error step has no usage");
    form.usage = parse_usage(*f);
  }
  if (const Field* f = view.get("timing")) form.timing = parse_timing(*f);
  if (const Field* f = view.get("finish")) {
    std::string finish = read_string(*f);
    if (error) refuse(f->path, "an error step has no stream to finish");
    if (finish == "complete")
      form.finish = Finish::complete;
    else if (finish == "stream_error")
      form.finish = Finish::stream_error;
    else if (finish == "disconnect")
      form.finish = Finish::disconnect;
    else
      refuse(f->path, "unknown finish " + in_quotes(finish) + " (expected complete, stream_error or disconnect)");
  }
  if (const Field* f = view.get("delta_bytes")) form.delta_bytes = read_count(*f, 1, 1u << 30);
  return form;
}

// A step (or the aux / exhausted answer when `in_sequence` is false) for every served wire.
Step parse_step(const json::value& v, const std::string& path, const Scenario& scenario, bool in_sequence) {
  const json::object& object = as_object(v, path);
  Step step;
  for (Wire wire : kWires) {
    WireView view = make_view(object, path, wire, kStepKeys, kStepOverrideKeys);
    if (wire == Wire::anthropic) {  // wire-independent keys, read once
      if (const Field* f = view.get("name")) step.name = read_string(*f);
      if (const Field* f = view.get("note")) read_string(*f);
      const Field* repeat = view.get("repeat");
      const Field* sticky = view.get("sticky");
      if (!in_sequence && (repeat || sticky))
        refuse((repeat ? repeat : sticky)->path,
               "only a step in \"steps\" can repeat or be sticky (this answer is given every "
               "time it is needed)");
      if (repeat) step.repeat = read_count(*repeat, 1, std::uint64_t{1} << 32);
      if (sticky) step.sticky = read_bool(*sticky);
      if (repeat && step.sticky)
        refuse(repeat->path, "a sticky step is served forever; \"repeat\" would have no effect");
      if (const Field* when = view.get("when")) {
        if (!in_sequence) refuse(when->path, "only a step in \"steps\" can be routed with \"when\"");
        if (step.sticky)
          refuse(when->path, "a sticky step answers every later request; it cannot be routed with \"when\"");
        step.when = parse_when(*when);
      }
    }
    if (!scenario.serves(wire)) continue;
    step.form(wire) = parse_form(view, path, wire);
  }
  return step;
}

Step text_answer(std::string text) {
  Step step;
  Block block;
  block.kind = Block::Kind::text;
  block.text = std::move(text);
  step.anthropic.content.push_back(block);
  step.anthropic.stop_reason = "end_turn";
  step.responses = step.anthropic;
  step.gemini = step.anthropic;
  return step;
}

Scenario parse_root(const json::value& root) {
  const json::object& object = as_object(root, "(document)");
  static constexpr std::array<std::string_view, 8> keys = {"format",    "description", "note",      "wires",
                                                           "main_loop", "aux",         "exhausted", "steps"};
  for (const auto& kv : object)
    if (!contains(keys, kv.key())) refuse(std::string(kv.key()), "unknown key (expected one of: " + list(keys) + ")");

  const json::value* format = object.if_contains("format");
  if (!format) refuse("format", "missing; a scenario starts with \"format\": \"" + std::string(kScenarioFormat) + "\"");
  if (!format->is_string() || format->get_string() != kScenarioFormat)
    refuse("format", "expected \"" + std::string(kScenarioFormat) + "\", found " + protocol::describe_json(*format));

  Scenario scenario;
  if (auto* v = object.if_contains("description")) scenario.description = read_string(*v, "description");
  if (auto* v = object.if_contains("note")) read_string(*v, "note");
  if (auto* v = object.if_contains("wires")) {
    if (!v->is_array() || v->get_array().empty())
      refuse("wires", "expected a non-empty list drawn from \"anthropic\", \"responses\", \"gemini\"");
    scenario.serves_anthropic = scenario.serves_responses = scenario.serves_gemini = false;
    const json::array& wires = v->get_array();
    for (std::size_t i = 0; i < wires.size(); ++i) {
      const std::string path = "wires[" + std::to_string(i) + "]";
      std::string name = read_string(wires[i], path);
      if (!is_wire_key(name))
        refuse(path, "unknown wire " + in_quotes(name) + " (expected anthropic, responses or gemini)");
      bool& slot = name == "anthropic"   ? scenario.serves_anthropic
                   : name == "responses" ? scenario.serves_responses
                                         : scenario.serves_gemini;
      if (slot) refuse(path, "wire " + in_quotes(name) + " is listed twice");
      slot = true;
    }
  }
  if (auto* v = object.if_contains("main_loop")) {
    std::string rule = read_string(*v, "main_loop");
    if (rule == "requests_with_tools")
      scenario.main_loop = MainLoopRule::requests_with_tools;
    else if (rule == "all_requests")
      scenario.main_loop = MainLoopRule::all_requests;
    else
      refuse("main_loop", "unknown rule " + in_quotes(rule) + " (expected requests_with_tools or all_requests)");
  }
  scenario.aux = object.if_contains("aux") ? parse_step(object.at("aux"), "aux", scenario, false)
                                           : text_answer("metaharness: scripted aux reply");
  scenario.exhausted = object.if_contains("exhausted")
                           ? parse_step(object.at("exhausted"), "exhausted", scenario, false)
                           : text_answer("metaharness: the scenario has no steps left.");
  if (auto* v = object.if_contains("steps")) {
    if (!v->is_array()) refuse("steps", "expected a list of steps, found " + protocol::describe_json(*v));
    const json::array& steps = v->get_array();
    std::optional<std::size_t> sticky_at;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      const std::string path = "steps[" + std::to_string(i) + "]";
      if (sticky_at)
        refuse(path,
               "unreachable: steps[" + std::to_string(*sticky_at) + "] is sticky and answers every later request");
      scenario.steps.push_back(parse_step(steps[i], path, scenario, true));
      if (scenario.steps.back().sticky) sticky_at = i;
    }
  }
  return scenario;
}

}  // namespace

boost::system::result<Scenario, ScenarioError> parse_scenario(std::string_view document) {
  std::string parse_error;
  auto root = protocol::parse_json(document, &parse_error);
  if (!root) return ScenarioError{"", "not valid JSON: " + parse_error};
  try {
    return parse_root(*root);
  } catch (const Refusal& r) {
    return ScenarioError{r.where, r.problem};
  }
}

boost::system::result<Scenario, ScenarioError> load_scenario_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ScenarioError{"", "cannot read scenario file " + path.string()};
  std::ostringstream text;
  text << in.rdbuf();
  auto scenario = parse_scenario(text.str());
  if (!scenario) {
    ScenarioError e = scenario.error();
    e.problem += " (in " + path.string() + ")";
    return e;
  }
  return scenario;
}

}  // namespace mh::model
