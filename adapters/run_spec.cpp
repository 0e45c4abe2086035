#include "adapters/run_spec.hpp"

#include <algorithm>
#include <boost/json/value_from.hpp>
#include <cctype>
#include <cstdlib>

#include "protocol/json.hpp"
#include "protocol/overloaded.hpp"

namespace mh::adapters {

bool set_budget(Budgets& b, std::string_view key, std::string_view value, std::string& error) {
  auto bad = [&](std::string_view what) {
    error =
        "budget " + std::string(key) + " must be " + std::string(what) + ", not \"" + proto::excerpt(value, 40) + "\"";
    return false;
  };
  if (key == "usd") {
    // A plain non-negative decimal: digits, at most one point.
    if (value.empty() || value.find_first_not_of("0123456789.") != std::string_view::npos ||
        value.find('.') != value.rfind('.') || value == ".")
      return bad("a non-negative decimal number of US dollars");
    b.usd = std::strtod(std::string(value).c_str(), nullptr);
    return true;
  }
  std::optional<std::uint64_t>* target = key == "turns"           ? &b.turns
                                         : key == "tool_calls"    ? &b.tool_calls
                                         : key == "input_tokens"  ? &b.input_tokens
                                         : key == "output_tokens" ? &b.output_tokens
                                         : key == "wall_ms"       ? &b.wall_ms
                                                                  : nullptr;
  if (!target) {
    error = "unknown budget \"" + proto::excerpt(key, 40) +
            "\"; the budgets are turns, tool_calls, input_tokens, output_tokens, wall_ms and usd";
    return false;
  }
  if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string_view::npos)
    return bad("a non-negative integer");
  *target = std::strtoull(std::string(value).c_str(), nullptr, 10);
  return true;
}

namespace {
constexpr std::string_view kLimitKeys = "memory_max_bytes, pids_max or cpu_max_percent";
}  // namespace

std::optional<LimitBounds> limit_bounds(std::string_view key) {
  if (key == "memory_max_bytes") return LimitBounds{RunLimits::kMemoryMin, RunLimits::kMemoryMax};
  if (key == "pids_max") return LimitBounds{1, RunLimits::kPidsMax};
  if (key == "cpu_max_percent") return LimitBounds{1, RunLimits::kCpuPercentMax};
  return std::nullopt;
}

void store_limit(RunLimits& limits, std::string_view key, std::uint64_t n) {
  if (key == "memory_max_bytes")
    limits.memory_max_bytes = n;
  else if (key == "pids_max")
    limits.pids_max = n;
  else
    limits.cpu_max_percent = static_cast<std::uint32_t>(n);
}

bool set_limit(RunLimits& limits, std::string_view key, std::string_view value, std::string& error) {
  auto bounds = limit_bounds(key);
  if (!bounds) {
    error = "unknown limit \"" + proto::excerpt(key, 40) + "\"; the limits are " + std::string(kLimitKeys);
    return false;
  }
  if (value.empty() || value.size() > 19 || value.find_first_not_of("0123456789") != std::string_view::npos) {
    error = "limit " + std::string(key) + " must be a whole number, not \"" + proto::excerpt(value, 40) + "\"";
    return false;
  }
  const std::uint64_t n = std::strtoull(std::string(value).c_str(), nullptr, 10);
  if (!bounds->holds(n)) {
    error = "limit " + std::string(key) + " is " + std::to_string(n) + "; expected " + bounds->text();
    return false;
  }
  store_limit(limits, key, n);
  return true;
}

void fill_unset_budgets(Budgets& b, const Budgets& defaults) {
  if (!b.turns) b.turns = defaults.turns;
  if (!b.tool_calls) b.tool_calls = defaults.tool_calls;
  if (!b.input_tokens) b.input_tokens = defaults.input_tokens;
  if (!b.output_tokens) b.output_tokens = defaults.output_tokens;
  if (!b.wall_ms) b.wall_ms = defaults.wall_ms;
  if (!b.usd) b.usd = defaults.usd;
}

json::object budgets_to_json(const Budgets& b) {
  json::object o;
  auto put = [&](std::string_view k, const std::optional<std::uint64_t>& v) {
    if (v) o[k] = *v;
  };
  put("turns", b.turns);
  put("tool_calls", b.tool_calls);
  put("input_tokens", b.input_tokens);
  put("output_tokens", b.output_tokens);
  put("wall_ms", b.wall_ms);
  if (b.usd) o["usd"] = *b.usd;
  return o;
}

