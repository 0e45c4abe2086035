#include "daemon/server/requests.hpp"

#include <array>

namespace mh::daemon {

namespace {

// clang-format off
constexpr std::array kRequests = {
    RequestDef{"submit",   Role::control, &handle_submit},
    RequestDef{"list",     Role::observe, &handle_list},
    RequestDef{"get",      Role::observe, &handle_get},
    RequestDef{"attach",   Role::control, &handle_attach},
    RequestDef{"tail",     Role::observe, &handle_tail},
    RequestDef{"command",  Role::control, &handle_command},
    RequestDef{"halt",     Role::control, &handle_halt},
    RequestDef{"status",   Role::observe, &handle_status},
    RequestDef{"shutdown", Role::admin,   &handle_shutdown},
    RequestDef{"viewer",   Role::observe, &handle_viewer},
    RequestDef{"budget",   Role::observe, &handle_budget},
};
// clang-format on

}  // namespace

std::span<const RequestDef> request_table() {
  return kRequests;
}

const RequestDef* find_request(std::string_view name) {
  for (const auto& def : kRequests)
    if (def.name == name) return &def;
  return nullptr;
}

}  // namespace mh::daemon
