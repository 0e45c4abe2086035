// The direct variants of an ACP vendor's seam bench row whose launch is its adapter's own plan
// (seam_gemini.cpp, seam_qwen.cpp): the plan's files written, the CLI spawned with the plan's
// program, arguments, environment and cwd, and driven over ACP stdio by a bare client:
// initialize, session/new, one session/prompt of N calls, every permission request answered
// with its allow_once option at once (never an "always" one: like metaharness, each call is
// decided on its own). The row makes the plan per variant (the floor: nothing asks; the bare
// driver: the adapter's plan, every call asking).
#pragma once

#include <string_view>

#include "adapters/launch_plan.hpp"
#include "bench/seam/seam.hpp"

namespace mh::seam {

struct AcpDirect {
  std::string_view vendor;  // its words in the failures
  bool ask;                 // the plan asks for every call (the bare driver); else none may ask
};

// Runs one direct variant of `plan` against `endpoint` (already started, stopped here).
void run_acp_plan_directly(const RunContext& c, RunRecord& r, model::ScriptedEndpoint& endpoint,
                           const adapters::LaunchPlan& plan, const AcpDirect& how);

}  // namespace mh::seam
