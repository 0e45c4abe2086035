#include "adapters/adapter.hpp"

#include <algorithm>
#include <boost/json/value_from.hpp>
#include <cctype>
#include <cstdlib>

#include "adapters/claude/claude_adapter.hpp"
#include "adapters/codex/codex_adapter.hpp"
#include "adapters/opencode/opencode_adapter.hpp"
#include "metaharness/build_info.hpp"
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

std::optional<std::string> refuse_deadline(const Adapter& adapter, std::uint64_t deadline_ms) {
  std::uint64_t max = adapter.max_decision_deadline_ms();
  if (deadline_ms <= max) return std::nullopt;
  return "decision_deadline_ms " + std::to_string(deadline_ms) + " is longer than the " + std::string(adapter.id()) +
         " adapter's seam can hold (at most " + std::to_string(max) +
         " ms: the seam's own timer for a pending decision — the vendor's hook timeout, or the hook program's wait — "
         "sits above the deadline and would overflow)";
}

json::value spec_to_json(const RunSpec& spec) {
  json::object o;
  o["run_id"] = spec.run_id;
  o["adapter"] = spec.adapter;
  o["prompt"] = spec.prompt;
  o["decisions"] = proto::to_string(spec.decisions);
  o["frame"] = spec.frame ? proto::frame_to_json(*spec.frame, true) : json::value(nullptr);
  o["decision_deadline_ms"] = spec.decision_deadline_ms;
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

json::value plan_to_json(const LaunchPlan& plan, const RunSpec& spec) {
  json::object o;
  o["adapter"] = plan.adapter;
  o["program"] = plan.program.string();
  json::array args;
  for (const auto& a : plan.args)
    args.emplace_back(a);
  o["args"] = std::move(args);
  json::array env;
  for (const auto& [k, v] : plan.env) {
    // Credentials never leave the process in a printable plan, nor does anything the submitter
    // declared: a vendor_env value may be a secret whatever its name.
    bool secret =
        k.find("TOKEN") != std::string::npos || k.find("KEY") != std::string::npos || spec.vendor_env.contains(k);
    env.emplace_back(k + "=" + (secret ? std::string(kRedacted) : v));
  }
  o["env"] = std::move(env);
  o["cwd"] = plan.cwd.string();
  json::array dirs;
  for (const auto& d : plan.directories)
    dirs.emplace_back(d.string());
  o["directories"] = std::move(dirs);
  json::array files;
  for (const auto& f : plan.files)
    files.push_back(json::object{{"path", f.path.string()}, {"bytes", f.contents.size()}, {"mode", f.mode}});
  o["files"] = std::move(files);
  if (!plan.links.empty()) {
    json::array links;
    for (const auto& l : plan.links)
      links.push_back(json::object{{"path", l.path.string()}, {"target", l.target.string()}});
    o["links"] = std::move(links);
  }
  o["transcript"] = plan.transcript_path.string();
  o["stdin_log"] = plan.stdin_log_path.string();
  o["run_marker"] = plan.run_marker.first + "=" + plan.run_marker.second;
  if (plan.hook_channel)
    o["hook_channel"] = json::object{{"env", plan.hook_channel->env_var}, {"address", plan.hook_channel->address}};
  else
    o["hook_channel"] = nullptr;
  std::string attestation;
  proto::JsonWriter w(attestation);
  proto::write(w, plan.attestation);
  o["hermetic"] = proto::parse_json(attestation).value_or(nullptr);
  json::array notes;
  for (const auto& n : plan.notes)
    notes.emplace_back(n);
  o["notes"] = std::move(notes);
  return o;
}

std::vector<proto::ev::CommandResult> refuse_unhonoured_commands(const RunSpec& spec,
                                                                 const proto::CapabilityTable& table) {
  std::vector<proto::CommandName> needed = {proto::CommandName::interrupt, proto::CommandName::halt};
  if (spec.decisions == proto::DecisionMode::ask || spec.decisions == proto::DecisionMode::observe || spec.frame)
    needed.push_back(proto::CommandName::tool_decide);
  for (auto c : spec.requires_commands)
    if (std::find(needed.begin(), needed.end(), c) == needed.end()) needed.push_back(c);

  std::vector<proto::ev::CommandResult> refused;
  for (auto c : needed) {
    proto::CommandSupport support = table.command(c);
    if (support.honoured) continue;
    refused.push_back(proto::ev::CommandResult{"start/" + std::string(proto::to_string(c)),
                                               proto::CommandOutcome::refused(support.code, table.refusal_reason(c))});
  }
  return refused;
}

proto::CapabilityTable harness_capabilities(std::string_view adapter_id) {
  proto::CapabilityTable t;
  t.adapter_id = std::string(adapter_id);
  t.adapter_class = proto::AdapterClass::harness;
  for (const auto& pin : build_info::vendor_pins)
    if (pin.adapter == adapter_id) t.versions_pinned.emplace_back(pin.version);
  t.tiers = {{proto::Tier::registration, proto::TierStatus::delivered},
             {proto::Tier::call, proto::TierStatus::delivered},
             {proto::Tier::turn, proto::TierStatus::delivered},
             {proto::Tier::kill, proto::TierStatus::delivered}};
  t.decision_modes = {{proto::DecisionMode::frame, proto::TierStatus::delivered},
                      {proto::DecisionMode::ask, proto::TierStatus::delivered},
                      {proto::DecisionMode::observe, proto::TierStatus::delivered}};
  return t;
}

std::vector<proto::Operation> operations_with(const proto::CapabilityTable& table, std::string_view tool,
                                              const std::vector<proto::OpKind>& also) {
  auto ops = table.operations_for_tool(tool);
  for (auto op : also)
    ops.push_back(proto::Operation{op, {}, {}});
  std::stable_sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.op < b.op; });
  return ops;
}