json::value spec_to_json(const RunSpec& spec) {
  json::object o;
  o["run_id"] = spec.run_id;
  o["adapter"] = spec.adapter;
  o["prompt"] = spec.prompt;
  o["decisions"] = proto::to_string(spec.decisions);
  o["frame"] = spec.frame ? proto::frame_to_json(*spec.frame, true) : json::value(nullptr);
  o["decision_deadline_ms"] = spec.decision_deadline_ms;
  o["stall_after_ms"] = spec.stall_after_ms ? json::value(*spec.stall_after_ms) : json::value(nullptr);
  o["on_stall"] = spec.on_stall ? json::value(proto::to_string(*spec.on_stall)) : json::value(nullptr);
  o["park_after_ms"] = spec.park_after_ms ? json::value(*spec.park_after_ms) : json::value(nullptr);
  o["cwd"] = spec.cwd ? json::value(*spec.cwd) : json::value(nullptr);
  if (spec.model_endpoint)
    o["model_endpoint"] = json::object{{"base_url", spec.model_endpoint->base_url}, {"token", kRedacted}};
  else
    o["model_endpoint"] = nullptr;
  o["upstream"] = spec.upstream ? json::value(*spec.upstream) : json::value(nullptr);
  json::array egress;
  for (const auto& destination : spec.egress)
    egress.emplace_back(destination);
  o["egress"] = std::move(egress);
  o["model"] = spec.model ? json::value(*spec.model) : json::value(nullptr);
  json::object vendor_env;
  // A value marked secret keeps its mark (an adopted run reads this file back, and redacts it).
  for (const auto& [name, value] : spec.vendor_env)
    vendor_env[name] = spec.secret_vendor_env.contains(name)
                           ? json::value(json::object{{"value", kRedacted}, {"secret", true}})
                           : json::value(kRedacted);
  o["vendor_env"] = std::move(vendor_env);
  o["vendor_options"] = json::value_from(spec.vendor_options);
  json::array requires_commands;
  for (auto c : spec.requires_commands)
    requires_commands.emplace_back(proto::to_string(c));
  o["requires"] = std::move(requires_commands);
  o["keep_open"] = spec.keep_open;
  o["labels"] = json::value_from(spec.labels);
  o["deny_only"] = spec.deny_only;
  o["hermetic"] = proto::to_string(spec.hermetic);
  o["budget"] = budgets_to_json(spec.budget);
  o["limits"] = limits_to_json(spec.limits);
  return o;
}

json::value redacted_spec_json(json::value spec) {
  json::object* o = spec.if_object();
  if (!o) return spec;
  if (json::value* env = o->if_contains("vendor_env"); env && env->is_object())
    for (auto& kv : env->get_object()) {
      if (json::object* marked = kv.value().if_object(); marked && marked->contains("value"))
        (*marked)["value"] = kRedacted;
      else
        kv.value() = kRedacted;
    }
  if (json::value* endpoint = o->if_contains("model_endpoint"); endpoint && endpoint->is_object())
    if (json::value* token = endpoint->get_object().if_contains("token")) *token = kRedacted;
  return spec;
}

json::object limits_to_json(const RunLimits& l) {
  json::object limits;
  if (l.memory_max_bytes) limits["memory_max_bytes"] = *l.memory_max_bytes;
  if (l.pids_max) limits["pids_max"] = *l.pids_max;
  if (l.cpu_max_percent) limits["cpu_max_percent"] = *l.cpu_max_percent;
  return limits;
}

