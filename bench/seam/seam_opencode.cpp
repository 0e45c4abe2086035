// The opencode row of the call seam bench (seam/seam.hpp): the real `opencode acp` (the pinned
// native binary) driven directly over ACP stdio, one turn (one session/prompt) of N sequential
// bash calls (`touch f<i>`), three variants:
//
//   permission_allow  the adapter's launch with "permission": "allow" and no plugin: opencode asks
//                     nobody. The floor (the issue's comparison).
//   ask_driver        the same with "permission": "ask" (what metaharness uses): opencode sends
//                     session/request_permission for every call and the bench answers allow_once
//                     at once. The ACP permission round trip inside opencode itself.
//   metaharness_ask   `metaharness run opencode --decisions ask` (shared: seam_bench.cpp). On top of
//                     the ask driver: the seam plugin asking the run over its hook channel before
//                     every call, and metaharness's own path.
//
// The direct variants are launched from the opencode adapter's own plan (the same environment,
// scratch dirs, config shape and pre-installed plugin package), with its seam plugin file and hook
// channel taken out and the config's permission rule set per variant; only that rule differs
// between them.
#include <sys/wait.h>

#include <fstream>
#include <iostream>

#include "adapters/adapter.hpp"
#include "adapters/opencode/opencode_adapter.hpp"
#include "adapters/opencode/opencode_plugin.hpp"
#include "adapters/registry.hpp"
#include "bench/seam/seam.hpp"
#include "daemon/model/scripted_endpoint.hpp"
#include "metaharness/build_info.hpp"
#include "protocol/json.hpp"

