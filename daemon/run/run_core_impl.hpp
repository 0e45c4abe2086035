// Helpers shared by the files that implement RunCore (run_core.cpp, run_core_sink.cpp,
// run_core_decide.cpp, run_core_commands.cpp). Internal to daemon/run.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "daemon/run/run_core.hpp"

namespace mh::daemon::run_core_detail {

inline std::string op_label(const proto::Operation& op) {
  if (op.op == proto::OpKind::mcp_call) return "mcp.call " + op.server + "/" + op.tool;
  return std::string(op.wire_name());
}

inline std::uint64_t ms_between(Instant from, Instant to) {
  if (to <= from) return 0;
  return static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

}  // namespace mh::daemon::run_core_detail
