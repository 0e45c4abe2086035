#include "cli/run_spec_options.hpp"

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "cli/verbs.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/commands.hpp"

namespace mh::cli {

std::string adapter_choices() {
  const auto& pins = build_info::vendor_pins;
  std::string out;
  for (std::size_t i = 0; i < std::size(pins); ++i) {
    if (i > 0) out += i + 1 == std::size(pins) ? " or " : ", ";
    out += pins[i].adapter;
  }
  return out;
}

void add_run_spec_options(CLI::App* app, RunSpecOptions& o) {
  app->add_option("ADAPTER", o.adapter, adapter_choices())->required();
  app->add_option("-p,--prompt", o.prompt, "the prompt of the first turn")->required();
  app->add_option("--frame", o.frame_path, "a sealed metaharness.frame/1 document in force from the start");
  app->add_option("--decisions", o.decisions, "frame (default), ask or observe")
      ->check(CLI::IsMember({"frame", "ask", "observe"}));
  app->add_option("--decision-deadline-ms", o.decision_deadline_ms,
                  "ask mode: a call nobody decides within this budget is denied (default 55000)");
  app->add_option("--stall-after", o.stall_after,
                  "DURATION (90s, 10m, 1500ms; 0: never) with no vendor output and no decision pending after which "
                  "the run is warned RUN_STALLED (default: the daemon's [runs] stall_after_s, 600 s)");
  app->add_option("--on-stall", o.on_stall,
                  "warn (default: the daemon's [runs] on_stall) or halt: a stalled run is then halted (failure "
                  "category stalled)")
      ->check(CLI::IsMember({"warn", "halt"}));
  app->add_option("--park-after", o.park_after,
                  "DURATION (10m, 90s, 1500ms; 0: never) a call may wait on a decision before the run is parked: "
                  "the vendor is answered defer and exits, a later decision resumes it (default: the daemon's "
                  "[runs] park_after_s, unset: never; adapters that cannot park refuse the run at start)");
  app->add_option("--model-scenario", o.model_scenario,
                  "host a scripted model endpoint for this run, playing this scenario file");
  app->add_option("--model-endpoint", o.model_endpoint, "the model endpoint base URL to use instead");
  app->add_option("--model-token-env", o.model_token_env,
                  "with --model-endpoint: the environment variable holding its credential");
  app->add_option("--upstream", o.upstream,
                  "the daemon's [upstreams.NAME] the run's model gateway forwards to; the key stays in the gateway "
                  "(default: the adapter's [vendor.upstream]; docs/gateway.md)");
  app->add_option("--egress", o.egress,
                  "HOST:PORT an allowed tool call may reach through the run's egress proxy (repeatable; a run on "
                  "the gateway network reaches nothing else)");
  app->add_option("--model", o.model, "vendor model name, passed through");
  app->add_option("--cwd", o.cwd, "the vendor's working directory (default: the run's scratch work dir)");
  app->add_option("--vendor-env", o.vendor_env, "KEY=VALUE declared for the vendor (repeatable)");
  app->add_option("--vendor-option", o.vendor_options,
                  "KEY=VALUE vendor setting the adapter knows (docs/cli.md lists each adapter's; repeatable)");
  app->add_option("--require", o.requires_commands,
                  "a command this run will need; refused at start if the adapter cannot honour it (repeatable)");
  app->add_option("--label", o.labels, "KEY=VALUE label kept with the run (repeatable)");
  app->add_flag("--keep-open", o.keep_open,
                "stay open between turns for message.inject until halted or the command source closes");
  app->add_flag("--deny-only", o.deny_only,
                "deny-only policy: every allow is delivered as abstain, so the vendor's own permission rules "
                "still decide; denials are delivered as they are");
  app->add_option("--hermetic", o.hermetic,
                  "the hermetic floor: off (no verdicts), on (default: verdicts reported), strict (the gating "
                  "verdicts decide the exit status)")
      ->check(CLI::IsMember({"off", "on", "strict"}));
  app->add_option("--budget", o.budgets,
                  "KEY=VALUE, a budget that ends the run with reason budget when crossed: turns, tool_calls, "
                  "input_tokens, output_tokens, wall_ms, usd (repeatable)");
  app->add_option("--limit", o.limits,
                  "KEY=VALUE, a limit of the run's cgroup: memory_max_bytes, pids_max, cpu_max_percent (100 = one "
                  "CPU); a limit the host cannot enforce refuses the run (repeatable)");
}

namespace {
using SpecResult = boost::system::result<adapters::RunSpec, std::string>;
SpecResult fail(std::string message) {
  return SpecResult(boost::system::in_place_error, std::move(message));
}

boost::system::result<std::pair<std::string, std::string>, std::string> split_kv(const std::string& kv) {
  auto eq = kv.find('=');
  if (eq == std::string::npos || eq == 0)
    return boost::system::result<std::pair<std::string, std::string>, std::string>(
        boost::system::in_place_error, "expected KEY=VALUE, got \"" + kv + "\"");
  return std::make_pair(kv.substr(0, eq), kv.substr(eq + 1));
}
}  // namespace

boost::system::result<std::uint64_t, std::string> parse_stall_after(const std::string& text, std::string_view flag) {
  using Result = boost::system::result<std::uint64_t, std::string>;
  auto refuse = [&](std::string why) {
    return Result(boost::system::in_place_error, std::string(flag) + " \"" + text + "\" " + std::move(why));
  };
  if (text == "0") return std::uint64_t{0};
  std::size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (digits == 0 || digits > 12) return refuse("is not a duration: a whole number and its unit (90s, 10m, 1500ms)");
  const std::string unit = text.substr(digits);
  std::uint64_t scale = 0;
  if (unit == "ms") scale = 1;
  if (unit == "s") scale = 1000;
  if (unit == "m") scale = 60'000;
  if (unit == "h") scale = 3'600'000;
  if (scale == 0) return refuse("has no unit it knows: give ms, s, m or h (90s, 10m, 1500ms), or 0 for never");
  const std::uint64_t ms = std::stoull(text.substr(0, digits)) * scale;
  if (ms > adapters::kMaxStallAfterMs) return refuse("is longer than 30 days, the longest stall_after");
  return ms;
}

boost::system::result<void, std::string> apply_stall_options(const RunSpecOptions& o, adapters::RunSpec& spec) {
  if (!o.stall_after.empty()) {
    auto ms = parse_stall_after(o.stall_after);
    if (!ms) return ms.error();
    spec.stall_after_ms = *ms;
  }
  if (!o.on_stall.empty()) spec.on_stall = protocol::parse_enum<protocol::OnStall>(o.on_stall);
  if (!o.park_after.empty()) {
    auto ms = parse_stall_after(o.park_after, "--park-after");
    if (!ms) return ms.error();
    spec.park_after_ms = *ms;
  }
  return {};
}

boost::system::result<adapters::RunSpec, std::string> build_spec(const RunSpecOptions& o, std::string run_id) {
  adapters::RunSpec spec;
  spec.run_id = std::move(run_id);
  spec.adapter = o.adapter;
  spec.prompt = o.prompt;
  spec.decisions = *protocol::parse_enum<protocol::DecisionMode>(o.decisions);
  spec.decision_deadline_ms = o.decision_deadline_ms;
  if (o.decision_deadline_ms == 0) return fail(std::string("--decision-deadline-ms must be positive"));
  if (auto stall = apply_stall_options(o, spec); !stall) return fail(stall.error());
  if (!o.frame_path.empty()) {
    std::string error;
    auto text = read_file_bytes(o.frame_path, error);
    if (!text) return fail("cannot read the frame " + o.frame_path);
    auto frame = protocol::load_frame(*text);
    if (!frame)
      return fail("the frame " + o.frame_path + " is refused (" + std::string(protocol::to_string(frame.error().kind)) +
                  "): " + frame.error().message);
    spec.frame = std::move(*frame);
  }
  if (!o.model_scenario.empty() && !o.model_endpoint.empty())
    return fail(std::string("give either --model-scenario or --model-endpoint, not both"));
  if (!o.model_endpoint.empty()) {
    adapters::ModelEndpoint endpoint{o.model_endpoint, ""};
    if (!o.model_token_env.empty()) {
      const char* token = std::getenv(o.model_token_env.c_str());
      if (!token) return fail("--model-token-env names " + o.model_token_env + ", which is not set");
      endpoint.token = token;
    }
    spec.model_endpoint = std::move(endpoint);
  }
  if (!o.upstream.empty()) spec.upstream = o.upstream;
  spec.egress = o.egress;
  if (!o.model.empty()) spec.model = o.model;
  if (!o.cwd.empty()) {
    // Its real path: the sandbox binds a cwd only by the path it was given, with no link in it.
    std::error_code ec;
    auto real = std::filesystem::weakly_canonical(std::filesystem::absolute(o.cwd), ec);
    if (ec) return fail("--cwd " + o.cwd + " cannot be resolved: " + ec.message());
    spec.cwd = real.string();
  }
  for (const auto& kv : o.vendor_env) {
    auto split = split_kv(kv);
    if (!split) return fail("--vendor-env: " + split.error());
    spec.vendor_env[split->first] = split->second;
  }
  for (const auto& kv : o.vendor_options) {
    auto split = split_kv(kv);
    if (!split) return fail("--vendor-option: " + split.error());
    spec.vendor_options[split->first] = split->second;
  }
  for (const auto& kv : o.labels) {
    auto split = split_kv(kv);
    if (!split) return fail("--label: " + split.error());
    spec.labels[split->first] = split->second;
  }
  for (const auto& name : o.requires_commands) {
    auto c = protocol::parse_enum<protocol::CommandName>(name);
    if (!c)
      return fail("--require: unknown command \"" + name + "\"; the vocabulary is " +
                  protocol::vocabulary<protocol::CommandName>());
    spec.requires_commands.push_back(*c);
  }
  spec.keep_open = o.keep_open;
  spec.deny_only = o.deny_only;
  spec.hermetic = *protocol::parse_enum<protocol::HermeticMode>(o.hermetic);
  for (const auto& kv : o.budgets) {
    auto split = split_kv(kv);
    if (!split) return fail("--budget: " + split.error());
    std::string error;
    if (!adapters::set_budget(spec.budget, split->first, split->second, error)) return fail("--budget: " + error);
  }
  for (const auto& kv : o.limits) {
    auto split = split_kv(kv);
    if (!split) return fail("--limit: " + split.error());
    std::string error;
    if (!adapters::set_limit(spec.limits, split->first, split->second, error)) return fail("--limit: " + error);
  }
  return spec;
}

}  // namespace mh::cli