namespace {

// run.limits: each key known, each value an integer within its bounds (no value is guessed or
// clamped). "" when it fits, else the refusal.
std::string read_limits(const json::object& limits, RunLimits& out) {
  for (const auto& kv : limits) {
    const std::string key(kv.key());
    const json::value& v = kv.value();
    std::optional<std::uint64_t> n;
    if (v.is_uint64()) n = v.get_uint64();
    if (v.is_int64() && v.get_int64() >= 0) n = static_cast<std::uint64_t>(v.get_int64());
    auto bounds = limit_bounds(key);
    if (!bounds)
      return "run: limits has an unknown key \"" + proto::excerpt(key, 40) + "\"; expected " + std::string(kLimitKeys);
    if (!n) return "run: limits." + key + " is " + proto::describe_json(v) + "; expected a whole number";
    if (!bounds->holds(*n)) return "run: limits." + key + " is " + std::to_string(*n) + "; expected " + bounds->text();
    store_limit(out, key, *n);
  }
  return "";
}

// One egress destination, "host:port": a host name or an IP address (IPv6 in brackets) and a
// port 1..65535. "" when it is one, else why not.
std::string egress_problem(const std::string& d) {
  const std::string shown = "\"" + proto::excerpt(d, 80) + "\"";
  if (d.size() > 261) return "run: egress " + shown + " is longer than a host name and a port can be";
  auto colon = d.rfind(':');
  if (colon == std::string::npos || colon == 0)
    return "run: egress " + shown + " is not HOST:PORT (an IPv6 address goes in brackets)";
  std::string_view host = std::string_view(d).substr(0, colon), port = std::string_view(d).substr(colon + 1);
  if (port.empty() || port.size() > 5 || port.find_first_not_of("0123456789") != std::string_view::npos ||
      std::stoul(std::string(port)) == 0 || std::stoul(std::string(port)) > 65535)
    return "run: egress " + shown + " has no port between 1 and 65535";
  if (host.front() == '[') {
    if (host.size() < 4 || host.back() != ']' ||
        host.substr(1, host.size() - 2).find_first_not_of("0123456789abcdefABCDEF:.") != std::string_view::npos)
      return "run: egress " + shown + " has a bracketed host that is not an IPv6 address";
    return "";
  }
  for (char ch : host)
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '.')
      return "run: egress " + shown + " has a host that is not a name or an address (A-Z, a-z, 0-9, - and .)";
  return "";
}

// How many egress destinations a run may list: enough for any tool's needs, small enough that a
// spec cannot make the proxy's list a burden.
constexpr std::size_t kMaxEgress = 64;

}  // namespace