void read_transcript(std::string_view transcript, const std::function<void(const proto::FramedLine&)>& on_line) {
  proto::LineFramer framer(proto::kDefaultMaxVendorLineBytes, /*digest_oversized=*/true);
  framer.feed(transcript, on_line);
  framer.finish(on_line);
}

proto::CloseReason classify_close(bool halted, const std::optional<proto::ev::SessionEnded>& terminal) {
  if (halted) return proto::CloseReason::steer_halt;
  if (!terminal) return proto::CloseReason::error;
  for (const auto* word : {&terminal->subtype, &terminal->stop_reason, &terminal->terminal_reason})
    if (*word && **word == "budget-exhausted") return proto::CloseReason::budget;
  if (terminal->is_error != true && (terminal->is_error == false || terminal->subtype == "success"))
    return proto::CloseReason::completed;
  return proto::CloseReason::error;
}

HostConfig host_config_from_environment() {
  HostConfig config;
  if (const char* dir = std::getenv("METAHARNESS_VENDOR_DIR"); dir && *dir)
    config.vendor_dir = dir;
  else
    config.vendor_dir = std::filesystem::path(build_info::default_vendor_dir);
  for (const auto& pin : build_info::vendor_pins) {
    std::string var = "METAHARNESS_" + std::string(pin.adapter) + "_BIN";
    std::transform(var.begin(), var.end(), var.begin(), [](unsigned char c) { return std::toupper(c); });
    if (const char* bin = std::getenv(var.c_str()); bin && *bin) config.binaries[std::string(pin.adapter)] = bin;
  }
  // Codex's per-call hook program ships next to this binary (build/bin, /usr/bin...).
  if (const char* hook = std::getenv("METAHARNESS_CODEX_HOOK_BIN"); hook && *hook) {
    config.binaries["codex-hook"] = hook;
  } else {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) config.binaries["codex-hook"] = self.parent_path() / "mh-codex-hook";
  }
  return config;
}

AdapterRegistry::AdapterRegistry(HostConfig config) : config_(std::move(config)) {
  adapters_.push_back(make_claude_adapter(config_));
  adapters_.push_back(make_codex_adapter(config_));
  adapters_.push_back(make_opencode_adapter(config_));
}

AdapterRegistry::~AdapterRegistry() = default;

