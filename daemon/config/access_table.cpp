// [access]: who may observe, control and administer the daemon (roles.cpp applies the grants).
#include "daemon/config/table_reader.hpp"
#include "daemon/config/tables.hpp"

namespace mh::daemon::config_tables {

std::string read_access_table(const toml::table& access, DaemonConfig& c) {
  std::string error;
  TableReader r(access, "access.", error);
  r.read_ids("observe_uids", c.observe.uids);
  r.read_ids("observe_gids", c.observe.gids);
  r.read_ids("control_uids", c.control.uids);
  r.read_ids("control_gids", c.control.gids);
  r.read_ids("admin_uids", c.admin.uids);
  r.read_ids("admin_gids", c.admin.gids);
  r.read_group_names("observe_groups", c.observe.gids);
  r.read_group_names("control_groups", c.control.gids);
  r.read_group_names("admin_groups", c.admin.gids);
  r.read<bool>("owner_is_admin", c.owner_is_admin);
  r.read<bool>("root_is_admin", c.root_is_admin);
  r.finish();
  return error;
}

}  // namespace mh::daemon::config_tables
