#include "adapters/acp/acp_adapter.hpp"

#include "adapters/session.hpp"

namespace mh::adapters::acp {

AcpAdapter::AcpAdapter(const AcpVendor& vendor, HostConfig config)
    : NpmCliAdapter(vendor.identity, std::move(config)), vendor_(vendor) {}

std::variant<LaunchPlan, LaunchRefusal> AcpAdapter::plan(const RunSpec& spec, const RunPaths& paths) const {
  return vendor_.make_plan(*this, config_, spec, paths);
}

std::unique_ptr<AdapterSession> AcpAdapter::open_session(const RunSpec& spec, const LaunchPlan& plan) const {
  return vendor_.make_session(spec, plan, /*offline=*/false);
}

std::vector<proto::Event> AcpAdapter::translate(std::string_view transcript, const std::string& run_id) const {
  auto session = vendor_.make_session(RunSpec{}, LaunchPlan{}, /*offline=*/true);
  return translate_with_session(*this, *session, transcript, run_id);
}

std::optional<std::string> AcpAdapter::default_model() const {
  return std::string(vendor_.default_model);
}

std::uint64_t AcpAdapter::max_decision_deadline_ms() const {
  return deadline_bound_of_int_ms_timer(vendor_.deadline_margin_s);
}

proto::CapabilityTable capability_table(std::string_view vendor) {
  proto::CapabilityTable t = harness_capabilities(vendor);
  using proto::CommandName;
  t.commands = {
      {CommandName::message_inject, {true, {}, "the next session/prompt"}},
      {CommandName::steer,
       {false, proto::RefusalCode::UNSUPPORTED_CONTROL,
        "ACP has no way into a running prompt: session/prompt starts a turn and session/cancel ends one, so a "
        "steer could not be promised"}},
      {CommandName::interrupt, {true, {}, "session/cancel: the running prompt answers cancelled"}},
      {CommandName::halt,
       {true, {}, "session/cancel, close " + std::string(vendor) + "'s stdin, then kill the run's processes"}},
  };
  return t;
}

}  // namespace mh::adapters::acp