const Adapter* AdapterRegistry::find(std::string_view id) const {
  for (const auto& a : adapters_)
    if (a->id() == id) return a.get();
  return nullptr;
}

std::vector<std::string_view> AdapterRegistry::ids() const {
  std::vector<std::string_view> out;
  for (const auto& a : adapters_)
    out.push_back(a->id());
  return out;
}

}  // namespace mh::adapters

namespace mh::adapters {

std::vector<std::string> Adapter::subjects_for(const ToolCall& call) const {
  // Paths exactly as the caller wrote them: never canonicalised, so a frame's subject globs
  // match what the model asked for.
  std::vector<std::string> out;
  if (!call.input.is_object()) return out;
  for (std::string_view key : {"file_path", "notebook_path", "path"}) {
    const json::value* v = call.input.get_object().if_contains(key);
    if (v && v->is_string() && !v->get_string().empty()) out.push_back("file:" + std::string(v->get_string()));
  }
  return out;
}

}  // namespace mh::adapters

namespace mh::adapters {

std::size_t AdapterOutputs::records_since(std::size_t from) const {
  std::size_t n = 0;
  for (std::size_t i = from; i < list_.size(); ++i)
    if (!std::holds_alternative<out::WriteVendor>(list_[i]) && !std::holds_alternative<out::ReplyHook>(list_[i]) &&
        !std::holds_alternative<out::SessionReady>(list_[i]) && !std::holds_alternative<out::FailRun>(list_[i]))
      ++n;
  return n;
}

OfflineSink::OfflineSink(const Adapter& adapter, std::string run_id) : adapter_(adapter), run_id_(std::move(run_id)) {}

void OfflineSink::push(proto::EventPayload payload, std::optional<std::string> at, std::vector<proto::CutField> cut) {
  proto::Event e{events_.size() + 1, run_id_, std::move(at), std::move(payload)};
  e.cut = std::move(cut);
  events_.push_back(std::move(e));
}

void OfflineSink::fold(AdapterOutputs& outputs) {
  for (auto& output : outputs.take()) {
    std::visit(
        proto::Overloaded{
            [&](out::Event& o) { push(std::move(o.payload), std::move(o.at)); },
            [&](out::EventCut& o) { push(std::move(o.payload), std::move(o.at), std::move(o.cut)); },
            [&](out::CallPresented& o) { call_presented(std::move(o.call), std::move(o.at)); },
            [&](out::CallAwaitsAnswer& o) { call_presented(std::move(o.call), std::nullopt); },
            [&](out::TurnStarted& o) {
              push(proto::ev::TurnStarted{++turn_, std::nullopt}, std::move(o.at));
            },
            [&](out::TurnEnded& o) {
              push(proto::ev::TurnEnded{std::max<std::uint32_t>(turn_, 1), std::move(o.stop_reason)}, std::move(o.at));
            },
            // Withdrawals, control answers, writes, hook replies, readiness, failure: nothing offline.
            [](auto&) {},
        },
        output);
  }
}

void OfflineSink::call_presented(ToolCall call, std::optional<std::string> at) {
  // One record per call, however many times the vendor's transcript restates it.
  if (!presented_.insert(call.call_id).second) return;
  proto::ev::ToolRequested r;
  for (const auto& op : adapter_.operations_for(call))
    r.operations.emplace_back(op.wire_name());
  r.subjects = adapter_.subjects_for(call);
  r.call_id = std::move(call.call_id);
  r.name = std::move(call.name);
  r.input = std::move(call.input);
  r.decision_required = false;
  r.seam = proto::Seam::none;  // offline: nobody adjudicates these calls
  r.agent = std::move(call.agent);
  r.escalation = call.escalation;
  push(std::move(r), std::move(at));
}

std::vector<proto::Event> OfflineSink::finish(std::optional<proto::ev::SessionEnded> ended) {
  if (ended) push(*ended, std::nullopt);
  proto::ev::StreamClosed closed;
  closed.events = events_.size();
  closed.reason = classify_close(false, ended);
  closed.run_id = run_id_;
  push(closed, std::nullopt);
  return std::move(events_);
}

}  // namespace mh::adapters
