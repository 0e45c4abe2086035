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

}  // namespace mh::adapters::acp
