// The Qwen Code row of the call seam bench (seam/seam.hpp): the real `qwen --acp` (the pinned
// @qwen-code/qwen-code entry on node) driven directly over ACP stdio, one turn (one
// session/prompt) of N sequential run_shell_command calls (`touch f<i>`) on the scripted
// endpoint's Anthropic wire, three variants:
//
//   approval_yolo    the adapter's launch with `--approval-mode yolo` and no permissions.ask rule:
//                    Qwen Code asks nobody. The floor (the same CLI with no seam).
//   ask_driver       the adapter's own launch (approval mode default, permissions.ask naming
//                    every tool): Qwen Code sends session/request_permission for every call and
//                    the bench answers proceed_once at once. ACP's permission round trip inside
//                    Qwen Code itself.
//   metaharness_ask  `metaharness run qwen --decisions ask` (shared: seam_bench.cpp): the same
//                    permission request, presented to the run, decided by the bench as client.
//
// Qwen Code's PreToolUse hooks fire only after its permission is granted, so ACP's permission
// request is its seam: there is no hook variant.
#include "adapters/qwen/qwen_adapter.hpp"
#include "adapters/registry.hpp"
#include "bench/seam/seam_acp.hpp"
#include "daemon/model/scripted_endpoint.hpp"

namespace mh::seam {
namespace {

void run_qwen_directly(const RunContext& c, RunRecord& r) {
  auto endpoint = c.start_endpoint(r);
  if (!endpoint) return;
  const bool ask = r.variant == Variant::bare_driver;
  adapters::HostConfig host = adapters::host_config_from_environment();
  host.binaries["qwen"] = c.o.vendor_bin;
  adapters::AdapterRegistry registry(host);
  adapters::RunSpec spec;
  spec.run_id = "seam-" + r.dir.filename().string();
  spec.adapter = "qwen";
  spec.prompt = c.o.prompt;
  spec.model_endpoint = adapters::ModelEndpoint{endpoint->base_url(), endpoint->token()};
  // The floor: deny-only plans no permissions.ask rule; yolo then asks nothing.
  spec.deny_only = !ask;
  auto planned = registry.find("qwen")->plan(spec, {r.dir, r.dir / "scratch"});
  if (auto* refused = std::get_if<adapters::LaunchRefusal>(&planned)) {
    r.failure = "the qwen plan was refused: " + refused->message;
    endpoint->stop();
    return;
  }
  auto plan = std::get<adapters::LaunchPlan>(std::move(planned));
  if (!ask)
    for (std::size_t i = 0; i + 1 < plan.args.size(); ++i)
      if (plan.args[i] == "--approval-mode") plan.args[i + 1] = "yolo";
  run_acp_plan_directly(c, r, *endpoint, plan, {.vendor = "qwen", .ask = ask});
}

}  // namespace

const VendorDriver kQwen = {
    .name = "qwen",
    .variant_names = {"approval_yolo", "ask_driver", "", "metaharness_ask"},
    .bin_under_vendor = mh::adapters::qwen::kBinaryUnderVendor,
    .bin_default = "the pinned entry script in <source>/.vendor",
    .json_name = "qwen-seam-bench.json",
    .metaharness = {.pass_locale = true, .close_at_turn_end = true, .strict_requests = true},
    .run_directly = &run_qwen_directly,
    .approval = ApprovalReport{.seam_title = "Qwen Code call seam",
                               .call_kind = "run_shell_command",
                               .line_prefix = "qwen_seam",
                               // Every variant's first sight of a call is Qwen Code's tool_call notice.
                               .latency_against_floor = true,
                               .helper_title = ""},
};

// This row, registered from its own file (seam.hpp).
[[maybe_unused]] const bool kQwenRegistered = register_driver(&kQwen);

}  // namespace mh::seam