boost::system::result<RunSpec, std::string> spec_from_json(const json::object& o) {
  using Result = boost::system::result<RunSpec, std::string>;
  auto fail = [](std::string m) { return Result(boost::system::in_place_error, std::move(m)); };
  proto::FieldReader f(o, "run");
  RunSpec spec;
  spec.adapter = f.req_string("adapter");
  spec.prompt = f.req_string("prompt");
  if (auto d = f.opt_string("decisions")) {
    auto mode = proto::parse_enum<proto::DecisionMode>(*d);
    if (!mode) return fail("run: \"decisions\" is \"" + proto::excerpt(*d, 40) + "\"; expected frame, ask or observe");
    spec.decisions = *mode;
  }
  if (auto deadline = f.opt_u64("decision_deadline_ms")) {
    if (*deadline == 0) return fail("run: \"decision_deadline_ms\" must be positive");
    spec.decision_deadline_ms = *deadline;
  } else {
    spec.decision_deadline_ms = 0;  // the host's default
  }
  // 0 is a value (never named stalled); absent or null leaves the host's default.
  spec.stall_after_ms = f.opt_u64("stall_after_ms");
  if (spec.stall_after_ms && *spec.stall_after_ms > kMaxStallAfterMs)
    return fail("run: \"stall_after_ms\" is " + std::to_string(*spec.stall_after_ms) + "; expected at most " +
                std::to_string(kMaxStallAfterMs) + " (30 days), or 0 for never");
  spec.park_after_ms = f.opt_u64("park_after_ms");
  if (spec.park_after_ms && *spec.park_after_ms > kMaxStallAfterMs)
    return fail("run: \"park_after_ms\" is " + std::to_string(*spec.park_after_ms) + "; expected at most " +
                std::to_string(kMaxStallAfterMs) + " (30 days), or 0 for never");
  if (auto on_stall = f.opt_string("on_stall")) {
    auto mode = proto::parse_enum<proto::OnStall>(*on_stall);
    if (!mode) return fail("run: \"on_stall\" is \"" + proto::excerpt(*on_stall, 40) + "\"; expected warn or halt");
    spec.on_stall = *mode;
  }
  if (const json::value* frame = o.if_contains("frame"); frame && !frame->is_null()) {
    auto loaded = proto::frame_from_json(*frame, /*require_sealed=*/true);
    if (!loaded)
      return fail("run: the frame is refused (" + std::string(proto::to_string(loaded.error().kind)) +
                  "): " + loaded.error().message);
    spec.frame = std::move(*loaded);
  }
  if (const json::object* endpoint = f.opt_object("model_endpoint")) {
    proto::FieldReader e(*endpoint, "run.model_endpoint");
    ModelEndpoint m{e.req_string("base_url"), e.opt_string("token").value_or("")};
    if (!e.ok()) return fail(e.error());
    spec.model_endpoint = std::move(m);
  }
  spec.model = f.opt_string("model");
  spec.cwd = f.opt_string("cwd");
  if (auto upstream = f.opt_string("upstream")) {
    if (upstream->empty() || upstream->size() > 64)
      return fail("run: \"upstream\" must name an [upstreams.NAME] of the daemon's config (1 to 64 characters)");
    spec.upstream = std::move(*upstream);
  }
  if (const json::value* egress = o.if_contains("egress"); egress && !egress->is_null()) {
    const json::array* list = egress->if_array();
    if (!list)
      return fail("run: \"egress\" is " + proto::describe_json(*egress) + "; expected an array of \"host:port\"");
    if (list->size() > kMaxEgress)
      return fail("run: \"egress\" lists " + std::to_string(list->size()) + " destinations; at most " +
                  std::to_string(kMaxEgress));
    for (const auto& d : *list) {
      if (!d.is_string()) return fail("run: \"egress\" holds " + proto::describe_json(d) + "; expected \"host:port\"");
      std::string destination(d.get_string());
      if (auto problem = egress_problem(destination); !problem.empty()) return fail(problem);
      if (std::find(spec.egress.begin(), spec.egress.end(), destination) == spec.egress.end())
        spec.egress.push_back(std::move(destination));
    }
  }
  for (std::string_view key : {"vendor_env", "vendor_options", "labels"}) {
    const json::object* m = f.opt_object(key);
    if (!m) continue;
    auto& target = key == "vendor_env" ? spec.vendor_env : key == "vendor_options" ? spec.vendor_options : spec.labels;
    for (const auto& kv : *m) {
      // vendor_env: {"value": "…", "secret": true} marks a value that is replaced by
      // [redacted:NAME] in everything the run writes (docs/socket-api.md).
      if (const json::object* marked = kv.value().if_object(); marked && key == "vendor_env") {
        const json::value* value = marked->if_contains("value");
        const json::value* secret = marked->if_contains("secret");
        if (!value || !value->is_string() || (secret && !secret->is_bool()) ||
            marked->size() != 1u + (secret ? 1u : 0u))
          return fail("run: \"vendor_env\" value of \"" + proto::excerpt(kv.key(), 40) +
                      "\" is an object other than {\"value\": \"…\", \"secret\": true}");
        target[std::string(kv.key())] = std::string(value->get_string());
        if (secret && secret->get_bool()) spec.secret_vendor_env.insert(std::string(kv.key()));
        continue;
      }
      if (!kv.value().is_string())
        return fail("run: \"" + std::string(key) + "\" values must be strings; \"" + proto::excerpt(kv.key(), 40) +
                    "\" is " + proto::describe_json(kv.value()));
      target[std::string(kv.key())] = std::string(kv.value().get_string());
    }
  }
  for (const auto& name : f.strings_or_empty("requires")) {
    auto c = proto::parse_enum<proto::CommandName>(name);
    if (!c) return fail("run: \"requires\" names an unknown command \"" + proto::excerpt(name, 40) + "\"");
    spec.requires_commands.push_back(*c);
  }
  spec.keep_open = f.opt_bool("keep_open").value_or(false);
  spec.deny_only = f.opt_bool("deny_only").value_or(false);
  if (auto h = f.opt_string("hermetic")) {
    auto mode = proto::parse_enum<proto::HermeticMode>(*h);
    if (!mode) return fail("run: \"hermetic\" is \"" + proto::excerpt(*h, 40) + "\"; expected off, on or strict");
    spec.hermetic = *mode;
  }
  if (const json::object* budget = f.opt_object("budget")) {
    for (const auto& kv : *budget) {
      // JSON numbers only (a string is refused, as elsewhere in the spec: no value is guessed).
      if (!kv.value().is_uint64() && !kv.value().is_int64() && !kv.value().is_double())
        return fail("run: budget " + proto::excerpt(kv.key(), 40) + " is " + proto::describe_json(kv.value()) +
                    "; expected a number");
      std::string text = proto::canonical_json(kv.value());
      std::string error;
      if (!set_budget(spec.budget, kv.key(), text, error)) return fail("run: " + error);
    }
  }
  if (const json::object* limits = f.opt_object("limits"))
    if (auto refusal = read_limits(*limits, spec.limits); !refusal.empty()) return fail(refusal);
  if (!f.ok()) return fail(f.error());
  return spec;
}

}  // namespace mh::adapters
