// What every ACP vendor's adapter (opencode, Gemini CLI, Qwen Code) does the same way, once: the
// plan is the vendor's own function, the session is adapters/acp's generic one configured by the
// vendor's profile (its make_session), translate replays a retained transcript through an offline
// session of the same profile, the default model is the plan's, and the longest decision deadline
// is bounded by the vendor's signed 32-bit millisecond timer less its margin. A vendor's adapter
// derives from AcpAdapter with its AcpVendor and adds only what is its own (e.g. subjects_for).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "adapters/plan_common.hpp"

namespace mh::adapters::acp {

struct AcpVendor {
  NpmCliAdapter::Identity identity;
  std::variant<LaunchPlan, LaunchRefusal> (*make_plan)(const Adapter& adapter, const HostConfig& config,
                                                       const RunSpec& spec, const RunPaths& paths);
  std::unique_ptr<AdapterSession> (*make_session)(const RunSpec& spec, const LaunchPlan& plan, bool offline);
  std::string_view default_model;
  // deadline_bound_of_int_ms_timer's margin: the seconds a vendor waits past the run's deadline
  // (opencode's plugin: 20), 0 where the vendor has no timer of its own on a permission answer.
  std::uint64_t deadline_margin_s;
};

// The capability table's ACP part, the same for every ACP vendor: message_inject is the next
// session/prompt, interrupt is session/cancel, halt cancels and closes the agent's stdin, and
// steer is refused (ACP has no way into a running prompt). The vendor adds tool_decide, frame_set,
// permission_set, its rendering and its notes.
proto::CapabilityTable capability_table(std::string_view vendor);

class AcpAdapter : public NpmCliAdapter {
 public:
  AcpAdapter(const AcpVendor& vendor, HostConfig config);

  std::variant<LaunchPlan, LaunchRefusal> plan(const RunSpec& spec, const RunPaths& paths) const override;
  std::unique_ptr<AdapterSession> open_session(const RunSpec& spec, const LaunchPlan& plan) const override;
  std::vector<proto::Event> translate(std::string_view transcript, const std::string& run_id) const override;
  std::optional<std::string> default_model() const override;
  std::uint64_t max_decision_deadline_ms() const override;

 private:
  const AcpVendor& vendor_;
};

}  // namespace mh::adapters::acp
