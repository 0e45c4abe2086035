// The Gemini CLI row of the call seam bench (seam/seam.hpp): the real `gemini --acp` (the pinned
// @google/gemini-cli bundle on node) driven directly over ACP stdio, one turn (one session/prompt)
// of N sequential run_shell_command calls (`touch f<i>`) on the scripted endpoint's Gemini wire,
// three variants:
//
//   approval_yolo    the adapter's launch with `--approval-mode yolo` and no admin policy: Gemini
//                    CLI asks nobody. The floor (the same CLI with no seam).
//   ask_driver       the adapter's own launch (approval mode default, the admin policy making
//                    every tool ask): Gemini CLI sends session/request_permission for every call
//                    and the bench answers proceed_once at once. ACP's permission round trip
//                    inside Gemini CLI itself.
//   metaharness_ask  `metaharness run gemini --decisions ask` (shared: seam_bench.cpp): the same
//                    permission request, presented to the run, decided by the bench as client.
//
// Gemini CLI's only seam over ACP is the permission request (no BeforeTool hook fires in its ACP
// mode), so there is no hook variant.
#include "adapters/gemini/gemini_adapter.hpp"
#include "adapters/registry.hpp"
#include "bench/seam/seam_acp.hpp"
#include "daemon/model/scripted_endpoint.hpp"

namespace mh::seam {
namespace {

void run_gemini_directly(const RunContext& c, RunRecord& r) {
  auto endpoint = c.start_endpoint(r);
  if (!endpoint) return;
  const bool ask = r.variant == Variant::bare_driver;
  adapters::HostConfig host = adapters::host_config_from_environment();
  host.binaries["gemini"] = c.o.vendor_bin;
  adapters::AdapterRegistry registry(host);
  adapters::RunSpec spec;
  spec.run_id = "seam-" + r.dir.filename().string();
  spec.adapter = "gemini";
  spec.prompt = c.o.prompt;
  spec.model_endpoint = adapters::ModelEndpoint{endpoint->base_url(), endpoint->token()};
  // The floor: deny-only plans no admin policy; yolo then asks nothing.
  spec.deny_only = !ask;
  auto planned = registry.find("gemini")->plan(spec, {r.dir, r.dir / "scratch"});
  if (auto* refused = std::get_if<adapters::LaunchRefusal>(&planned)) {
    r.failure = "the gemini plan was refused: " + refused->message;
    endpoint->stop();
    return;
  }
  auto plan = std::get<adapters::LaunchPlan>(std::move(planned));
  if (!ask) {
    for (std::size_t i = 0; i + 1 < plan.args.size(); ++i)
      if (plan.args[i] == "--approval-mode") plan.args[i + 1] = "yolo";
    // Gemini CLI refuses yolo in an untrusted folder (it falls back to asking): the floor's work
    // dir is trusted, which loads nothing more (the fresh scratch work dir holds no settings).
    plan.env.emplace_back("GEMINI_CLI_TRUST_WORKSPACE", "true");
  }
  run_acp_plan_directly(c, r, *endpoint, plan, {.vendor = "gemini", .ask = ask});
}

}  // namespace

const VendorDriver kGemini = {
    .name = "gemini",
    .variant_names = {"approval_yolo", "ask_driver", "", "metaharness_ask"},
    .bin_under_vendor = mh::adapters::gemini::kBinaryUnderVendor,
    .bin_default = "the pinned bundle in <source>/.vendor",
    .json_name = "gemini-seam-bench.json",
    .metaharness = {.pass_locale = true, .close_at_turn_end = true, .strict_requests = true},
    .run_directly = &run_gemini_directly,
    .approval = ApprovalReport{.seam_title = "Gemini CLI call seam",
                               .call_kind = "run_shell_command",
                               .line_prefix = "gemini_seam",
                               // Every variant's first sight of a call is Gemini CLI's tool_call notice.
                               .latency_against_floor = true,
                               .helper_title = ""},
};

// This row, registered from its own file (seam.hpp).
[[maybe_unused]] const bool kGeminiRegistered = register_driver(&kGemini);

}  // namespace mh::seam