namespace mh::seam {
namespace {

using namespace std::chrono_literals;

// The adapter's plan for one direct run, the plugin and the hook channel taken out and the
// permission rule set to `permission`; nullopt with r.failure saying why.
std::optional<adapters::LaunchPlan> direct_plan(const RunContext& c, const model::ScriptedEndpoint& endpoint,
                                                std::string_view permission, RunRecord& r) {
  adapters::HostConfig host = adapters::host_config_from_environment();
  host.binaries["opencode"] = c.o.vendor_bin;
  adapters::AdapterRegistry registry(host);
  adapters::RunSpec spec;
  spec.run_id = "seam-" + r.dir.filename().string();
  spec.adapter = "opencode";
  spec.prompt = c.o.prompt;
  spec.model_endpoint = adapters::ModelEndpoint{endpoint.base_url(), endpoint.token()};
  auto planned = registry.find("opencode")->plan(spec, {r.dir, r.dir / "scratch"});
  if (auto* refused = std::get_if<adapters::LaunchRefusal>(&planned)) {
    r.failure = "the opencode plan was refused: " + refused->message;
    return std::nullopt;
  }
  auto plan = std::get<adapters::LaunchPlan>(std::move(planned));
  std::erase_if(plan.files,
                [](const adapters::ScratchFile& f) { return f.path.filename() == adapters::opencode::kPluginFile; });
  std::erase_if(plan.env, [](const auto& kv) {
    return kv.first == adapters::opencode::kHookSocketEnv || kv.first == adapters::opencode::kHookDeadlineEnv;
  });
  for (auto& f : plan.files)
    if (f.path.filename() == "opencode.json") {
      auto config = protocol::parse_json(f.contents);
      if (!config || !config->is_object()) {
        r.failure = "the plan's opencode.json is not an object";
        return std::nullopt;
      }
      config->as_object()["permission"] = permission;
      f.contents = protocol::canonical_json(*config);
    }
  return plan;
}

void run_opencode_directly(const RunContext& c, RunRecord& r) {
  auto endpoint = c.start_endpoint(r);
  if (!endpoint) return;
  const bool ask = r.variant == Variant::bare_driver;
  auto plan = direct_plan(c, *endpoint, ask ? "ask" : "allow", r);
  if (!plan) {
    endpoint->stop();
    return;
  }
  for (const auto& d : plan->directories)
    fs::create_directories(d);
  for (const auto& f : plan->files)
    std::ofstream(f.path) << f.contents;
  for (const auto& l : plan->links)
    fs::create_symlink(l.target, l.path);
  std::vector<std::string> env;
  for (const auto& [name, value] : plan->env)
    env.push_back(name + "=" + value);

  DirectChild d(c);
  if (!d.spawn({.program = plan->program, .args = plan->args, .env = env, .cwd = plan->cwd}, r)) {
    endpoint->stop();
    return;
  }
  d.child.write_line(protocol::canonical_json(json::object{
      {"jsonrpc", "2.0"},
      {"id", 1},
      {"method", "initialize"},
      {"params",
       json::object{
           {"protocolVersion", 1},
           {"clientCapabilities",
            json::object{{"fs", json::object{{"readTextFile", false}, {"writeTextFile", false}}}, {"terminal", false}}},
           {"clientInfo", json::object{{"name", "mh_seam_bench"}, {"version", mh::build_info::version}}}}}}));

  d.read_rpc("the prompt's answer", r, [&](const json::object& m, const json::value* id, const auto& method) {
    if (!method && id) {  // an answer to one of ours
      if (m.contains("error")) {
        r.failure = "opencode refused request " + protocol::canonical_json(*id) + ": " + d.line.substr(0, 300);
        return;
      }
      const json::value* result = m.if_contains("result");
      if (*id == 1) {
        d.child.write_line(protocol::canonical_json(
            json::object{{"jsonrpc", "2.0"},
                         {"id", 2},
                         {"method", "session/new"},
                         {"params", json::object{{"cwd", plan->cwd.string()}, {"mcpServers", json::array{}}}}}));
      } else if (*id == 2) {
        auto session = result && result->is_object() ? string_at(result->get_object(), "sessionId") : std::nullopt;
        if (!session) {
          r.failure = "session/new answered without a sessionId";
          return;
        }
        d.child.write_line(protocol::canonical_json(json::object{
            {"jsonrpc", "2.0"},
            {"id", 3},
            {"method", "session/prompt"},
            {"params", json::object{{"sessionId", *session},
                                    {"prompt", json::array{json::object{{"type", "text"}, {"text", c.o.prompt}}}}}}}));
      } else if (*id == 3) {
        d.turn_done_at = d.read_at;
        auto stop = result && result->is_object() ? string_at(result->get_object(), "stopReason") : std::nullopt;
        if (stop != "end_turn" && d.problem.empty()) d.problem = "the prompt ended " + stop.value_or("(no stopReason)");
      }
    } else if (method && id) {  // a request of opencode's
      if (*method == "session/request_permission" && ask) {
        // Never "always": like metaharness, every call is decided on its own.
        d.child.write_line(R"({"jsonrpc":"2.0","id":)" + protocol::canonical_json(*id) +
                           R"(,"result":{"outcome":{"outcome":"selected","optionId":"once"}}})");
        r.driver_reaction_us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - d.read_at).count());
        ++r.calls_answered;
      } else {
        d.child.write_line(R"({"jsonrpc":"2.0","id":)" + protocol::canonical_json(*id) +
                           R"(,"error":{"code":-32601,"message":"mh_seam_bench does not serve this"}})");
        if (d.problem.empty()) d.problem = "opencode sent an unexpected " + *method;
      }
    } else if (*method == "session/update") {
      const json::value* params = m.if_contains("params");
      const json::value* update = params && params->is_object() ? params->get_object().if_contains("update") : nullptr;
      if (!update || !update->is_object()) return;
      const json::object& u = update->get_object();
      auto kind = string_at(u, "sessionUpdate");
      auto call = string_at(u, "toolCallId").value_or("");
      if (kind == "tool_call") {
        r.call_seen_ms.push_back(ms_between(d.started, d.read_at));
        r.seen_by_id.emplace(call, ms_between(d.started, d.read_at));
      } else if (kind == "tool_call_update") {
        auto status = string_at(u, "status");
        if (status == "completed") r.done_by_id[call] = ms_between(d.started, d.read_at);
        if (status == "failed" && d.problem.empty()) d.problem = "call " + call + " failed";
      }
    }
  });
  finish_direct_run(
      d, *endpoint,
      {.vendor = "opencode", .answers_expected = ask, .answered_what = "permission requests", .work = plan->cwd}, r);
}

}  // namespace

const VendorDriver kOpencode = {
    .name = "opencode",
    .variant_names = {"permission_allow", "ask_driver", "", "metaharness_ask"},
    .bin_under_vendor = mh::adapters::opencode::kBinaryUnderVendor,
    .json_name = "opencode-seam-bench.json",
    .metaharness = {.pass_locale = true, .close_at_turn_end = true, .strict_requests = true},
    .run_directly = &run_opencode_directly,
    .approval = ApprovalReport{.seam_title = "opencode call seam",
                               .call_kind = "bash",
                               .line_prefix = "opencode_seam",
                               // Every variant's first sight of a call is opencode's tool_call notice (or,
                               // under metaharness, the plugin's request just after it): comparable.
                               .latency_against_floor = true,
                               .helper_title = ""},
};

// This row, registered from its own file (seam.hpp).
[[maybe_unused]] const bool kOpencodeRegistered = register_driver(&kOpencode);

}  // namespace mh::seam
